"""Special tokens as servers leak them into text, by shape rather than by name: `<|...|>` (Qwen, Kimi, Granite,
Inkling), `<｜...｜>` (DeepSeek's full-width bars) and `]<]...[>[` (MiniMax-M3's namespace token).

New models bring new tokens faster than any list of names can follow, so the family grammars tolerate any token of
these shapes where their markup allows one (MiniMax-M3 writes its namespace token before every tag), and a run of
them right beside a call is markup that goes with the call instead of into content (`<|/tool_call|>`,
`<|assistant|>`, end-of-turn tokens). Every pattern is bounded, so a search costs at most the text it reads.
"""

from __future__ import annotations

import re

_WORD = r"[^\s<>|｜\[\]]{1,48}"
# One token: `<|im_end|>`, `<|/tool_call|>`, `<｜end▁of▁sentence｜>`, `]<]minimax[>[`.
TOKEN = rf"(?:<\|{_WORD}\|>|<｜{_WORD}｜>|\]<\]{_WORD}\[>\[)"
# Several in a row, with white space or one short word between two of them: `<|close|>message<|sep|>`,
# `<|im_start|>assistant<|im_sep|>` (a word alone after a token is text: `<|im_start|>assistant` is not a run).
RUN = rf"{TOKEN}(?:\s{{0,8}}+(?:\w{{1,32}}+)?{TOKEN})*+"
_RUN = re.compile(RUN)
_RUN_AT_START = re.compile(rf"(?:\s{{0,64}}+{RUN})+")
_TOKEN = re.compile(TOKEN)
_TOKEN_AT_END = re.compile(rf"{TOKEN}\s{{0,16}}+\Z")
_WORD_BACK = re.compile(r"\w{1,32}\Z")
_SPACE_BACK = re.compile(r"\s{1,64}\Z")
# How a token ends, and how the same token begins: found backwards from its end with one bounded rfind.
_ENDS = (("|>", "<|"), ("｜>", "<｜"), ("[>[", "]<]"))
_WINDOW = 2048  # how far back from a call a run of tokens is looked for


def leading_run(text: str) -> int:
    """Length of the tokens (and white space before and between them) that `text` starts with, up to the last
    token that stands apart from the text after it (`<|im_end|>\n`, not `<|START_THINKING|>Next`); 0 for none."""
    found = _RUN_AT_START.match(text)
    if found is None:
        return 0
    ends = [token.end() for token in _TOKEN.finditer(text, 0, found.end())]
    apart = [end for end in ends if end == len(text) or text[end].isspace()]
    return apart[-1] if apart else 0


def trailing_run(text: str) -> int:
    """Length of the tokens (and white space between and after them) that `text` ends with, from the first token
    that stands apart from the text before it (`_stands_apart`: `\n<|assistant|>`, not `sum.<|END_THINKING|>`);
    0 for none. Read backwards token by token, each found with one bounded rfind, so the cost is the run's length,
    not the text's."""
    window = text[-_WINDOW:]
    offset = len(text) - len(window)
    starts: list[int] = []
    end = _space_back(window, len(window))
    while (token := _token_ending_at(window, end)) >= 0:
        starts.append(token)
        end = _space_back(window, token)
        word = _WORD_BACK.search(window, max(0, end - 32), end)
        if word is not None and _token_ending_at(window, _space_back(window, word.start())) >= 0:
            end = _space_back(window, word.start())
    for start in reversed(starts):
        if _stands_apart(text, window, offset, start):
            return len(window) - start
    return 0


def _stands_apart(text: str, window: str, offset: int, start: int) -> bool:
    """Whether the token at `start` of the window is not the end of what the text before it holds: it follows
    white space or the reply's start, or no token comes before it (so it closes nothing opened in the text, as
    `<|END_THINKING|>` closes a `<|START_THINKING|>`), or it is a namespace token, which always begins a tag."""
    if offset + start == 0 or text[offset + start - 1].isspace() or window.startswith("]<]", start):
        return True
    return offset == 0 and _TOKEN.search(window, 0, start) is None


def _space_back(text: str, end: int) -> int:
    found = _SPACE_BACK.search(text, max(0, end - 64), end)
    return found.start() if found else end


def _token_ending_at(text: str, end: int) -> int:
    """Where the token that ends at `end` begins, or -1."""
    for closing, opening in _ENDS:
        if text.endswith(closing, 0, end):
            start = text.rfind(opening, max(0, end - 56), end - len(closing))
            if start >= 0 and _TOKEN.fullmatch(text, start, end):
                return start
    return -1


def strip_trailing_token(value: str) -> str:
    """A value without the token its closing tag carried in front of it (`date]<]minimax[>[` -> `date`)."""
    tail = value[-96:]
    found = _TOKEN_AT_END.search(tail)
    return value[: len(value) - len(tail) + found.start()] if found else value


def remove_tokens(text: str) -> str:
    """`text` with every run of tokens taken out (nested MiniMax-M3 values carry one before each tag)."""
    return _RUN.sub("", text)


_PARTIAL_TOKEN = re.compile(r"(?:<[|｜][^\s<>|｜\[\]]{0,48}[|｜]?|\](?:<(?:\](?:[^\s<>|｜\[\]]{1,48}(?:\[>?)?)?)?)?)\Z")


def token_end(text: str, position: int) -> int | None:
    """The end of a special token at `position`, or None."""
    found = _TOKEN.match(text, position)
    return found.end() if found is not None else None


def may_begin_token(text: str, position: int) -> bool:
    """Whether the text, ending within a token's length of `position`, may still become one there."""
    return len(text) - position < 64 and _PARTIAL_TOKEN.match(text, position) is not None
