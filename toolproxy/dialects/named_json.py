"""A declared tool's name between markers, then its arguments as one JSON object, then a closer: the family of
`name` plus a JSON object that models drift into when they write a call as text.

Qwen2.5-Coder in LM Studio writes `[read]\\n{"path": "a.py"}\\n[/read]` (or `[END_TOOL_REQUEST]` after it,
LM Studio's own closer); Gemini behind a router writes the transcript line agents keep past calls in,
`[Called function "read" with args: {"path": "a.py"}]`. A member is data: what stands before the name and after
it, and the closers (`{name}` in one stands for the tool's name). The openers are built from the request's tools,
so only a declared name opens a block, and the block is a call only when a JSON object and a closer follow;
`extraction.py` still validates the arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, decode_json
from toolproxy.dialects.cursor import SPACE, ahead, json_value, literal, marker, space
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

NAME = "{name}"


@dataclass(frozen=True, slots=True)
class NamedJsonDialect:
    name: str
    before: str  # what stands right before the tool's name
    after: str  # what stands right after it, before the JSON object (white space may follow)
    closers: tuple[str, ...]  # one must follow the object (white space may come first); NAME is the tool's name

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        # Its openers hold the tool's name, so no literal of them only ever starts a call.
        return Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return tuple(self._opener(name) for name in tools)

    def scanner(self, tools: ToolIndex) -> NamedJsonScanner:
        return NamedJsonScanner(self, {self._opener(name): name for name in tools})

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        closer = self.closers[0].replace(NAME, name)
        return f"{self._opener(name)}{json.dumps(dict(arguments), ensure_ascii=False)}{closer}"

    def _opener(self, name: str) -> str:
        return f"{self.before}{name}{self.after}"


class NamedJsonScanner(TokenBlockScanner):
    def __init__(self, dialect: NamedJsonDialect, names: Mapping[str, str]) -> None:
        follow = ahead(SPACE, literal("{"))
        super().__init__(dialect.name, tuple(names), dict.fromkeys(names, follow))
        self._names = names
        self._closers = dialect.closers

    def _hold(self) -> int:
        return super()._hold() if self._names else 0  # a request without tools: nothing can open a block

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        name = self._names[opener]
        yield from space(cursor)
        value = yield from json_value(cursor, "{")
        if value is None:
            return None
        yield from space(cursor)
        if (yield from marker(cursor, *(closer.replace(NAME, name) for closer in self._closers))) is None:
            return None
        try:
            arguments = decode_json(value)
        except ValueError:
            return None
        return [Found(name, arguments, cursor.offset())] if isinstance(arguments, dict) else None
