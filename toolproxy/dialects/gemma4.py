"""Gemma 4 calls: `<|tool_call>call:NAME{key:<|"|>text<|"|>,count:5,on:true}<tool_call|>`.

Arguments are Gemma's own notation, not JSON: keys are bare, strings sit between `<|"|>` tokens (so a quote or a
brace inside one is just text), numbers, `true`, `false` and `null` are bare, and values nest in `{...}` and
`[...]`, as in llama.cpp's Gemma 4 grammar. Each call has its own opener; some servers end one with `<turn|>`
instead of `<tool_call|>`, or cut the closer as a stop token. Anything else inside the braces makes the block text.

Servers that strip special tokens leave `call:NAME{key:value,...}` with bare strings (Gitlawb/openclaude#380). That
form counts only for a declared tool whose schema names every key; a bare value runs to the next `,`, `}` or `]`
and is a number, `true`, `false` or `null` when it reads as one, else text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import ToolIndex, partial_suffix
from toolproxy.dialects.cursor import SPACE, Cursor, Read, ahead, either, literal, marker, peek, run, space, word
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

OPENER = "<|tool_call>"
CLOSERS = ("<tool_call|>", "<turn|>")
QUOTE = '<|"|>'
_CALL = "call:"
_NAME = re.compile(r"[\w.\-]*")
_KEY = re.compile(r"[^:{}\[\],<>\s]*")
_NUMBER_RUN = re.compile(r"[\w.+\-]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None}
_BARE = re.compile(r"[^,{}\[\]\n]*")  # a bare value in the stripped form: up to the next separator
_BARE_LIMIT = 4096
_WORD_CHAR = re.compile(r"[\w.\-:>]")  # `>`: right after a refused <|tool_call> is not the stripped form
_LIMIT = 128
_DEPTH_LIMIT = 32
_INVALID = object()
_FOLLOW = ahead(SPACE, literal(_CALL), run(r"[\w.\-]", _LIMIT), SPACE, literal("{"))


class Gemma4Dialect:
    name = "gemma4"

    holds_only_markers = True

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (OPENER, _CALL)

    def scanner(self, tools: ToolIndex) -> Gemma4Scanner:
        return Gemma4Scanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"{OPENER}{_CALL}{name}{render_value(dict(arguments))}{CLOSERS[0]}"


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return f"{QUOTE}{value}{QUOTE}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{render_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render_value(item) for item in value) + "]"
    return json.dumps(value)


class Gemma4Scanner(TokenBlockScanner):
    def __init__(self, tools: ToolIndex) -> None:
        names = tuple(sorted((name for name in tools if _NAME.fullmatch(name) and name), key=len, reverse=True))
        super().__init__(Gemma4Dialect.name, (OPENER, _CALL), {OPENER: _FOLLOW, _CALL: _bare_ahead(names)})
        self._tools = tools
        self._last = ""  # the last character that went out, to tell `call:` from `recall:`

    def _find_opener(self) -> tuple[int, str] | None:
        """As the base, but a bare `call:` must begin a word."""
        cursor = self._cursor
        start = cursor.position
        while (found := self._search(start)) is not None:
            before = cursor.text[found.start() - 1] if found.start() > cursor.position else self._last
            if found.group() != _CALL or not _WORD_CHAR.match(before):
                return found.start(), found.group()
            start = found.start() + 1
        return None

    def _passed(self, text: str) -> None:
        self._last = text[-1:] or self._last

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        bare = opener == _CALL
        if not bare:
            yield from space(cursor)
            if (yield from marker(cursor, _CALL)) is None:
                return None
        name = yield from word(cursor, _NAME, _LIMIT)
        yield from space(cursor)
        if name is None or (yield from peek(cursor)) != "{":
            return None
        arguments = yield from _value(cursor, 0, bare)
        if arguments is _INVALID or (bare and not _fits(arguments, self._tools.get(name))):
            return None
        end = cursor.offset()
        yield from space(cursor)
        if (yield from marker(cursor, *CLOSERS)) is not None:
            end = cursor.offset()
        return [Found(name, arguments, end)]


def _bare_ahead(names: tuple[str, ...]) -> str:
    """A declared name and `{` after a bare `call:` (never, without a declared tool)."""
    if not names:
        return "(?!)"
    name = either(rf"(?:{'|'.join(map(re.escape, names))})(?![\w.\-])", rf"[\w.\-]{{1,{_LIMIT}}}+\Z")
    return ahead(name, SPACE, literal("{"))


def _fits(arguments: Any, schema: Any) -> bool:
    """Whether the bare form's keys are all among the declared tool's properties (its one anchor against prose)."""
    if not isinstance(schema, Mapping):
        return False
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and isinstance(arguments, dict) and set(arguments) <= set(properties)


def _value(cursor: Cursor, depth: int, bare: bool = False) -> Read[Any]:
    """One value, or _INVALID; `bare`: a value that is not markup is text up to the next separator."""
    first = yield from peek(cursor)
    if first == "<" and not bare:
        return (yield from _string(cursor))
    if first in ("{", "["):
        if depth >= _DEPTH_LIMIT:
            return _INVALID
        cursor.position += 1
        return (yield from (_dict(cursor, depth + 1, bare) if first == "{" else _list(cursor, depth + 1, bare)))
    if bare:
        text = yield from word(cursor, _BARE, _BARE_LIMIT)
        value = _CONSTANTS.get(text, _number(text)) if text is not None else _INVALID
        return text.strip() if value is _INVALID and text is not None and text.strip() else value
    if first and (first.isdigit() or first == "-"):
        return _number((yield from word(cursor, _NUMBER_RUN, 64)))
    constant = yield from word(cursor, _NAME, 8)
    return _CONSTANTS.get(constant, _INVALID) if constant is not None else _INVALID


def _dict(cursor: Cursor, depth: int, bare: bool = False) -> Read[Any]:
    """`key:value, ...}` after the `{`; a key may be written as a string too."""
    result: dict[str, Any] = {}
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, "}")) is not None:
            return result
        quoted = (yield from peek(cursor)) == "<"
        key = (yield from _string(cursor)) if quoted else (yield from word(cursor, _KEY, _LIMIT))
        yield from space(cursor)
        if not isinstance(key, str) or not key or key in result or (yield from marker(cursor, ":")) is None:
            return _INVALID
        yield from space(cursor)
        value = yield from _value(cursor, depth, bare)
        if value is _INVALID:
            return _INVALID
        result[key] = value
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "}")
        if separator != ",":
            return result if separator == "}" else _INVALID


def _list(cursor: Cursor, depth: int, bare: bool = False) -> Read[Any]:
    items: list[Any] = []
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, "]")) is not None:
            return items
        item = yield from _value(cursor, depth, bare)
        if item is _INVALID:
            return _INVALID
        items.append(item)
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "]")
        if separator != ",":
            return items if separator == "]" else _INVALID


def _string(cursor: Cursor) -> Read[Any]:
    """`<|"|>text<|"|>`, read as it streams: only a possible beginning of the closing token is held back."""
    if (yield from marker(cursor, QUOTE)) is None:
        return _INVALID
    pieces: list[str] = []
    while True:
        index = cursor.text.find(QUOTE, cursor.position)
        if index >= 0:
            pieces.append(cursor.text[cursor.position : index])
            cursor.position = index + len(QUOTE)
            return "".join(pieces)
        tail = cursor.text[max(cursor.position, len(cursor.text) - len(QUOTE)) :]
        stop = len(cursor.text) - partial_suffix(tail, QUOTE)
        pieces.append(cursor.text[cursor.position : stop])
        cursor.position = stop
        if cursor.ended:
            return _INVALID
        yield


def _number(run: str | None) -> Any:
    if run is None or not _NUMBER.fullmatch(run):
        return _INVALID
    if "." not in run and "e" not in run.lower():
        return int(run)  # at most 64 digits: no quadratic conversion
    number = float(run)
    return number if math.isfinite(number) else _INVALID
