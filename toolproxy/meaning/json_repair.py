"""Repair of native tool-call `arguments` strings that an inference server returned as almost-JSON.

Only unambiguous damage is mended (trailing commas, a truncated end, Python quoting and literals, bare identifier
keys); everything else is refused so the caller can hand the text back instead of guessing. No I/O here: one
linear, hand-written scanner rewrites the text and `json.loads` has the last word.
"""

from __future__ import annotations

import json
import math
import string
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from toolproxy.meaning.json_strings import is_raw, requote, string_end, unraw
from toolproxy.wire.jsonwire import depth_exceeds

MAX_DEPTH = 64

TRAILING_COMMA = "trailing comma"
MISSING_CLOSER = "missing closing brace"
SINGLE_QUOTES = "single quotes"
PYTHON_LITERALS = "python literals"
UNQUOTED_KEYS = "unquoted keys"
DOUBLE_ENCODED = "double encoded"
RAW_BACKSLASHES = "raw backslashes"

# Only JSON's own whitespace: anything else outside a string would make json.loads fail anyway.
_WHITESPACE = frozenset(" \t\n\r")
# Characters of numbers, literals and bare keys; a run of them is one word.
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_.+-")
_IDENTIFIER_START = frozenset(string.ascii_letters + "_")
_IDENTIFIER_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_PYTHON_TO_JSON = {"True": "true", "False": "false", "None": "null"}
_JSON_LITERALS = frozenset({"true", "false", "null"})


@dataclass(frozen=True, slots=True)
class RepairResult:
    """The arguments as an object, or None when the text cannot be read unambiguously; `fixes` names each repair."""

    value: dict[str, Any] | None
    fixes: tuple[str, ...] = ()


_REFUSED = RepairResult(None)


class _Refused(ValueError):
    """The scanner met something it must not guess about."""


class _Expect(Enum):
    VALUE = auto()  # top level, or after ':'
    VALUE_OR_CLOSE = auto()  # just after '['
    VALUE_AFTER_COMMA = auto()  # after ',' in an array: a ']' here means a trailing comma
    KEY_OR_CLOSE = auto()  # just after '{'
    KEY_AFTER_COMMA = auto()  # after ',' in an object: a '}' here means a trailing comma
    COLON = auto()
    COMMA_OR_CLOSE = auto()  # after a value inside a container
    END = auto()  # after the top-level value: only whitespace may follow


_VALUE_STATES = frozenset({_Expect.VALUE, _Expect.VALUE_OR_CLOSE, _Expect.VALUE_AFTER_COMMA})
_KEY_STATES = frozenset({_Expect.KEY_OR_CLOSE, _Expect.KEY_AFTER_COMMA})
# Where a truncated text may be closed: right after a complete value or an opening bracket, never after ':' or ','.
_CLOSABLE_STATES = frozenset({_Expect.COMMA_OR_CLOSE, _Expect.KEY_OR_CLOSE, _Expect.VALUE_OR_CLOSE})


def repair_arguments(text: str) -> RepairResult:
    """The JSON object `text` stands for, mended where the damage is unambiguous, or a result with value None."""
    try:
        value = _decode(text)
    except (ValueError, RecursionError):
        return _repair(text)
    if isinstance(value, str):
        return _unwrap(value)
    return _accept(value, ())


def _repair(text: str) -> RepairResult:
    try:
        rewritten, fixes = _Scanner(text).run()
        value = _decode(rewritten)
    except (ValueError, RecursionError):
        return _REFUSED
    return _accept(value, fixes)


def _unwrap(inner: str) -> RepairResult:
    """Arguments a server JSON-encoded twice. The inner text must be a valid object on its own: mending damage
    behind a second layer of quoting would be a guess on top of a guess."""
    try:
        value = _decode(inner)
    except (ValueError, RecursionError):
        return _REFUSED
    return _accept(value, (DOUBLE_ENCODED,))


def _accept(value: Any, fixes: tuple[str, ...]) -> RepairResult:
    if isinstance(value, dict) and not depth_exceeds(value, MAX_DEPTH):
        return RepairResult(value, fixes)
    return _REFUSED


