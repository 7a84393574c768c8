"""Calls between special tokens, written as a Python list or as JSON: LFM2's `<|tool_call_start|>[f(a=1)]
<|tool_call_end|>`, Llama 4's `<|python_start|>...<|python_end|>`, and OLMo 3's `<function_calls>` with one Python
call per line.

Dialects that differ only in their markers are instances of one class. Inside: a Python list of calls, a JSON list
of call objects, or JSON call objects joined by `;` (what Llama and LFM2 write when the prompt asks for JSON); with
`lines`, bare Python calls one per line. Python values are read by `pythonic.py`'s tokenizer, JSON by its span
tracker. The closing token goes with the last call when it follows; servers that stop on it may drop it. Names are
judged by `extraction.py`, so each call keeps its own source and a refused one goes back as text alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import (
    SPACE,
    Cursor,
    Read,
    ahead,
    either,
    json_value,
    literal,
    marker,
    object_list,
    peek,
    space,
)
from toolproxy.dialects.pythonic import ARGUMENTS_AHEAD, IDENTIFIER_AHEAD, read_call, read_list, render_call
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner, calls_in

# `[` and, after white space, what comes next: `{` makes it a JSON list, anything else a Python one.
_LIST_HEAD = re.compile(r"\[(\s{0,64}+)(\S?)")
# What the readers need after the opener, so that a flood of openers in prose is skipped in C: a Python call as far
# as its first value, a list of those or of JSON objects, or a JSON object.
_CALL_AHEAD = either(ahead(IDENTIFIER_AHEAD, ARGUMENTS_AHEAD),
                     ahead(literal("print("), r"[ \t]{0,64}+", IDENTIFIER_AHEAD, ARGUMENTS_AHEAD))
_BODY_AHEAD = either(ahead(literal("["), SPACE, either(literal("{"), _CALL_AHEAD)), literal("{"))


@dataclass(frozen=True, slots=True)
class WrappedCallsDialect:
    name: str
    opener: str
    closer: str
    lines: bool = False  # OLMo 3: bare Python calls, one per line, instead of a list

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        if self.closer.startswith("`"):  # a fence's end closes any fence: neither a wrapper nor markup of calls
            return Markup((self.opener,))
        return Markup((self.opener,), (self.closer,), ((self.opener, self.closer),))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.opener,)

    def scanner(self, tools: ToolIndex) -> WrappedCallsScanner:
        return WrappedCallsScanner(self)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if self.lines:
            return f"{self.opener}\n{render_call(name, arguments)}\n{self.closer}"
        return f"{self.opener}[{render_call(name, arguments)}]{self.closer}"


class WrappedCallsScanner(TokenBlockScanner):
    def __init__(self, dialect: WrappedCallsDialect) -> None:
        body = _CALL_AHEAD if dialect.lines else _BODY_AHEAD
        super().__init__(dialect.name, (dialect.opener,), {dialect.opener: ahead(SPACE, body)})
        self._closer = dialect.closer
        self._lines = dialect.lines

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        yield from space(cursor)
        found, whole = (yield from _call_lines(cursor)) if self._lines else (yield from _body(cursor))
        if not found:
            return None
        if whole:  # only right after the last call: text read past a broken one stays text
            yield from space(cursor)
            if (yield from marker(cursor, self._closer)) is not None:
                found[-1] = replace(found[-1], end=cursor.offset())
        return found


# Each reader answers (the calls read, whether reading stopped right after the last of them).
Calls = tuple[list[Found] | None, bool]


def _body(cursor: Cursor) -> Read[Calls]:
    first = yield from peek(cursor)
    if first == "{":
        return (yield from _json_calls(cursor))
    if first != "[":
        return None, False
    while (head := _LIST_HEAD.match(cursor.text, cursor.position)) is not None and not head.group(2):
        if cursor.ended or len(head.group(1)) == 64:
            return None, False
        yield
    if head is None:
        return None, False
    if head.group(2) == "{":
        return calls_in((yield from object_list(cursor))), True
    cursor.position = head.start(2)
    return (yield from read_list(cursor, None)), True


def _json_calls(cursor: Cursor) -> Read[Calls]:
    """JSON call objects, joined by `;`: the calls before a broken one stand."""
    found: list[Found] = []
    while True:
        value = yield from json_value(cursor, "{")
        calls = calls_in([(value, cursor.offset())] if value is not None else None)
        if calls is None:
            return found, False
        found.extend(calls)
        yield from space(cursor)
        if (yield from marker(cursor, ";")) is None:
            return found, True
        yield from space(cursor)


def _call_lines(cursor: Cursor) -> Read[Calls]:
    """Python calls separated by white space, up to the first thing that is not one; a broken call refuses all.
    A call may be printed (`print(get_weather(city="Paris"))`, as Google's Gemma function-calling guide writes
    `tool_code`)."""
    found: list[Found] = []
    while (yield from _starts_call(cursor)):
        printed = yield from _printed(cursor)
        call = yield from read_call(cursor, None)
        if call is not None and printed:
            yield from space(cursor)
            call = call if (yield from marker(cursor, ")")) is not None else None
        if call is None:
            return None, False
        found.append(Found(*call, cursor.offset()))
        yield from space(cursor)
    return found, True


_PRINT_HEAD = re.compile(r"print\([ \t]{0,64}+([A-Za-z_])?")


def _printed(cursor: Cursor) -> Read[bool]:
    """Whether `print(` and a name come next; read up to the name when they do, else nothing."""
    while True:
        head = _PRINT_HEAD.match(cursor.text, cursor.position)
        if head is None:
            return False
        if head.group(1):
            cursor.position = head.start(1)
            return True
        if head.end() < len(cursor.text) or cursor.ended:
            return False
        yield


_CALL_HEAD = re.compile(rf"{IDENTIFIER_AHEAD}[ \t]{{0,64}}+(\()?")


def _starts_call(cursor: Cursor) -> Read[bool]:
    """Whether a name and `(` come next, read nothing."""
    while True:
        head = _CALL_HEAD.match(cursor.text, cursor.position)
        if head is None or head.group(1):
            return head is not None
        if head.end() < len(cursor.text) or cursor.ended:
            return False
        yield
