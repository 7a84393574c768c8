"""MeetKai Functionary calls: v3.1 (Llama 3.1 based) writes `<function=NAME>{...}</function>`, v3.2 (Llama 3
based) addresses each message to a recipient, `>>>NAME\\n{...}` for a call and `>>>all\\n` for text to the user.

Each call has its own opener, and its arguments are one JSON object, kept as text for `extraction.py` to decode.
A `>>>all` message is text: this room owns the calls; `meaning/channels.py` drops the `>>>all` header. Qwen3-Coder's
`<function=NAME>` is followed by `<parameter=`, never by `{`, so the two v3.1 lookalikes never take each other's
blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import SPACE, ahead, json_value, literal, marker, run, space, word
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

V31_OPENER, V31_CLOSER = "<function=", "</function>"
V3_OPENER = ">>>"
_NAME = re.compile(r"[\w.\-]*")
_LIMIT = 128
_V31_FOLLOW = ahead(run(r"[\w.\-]", _LIMIT), literal(">"), SPACE, literal("{"))
# `>>>all` is followed by text, not JSON: the lookahead lets it through only when an object follows anyway.
_V3_FOLLOW = ahead(run(r"[\w.\-]", _LIMIT), literal("\n"), SPACE, literal("{"))


class FunctionaryV31Dialect:
    name = "functionary_v31"

    holds_only_markers = True

    markup = Markup(("<function=",), ("</function>",))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (V31_OPENER,)

    def scanner(self, tools: ToolIndex) -> FunctionaryScanner:
        return FunctionaryScanner(self.name, V31_OPENER, _V31_FOLLOW)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"{V31_OPENER}{name}>{json.dumps(dict(arguments), ensure_ascii=False)}{V31_CLOSER}"


class FunctionaryV3Dialect:
    name = "functionary_v3"

    holds_only_markers = True

    markup = Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (V3_OPENER,)

    def scanner(self, tools: ToolIndex) -> FunctionaryScanner:
        return FunctionaryScanner(self.name, V3_OPENER, _V3_FOLLOW)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"{V3_OPENER}{name}\n{json.dumps(dict(arguments), ensure_ascii=False)}"


class FunctionaryScanner(TokenBlockScanner):
    def __init__(self, dialect: str, opener: str, follow: str) -> None:
        super().__init__(dialect, (opener,), {opener: follow})

    def _resume_after(self, opener: str) -> int:
        return 1 if opener == V3_OPENER else len(opener)  # in `>>>>name` the call's `>>>` begins one `>` later

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        name = yield from word(cursor, _NAME, _LIMIT)
        header_end = ">" if opener == V31_OPENER else "\n"
        if name is None or name == "all" or (yield from marker(cursor, header_end)) is None:
            return None
        yield from space(cursor)
        arguments = yield from json_value(cursor, "{")
        if arguments is None:
            return None
        end = cursor.offset()
        if opener == V31_OPENER:
            yield from space(cursor)
            if (yield from marker(cursor, V31_CLOSER)) is not None:
                end = cursor.offset()
        return [Found(name, arguments, end)]
