"""Reading a special-token block as it streams in: a cursor over held-back plus new text, and the steps to read with.

A step is a generator that reads from the `Cursor` and yields while what it needs has not arrived: a marker coming
in pieces, the rest of a name, the end of a JSON value. What a step holds back is bounded (a marker, a name), and
long runs (white space, a JSON body) are read as they come, so a block costs time linear in its length whatever
the chunking. Once the text has ended, steps decide with what there is and never yield again.

The same rules as regular expressions (`ahead` and its pieces) let a scanner skip, at C speed, an opener after which
the steps would fail at once: a flood of openers in prose then costs no Python per opener.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import TypeAlias, TypeVar

from toolproxy.dialects.json_span import JsonSpan

T = TypeVar("T")
Read: TypeAlias = Generator[None, None, T]

# A block that fails within this many characters is read again as text from just after its opener, so a marker
# that a failed block swallowed (`[TOOL_CALLS][TOOL_CALLS]add...`) still counts. Longer failed blocks go out whole:
# reading them again could be quadratic. It covers the longest opener lookahead (`ahead`): a block that one-shot
# parsing skips by its lookahead, streaming may open before the text that refutes it has come, and it must then be
# read again just the same.
REWIND_LIMIT = 1024

_SPACE = re.compile(r"\s*")


class Cursor:
    """The text not yet scanned, as one string with a position; the open block's text is kept until it ends."""

    def __init__(self) -> None:
        self.text = ""
        self.position = 0
        self.ended = False
        self._mark: int | None = None  # where the open block starts in `text`
        self._dropped: list[str] = []  # the open block's text that is no longer in `text`
        self._dropped_length = 0

    def append(self, text: str) -> None:
        """Add new text; what was read is let go of, except a short open block, which may yet be read again."""
        keep = self.position
        if self._mark is not None:
            if self._dropped or self.position - self._mark > REWIND_LIMIT:
                self._dropped.append(self.text[self._mark : self.position])
                self._dropped_length += self.position - self._mark
                self._mark = self.position
            keep = self._mark
            self._mark -= keep
        self.text = self.text[keep:] + text
        self.position -= keep

    def begin_block(self) -> None:
        self._mark = self.position
        self._dropped, self._dropped_length = [], 0

    def offset(self) -> int:
        """How many characters of the open block have been read."""
        assert self._mark is not None
        return self._dropped_length + self.position - self._mark

    def end_block(self) -> str:
        """The open block's text, everything read since `begin_block`."""
        assert self._mark is not None
        block = "".join(self._dropped) + self.text[self._mark : self.position]
        self._mark, self._dropped, self._dropped_length = None, [], 0
        return block

    def rewind(self, length: int) -> bool:
        """Close the open block after its first `length` characters and read on from there, if it is short."""
        assert self._mark is not None
        if self.offset() > REWIND_LIMIT:
            return False
        self.position = self._mark + length
        self._mark = None
        return True


def peek(cursor: Cursor) -> Read[str]:
    """The next character, not read; "" when the text has ended."""
    while cursor.position >= len(cursor.text):
        if cursor.ended:
            return ""
        yield
    return cursor.text[cursor.position]


def space(cursor: Cursor) -> Read[None]:
    """Read white space up to the next other character, or the end of the text."""
    while True:
        found = _SPACE.match(cursor.text, cursor.position)
        assert found is not None
        cursor.position = found.end()
        if cursor.position < len(cursor.text) or cursor.ended:
            return
        yield


def marker(cursor: Cursor, *markers: str) -> Read[str | None]:
    """Read whichever of `markers` comes next; None, with nothing read, when none does.

    No marker may be the beginning of another: the first one complete is taken.
    """
    while True:
        could_come = False
        for candidate in markers:
            if cursor.text.startswith(candidate, cursor.position):
                cursor.position += len(candidate)
                return candidate
            rest = cursor.text[cursor.position : cursor.position + len(candidate)]
            could_come = could_come or (len(rest) < len(candidate) and candidate.startswith(rest))
        if cursor.ended or not could_come:
            return None
        yield


def until(cursor: Cursor, stop: str, limit: int) -> Read[str | None]:
    """The text before `stop`, with `stop` read too, when `stop` comes within `limit` characters; else None."""
    while True:
        window = cursor.position + limit + len(stop)
        index = cursor.text.find(stop, cursor.position, window)
        if index >= 0:
            value = cursor.text[cursor.position : index]
            cursor.position = index + len(stop)
            return value
        if cursor.ended or len(cursor.text) >= window:
            return None
        yield


