"""The streaming scanner that special-token dialects share: text flows through live, an opener starts a block.

A dialect names its openers and writes one generator, `_read`, that reads a block with the steps of `cursor.py`
and returns the calls it found, or None when the block is not one of its calls after all. Each call's source runs
from the end of the one before (the first carries the opener), so sources and the text around them join back to
the reply exactly. What a block read past its last call (white space, a half call) goes out as text.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from toolproxy.dialects.base import Call, Segment, Text, call_from_json, decode_json, partial_suffix
from toolproxy.dialects.cursor import Cursor, Read


@dataclass(frozen=True, slots=True)
class Found:
    """A call a block holds: raw arguments, and the block offset where its source ends."""

    name: str
    arguments: Any
    end: int


Script: TypeAlias = Read[list[Found] | None]


class TokenBlockScanner(ABC):
    """Streams text through until one of `openers`, then runs the dialect's `_read` on the block that follows."""

    def __init__(self, dialect: str, openers: Sequence[str], follow: Mapping[str, str] | None = None) -> None:
        """`follow` maps an opener to a lookahead (built with `cursor.ahead`) of what `_read` needs right after it:
        an opener it refuses is skipped in C, so a flood of them in prose costs no Python per opener."""
        self._dialect = dialect
        self._openers = tuple(openers)
        self._opener_patterns = _opener_patterns(self._openers, tuple(sorted((follow or {}).items())))
        # The last search of each pattern: (the text searched, from where, the match or None). One regex per opener,
        # each with a literal prefix, finds its opener at C speed (an alternation of openers cannot: ~12x slower per
        # MB); a search from an earlier position in the same text still answers for any later one up to its match.
        self._searches: list[tuple[str, int, re.Match[str] | None]] = [("", 0, None)] * len(self._opener_patterns)
        self._cursor = Cursor()
        self._script: Script | None = None
        self._opener = ""

    def feed(self, text: str) -> list[Segment]:
        self._cursor.append(text)
        return self._scan()

    def finish(self) -> list[Segment]:
        """The text has ended: an open block is read to a decision, and everything held back goes out."""
        self._cursor.ended = True
        out = self._scan()
        self._cursor, self._script = Cursor(), None
        return out

    @abstractmethod
    def _read(self, opener: str) -> Script:
        """Read one block, its opener already read; the calls found, or None when it holds none."""

    def _find_opener(self) -> tuple[int, str] | None:
        found = self._search(self._cursor.position)
        return (found.start(), found.group()) if found is not None else None

    def _search(self, position: int) -> re.Match[str] | None:
        """The first opener at or after `position` in the cursor's text (the longest, where two begin together)."""
        text = self._cursor.text
        best: re.Match[str] | None = None
        for index, pattern in enumerate(self._opener_patterns):
            searched, start, found = self._searches[index]
            if searched is not text or position < start or (found is not None and found.start() < position):
                found = pattern.search(text, position)
                self._searches[index] = (text, position, found)
            if found is not None and (best is None or (found.start(), -len(found.group())) <
                                      (best.start(), -len(best.group()))):
                best = found
        return best

    def _hold(self) -> int:
        """How many characters at the end of the text may be the start of an opener, to wait for."""
        cursor = self._cursor
        longest = max(len(opener) for opener in self._openers)
        tail = cursor.text[max(cursor.position, len(cursor.text) - longest) :]
        return max(partial_suffix(tail, opener) for opener in self._openers)

    def _resume_after(self, opener: str) -> int:
        """Where scanning resumes in a refused short block: after its opener, unless an opener can begin inside
        another (`>>>>name`), where the next one may begin one character later."""
        return len(opener)

    def _passed(self, text: str) -> None:  # noqa: B027 (a hook with a default: most dialects need nothing)
        """Called with every piece of the reply once it is decided, in order; for dialects that track lines."""

    def _scan(self) -> list[Segment]:
        out: list[Segment] = []
        while self._step_block(out) if self._script is not None else self._step_text(out):
            pass
        return out

    def _step_text(self, out: list[Segment]) -> bool:
        """Text up to the next opener goes out; False when the text read so far holds none."""
        cursor = self._cursor
        found = self._find_opener()
        if found is None:
            stop = len(cursor.text) - (0 if cursor.ended else self._hold())
            self._emit(out, Text(cursor.text[cursor.position : stop]))
            cursor.position = stop
            return False
        index, opener = found
        self._emit(out, Text(cursor.text[cursor.position : index]))
        cursor.position = index
        cursor.begin_block()
        cursor.position += len(opener)
        self._opener, self._script = opener, self._read(opener)
        return True

    def _step_block(self, out: list[Segment]) -> bool:
        """Run the block's script on what has come; False while it waits for more."""
        assert self._script is not None
        try:
            next(self._script)
        except StopIteration as stop:
            found: list[Found] | None = stop.value
        else:
            if not self._cursor.ended:
                return False
            found = None  # steps never wait once the text has ended; should one, the block is text
        self._script = None
        self._close(found, out)
        return True

    def _close(self, found: list[Found] | None, out: list[Segment]) -> None:
        cursor = self._cursor
        if not found:
            resume = self._resume_after(self._opener)
            if cursor.rewind(resume):  # the block's first characters, its opener's (or a bare call's name's)
                self._emit(out, Text(cursor.text[cursor.position - resume : cursor.position]))
            else:
                self._emit(out, Text(cursor.end_block()))
            return
        block = cursor.end_block()
        start = 0
        for call in found:
            self._emit(out, Call(call.name, call.arguments, block[start : call.end], self._dialect))
            start = call.end
        self._emit(out, Text(block[start:]))

    def _emit(self, out: list[Segment], segment: Segment) -> None:
        text = segment.text if isinstance(segment, Text) else segment.source
        if text or isinstance(segment, Call):
            out.append(segment)
            self._passed(text)


@functools.lru_cache(maxsize=256)  # per reply and after every call; bounded: Gemma 4 opener depends on the tools
def _opener_patterns(openers: tuple[str, ...], follow: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], ...]:
    lookaheads = dict(follow)
    return tuple(re.compile(re.escape(opener) + (f"(?={lookaheads[opener]})" if opener in lookaheads else ""))
                 for opener in openers)


def calls_in(objects: list[tuple[str, int]] | None,
             shape_of: Callable[[Any], tuple[str, Any] | None] = call_from_json) -> list[Found] | None:
    """The calls a list of JSON objects holds, one per object, or None when any object is not a call.

    `shape_of` turns a decoded object into (name, raw arguments), or None when it is not shaped like a call.
    """
    if not objects:
        return None
    found: list[Found] = []
    for text, end in objects:
        try:
            shape = shape_of(decode_json(text))
        except ValueError:
            return None
        if shape is None:
            return None
        found.append(Found(shape[0], shape[1], end))
    return found
