"""gpt-oss harmony messages as they appear in text: a message addressed `to=functions.NAME` is a call.

`<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`, also
without `<|start|>assistant`, without `<|constrain|>`, or with the recipient in the role part of the header
(`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`). `<|call|>` is a stop token that
servers often cut, so the call may end with its JSON. Servers that strip special tokens leave the header as plain
text (`commentary to=functions.NAME json{...}`, or `<|constrain|>json` kept): read too, the channel word included.
A name glued to its `json` (`to=functions.shelljson`) is cut back when only the shorter name is a declared tool.
Every other message (analysis, final, a commentary preamble, a built-in tool's `to=python`) stays text, markup
included: this room owns the calls; `meaning/reasoning.py` owns the channels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import (
    JSON_START,
    SPACE,
    Cursor,
    Read,
    ahead,
    json_value,
    literal,
    marker,
    run,
    space,
    until,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

START = "<|start|>"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
CALL = "<|call|>"
END = "<|end|>"
# Tokens that end or begin a message: a header running into one of them is not one message's header.
_OTHER_MESSAGE = ("<|start|>", "<|end|>", "<|call|>", "<|return|>")
# Within a header of at most _HEADER_LIMIT characters; one character class repeated, so no backtracking.
# `to=functions.NAME`; some gpt-oss builds drop `functions.` (cline#5393), which counts only for a declared tool, so
# a built-in's `to=python` stays text.
_RECIPIENT = re.compile(r"\bto=(functions\.)?([^\s<]+)")
_HEADER_LIMIT = 256
# What `_read` needs after an opener, at C speed: a header free of other messages' tokens (and of a second channel
# token), the message token and a JSON value; then a recipient in that header, or the end of the text before it. A
# header stops at the first such token, so a flood of openers is never scanned far.
_TOKENS = "start|end|call|return|message"
_HEADER = rf"(?:[^<]|<(?!\|(?:{_TOKENS}|channel)\|>)){{0,{_HEADER_LIMIT}}}+"
_BODY = ahead(literal(MESSAGE), SPACE, JSON_START)
_START_HEAD = rf"{_HEADER}(?:{re.escape(CHANNEL)}{_HEADER})?{_BODY}"
_CHANNEL_HEAD = _HEADER + _BODY
_RECIPIENT_AHEAD = rf"(?:[^<]|<(?!\|(?:{_TOKENS})\|>)){{0,{2 * _HEADER_LIMIT}}}?(?:\bto=[^\s<]|\Z)"
_FOLLOW = {START: f"(?={_START_HEAD}){_RECIPIENT_AHEAD}", CHANNEL: f"(?={_CHANNEL_HEAD}){_RECIPIENT_AHEAD}"}
# The header with its special tokens stripped: the channel and recipient as plain text, then the name, an optional
# `<|constrain|>` and `json`, and the arguments' `{`. Bounded runs, so the match is decided within _STRIPPED_REACH.
RECIPIENT = "to=functions."
STRIPPED = (f"assistant {RECIPIENT}", f"commentary {RECIPIENT}", f"analysis {RECIPIENT}", RECIPIENT)
# After the name: the channel when the recipient came in the role part (`assistant to=functions.NAME commentary
# json`, openai/codex#13114; `to=functions.NAME<|channel|>commentary json` with `<|start|>assistant` in the prompt),
# then `<|constrain|>`, `json`, `<|message|>`, each optional.
_STRIPPED_HEADER = re.compile(r"([^\s<{]{1,128})((?:(?:[ \t]{1,8}|<\|channel\|>)(?:commentary|analysis))?[ \t]{0,8}"
                              r"(?:<\|constrain\|>)?"
                              r"[ \t]{0,8}(?:json|code)?[ \t]{0,8}"
                              r"(?:<\|message\|>)?\s{0,8})\{")
_STRIPPED_REACH = 128 + 80
_STRIPPED_FOLLOW = ahead(run(r"[^\s<{]", 128), r"[^{]{0,96}+", literal("{"))


class HarmonyDialect:
    name = "harmony"

    # Its stripped openers are longer than the marker `to=functions.`: it holds back `assis`.
    holds_only_markers = False

    markup = Markup(("to=functions.",), ("<|call|>",))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (START, CHANNEL, RECIPIENT)  # every stripped header holds the recipient

    def scanner(self, tools: ToolIndex) -> HarmonyScanner:
        return HarmonyScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        body = json.dumps(dict(arguments), ensure_ascii=False)
        return f"{START}assistant{CHANNEL}commentary to=functions.{name} <|constrain|>json{MESSAGE}{body}{CALL}"


class HarmonyScanner(TokenBlockScanner):
    def __init__(self, tools: ToolIndex) -> None:
        super().__init__(HarmonyDialect.name, (START, CHANNEL, *STRIPPED),
                         {**_FOLLOW, **{opener: _STRIPPED_FOLLOW for opener in STRIPPED}})
        self._tools = tools

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        if opener in STRIPPED:
            name = yield from _stripped_header(cursor)
        else:
            name = yield from _header(cursor, opener, self._tools)
        if name is None:
            return None  # not a call: the header goes out as text and the message is scanned as text
        arguments = yield from json_value(cursor)
        if arguments is None:
            return None
        end = cursor.offset()
        yield from space(cursor)
        if (yield from marker(cursor, CALL, END)) is not None:
            end = cursor.offset()
        return [Found(self._name(name), arguments, end)]

    def _name(self, name: str) -> str:
        """`shelljson` is `shell` with its `json` glued on, when only `shell` is a tool of the request."""
        if name not in self._tools and name.endswith("json") and name[:-4] in self._tools:
            return name[:-4]
        return name


def _header(cursor: Cursor, opener: str, tools: ToolIndex) -> Read[str | None]:
    """The recipient's name, the header up to `<|message|>` and the space after it read; None when not a call."""
    header = yield from until(cursor, MESSAGE, _HEADER_LIMIT)
    if header is None or any(token in header for token in _OTHER_MESSAGE):
        return None
    if header.count(CHANNEL) > (opener == START):  # one channel per header: the later one opens its own
        return None
    recipient = _RECIPIENT.search(header)
    if recipient is None:
        return None
    name = _spaced_name(header, recipient, tools)
    if not (recipient.group(1) or name in tools):
        return None
    yield from space(cursor)
    return name


def _spaced_name(header: str, recipient: re.Match[str], tools: ToolIndex) -> str:
    """The recipient's name, or the longest declared name with spaces it begins (`to=functions.Web Search`, an
    LM Studio tool): a name ends at white space only where no declared one goes on."""
    name = recipient.group(2)
    if name in tools:
        return name
    rest = header[recipient.start(2) :]
    spaced = [tool for tool in tools if " " in tool and rest.startswith(tool) and rest[len(tool) : len(tool) + 1]
              in ("", " ", "<")]
    return max(spaced, key=len) if spaced else name


def _stripped_header(cursor: Cursor) -> Read[str | None]:
    """The name after a stripped `to=functions.`, the rest of the header read up to the arguments' `{`."""
    while True:
        header = _STRIPPED_HEADER.match(cursor.text, cursor.position)
        if header is not None:
            cursor.position = header.end() - 1
            return header.group(1)
        if cursor.ended or len(cursor.text) - cursor.position > _STRIPPED_REACH:
            return None
        yield
