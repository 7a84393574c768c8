"""gpt-oss harmony messages as they appear in text: a message addressed `to=functions.NAME` is a call.

`<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`, also
without `<|start|>assistant`, without `<|constrain|>`, or with the recipient in the role part of the header
(`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`). `<|call|>` is a stop token that
servers often cut, so the call may end with its JSON. Every other message (analysis, final, a commentary preamble,
a built-in tool's `to=python`) stays text, markup included: this room owns the calls, not the channels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import ToolIndex
from toolproxy.dialects.cursor import JSON_START, SPACE, ahead, json_value, literal, marker, space, until
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

START = "<|start|>"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
CALL = "<|call|>"
END = "<|end|>"
# Tokens that end or begin a message: a header running into one of them is not one message's header.
_OTHER_MESSAGE = ("<|start|>", "<|end|>", "<|call|>", "<|return|>")
# Within a header of at most _HEADER_LIMIT characters; one character class repeated, so no backtracking.
_RECIPIENT = re.compile(r"\bto=functions\.([^\s<]+)")
_HEADER_LIMIT = 256
# What `_read` needs after an opener, at C speed: a header free of other messages' tokens (and of a second channel
# token), the message token and a JSON value; then a recipient in that header, or the end of the text before it. A
# header stops at the first such token, so a flood of openers is never scanned far.
_TOKENS = "start|end|call|return|message"
_HEADER = rf"(?:[^<]|<(?!\|(?:{_TOKENS}|channel)\|>)){{0,{_HEADER_LIMIT}}}+"
_BODY = ahead(literal(MESSAGE), SPACE, JSON_START)
_START_HEAD = rf"{_HEADER}(?:{re.escape(CHANNEL)}{_HEADER})?{_BODY}"
_CHANNEL_HEAD = _HEADER + _BODY
_RECIPIENT_AHEAD = rf"(?:[^<]|<(?!\|(?:{_TOKENS})\|>)){{0,{2 * _HEADER_LIMIT}}}?(?:\bto=functions\.[^\s<]|\Z)"
_FOLLOW = {START: f"(?={_START_HEAD}){_RECIPIENT_AHEAD}", CHANNEL: f"(?={_CHANNEL_HEAD}){_RECIPIENT_AHEAD}"}


class HarmonyDialect:
    name = "harmony"

    def scanner(self, tools: ToolIndex) -> HarmonyScanner:
        return HarmonyScanner()

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        body = json.dumps(dict(arguments), ensure_ascii=False)
        return f"{START}assistant{CHANNEL}commentary to=functions.{name} <|constrain|>json{MESSAGE}{body}{CALL}"


class HarmonyScanner(TokenBlockScanner):
    def __init__(self) -> None:
        super().__init__(HarmonyDialect.name, (START, CHANNEL), _FOLLOW)

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        header = yield from until(cursor, MESSAGE, _HEADER_LIMIT)
        if header is None or any(token in header for token in _OTHER_MESSAGE):
            return None
        if header.count(CHANNEL) > (opener == START):  # one channel per header: the later one opens its own
            return None
        recipient = _RECIPIENT.search(header)
        if recipient is None:
            return None  # not a call: the header goes out as text and the message is scanned as text
        yield from space(cursor)
        arguments = yield from json_value(cursor)
        if arguments is None:
            return None
        end = cursor.offset()
        yield from space(cursor)
        if (yield from marker(cursor, CALL, END)) is not None:
            end = cursor.offset()
        return [Found(recipient.group(1), arguments, end)]
