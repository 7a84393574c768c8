"""Python-style calls as Llama 3.2, 3.3 and 4 write them: `[get_weather(city="Paris"), get_time()]`.

Only a list that starts a line (or the reply) counts, and only when every name in it is one of the request's tools:
a Python list in an answer stays text. Arguments are keywords whose values are Python literals (strings in either
quote style, numbers, True/False/None, lists, tuples, dicts), read by a hand-written tokenizer in one pass: no
`eval`, no `ast`, and no regular expression with nested repetition (sglang#31912: a Pythonic detector that went
exponential on 150 characters). Nesting is bounded, and strings are read as they stream in.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproxy.dialects.base import ToolIndex
from toolproxy.dialects.cursor import (
    SPACE,
    SPACE_REACH,
    Cursor,
    Read,
    ahead,
    either,
    literal,
    marker,
    peek,
    space,
    word,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

_LINE_SPACE = re.compile(r"[ \t]*")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NUMBER_RUN = re.compile(r"[\w.+\-]*")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")
_STRING_STOPS = {"'": re.compile(r"['\\\n]"), '"': re.compile(r'["\\\n]')}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|N\{[^{}\n]{1,100}\}|[\s\S])")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a",
                   "\\": "\\", "'": "'", '"': '"', "\n": ""}
# JSON's spellings too: models trained on JSON calls write them inside Python calls.
_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_NAME_LIMIT = 128
_NUMBER_LIMIT = 64
_DEPTH_LIMIT = 32
_INVALID = object()
# What a call's first argument needs, for the opener's lookahead: a key, `=`, and how a value begins (brackets and
# white space, then a quote, a number, a closer or a constant; an identifier at the end of the text may become one).
# A longer run of brackets and white space lets anything follow, as `ahead` does for white space.
_KEY_AHEAD = rf"[A-Za-z_]\w{{0,{_NAME_LIMIT - 1}}}+"
_VALUE_AHEAD = (rf"(?:[\s\[({{]{{{SPACE_REACH}}}|[\s\[({{]{{0,{SPACE_REACH - 1}}}+(?:\Z|['\"\d+\-.\])}}]|"
                rf"(?:True|False|None|true|false|null)(?!\w)|[A-Za-z_]\w{{0,{_NAME_LIMIT - 1}}}+\Z))")


class PythonicDialect:
    name = "pythonic"

    def scanner(self, tools: ToolIndex) -> PythonicScanner:
        return PythonicScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """`repr` writes Python literals; argument names must be identifiers."""
        return f"[{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})]"


class PythonicScanner(TokenBlockScanner):
    def __init__(self, tools: ToolIndex) -> None:
        super().__init__(PythonicDialect.name, ("[",))
        self._tools = tools
        self._line_start = True  # nothing but spaces and tabs since the last line break (or the start)
        # A `[` counts only when a declared name, `(` and a first argument can follow: a Python list in an answer,
        # or a flood of `[tool(a=` lines, is skipped in C.
        self._bracket, self._line_bracket = _openers(tuple(name for name in tools if _IDENTIFIER.fullmatch(name)))

    def _find_opener(self) -> tuple[int, str] | None:
        cursor = self._cursor
        if self._line_start:
            lead = _LINE_SPACE.match(cursor.text, cursor.position)
            assert lead is not None
            if self._bracket.match(cursor.text, lead.end()):
                return lead.end(), "["
        found = self._line_bracket.search(cursor.text, cursor.position)
        return (found.end() - 1, "[") if found is not None else None

    def _hold(self) -> int:
        return 0  # the opener is one character; where a line starts is tracked in `_passed`

    def _passed(self, text: str) -> None:
        newline = text.rfind("\n")
        if newline >= 0 or self._line_start:
            blank = _LINE_SPACE.match(text, newline + 1)
            self._line_start = blank is not None and blank.end() == len(text)

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        found: list[Found] = []
        while True:
            yield from space(cursor)
            name = yield from word(cursor, _IDENTIFIER, _NAME_LIMIT)
            if name is None or name not in self._tools:
                return None  # a list with anything but calls to this request's tools is text, whole
            yield from space(cursor)
            if (yield from marker(cursor, "(")) is None:
                return None
            arguments = yield from _keywords(cursor)
            if arguments is None:
                return None
            found.append(Found(name, arguments, cursor.offset()))
            yield from space(cursor)
            separator = yield from marker(cursor, ",", "]")
            if separator is None:
                return None
            if separator == ",":
                yield from space(cursor)
                separator = yield from marker(cursor, "]")  # a trailing comma
            if separator == "]":
                found[-1] = replace(found[-1], end=cursor.offset())
                return found


@functools.lru_cache(maxsize=64)  # a scanner is made per reply and after every call; tool sets repeat
def _openers(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """`[` followed by what `_read` needs; and the same at the start of a line, where the run of spaces before `[`
    ends at the next character."""
    follow = call_ahead(names)
    return re.compile(rf"\[(?={follow})"), re.compile(rf"\n[ \t]*+\[(?={follow})")


def call_ahead(names: tuple[str, ...]) -> str:
    """What `_read` needs after `[` before its first value (never, without a tool that can be called)."""
    callable_names = sorted((name for name in names if len(name) <= _NAME_LIMIT), key=len, reverse=True)
    if not callable_names:
        return "(?!)"
    name = either(rf"(?:{'|'.join(map(re.escape, callable_names))})(?!\w)", rf"[A-Za-z_]\w{{0,{_NAME_LIMIT - 1}}}+\Z")
    argument = ahead(_KEY_AHEAD, SPACE, literal("="), SPACE, _VALUE_AHEAD)
    return ahead(SPACE, name, SPACE, literal("("), SPACE, either(literal(")"), argument))


def _keywords(cursor: Cursor) -> Read[dict[str, Any] | None]:
    """`key=value, ...)` after a call's `(`."""
    arguments: dict[str, Any] = {}
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, ")")) is not None:
            return arguments
        key = yield from word(cursor, _IDENTIFIER, _NAME_LIMIT)
        yield from space(cursor)
        if key is None or key in arguments or (yield from marker(cursor, "=")) is None:
            return None
        yield from space(cursor)
        value = yield from _value(cursor, 0)
        if value is _INVALID:
            return None
        arguments[key] = value
        yield from space(cursor)
        separator = yield from marker(cursor, ",", ")")
        if separator != ",":
            return arguments if separator == ")" else None


