"""DeepSeek V3, R1 and V3.1 calls between full-width special tokens, code points as in vLLM's deepseekv3/v31 parsers.

V3 and R1: `CALL_BEGIN function SEP NAME` then the arguments in a ```json fence, then `CALL_END`; V3.1:
`CALL_BEGIN NAME SEP {...} CALL_END` (the constants below; the bars are U+FF5C and the spaces U+2581). Calls sit
between CALLS_BEGIN and CALLS_END; a block missing the outer tokens still counts call by call, as each call has its
own end token. Arguments stay JSON text for `extraction.py` to judge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import (
    JSON_START,
    SPACE,
    Cursor,
    Read,
    ahead,
    either,
    json_value,
    literal,
    marker,
    peek,
    space,
    until,
    up_to,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
SEP = "<\uff5ctool\u2581sep\uff5c>"
FENCE = "```"
_NAME_LIMIT = 128
TOKEN = "<\uff5ctool\u2581"  # how every token of these calls begins
# What `_call` needs after a call's begin token: a head free of other tokens, the separator, then JSON (V3.1) or a
# name line and JSON or a fence. The head stops at the first token, so a flood of begin tokens is never scanned far.
_HEAD = rf"(?:[^<]|<(?!{re.escape(TOKEN[1:])})){{0,{_NAME_LIMIT}}}+"
_CALL = ahead(_HEAD, literal(SEP), SPACE,
              either(JSON_START, ahead(up_to("\n", _NAME_LIMIT), SPACE, either(JSON_START, literal(FENCE)))))
_FOLLOW = {CALL_BEGIN: _CALL, CALLS_BEGIN: ahead(SPACE, literal(CALL_BEGIN), _CALL)}


class DeepSeekDialect:
    name = "deepseek"

    holds_only_markers = True

    markup = Markup((CALLS_BEGIN, CALL_BEGIN), (CALLS_END, CALL_END, SEP))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (CALLS_BEGIN, CALL_BEGIN)

    def scanner(self, tools: ToolIndex) -> DeepSeekScanner:
        return DeepSeekScanner()

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The V3.1 shape."""
        body = json.dumps(dict(arguments), ensure_ascii=False)
        return f"{CALLS_BEGIN}{CALL_BEGIN}{name}{SEP}{body}{CALL_END}{CALLS_END}"


class DeepSeekScanner(TokenBlockScanner):
    def __init__(self) -> None:
        super().__init__(DeepSeekDialect.name, (CALLS_BEGIN, CALL_BEGIN), _FOLLOW)

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        found: list[Found] = []
        at_call = opener == CALL_BEGIN
        while True:
            if not at_call:
                yield from space(cursor)
                token = yield from marker(cursor, CALL_BEGIN, CALLS_END)
                if token != CALL_BEGIN:
                    if token == CALLS_END and found:
                        found[-1] = replace(found[-1], end=cursor.offset())
                    return found
            at_call = False
            call = yield from _call(cursor)
            if call is None:
                return found  # the calls before a broken one stand; the rest is text
            found.append(Found(call[0], call[1], cursor.offset()))


def _call(cursor: Cursor) -> Read[tuple[str, str] | None]:
    """One call after its begin token, through its end token: (name, arguments as JSON text)."""
    head = yield from until(cursor, SEP, _NAME_LIMIT)
    if head is None or TOKEN in head:  # another token before the separator: this call was abandoned
        return None
    yield from space(cursor)
    fenced = False
    if (yield from peek(cursor)) in ("{", "["):
        name = head.strip()  # V3.1: the name comes before the separator
    else:  # V3/R1: the type ("function") before the separator, the name on the rest of the line
        line = yield from until(cursor, "\n", _NAME_LIMIT)
        name = line.strip() if line is not None else ""
        yield from space(cursor)
        fenced = (yield from marker(cursor, FENCE)) is not None
        if fenced:
            yield from marker(cursor, "json")
            yield from space(cursor)
    arguments = yield from json_value(cursor)
    if not name or arguments is None:
        return None
    yield from space(cursor)
    if fenced and (yield from marker(cursor, FENCE)) is None:
        return None
    yield from space(cursor)
    if (yield from marker(cursor, CALL_END)) is None:
        return None
    return name, arguments
