"""Tool calls written as bare JSON: the whole reply, or one object per line, with no marker around them.

Without a marker, JSON counts as a call only when it names one of the request's tools: a reply such as
`{"name": "Bob", "age": 3}` is an answer, not a call. Accepted shapes: `{"name", "arguments"|"parameters"}`, a
list of those, and the `{"tool_calls": [...]}` object that prompt-engineered setups ask for (seed 001). After a
call, a `;` joins the next one on the same line or the next, as Llama 3.2 writes several (`{...}; {...}`, the
llama3_json parser tests of vLLM): the separator goes with the value after it, so it is never left as content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import Call, Markup, Segment, Text, ToolIndex, call_from_json, decode_json
from toolproxy.dialects.json_span import JsonSpan, is_decoded

_LEADING_SPACE = re.compile(r"[ \t]*")
# A JSON value that begins a line. The white-space run is bounded by the next character, so this is linear.
_LINE_OPENER = re.compile(r"\n[ \t]*[\[{]")
# What may stand between two calls: white space, then a `;` with white space and at most one line break after it.
# The classes next to each other are disjoint, so the match is linear; it matches the empty string too.
_SEPARATOR = re.compile(r"[ \t]*(;[ \t]*(?:\n[ \t]*)?)?")


class BareJsonDialect:
    name = "json"

    # It holds back the white space that begins a line, which may precede a JSON value.
    holds_only_markers = False

    markup = Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return ("{",)  # every accepted shape is an object or a list of objects

    def scanner(self, tools: ToolIndex) -> BareJsonScanner:
        return BareJsonScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


class BareJsonScanner:
    def __init__(self, tools: ToolIndex) -> None:
        self._tools = tools
        self._at_line_start = True
        self._pending = ""  # white space at the start of a line, which may precede a JSON value
        self._span: JsonSpan | None = None
        self._value: list[str] = []
        self._after_call = False  # the last value was a call: a `;` and another value may follow
        self._prefix = 0  # how much of the value's source is the separator before it

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        text = self._pending + text
        self._pending = ""
        position = 0
        while position < len(text):
            if self._span is not None:
                position = self._continue_value(text, position, out)
            else:
                position = self._step_text(text, position, out)
        return out

    def finish(self) -> list[Segment]:
        out: list[Segment] = [Text("".join(self._value) + self._pending)]
        self._span, self._value, self._pending, self._after_call = None, [], "", False
        return out

    def _step_text(self, text: str, position: int, out: list[Segment]) -> int:
        if self._after_call:
            joined = self._step_separator(text, position, out)
            if joined is not None:
                return joined
        if self._at_line_start:
            lead = _LEADING_SPACE.match(text, position)
            assert lead is not None
            if lead.end() == len(text):
                self._pending = text[position:]
                return len(text)
            if text[lead.end()] in "{[":
                out.append(Text(text[position : lead.end()]))
                return self._start_value(text, lead.end(), out)
            self._at_line_start = False
        found = _LINE_OPENER.search(text, position)
        if found is not None:
            out.append(Text(text[position : found.end() - 1]))
            return self._start_value(text, found.end() - 1, out)
        newline = text.rfind("\n", position)
        if newline >= 0 and not text[newline + 1 :].strip(" \t"):
            out.append(Text(text[position : newline + 1]))
            self._pending = text[newline + 1 :]
            self._at_line_start = True
        else:
            out.append(Text(text[position:]))
        return len(text)

    def _step_separator(self, text: str, position: int, out: list[Segment]) -> int | None:
        """After a call: a `;` and the next value, read with the separator as the start of its source; what may
        still become one is held back; anything else is left to the text rules (None)."""
        found = _SEPARATOR.match(text, position)
        assert found is not None
        if found.end() == len(text):
            self._pending = text[position:]
            return len(text)
        self._after_call = False
        if found.group(1) is None or text[found.end()] != "{":
            return None
        return self._start_value(text, found.end(), out, prefix=text[position : found.end()])

    def _start_value(self, text: str, position: int, out: list[Segment], prefix: str = "") -> int:
        self._span = JsonSpan()
        self._value = [prefix] if prefix else []
        self._prefix = len(prefix)
        return self._continue_value(text, position, out)

    def _continue_value(self, text: str, position: int, out: list[Segment]) -> int:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._value.append(text[position:stop])
        if end is not None:
            source, decoded = "".join(self._value), self._span.value
            self._span, self._value, self._at_line_start = None, [], False
            segments = self._segments(source, source[self._prefix :], decoded)
            self._after_call = isinstance(segments[-1], Call)
            out.extend(segments)
        return stop

    def _segments(self, source: str, json_text: str, value: Any) -> list[Segment]:
        """The calls the value holds, or its source as text; `value` is decoded already when its span could."""
        if not is_decoded(value):
            try:
                value = decode_json(json_text)
            except ValueError:
                return [Text(source)]
        shapes = [call_from_json(item) for item in _call_items(value)]
        if not shapes or any(shape is None or shape[0] not in self._tools for shape in shapes):
            return [Text(source)]
        return [Call(shape[0], shape[1], source if index == 0 else "", "json")
                for index, shape in enumerate(shapes) if shape is not None]


def _call_items(value: Any) -> list[Any]:
    if isinstance(value, dict) and set(value) == {"tool_calls"} and isinstance(value["tool_calls"], list):
        return list(value["tool_calls"])
    return value if isinstance(value, list) else [value]
