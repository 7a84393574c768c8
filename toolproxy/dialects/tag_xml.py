"""Tag-per-tool XML as RooCode and OpenCode prompts teach it (seed 004): `<read><filePath>a.js</filePath></read>`.

Only a tag that names one of the request's tools opens a call, so ordinary HTML or XML in an answer stays
text. Parameter values are text; the tool's schema says when a value holds `<item>` elements (an array) or
nested tags (an object). Numbers and booleans are typed later, by `schema.py`, for every dialect alike.
The same call as one self-closing tag with the arguments as attributes (`<read path="/etc/hostname" />`, Qwen 3.6
drifting, can1357/oh-my-pi#8945) counts when every attribute names a property of the tool's schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolproxy.dialects.base import Call, Markup, Segment, Text, ToolIndex, partial_suffix, trim_value
from toolproxy.dialects.block import pad_newlines
from toolproxy.dialects.invoke_tags import attributes_of

_TAG = re.compile(r"<([A-Za-z_][\w.\-]{0,63})>")
_PARTIAL_TAG = re.compile(r"<[A-Za-z_][\w.\-]{0,63}\Z|<\Z")
# The longest self-closing tag after its name; what is still arriving within it at the end of the text is held.
_EMPTY_REACH = 2048
# Its attributes, quoted, up to `/>`, the whole within reach: possessive, so one way to match.
_ATTRIBUTES = (rf"""(?=[^<>]{{0,{_EMPTY_REACH}}}+>)(?:\s++[\w.:\-]{{1,64}}+\s*+=\s*+(?:"[^"<>]*+"|'[^'<>]*+'))++"""
               r"\s*+/>")
_NON_SPACE = re.compile(r"\S")


class TagXmlDialect:
    name = "roo_xml"

    # It holds back `<na` only where `na` may be a tag name, not every start of `<NAME>`.
    holds_only_markers = False

    # Its markers are the request's tool names, which `extraction.py` looks for itself.
    markup = Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        # Every name, even one no tag can carry: the scanner holds back `<na` for any of them.
        return tuple(f"<{name}" for name in tools)

    def scanner(self, tools: ToolIndex) -> TagXmlScanner:
        return TagXmlScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Seed 004's layout: one parameter per line; arrays as <item>s, objects as nested tags."""
        return f"<{name}>\n{render_elements(arguments)}</{name}>"


class TagXmlScanner:
    def __init__(self, tools: ToolIndex) -> None:
        self._tools = tools
        # Only tags that name a declared tool open a call; one compiled alternation finds them at C speed.
        names = sorted((name for name in tools if _TAG.fullmatch(f"<{name}>")), key=len, reverse=True)
        alternatives = "|".join(map(re.escape, names))
        # group 1: a block's opening tag; group 2: a self-closing call, whose attributes are its arguments.
        self._opener = re.compile(rf"<(?:({alternatives})>|({alternatives}){_ATTRIBUTES})") if names else None
        self._arriving = re.compile(rf"<(?:{alternatives})\s[^<>]{{0,{_EMPTY_REACH}}}+\Z") if names else None
        self._pending = ""
        self._tool: str | None = None  # the tool whose block is open
        self._body: list[str] = []

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        text = self._pending + text
        self._pending = ""
        position = 0
        while position < len(text):
            step = self._step_block if self._tool is not None else self._step_text
            position = step(text, position, out)
        return out

    def finish(self) -> list[Segment]:
        opener = f"<{self._tool}>" if self._tool is not None else ""
        out: list[Segment] = [Text(opener + "".join(self._body) + self._pending)]
        self._tool, self._body, self._pending = None, [], ""
        return out

    def _step_text(self, text: str, position: int, out: list[Segment]) -> int:
        tag = self._opener.search(text, position) if self._opener else None
        if tag is not None:
            out.append(Text(text[position : tag.start()]))
            if tag.group(2) is not None:
                out.append(self._empty(tag.group(2), tag.group()))
                return tag.end()
            self._tool, self._body = tag.group(1), []
            return tag.end()
        # Hold back a tag that is still arriving (`<rea` may become `<read>`); only the tail can be one.
        tail = max(position, len(text) - 66)
        partial = _PARTIAL_TAG.search(text, tail)
        reach = max(position, len(text) - _EMPTY_REACH - 66)
        arriving = self._arriving.search(text, reach) if self._arriving else None
        if arriving is not None:
            out.append(Text(text[position : arriving.start()]))
            self._pending = text[arriving.start() :]
        elif partial is not None and self._may_open(partial.group()[1:]):
            out.append(Text(text[position : partial.start()]))
            self._pending = text[partial.start() :]
        else:
            out.append(Text(text[position:]))
        return len(text)

    def _may_open(self, partial_name: str) -> bool:
        return any(name.startswith(partial_name) for name in self._tools)

    def _step_block(self, text: str, position: int, out: list[Segment]) -> int:
        assert self._tool is not None
        closer = f"</{self._tool}>"
        index = text.find(closer, position)
        if index < 0:
            hold = partial_suffix(text[-len(closer) :], closer)
            self._body.append(text[position : len(text) - hold])
            self._pending = text[len(text) - hold :]
            return len(text)
        self._body.append(text[position:index])
        out.append(self._close(self._tool, "".join(self._body)))
        self._tool, self._body = None, []
        return index + len(closer)

    def _empty(self, tool: str, source: str) -> Segment:
        attributes = attributes_of(source[len(tool) + 1 : source.rfind("/")])
        properties = self._tools[tool].get("properties")
        if attributes is None or not isinstance(properties, Mapping) or not set(attributes) <= set(properties):
            return Text(source)
        return Call(tool, attributes, source, TagXmlDialect.name)

    def _close(self, tool: str, body: str) -> Segment:
        source = f"<{tool}>{body}</{tool}>"
        arguments = parse_elements(body, self._tools[tool])
        if arguments is None:
            return Text(source)
        return Call(tool, arguments, source, TagXmlDialect.name)


