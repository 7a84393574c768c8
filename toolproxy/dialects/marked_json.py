"""JSON tool calls between an opening and a closing marker, e.g. Qwen2.5-Coder's `<tools>{...}</tools>`.

Dialects that differ only in their markers are instances of one class. Between the markers: one or more JSON
objects (or lists of them), separated by white space, single- or multi-line, or by one `,` or `;` (two call
objects in one `<tool_call>` block written `{...}, {...}`, as SGLang's detector tests have them). The closing
marker is looked for only between JSON values, so a marker inside a string argument never ends the block. A call
is written `{"name": ..., "arguments": ...}` (`call_from_json`'s shapes), or, with `named`, `{"NAME": {...}}`
(Apertus).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import Call, Markup, Segment, Text, ToolIndex, call_from_json, decode_json, partial_suffix
from toolproxy.dialects.json_span import JsonSpan, is_decoded

_NON_SPACE = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class MarkedJsonDialect:
    name: str
    opener: str
    closer: str
    named: bool = False  # each call is `{"NAME": {arguments}}`, as Apertus writes them
    around: tuple[str, str] | None = None  # a block around the calls (K2 Horizon's `<ifm|tool_calls>`), absorbed

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        if self.around is None:
            return Markup((self.opener,), (self.closer,), ((self.opener, self.closer),))
        return Markup((self.opener, self.around[0]), (self.closer, self.around[1]),
                      ((self.opener, self.closer), self.around))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.opener,)

    def scanner(self, tools: ToolIndex) -> MarkedJsonScanner:
        return MarkedJsonScanner(self)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if self.named:
            return f"{self.opener}[{json.dumps({name: dict(arguments)}, ensure_ascii=False)}]{self.closer}"
        return f"{self.opener}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{self.closer}"


class MarkedJsonScanner:
    def __init__(self, dialect: MarkedJsonDialect) -> None:
        self._dialect = dialect
        # An opener counts only when JSON (or the end of the text so far) follows it: openers in prose, or of
        # another dialect sharing the marker (Qwen3-Coder's `<tool_call><function=`), are skipped at C speed.
        self._opener = re.compile(re.escape(dialect.opener) + r"(?=\s*(?:[\[{]|\Z))")
        self._pending = ""  # held back: a possible opener, or a possible closer inside a block
        self._in_block = False
        self._block: list[str] = []  # source pieces of the current block, markers and white space included
        self._values: list[list[str]] = []  # the JSON text of each value in the block, in pieces
        self._decoded: list[Any] = []  # each value as its span decoded it, when it could (JsonSpan.value)
        self._value_ends: list[int] = []  # for each finished value, len(self._block) when it ended
        self._span: JsonSpan | None = None
        self._separated = False  # a `,` or `;` has followed the last value

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        text = self._pending + text
        self._pending = ""
        position = 0
        # Positions, not slices: slicing the rest of a long reply at every block would be quadratic.
        while position < len(text):
            step = self._step_block if self._in_block else self._step_text
            position = step(text, position, out)
        return out

    def finish(self) -> list[Segment]:
        """An unfinished block is text: a call cut off by max_tokens must not become a half call. A block whose
        values all ended, where the reply ends before the closer (Apertus stops at its last `]`), is whole."""
        if self._in_block and self._span is None and self._value_ends and not self._pending.strip():
            self._block.append(self._pending)
            self._pending = ""
            return self._close_block()
        out: list[Segment] = [Text("".join(self._block) + self._pending)]
        self._reset_block()
        self._pending = ""
        return out

    def _step_text(self, text: str, position: int, out: list[Segment]) -> int:
        opener = self._dialect.opener
        found = self._opener.search(text, position)
        if found is None:
            hold = partial_suffix(text[-len(opener) :], opener)
            out.append(Text(text[position : len(text) - hold]))
            self._pending = text[len(text) - hold :]
            return len(text)
        out.append(Text(text[position : found.start()]))
        self._in_block = True
        self._block = [opener]
        return found.end()

    def _step_block(self, text: str, position: int, out: list[Segment]) -> int:
        if self._span is not None:
            return self._continue_value(text, position)
        found = _NON_SPACE.search(text, position)
        start = found.start() if found else len(text)
        self._block.append(text[position:start])
        if found is None:
            return len(text)
        if text[start] in "{[":
            self._separated = False
            self._span = JsonSpan()
            self._values.append([])
            return self._continue_value(text, start)
        if text[start] in ",;" and self._value_ends and not self._separated:  # between two values, once
            self._separated = True
            self._block.append(text[start])
            return start + 1
        closer = self._dialect.closer
        if text.startswith(closer, start):
            self._block.append(closer)
            out.extend(self._close_block())
            return start + len(closer)
        if closer.startswith(text[start : start + len(closer)]):  # the closer may be arriving in pieces
            self._pending = text[start:]
            return len(text)
        # Not a block of this dialect after all: what was taken goes out as text, scanning resumes here.
        out.append(Text("".join(self._block)))
        self._reset_block()
        return start

    def _continue_value(self, text: str, position: int) -> int:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._values[-1].append(text[position:stop])
        self._block.append(text[position:stop])
        if end is None:
            return stop
        self._decoded.append(self._span.value)
        self._span = None
        self._value_ends.append(len(self._block))
        return stop

    def _close_block(self) -> list[Segment]:
        block, ends = self._block, self._value_ends
        shape = named_call if self._dialect.named else call_from_json
        calls_per_value = [_calls_in(value, decoded, self._dialect.name, shape)
                           for value, decoded in zip(self._values, self._decoded, strict=True)]
        self._reset_block()
        if not calls_per_value or any(calls is None for calls in calls_per_value):
            return [Text("".join(block))]
        # Sources join back to the block: each value's span runs from the end of the previous one, the first
        # carries the opener and the last the closer; further calls of one JSON list get an empty source.
        starts = [0, *ends[:-1]]
        stops = [*ends[:-1], len(block)]
        out: list[Segment] = []
        for calls, start, stop in zip(calls_per_value, starts, stops, strict=True):
            assert calls is not None
            source = "".join(block[start:stop])
            out.extend(Call(call.name, call.arguments, source if i == 0 else "", call.dialect)
                       for i, call in enumerate(calls))
        return out

    def _reset_block(self) -> None:
        self._in_block = False
        self._block = []
        self._values = []
        self._decoded = []
        self._value_ends = []
        self._span = None
        self._separated = False


def _calls_in(pieces: list[str], decoded: Any, dialect: str,
              shape: Callable[[Any], tuple[str, Any] | None]) -> list[Call] | None:
    """The calls one JSON value holds (an object, or a list of objects), or None when it is not calls. `decoded`
    is the value when its span decoded it already; the text is decoded only otherwise."""
    if not is_decoded(decoded):
        try:
            decoded = decode_json("".join(pieces))
        except ValueError:
            return None
    items = decoded if isinstance(decoded, list) else [decoded]
    shapes = [shape(item) for item in items]
    if not shapes or any(shape is None for shape in shapes):
        return None
    return [Call(shape[0], shape[1], "", dialect) for shape in shapes if shape is not None]


def named_call(value: Any) -> tuple[str, Any] | None:
    """(name, arguments) of `{"NAME": {...}}`: one key, whose value is the arguments object."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    [(name, arguments)] = value.items()
    return (name, arguments) if name and isinstance(arguments, dict) else None
