"""The streaming scanner the XML-family dialects share: find an opener, read the block token by token, cut calls.

A dialect brings a `Reader`, a small state machine that knows its opener and then reads one token per step.
A value is searched only for its own closer, so a `</function>` or `</tool_call>` inside code never ends a block,
and a wrapper's closer is looked for only between calls. Every wait is for a bounded token (a tag, a name, a
closer), so the held-back tail stays short and scanning stays linear. No I/O here, as for every dialect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, Protocol

from toolproxy.dialects.base import (
    Call,
    Segment,
    Text,
    merge_text,
    padded,
    partial_suffix,
)


class Outcome(Enum):
    TOKEN = auto()  # a token was read; the block goes on
    CALL = auto()  # a token was read that ends one call; more may follow in the same block
    MORE = auto()  # the text ran out inside a token: what lies before `end` is read, the rest is held back
    DONE = auto()  # the block ends at `end`
    BAD = auto()  # not this dialect's markup: the block goes out as text and scanning resumes at `end`


@dataclass(frozen=True, slots=True)
class Step:
    outcome: Outcome
    end: int


class Reader(Protocol):
    def step(self, text: str, position: int) -> Step:
        """Read one token at `position`; a reader in its opening state changes only when it returns TOKEN."""
        ...

    def calls(self) -> list[tuple[str, Any]]:
        """(name, raw arguments) of every call read so far, in order."""
        ...

    def is_whole(self) -> bool:
        """Whether the calls read so far are complete if the text ends here, a wrapper's closer being all that is
        missing (servers that stop on the closer token drop it)."""
        ...


# How many `<` a scanner tries one by one (str.find, at memchr speed) before the hint's regex searches the rest
# itself: sre reads a 256 KB reply at ~0.4 ns a character even when it holds no `<`; a bounded cost where `<` abounds.
_WALK = 16


class BlockScanner:
    """`hint` finds where a block may open: it begins with `<`, must match wherever the reader could find a call, and
    should refuse, with a lookahead (`cursor.ahead`), an opener after which the reader would go BAD at once, so
    that a flood of such openers is skipped in C. `reach` is the longest an unfinished opener can be, so how far
    back from the end a `<` may still become one."""

    def __init__(self, dialect: str, hint: re.Pattern[str], reach: int, new_reader: Callable[[], Reader]) -> None:
        if not hint.pattern.startswith("<"):  # what lets `_find_hint` try only where a `<` stands
            raise ValueError(f"{dialect}: a block's hint must begin with '<'")
        self._dialect = dialect
        self._hint = hint
        self._reach = reach
        self._new_reader = new_reader
        self._reader = new_reader()
        self._pending = ""  # held back: a possible opener, or the unfinished token of an open block
        self._open = False
        self._block: list[str] = []  # source pieces of the open block
        self._length = 0  # characters in `_block`
        self._cuts: list[int] = []  # offsets in the block where one call ends and the next begins

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        text = self._pending + text
        self._pending = ""
        position = 0
        # Positions, not slices: slicing the rest of a long reply at every block would be quadratic.
        while position < len(text):
            step = self._step_block if self._open else self._step_text
            position = step(text, position, out)
        # Text that only looked like markup can come in many pieces: joined once here, not one by one later.
        return merge_text(out)

    def finish(self) -> list[Segment]:
        """An unfinished block is text: a call cut off by max_tokens must not become a half call. Only whole calls
        whose wrapper never closed stand, and what was held back after them stays text."""
        out: list[Segment] = [Text("".join(self._block) + self._pending)]
        if self._open and self._reader.is_whole():
            out = [*self._close("".join(self._block)), Text(self._pending)]
        self._reset()
        self._pending = ""
        return out

    def _step_text(self, text: str, position: int, out: list[Segment]) -> int:
        search = position
        while (found := self._find_hint(text, search)) is not None:
            if (end := self._try_open(text, position, found.start(), out)) is not None:
                return end
            search = found.start() + 1
        # No whole opener: a `<` near the end may still become one, so it is held back with what follows it.
        index = text.find("<", max(position, len(text) - self._reach))
        while index >= 0:
            if (end := self._try_open(text, position, index, out)) is not None:
                return end
            index = text.find("<", index + 1)
        out.append(Text(text[position:]))
        return len(text)

    def _find_hint(self, text: str, search: int) -> re.Match[str] | None:
        """`self._hint.search(text, search)`. The hint begins with `<`, so it can match only where one stands: the
        first `<` where it matches is the regex's own first match, found without reading every character in sre."""
        for _ in range(_WALK):
            index = text.find("<", search)
            if index < 0:
                return None
            if (found := self._hint.match(text, index)) is not None:
                return found
            search = index + 1
        return self._hint.search(text, search)

    def _try_open(self, text: str, position: int, index: int, out: list[Segment]) -> int | None:
        """Where scanning goes on when a block opens at `index` or the text ends inside its opener, else None."""
        step = self._reader.step(text, index)
        if step.outcome is Outcome.TOKEN:
            out.append(Text(text[position:index]))
            self._open, self._block, self._length = True, [text[index : step.end]], step.end - index
            return step.end
        if step.outcome is Outcome.MORE:
            out.append(Text(text[position:index]))
            self._pending = text[index:]
            return len(text)
        return None

    def _step_block(self, text: str, position: int, out: list[Segment]) -> int:
        step = self._reader.step(text, position)
        piece = text[position : step.end]
        if step.outcome is Outcome.BAD:
            out.append(Text("".join(self._block) + piece))
            self._reset()
            return step.end
        self._block.append(piece)
        self._length += len(piece)
        if step.outcome is Outcome.MORE:
            self._pending = text[step.end :]
            return len(text)
        if step.outcome is Outcome.CALL:
            self._cuts.append(self._length)
        elif step.outcome is Outcome.DONE:
            out.extend(self._close("".join(self._block)))
            self._reset()
        return step.end

    def _close(self, source: str) -> list[Segment]:
        """The block's calls, whose sources join back to the block: the first carries the opener, the last the
        closer and any white space after its call."""
        calls = self._reader.calls()
        if not calls:
            return [Text(source)]
        cuts = self._cuts[: len(calls) - 1]
        starts, stops = [0, *cuts], [*cuts, len(source)]
        return [Call(name, arguments, source[start:stop], self._dialect)
                for (name, arguments), start, stop in zip(calls, starts, stops, strict=True)]

    def _reset(self) -> None:
        self._open, self._block, self._length, self._cuts = False, [], 0, []
        self._reader = self._new_reader()