def word(cursor: Cursor, pattern: re.Pattern[str], limit: int) -> Read[str | None]:
    """A non-empty run that `pattern` matches, read whole; None, with nothing read, when there is none or it is
    longer than `limit`. The pattern must match runs of single characters (a class with a repeat), nothing more."""
    while True:
        while cursor.position >= len(cursor.text) and not cursor.ended:
            yield
        start = cursor.position
        found = pattern.match(cursor.text, start, start + limit + 1)
        end = found.end() if found is not None else start
        if end == len(cursor.text) and not cursor.ended and end - start <= limit:
            yield  # the run may go on in the next piece
            continue
        if end == start or end - start > limit:
            return None
        cursor.position = end
        return cursor.text[start:end]


def json_value(cursor: Cursor, openers: str = "{[") -> Read[str | None]:
    """A JSON object or array, read whole, as text; None when none starts here or the text ends inside it.

    The end is found by bracket tracking that skips strings, so a marker inside a string argument ends nothing;
    whether the text is valid JSON is judged later, by whoever decodes it.
    """
    first = yield from peek(cursor)
    if not first or first not in openers:
        return None
    span = JsonSpan()
    pieces: list[str] = []
    while True:
        end = span.feed(cursor.text, cursor.position)
        stop = len(cursor.text) if end is None else end
        pieces.append(cursor.text[cursor.position : stop])
        cursor.position = stop
        if end is not None:
            return "".join(pieces)
        if cursor.ended:
            return None
        yield


def object_list(cursor: Cursor) -> Read[list[tuple[str, int]] | None]:
    """`[{...}, {...}]`: each object's JSON text with the block offset just past it (past the `]` for the last);
    None when not that shape."""
    if (yield from marker(cursor, "[")) is None:
        return None
    objects: list[tuple[str, int]] = []
    while True:
        yield from space(cursor)
        value = yield from json_value(cursor, "{")
        if value is None:
            return None
        objects.append((value, cursor.offset()))
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "]")
        if separator is None:
            return None
        if separator == "]":
            objects[-1] = (value, cursor.offset())  # the closing bracket goes with the last call
            return objects


# Lookaheads: what the steps must find right after an opener, as one regular expression for the opener's pattern.
# Each piece matches what its step accepts, or a beginning of it that runs to the end of the text so far (there the
# step would wait, so the opener must still be found and held back). A lookahead may let through more than the
# steps accept, never less: the steps stay the judges. It refuses only where a step fails before reading on, and
# only within REWIND_LIMIT characters of the opener, so a block opened early is read again exactly as if skipped.
# No piece backtracks: runs are possessive and bounded.

SPACE = r"\s"
"""White space, as `space` reads it; in `ahead`, a run longer than `SPACE_REACH` lets anything follow."""
SPACE_REACH = 64
JSON_START = r"[\[{]"
_ANY = "(?s:.)"


def ahead(*pieces: str) -> str:
    """The pieces one after the other; the text may end before any of them."""
    pattern = ""
    for piece in reversed(pieces):
        pattern = rf"(?:\Z|{_followed(piece, pattern)})"
    return pattern


def _followed(piece: str, rest: str) -> str:
    if piece == SPACE:  # past its reach the lookahead lets anything through: the rest is left to the steps
        return rf"(?:\s{{{SPACE_REACH}}}|\s{{0,{SPACE_REACH - 1}}}+{rest})"
    return piece + rest


def either(*pieces: str) -> str:
    return "(?:" + "|".join(pieces) + ")"


def literal(*words: str) -> str:
    """One of `words` (`marker`'s rule); within a word's length of the end of the text, anything: it may yet come."""
    longest = max(len(word) for word in words)
    alternatives = [re.escape(word) for word in sorted(words, key=len, reverse=True)]
    if longest > 1:
        alternatives.append(rf"{_ANY}{{1,{longest - 1}}}+\Z")
    return either(*alternatives)


def run(char_class: str, limit: int) -> str:
    """`word`'s rule: 1 to `limit` characters of `char_class`; a longer run fails, as the next piece must not begin
    with one of them."""
    return f"{char_class}{{1,{limit}}}+"


def up_to(stop: str, limit: int) -> str:
    """`until`'s rule: `stop` within `limit` characters (the first one), or the text ends before it could."""
    return either(rf"(?>{_ANY}{{0,{limit}}}?{re.escape(stop)})", rf"{_ANY}{{0,{limit + len(stop) - 1}}}+\Z")


OBJECT_LIST = ahead(literal("["), SPACE, literal("{"))
"""How `object_list` begins: `[` and the first object's `{` (what the object holds is judged once it is read)."""
