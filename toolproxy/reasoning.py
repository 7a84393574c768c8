"""Reasoning written inline as `<think>...</think>`: separated from the answer before calls are looked for, so
a call the model only thought about is not made, and reasoning never ends up inside tool arguments."""

from __future__ import annotations

from dataclasses import dataclass

OPEN, CLOSE = "<think>", "</think>"


@dataclass(frozen=True, slots=True)
class Split:
    answer: str  # the text outside reasoning
    reasoning: str  # the text inside, markers removed
    markup: str  # the reasoning spans exactly as written, markers included


def split(text: str) -> Split:
    """Linear: each marker is found once with str.find. Qwen3 and DeepSeek-R1 templates put `<think>` in the
    prompt, so a reply may open inside reasoning and only close it; an unclosed `<think>` runs to the end."""
    answer: list[str] = []
    inner: list[str] = []
    markup: list[str] = []
    position = 0
    first_close, first_open = text.find(CLOSE), text.find(OPEN)
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        inner.append(text[:first_close])
        markup.append(text[: first_close + len(CLOSE)])
        position = first_close + len(CLOSE)
    while (start := text.find(OPEN, position)) >= 0:
        answer.append(text[position:start])
        end = text.find(CLOSE, start + len(OPEN))
        if end < 0:
            inner.append(text[start + len(OPEN) :])
            markup.append(text[start:])
            position = len(text)
            break
        inner.append(text[start + len(OPEN) : end])
        markup.append(text[start : end + len(CLOSE)])
        position = end + len(CLOSE)
    answer.append(text[position:])
    return Split("".join(answer), "\n\n".join(piece.strip() for piece in inner if piece.strip()), "".join(markup))
