"""The arguments of a Python-style call: `key=value, ...)` with Python literals as values (strings in either quote
style, numbers, True/False/None, lists, tuples, dicts), read by a hand-written tokenizer in one pass: no `eval`,
no `ast`, no regular expression with nested repetition. Nesting is bounded; strings are read as they stream in."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

from toolproxy.dialects.cursor import Cursor, Read, marker, peek, space, word

IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
NAME_LIMIT = 128
_NUMBER_RUN = re.compile(r"[\w.+\-]*")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d+")
_STRING_STOPS = {"'": re.compile(r"['\\\n]"), '"': re.compile(r'["\\\n]')}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|N\{[^{}\n]{1,100}\}|[\s\S])")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a",
                   "\\": "\\", "'": "'", '"': '"', "\n": ""}
_NUMBER_LIMIT = 64
_DEPTH_LIMIT = 32
_INVALID = object()


def keywords(cursor: Cursor) -> Read[dict[str, Any] | None]:
    """`key=value, ...)` after a call's `(`."""
    arguments: dict[str, Any] = {}
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, ")")) is not None:
            return arguments
        key = yield from word(cursor, IDENTIFIER, NAME_LIMIT)
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
    name = yield from word(cursor, IDENTIFIER, NAME_LIMIT)
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