def render_elements(values: Mapping[str, Any]) -> str:
    return "".join(f"<{key}>{_render_value(value)}</{key}>\n" for key, value in values.items())


def _render_value(value: Any) -> str:
    if isinstance(value, list):
        return "\n" + "".join(f"<item>{_render_value(item)}</item>\n" for item in value)
    if isinstance(value, dict):
        return "\n" + render_elements(value)
    if isinstance(value, str):
        return pad_newlines(value)
    return json.dumps(value)


def parse_elements(body: str, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """`<a>1</a><b>x</b>` as {"a": "1", "b": "x"}; None when anything but elements and white space is there."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(properties, dict)
    values: dict[str, Any] = {}
    position = 0
    while (found := _NON_SPACE.search(body, position)) is not None:
        tag = _TAG.match(body, found.start())
        if tag is None:
            return None
        name = tag.group(1)
        end = _matching_close(body, name, tag.end())
        if end < 0:
            return None
        value = element_value(body[tag.end() : end], properties.get(name, {}))
        # A tag written again is a list (MiniMax-M3 repeats a key for each item): nothing is overwritten.
        if name not in values:
            values[name] = value
        elif isinstance(values[name], _Repeated):
            values[name].append(value)
        else:
            values[name] = _Repeated([values[name], value])
        position = end + len(name) + 3
    return {key: list(value) if isinstance(value, _Repeated) else value for key, value in values.items()}


class _Repeated(list[Any]):
    """The values of a tag written more than once (told apart from a value that is a list itself)."""


def _matching_close(body: str, name: str, position: int) -> int:
    """Where the element opened just before `position` closes, counting nested elements of the same name
    (`<a><a>0</a></a>`); -1 when it does not."""
    opener, closer = f"<{name}>", f"</{name}>"
    depth = 1
    close = body.find(closer, position)
    while close >= 0:
        nested = body.find(opener, position, close)
        if nested >= 0:  # a nested opener before this closer: the closer stays the next one to look at
            depth += 1
            position = nested + len(opener)
            continue
        depth -= 1
        if depth == 0:
            return close
        position = close + len(closer)
        close = body.find(closer, position)
    return -1


def element_value(raw: str, schema: Any, paired: bool = False) -> Any:
    """The value between an element's tags: `<item>`s where the schema says array, nested elements where it says
    object, else the text without its layout (`paired`: see `base.trim_value`)."""
    types = _types(schema)
    inner = raw.strip()
    if not inner and types & {"array", "object"} and "string" not in types:
        return [] if "array" in types else {}
    if "array" in types and inner.startswith("<item>"):
        items = _items(inner, schema.get("items", {}))
        if items is not None:
            return items
    if "object" in types and inner.startswith("<"):
        nested = parse_elements(inner, schema)
        if nested is not None:
            return nested
    return trim_value(raw, paired)


def _items(body: str, schema: Any) -> list[Any] | None:
    items: list[Any] = []
    position = 0
    while (found := _NON_SPACE.search(body, position)) is not None:
        if not body.startswith("<item>", found.start()):
            return None
        end = body.find("</item>", found.start())
        if end < 0:
            return None
        items.append(element_value(body[found.start() + 6 : end], schema))
        position = end + 7
    return items


def _types(schema: Any) -> set[str]:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        return {str(item) for item in kind}
    return {kind} if isinstance(kind, str) else set()
