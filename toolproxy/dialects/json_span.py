"""Where a JSON value ends in model text that arrives in pieces: `JsonSpan`, the bracket tracker the dialects share.

Brackets inside strings do not count, so `"</tool_call>"` or `"}"` in an argument never ends a block. Counting runs
in C wherever the depth cannot reach zero, so adversarial input (a megabyte of `[`, or of calls opened and never
closed) stays linear and fast. No I/O, as for every dialect.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_UNDECODED = object()  # JsonSpan.value before (or without) a whole decode
_IN_CODE = re.compile(r'["{}\[\]]')
# The rest of a JSON string up to its closing quote, escapes included, in one C-speed match (a loop per escape
# made a 256 KB `write` argument cost 30 ms). The unrolled form (a run of plain characters, then escapes each
# followed by a run) has one way to match, and possessive quantifiers keep sre from even trying others: linear.
# It stops on the closing quote, on a backslash that ends the text, or at the end of the text.
_STRING_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_OPENERS = re.compile(r"[\[{]+")
_CLOSERS = re.compile(r"[\]}]+")
# Code and whole strings, up to a string not closed within the window: what a bulk count may read in one C pass.
# Unrolled and possessive like _STRING_REST, so one way to match: linear.
_LEXED = re.compile(r'(?:[^"]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)
_STRINGS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)


class JsonSpan:
    """Finds where a JSON object or array ends, fed piece by piece from its opening bracket (it must be started
    on that bracket: a stray closer first would end it at once).

    Brackets inside strings do not count, so `"</tool_call>"` or `"}"` in an argument never ends a block.
    Between two strings the brackets are counted in bulk (str.count runs in C) whenever the depth cannot reach
    zero there, which keeps adversarial input like a megabyte of `[` or `{` linear and fast.
    Bracket kinds are not matched here: `json.loads` judges the finished span.
    """

    def __init__(self) -> None:
        self.value: Any = _UNDECODED  # the decoded value, when its first piece held it whole
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self._stepping_until = -1  # in this stretch the bulk count failed: step bracket by bracket
        # How far a bulk count looks ahead; doubled after each success. Without a bound, every new span in text
        # with no more quotes would count to the end of the whole text: quadratic over many small spans.
        self._reach = 256

    def feed(self, text: str, position: int = 0) -> int | None:
        """Index just past the value's end within `text`, or None while it is still open."""
        if self.depth == 0 and not self.in_string and text.startswith(("{", "["), position):
            end = self._decode(text, position)
            if end is not None:
                return end
        self._stepping_until = -1
        while position < len(text):
            if self.escaped:
                self.escaped = False
                position += 1
            elif self.in_string:
                position = self._skip_string(text, position)
            else:
                end, position = self._step_code(text, position)
                if end is not None:
                    return end
        return None

    def _decode(self, text: str, position: int) -> int | None:
        """A whole value (a one-shot parse, or a call that came in one piece) is decoded where it starts, in one
        C pass that also finds its end, and callers use the value instead of decoding it again: the bracket tracker
        read a 200 KB `write` argument at 10 ns a character before json read it once more. A valid value ends where
        the tracker would end it (brackets balance, strings lexed alike), and a value that is invalid or not all
        here fails no later than that end: at most one more read of what the tracker reads anyway."""
        try:
            self.value, end = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        assert isinstance(end, int)
        return end

    def _skip_string(self, text: str, position: int) -> int:
        match = _STRING_REST.match(text, position)  # always matches (perhaps empty)
        end = match.end() if match else position
        if end == len(text):
            return end
        if text[end] == "\\":  # the last character of the text: its escaped character comes with the next piece
            self.escaped = True
        else:
            self.in_string = False
        return end + 1

    def _step_code(self, text: str, position: int) -> tuple[int | None, int]:
        """(end of the value or None, where to go on)."""
        if position >= self._stepping_until:
            limit = min(len(text), position + self._reach)
            found = _LEXED.match(text, position, limit)
            stop = found.end() if found else position
            # Closing brackets inside strings count too: fewer than the depth, the depth cannot reach zero here.
            closes = text.count("}", position, stop) + text.count("]", position, stop)
            if closes < self.depth:  # count in bulk, across whole strings (`{"name": "read", "arguments": {` ...)
                self.depth += _depth_change(text, position, stop)
                if stop < limit:  # a string opens at `stop` and does not close within the window
                    self.in_string = True
                    return None, stop + 1
                self._reach *= 2
                return None, stop
            if self.depth:  # (at depth 0 we stand on the opening bracket: one step, then bulk counting again)
                self._stepping_until = stop  # each stretch is counted at most once, so this stays linear
        match = _IN_CODE.search(text, position)
        if match is None:
            return None, len(text)
        if match.group() == '"':
            self.in_string = True
            return None, match.end()
        run = (_OPENERS if match.group() in "[{" else _CLOSERS).match(text, match.start())
        assert run is not None
        count = run.end() - run.start()
        if match.group() in "[{":
            self.depth += count
            return None, run.end()
        if count >= self.depth:
            end = match.start() + self.depth
            self.depth = 0
            return end, end
        self.depth -= count
        return None, run.end()


def _depth_change(text: str, start: int, stop: int) -> int:
    """Brackets opened less brackets closed outside strings in `text[start:stop]`, which holds only whole strings."""
    if text.find('"', start, stop) >= 0:
        text = _STRINGS.sub("", text[start:stop])
        start, stop = 0, len(text)
    return (text.count("{", start, stop) + text.count("[", start, stop)
            - text.count("}", start, stop) - text.count("]", start, stop))


def is_decoded(value: Any) -> bool:
    """Whether a JsonSpan's `value` holds the decoded value."""
    return value is not _UNDECODED