def _decode(text: str) -> Any:
    """Strict json.loads: NaN, Infinity and numbers that overflow to inf are Python's extensions, not JSON, and
    would come out of json.dumps as text no client can parse."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} does not fit a float")
    return number


class _Scanner:
    """One pass over the text with a bracket stack and the grammar position, writing the repaired text as it goes.
    Every grammar violation it does not know how to mend is a refusal, so json.loads only checks the tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out: list[str] = []
        self.closers: list[str] = []
        self.expect = _Expect.VALUE
        self.comma_at = -1
        self.fixes: list[str] = []

    def run(self) -> tuple[str, tuple[str, ...]]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in _WHITESPACE:
                self.out.append(char)
                self.pos += 1
            elif char in "{[":
                self._open(char)
            elif char in "}]":
                self._close(char)
            elif char in ",:":
                self._punctuation(char)
            elif char in "\"'":
                self._string(char)
            elif char in _WORD_CHARS:
                self._word()
            else:
                raise _Refused(f"unexpected {char!r}")
        self._finish()
        return "".join(self.out), tuple(self.fixes)

    def _fix(self, name: str) -> None:
        if name not in self.fixes:
            self.fixes.append(name)

    def _begin_value(self) -> None:
        if self.expect not in _VALUE_STATES:
            raise _Refused("a value where none may stand")

    def _end_value(self) -> None:
        self.expect = _Expect.COMMA_OR_CLOSE if self.closers else _Expect.END

    def _open(self, char: str) -> None:
        self._begin_value()
        if len(self.closers) >= MAX_DEPTH:
            raise _Refused("nested too deep")
        self.closers.append("}" if char == "{" else "]")
        self.expect = _Expect.KEY_OR_CLOSE if char == "{" else _Expect.VALUE_OR_CLOSE
        self.out.append(char)
        self.pos += 1

    def _close(self, char: str) -> None:
        if not self.closers or self.closers[-1] != char:
            raise _Refused("unbalanced closer")
        if self.expect in (_Expect.KEY_AFTER_COMMA, _Expect.VALUE_AFTER_COMMA):
            # Whitespace between the comma and the closer stays; only the comma goes.
            self.out[self.comma_at] = ""
            self._fix(TRAILING_COMMA)
        elif self.expect not in _CLOSABLE_STATES:
            raise _Refused("closer where a key or a value must come")
        self.closers.pop()
        self._end_value()
        self.out.append(char)
        self.pos += 1

    def _punctuation(self, char: str) -> None:
        if char == ":" and self.expect is _Expect.COLON:
            self.expect = _Expect.VALUE
        elif char == "," and self.expect is _Expect.COMMA_OR_CLOSE:
            self.comma_at = len(self.out)
            self.expect = _Expect.KEY_AFTER_COMMA if self.closers[-1] == "}" else _Expect.VALUE_AFTER_COMMA
        else:
            raise _Refused(f"misplaced {char!r}")
        self.out.append(char)
        self.pos += 1

    def _string(self, quote: str) -> None:
        end = string_end(self.text, self.pos + 1, quote)
        if end < 0:
            # A string cut off mid-way: where it was meant to end, and what followed, is anyone's guess.
            raise _Refused("unterminated string")
        body = self.text[self.pos + 1 : end]
        if quote == "'":
            self.out.append('"' + requote(body) + '"')
            self._fix(SINGLE_QUOTES)
        elif is_raw(body):  # (double quotes only: single-quoted strings are Python's, whose escapes are others)
            self.out.append('"' + unraw(body) + '"')
            self._fix(RAW_BACKSLASHES)
        else:
            self.out.append(self.text[self.pos : end + 1])
        if self.expect in _KEY_STATES:
            self.expect = _Expect.COLON
        else:
            self._begin_value()
            self._end_value()
        self.pos = end + 1

    def _word(self) -> None:
        end = self.pos
        while end < len(self.text) and self.text[end] in _WORD_CHARS:
            end += 1
        word = self.text[self.pos : end]
        if self.expect in _KEY_STATES:
            self._bare_key(word)
        else:
            self._begin_value()
            self._literal(word)
            self._end_value()
        self.pos = end

    def _bare_key(self, word: str) -> None:
        # Literal names as keys ({True: 1}, {null: 1}) are a Python or JavaScript value, not a name: refuse.
        if word[0] not in _IDENTIFIER_START or not _IDENTIFIER_CHARS.issuperset(word):
            raise _Refused(f"bare key {word!r}")
        if word in _PYTHON_TO_JSON or word in _JSON_LITERALS:
            raise _Refused(f"bare key {word!r}")
        self.out.append(f'"{word}"')
        self._fix(UNQUOTED_KEYS)
        self.expect = _Expect.COLON

    def _literal(self, word: str) -> None:
        if word in _PYTHON_TO_JSON:
            self.out.append(_PYTHON_TO_JSON[word])
            self._fix(PYTHON_LITERALS)
        elif word in _JSON_LITERALS or word[0] in "-0123456789":
            self.out.append(word)  # json.loads decides whether the number is well formed
        else:
            raise _Refused(f"bare word {word!r}")

    def _finish(self) -> None:
        if self.expect is _Expect.END:
            return
        if not self.closers or self.expect not in _CLOSABLE_STATES:
            raise _Refused("text ends where no value may end")
        # vLLM sometimes drops the final brace of tool arguments (vllm-project/vllm#32152, #22885).
        self.out.append("".join(reversed(self.closers)))
        self._fix(MISSING_CLOSER)