def _value(cursor: Cursor, depth: int) -> Read[Any]:
    """One Python literal, or _INVALID."""
    first = yield from peek(cursor)
    if not first:
        return _INVALID
    if first in "'\"":
        return (yield from _string(cursor, first))
    if first in "[({":
        if depth >= _DEPTH_LIMIT:
            return _INVALID
        if first == "{":
            return (yield from _dict(cursor, depth + 1))
        return (yield from _sequence(cursor, depth + 1))
    if first.isdigit() or first in "+-.":
        return _number((yield from word(cursor, _NUMBER_RUN, _NUMBER_LIMIT)))
    name = yield from word(cursor, _IDENTIFIER, _NAME_LIMIT)
    return _CONSTANTS.get(name, _INVALID) if name is not None else _INVALID


def _sequence(cursor: Cursor, depth: int) -> Read[Any]:
    """A list, or a tuple (as a list); `(x)` is just x, as in Python."""
    opener = cursor.text[cursor.position]
    closer = "]" if opener == "[" else ")"
    cursor.position += 1
    items: list[Any] = []
    comma = False
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, closer)) is not None:
            break
        item = yield from _value(cursor, depth)
        if item is _INVALID:
            return _INVALID
        items.append(item)
        yield from space(cursor)
        separator = yield from marker(cursor, ",", closer)
        if separator is None:
            return _INVALID
        if separator == closer:
            break
        comma = True
    return items[0] if opener == "(" and len(items) == 1 and not comma else items


def _dict(cursor: Cursor, depth: int) -> Read[Any]:
    cursor.position += 1
    result: dict[str, Any] = {}
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, "}")) is not None:
            return result
        key = yield from _value(cursor, depth)
        if key is _INVALID or isinstance(key, (list, dict)):
            return _INVALID
        yield from space(cursor)
        if (yield from marker(cursor, ":")) is None:
            return _INVALID
        yield from space(cursor)
        value = yield from _value(cursor, depth)
        if value is _INVALID:
            return _INVALID
        result[key if isinstance(key, str) else json.dumps(key)] = value  # JSON keys are strings
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "}")
        if separator != ",":
            return result if separator == "}" else _INVALID


def _number(run: str | None) -> Any:
    if run is None or not _NUMBER.fullmatch(run):
        return _INVALID
    if _INTEGER.fullmatch(run):
        return int(run)  # at most _NUMBER_LIMIT digits: no quadratic conversion
    number = float(run)
    return number if math.isfinite(number) else _INVALID  # 1e999 is inf, which JSON cannot carry


def _string(cursor: Cursor, quote: str) -> Read[Any]:
    """A string literal in either quote style, single or triple; read in pieces as it streams."""
    while len(cursor.text) - cursor.position < 3 and not cursor.ended:
        yield  # three characters tell '''...''' from '' followed by something
    triple = cursor.text.startswith(quote * 3, cursor.position)
    cursor.position += 3 if triple else 1
    raw: list[str] = []
    stops = _STRING_STOPS[quote]
    while True:
        found = stops.search(cursor.text, cursor.position)
        stop = found.start() if found is not None else len(cursor.text)
        raw.append(cursor.text[cursor.position : stop])
        cursor.position = stop
        step = _string_step(cursor, quote, triple)
        if step is None:
            if cursor.ended:
                return _INVALID
            yield
        elif isinstance(step, bool):
            return _unescape("".join(raw)) if step else _INVALID
        else:
            raw.append(step)


def _string_step(cursor: Cursor, quote: str, triple: bool) -> str | bool | None:
    """At a quote, backslash or line break inside a string: the raw text it stands for, read; True when the string
    closes here, False when it cannot go on, None when the next characters have not come yet."""
    text, position = cursor.text, cursor.position
    if position >= len(text):
        return None
    char = text[position]
    if char == "\\":
        if len(text) - position < 2:
            return False if cursor.ended else None
        cursor.position += 2
        return text[position : position + 2]
    if char == "\n" and not triple:
        return False  # a one-line string cannot hold a line break
    if char == quote:
        if not triple:
            cursor.position += 1
            return True
        if text.startswith(quote * 3, position):
            cursor.position += 3
            return True
        rest = text[position : position + 3]
        if len(rest) < 3 and rest == quote * len(rest) and not cursor.ended:
            return None
    cursor.position += 1
    return char


def _unescape(raw: str) -> Any:
    try:
        return _ESCAPE.sub(_escaped, raw)
    except (ValueError, KeyError, OverflowError):
        return _INVALID


def _escaped(escape: re.Match[str]) -> str:
    body = escape.group(1)
    if body in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[body]
    if body[0] in "xuU" and len(body) > 1:
        return chr(int(body[1:], 16))  # ValueError beyond U+10FFFF
    if body[0] in "01234567":
        return chr(int(body, 8))
    if body[0] == "N" and len(body) > 1:
        return unicodedata.lookup(body[2:-1])  # KeyError for an unknown name
    return "\\" + body  # Python keeps a backslash before a character it does not know as an escape
