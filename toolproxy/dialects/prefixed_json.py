"""A marker followed by JSON calls, with no closing marker: Phi-4-mini's `functools[...]`, Granite 3.0's
`<|tool_call|>[...]` (a JSON list of calls), Granite 20B FC's `<function_call> {...}` (one call per marker).

Dialects that differ only in their marker are instances of one class. A list ends where its JSON ends; every
element must have the shape of a call, or the whole list is text. Each call's source is its own element, so a
call that `extraction.py` refuses goes back as text on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import OBJECT_LIST, SPACE, ahead, json_value, literal, object_list, space
from toolproxy.dialects.token_block import Script, TokenBlockScanner, calls_in


@dataclass(frozen=True, slots=True)
class PrefixedJsonDialect:
    name: str
    opener: str
    single: bool = False  # one call object per marker instead of a list of calls

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        # A word (Phi-4-mini's `functools`) is no marker: prose writes it too.
        return Markup(() if self.opener.isalnum() else (self.opener,))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.opener,)

    def scanner(self, tools: ToolIndex) -> PrefixedJsonScanner:
        return PrefixedJsonScanner(self.name, self.opener, self.single)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
        return f"{self.opener} {call}" if self.single else f"{self.opener}[{call}]"


class PrefixedJsonScanner(TokenBlockScanner):
    def __init__(self, dialect: str, opener: str, single: bool) -> None:
        follow = ahead(SPACE, literal("{")) if single else ahead(SPACE, OBJECT_LIST)
        super().__init__(dialect, (opener,), {opener: follow})
        self._single = single

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        yield from space(cursor)
        if not self._single:
            return calls_in((yield from object_list(cursor)))
        value = yield from json_value(cursor, "{")
        return calls_in([(value, cursor.offset())] if value is not None else None)