# Token readers for the dialects' step functions. Each answers a value or an `Outcome`: MORE when the text ends
# where the token could still complete, BAD when it cannot be the token.

_SPACE = re.compile(r"\s*")


def skip_space(text: str, position: int) -> int:
    found = _SPACE.match(text, position)
    assert found is not None
    return found.end()


def match_word(text: str, position: int, words: Sequence[str]) -> int | Outcome:
    """Index of the word of `words` found at `position`."""
    for index, word in enumerate(words):
        if text.startswith(word, position):
            return index
    rest = text[position : position + max(len(word) for word in words)]
    if any(len(rest) < len(word) and word.startswith(rest) for word in words):
        return Outcome.MORE
    return Outcome.BAD


def read_token(text: str, position: int, pattern: re.Pattern[str], stop: str) -> tuple[str, int] | Outcome:
    """What a bounded `pattern` matches at `position` when `stop` follows it, and the index after `stop`."""
    found = pattern.match(text, position)
    if found is None:
        return Outcome.BAD
    if text.startswith(stop, found.end()):
        return found.group(), found.end() + len(stop)
    rest = text[found.end() : found.end() + len(stop)]
    return Outcome.MORE if len(rest) < len(stop) and stop.startswith(rest) else Outcome.BAD


def read_word(text: str, position: int, pattern: re.Pattern[str]) -> tuple[str, int] | Outcome:
    """A bounded, non-empty run `pattern` matches at `position`; it is whole only once something else follows."""
    found = pattern.match(text, position)
    if found is None or found.end() == position:
        return Outcome.BAD
    if found.end() == len(text):
        return Outcome.MORE
    return found.group(), found.end()


def read_value(text: str, position: int, closer: str) -> tuple[str, int, bool]:
    """The raw value from `position` up to `closer`: (piece, index after it, whether the closer was found).

    Without the closer, everything but a possible beginning of it is taken, so only that beginning is held back.
    """
    index = text.find(closer, position)
    if index >= 0:
        return text[position:index], index + len(closer), True
    hold = partial_suffix(text[max(position, len(text) - len(closer)) :], closer)
    return text[position : len(text) - hold], len(text) - hold, False


def pad_newlines(value: str, paired: bool = False) -> str:
    """What `trim_value` (`paired` or not) gives back as `value`: padded with a line of its own only when its first
    or last line is blank (`paired`: both), which would otherwise be taken for layout, or when it is one line with
    white space on both sides, which would otherwise be taken for padding."""
    if "\n" not in value:
        return f"\n{value}\n" if padded(value) else value
    first, last = value[: value.find("\n")], value[value.rfind("\n") + 1 :]
    blank = (not first.strip(" \t\r"), not last.strip(" \t\r"))
    return f"\n{value}\n" if (all(blank) if paired else any(blank)) else value


def render_value(value: Any) -> str:
    """An argument as text: strings as they are, anything else as JSON (`schema.py` types it back)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
