"""Tool calls written as bare JSON: the whole reply, or one object per line, with no marker around them.

Without a marker, JSON counts as a call only when it names one of the request's tools: a reply such as
`{"name": "Bob", "age": 3}` is an answer, not a call. Accepted shapes: `{"name", "arguments"|"parameters"}`, a
list of those, and the `{"tool_calls": [...]}` object that prompt-engineered setups ask for (seed 001).
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
        self._span, self._value, self._pending = None, [], ""
        return out

    def _step_text(self, text: str, position: int, out: list[Segment]) -> int:
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

    def _start_value(self, text: str, position: int, out: list[Segment]) -> int:
        self._span = JsonSpan()
        self._value = []
        return self._continue_value(text, position, out)

    def _continue_value(self, text: str, position: int, out: list[Segment]) -> int:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._value.append(text[position:stop])
        if end is not None:
            source, decoded = "".join(self._value), self._span.value
            self._span, self._value, self._at_line_start = None, [], False
            out.extend(self._segments(source, decoded))
        return stop

    def _segments(self, source: str, value: Any) -> list[Segment]:
        """The calls the value holds, or its source as text; `value` is decoded already when its span could."""
        if not is_decoded(value):
            try:
                value = decode_json(source)
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
