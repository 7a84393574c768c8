"""From a reply's text to the tool calls it holds: dialects find candidate calls, this room decides which count.

Only calls to tools of this request become calls (a model writing `{"name": "format_disk"}` must not trigger
anything); their arguments must be a JSON object, then are typed by the tool's schema. Everything refused goes
back as text, with an issue recorded: no character of the reply is ever lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolproxy import schema
from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, merge_text
from toolproxy.dialects.chain import ChainScanner
from toolproxy.dialects.registry import AUTO_ORDER, DIALECTS


@dataclass(slots=True)
class Extraction:
    segments: list[Segment]
    issues: list[str] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        return [segment for segment in self.segments if isinstance(segment, Call)]

    def content(self) -> str | None:
        """The text around the calls, as the message's content.

        With no call the text is returned untouched. Around calls, each piece is trimmed of the blank lines that
        separated it from a call; content is None only when nothing but calls remains.
        """
        texts = [segment.text for segment in self.segments if isinstance(segment, Text)]
        if not self.calls:
            return "".join(texts)
        pieces = [text.strip() for text in texts if text.strip()]
        return "\n\n".join(pieces) or None


def scanner(tools: ToolIndex, dialects: Sequence[str] = ()) -> ChainScanner:
    """A scanner over the pinned dialects, or all of them in the automatic order."""
    return ChainScanner([DIALECTS[name] for name in dialects or AUTO_ORDER], tools)


def extract(text: str, tools: ToolIndex, dialects: Sequence[str] = ()) -> Extraction:
    scan = scanner(tools, dialects)
    return accept(scan.feed(text) + scan.finish(), tools)


def accept(segments: list[Segment], tools: ToolIndex) -> Extraction:
    """Keep the calls that name a declared tool with usable arguments; the rest become text again."""
    extraction = Extraction([])
    for segment in segments:
        if isinstance(segment, Call):
            segment = _judge(segment, tools, extraction.issues)
        extraction.segments.append(segment)
    extraction.segments = merge_text(extraction.segments)
    return extraction


def _judge(call: Call, tools: ToolIndex, issues: list[str]) -> Segment:
    if call.name not in tools:
        issues.append(f"{call.dialect}: call to undeclared tool {call.name!r} kept as text")
        return Text(call.source)
    arguments = _arguments_object(call.arguments)
    if arguments is None:
        issues.append(f"{call.dialect}: arguments of {call.name!r} are not a JSON object; kept as text")
        return Text(call.source)
    return Call(call.name, schema.coerce(arguments, tools[call.name]), call.source, call.dialect)


def _arguments_object(arguments: Any) -> dict[str, Any] | None:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    return arguments if isinstance(arguments, dict) else None
