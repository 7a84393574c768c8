"""Reasoning written inline as `<think>...</think>` (or on gpt-oss's analysis channel, see `channels.py`):
separated from the answer before calls are looked for, so a call the model only thought about is not made, and
reasoning never ends up inside tool arguments."""

from __future__ import annotations

from dataclasses import dataclass

from toolproxy.dialects.markers import markers_in
from toolproxy.meaning.channels import split_channels

# Qwen3, DeepSeek-R1 and most others write <think>; Seed-OSS writes <seed:think>; some fine-tunes <thinking>;
# Gemma 4 thinks on its `thought` channel (llama.cpp common/parsers/gemma4.cpp); MiniMax-M3 writes <mm:think>
# (its opener often in the prompt); Kimi K3 thinks in an XTML `think` channel (vLLM's kimi_k3 reasoning parser);
# AWS Bedrock's gpt-oss endpoint puts reasoning in content as `<reasoning>` (one pair per streamed chunk), and so do
# models trained with the GRPO recipes' `<reasoning>...</reasoning><answer>` format; Magistral and Ministral 3 write
# `[THINK]`, Command R7B and Cohere2MoE `<|START_THINKING|>` (llama.cpp's tests/test-chat.cpp reads both so).
MARKERS = (("<think>", "</think>"), ("<seed:think>", "</seed:think>"), ("<thinking>", "</thinking>"),
           ("<|channel>thought", "<channel|>"), ("<mm:think>", "</mm:think>"),
           ("<|open|>think<|sep|>", "<|close|>think<|sep|>"), ("<reasoning>", "</reasoning>"),
           ("[THINK]", "[/THINK]"), ("<|START_THINKING|>", "<|END_THINKING|>"))
# Pairs of a word prose names too (`* <reasoning>` in a list of XML tags): reasoning only as a whole span, opened and
# closed; an opener never closed and a closer never opened are text.
CLOSED_ONLY = frozenset({("<reasoning>", "</reasoning>")})
_EVERY_MARKER = tuple(marker for pair in MARKERS for marker in pair)


@dataclass(frozen=True, slots=True)
class Split:
    answer: str  # the text outside reasoning
    reasoning: str  # the text inside, markers removed
    markup: str  # the reasoning spans exactly as written, markers included


def split(text: str) -> Split:
    """The reply with reasoning set aside: gpt-oss channels first, then every pair of reasoning markers in turn."""
    channels = split_channels(text)
    answer = "".join(channels.answer)
    inner = ["\n\n".join(piece.strip() for piece in channels.reasoning if piece.strip())]
    markup = ["".join(channels.markup)]
    # One pass finds the markers present (eight `in` over a 256 KB reply took 6% of a worker).
    present = markers_in(answer, _EVERY_MARKER)
    for opener, closer in MARKERS:
        if closer in present or opener in present:
            part = split_pair(answer, opener, closer, closed_only=(opener, closer) in CLOSED_ONLY)
            if part.markup:  # the text around a span removed may join into a marker: look again
                answer, present = part.answer, markers_in(part.answer, _EVERY_MARKER)
            inner.append(part.reasoning)
            markup.append(part.markup)
    return Split(answer, "\n\n".join(piece for piece in inner if piece), "".join(markup))


def split_pair(text: str, opener: str, closer: str, closed_only: bool = False) -> Split:
    """Linear: each marker is found once with str.find. Qwen3 and DeepSeek-R1 templates put `<think>` in the
    prompt, so a reply may open inside reasoning and only close it; an unclosed opener runs to the end (unless the
    pair is `closed_only`). A span that opens right where the one before closed continues it (a server that wraps
    each streamed chunk's reasoning in its own pair cuts words in half: `myaw</reasoning><reasoning>esome`)."""
    answer: list[str] = []
    inner: list[list[str]] = []  # each span's pieces (touching spans are one), joined once at the end
    markup: list[str] = []
    position = 0
    first_close, first_open = text.find(closer), text.find(opener)
    if first_close >= 0 and (first_open < 0 or first_close < first_open) and not closed_only:
        inner.append([text[:first_close]])
        markup.append(text[: first_close + len(closer)])
        position = first_close + len(closer)
    while (start := text.find(opener, position)) >= 0:
        end = text.find(closer, start + len(opener))
        if end < 0 and closed_only:
            break
        if start > position or not inner:
            answer.append(text[position:start])
            inner.append([])
        stop = len(text) if end < 0 else end
        inner[-1].append(text[start + len(opener) : stop])
        markup.append(text[start : stop + (len(closer) if end >= 0 else 0)])
        position = stop + (len(closer) if end >= 0 else 0)
        if end < 0:
            break
    answer.append(text[position:])
    spans = ("".join(pieces).strip() for pieces in inner)
    return Split("".join(answer), "\n\n".join(span for span in spans if span), "".join(markup))
