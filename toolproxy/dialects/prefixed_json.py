"""A marker followed by a JSON list of calls, with no closing marker: Phi-4-mini's `functools[...]`, Granite 3.0's
`<|tool_call|>[...]`.

Dialects that differ only in their marker are instances of one class. The list ends where its JSON ends; every
element must have the shape of a call, or the whole list is text. Each call's source is its own element, so a
call that `extraction.py` refuses goes back as text on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import ToolIndex
from toolproxy.dialects.cursor import OBJECT_LIST, SPACE, ahead, object_list, space
from toolproxy.dialects.token_block import Script, TokenBlockScanner, calls_in


@dataclass(frozen=True, slots=True)
class PrefixedJsonDialect:
    name: str
    opener: str

    def scanner(self, tools: ToolIndex) -> PrefixedJsonScanner:
        return PrefixedJsonScanner(self.name, self.opener)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"{self.opener}[{json.dumps({'name': name, 'arguments': dict(arguments)}, ensure_ascii=False)}]"


class PrefixedJsonScanner(TokenBlockScanner):
    def __init__(self, dialect: str, opener: str) -> None:
        super().__init__(dialect, (opener,), {opener: ahead(SPACE, OBJECT_LIST)})

    def _read(self, opener: str) -> Script:
        yield from space(self._cursor)
        return calls_in((yield from object_list(self._cursor)))
