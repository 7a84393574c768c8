"""Invoke-style XML calls: `<function_calls><invoke name="NAME"><parameter name="P">v</parameter></invoke>...`.

Cline, Kilo Code and Roo Code carry Anthropic-style calls this way (seed 000): several `<invoke>` per block, or a
bare `<invoke>` without the wrapper. A namespace prefix is stripped from tag names (`<ns:invoke>`) and from the
function name (`default_api:read_file`, `antml:tool:read_file`) unless the request declares the prefixed name.
MiniMax-M2 writes the same grammar inside `<minimax:tool_call>`: dialects that differ only in their wrapper are
instances of one class. Extra attributes (`<parameter name="p" type="string">`) are allowed and ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from toolproxy.dialects.base import ToolIndex, trim_newlines
from toolproxy.dialects.block import (
    BlockScanner,
    Outcome,
    Step,
    pad_newlines,
    read_value,
    render_value,
    skip_space,
)

_PREFIX = r"(?:[A-Za-z_][\w.\-]{0,31}:)?"  # one namespace prefix, as in `<ns:invoke>`
_TAG_NAME = re.compile(rf"<(/?)({_PREFIX})([A-Za-z_][\w.\-]{{0,63}})")
_TAG_STOP = re.compile(r"[\"'<>]")
_ATTRIBUTE = re.compile(r"""\s+([\w.:\-]{1,64})\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))""")
_TAG_TAIL = re.compile(r"\s*\Z")
_MAX_TAG = 1024  # longest tag, attributes included; a longer one is not markup of ours


@dataclass(frozen=True, slots=True)
class InvokeXmlDialect:
    name: str
    wrapper: str  # the wrapper's tag name, e.g. `function_calls`; a prefixed `ns:function_calls` counts too
    bare: bool  # whether an `<invoke>` without the wrapper is a call

    # It holds back any unfinished tag (`<di` may yet be `<di:invoke`), not only the start of a marker.
    holds_only_markers = False

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        # The reader opens on a tag whose name is the wrapper (prefix and all) or, when bare, `invoke`.
        return (self.wrapper, "invoke") if self.bare else (self.wrapper,)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        return BlockScanner(self.name, _hint(self.wrapper, self.bare), _MAX_TAG, lambda: InvokeReader(self, tools))

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call inside this dialect's wrapper, as Cline's prompt and MiniMax-M2's chat template write it."""
        parameters = "".join(f'<parameter name="{key}">{pad_newlines(render_value(value))}</parameter>\n'
                             for key, value in arguments.items())
        return f'<{self.wrapper}>\n<invoke name="{name}">\n{parameters}</invoke>\n</{self.wrapper}>'


@dataclass(frozen=True, slots=True)
class Tag:
    closing: bool
    qualified: str  # as written, prefix included
    local: str  # without the prefix
    attributes: dict[str, str]
    end: int


class _State(Enum):
    OPENING = auto()
    WRAPPED = auto()  # after the wrapper's opening tag: an invoke must follow
    BODY = auto()  # inside an invoke: parameters or its end
    VALUE = auto()
    AFTER = auto()  # after an invoke inside the wrapper: another invoke or the wrapper's end


@functools.cache
def _hint(wrapper: str, bare: bool) -> re.Pattern[str]:
    """Where a block may open. An opener is skipped in C, by the regex, only when the text already shows the
    reader refusing it at a complete tag: a wrapper whose first tag (or the one after its first invoke) is another
    opener, or such an invoke, or a wrapper followed by something other than a tag. Floods of openers cost no
    Python step each; anything less certain is left to the reader, so streaming and one-shot parsing still agree."""
    opener = rf"\s*<{_PREFIX}(?:{re.escape(wrapper)}|invoke)[\s>]"
    invoke = r'\s+name="[^"<>]{0,64}"\s*>'
    another_wrapper = rf"\s*<{_PREFIX}{re.escape(wrapper)}[\s>]"
    # A wrapper followed by anything but a tag (OLMo 3's Python calls in `<function_calls>`) is refused here too.
    wrapper_rule = (rf"{re.escape(wrapper)}(?!>(?:{another_wrapper}|\s*<{_PREFIX}invoke{invoke}{opener}))"
                    r"(?!>\s*+[^\s<])")
    rules = [wrapper_rule, rf"invoke(?!{invoke}{opener})"] if bare else [wrapper_rule]
    return re.compile(rf"<{_PREFIX}(?:{'|'.join(rules)})")


class InvokeReader:
    def __init__(self, dialect: InvokeXmlDialect, tools: ToolIndex) -> None:
        self._dialect = dialect
        self._tools = tools
        self._state = _State.OPENING
        self._wrapper = ""  # the wrapper's name as written; empty for a bare invoke
        self._invoke = ""  # the open invoke's name as written
        self._calls: list[tuple[str, dict[str, str]]] = []
        self._parameter = ""
        self._closer = ""  # the open parameter's closing tag
        self._value: list[str] = []

    def calls(self) -> list[tuple[str, Any]]:
        return [(name, dict(arguments)) for name, arguments in self._calls]

    def is_whole(self) -> bool:
        return self._state is _State.AFTER

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.VALUE:
            return self._read_value(text, position)
        start = position if self._state is _State.OPENING else skip_space(text, position)
        if start == len(text) and self._state is not _State.OPENING:
            return Step(Outcome.MORE, start)
        tag = read_tag(text, start)
        if isinstance(tag, Outcome):
            if self._state is _State.AFTER and tag is Outcome.BAD:
                return Step(Outcome.DONE, start)  # see `_after`
            return Step(tag, start)
        if self._state is _State.OPENING:
            return self._open(tag, start)
        if self._state is _State.WRAPPED:
            return self._invoke_tag(tag, start)
        if self._state is _State.BODY:
            return self._in_body(tag, start)
        return self._after(tag, start)

    def _open(self, tag: Tag, start: int) -> Step:
        if not tag.closing and self._dialect.wrapper in (tag.qualified, tag.local):
            self._state, self._wrapper = _State.WRAPPED, tag.qualified
            return Step(Outcome.TOKEN, tag.end)
        return self._invoke_tag(tag, start) if self._dialect.bare else Step(Outcome.BAD, start)

    def _invoke_tag(self, tag: Tag, start: int) -> Step:
        name = tag.attributes.get("name", "").strip()
        if name not in self._tools and ":" in name:
            name = name.rpartition(":")[2]  # `default_api:read_file`, `antml:tool:read_file`
        if tag.closing or tag.local != "invoke" or not name:
            return Step(Outcome.BAD, start)
        self._calls.append((name, {}))
        self._state, self._invoke = _State.BODY, tag.qualified
        return Step(Outcome.TOKEN, tag.end)

    def _in_body(self, tag: Tag, start: int) -> Step:
        if tag.closing and tag.qualified == self._invoke:
            self._state = _State.AFTER
            return Step(Outcome.CALL if self._wrapper else Outcome.DONE, tag.end)
        name = tag.attributes.get("name", "").strip()
        if tag.closing or tag.local != "parameter" or not name:
            return Step(Outcome.BAD, start)
        self._state, self._parameter, self._closer, self._value = _State.VALUE, name, f"</{tag.qualified}>", []
        return Step(Outcome.TOKEN, tag.end)

    def _read_value(self, text: str, position: int) -> Step:
        # Only the parameter's own closing tag ends a value: `</invoke>` inside code stays in it.
        piece, end, found = read_value(text, position, self._closer)
        self._value.append(piece)
        if not found:
            return Step(Outcome.MORE, end)
        self._calls[-1][1][self._parameter] = trim_newlines("".join(self._value))
        self._state = _State.BODY
        return Step(Outcome.TOKEN, end)

    def _after(self, tag: Tag, start: int) -> Step:
        if tag.closing and tag.qualified == self._wrapper:
            return Step(Outcome.DONE, tag.end)
        step = self._invoke_tag(tag, start)
        # Anything else after a whole invoke: the wrapper's end was dropped (a stop string), the calls stand.
        return step if step.outcome is not Outcome.BAD else Step(Outcome.DONE, start)


def read_tag(text: str, position: int) -> Tag | Outcome:
    """The tag at `position`, with its attributes; a `>` inside a quoted attribute value does not end it."""
    head = _TAG_NAME.match(text, position)
    if head is None:
        rest = text[position : position + 2]
        return Outcome.MORE if rest in ("<", "</") and position + len(rest) == len(text) else Outcome.BAD
    end = _tag_end(text, head.end(), position + _MAX_TAG)
    if isinstance(end, Outcome):
        return end
    attributes = _attributes(text[head.end() : end - 1])
    if attributes is None:
        return Outcome.BAD
    closing, prefix, local = head.groups()
    return Tag(bool(closing), prefix + local, local, attributes, end)


def _tag_end(text: str, position: int, limit: int) -> int | Outcome:
    """Index just past the `>` that ends the tag whose name ends at `position`."""
    while (stop := _TAG_STOP.search(text, position, limit)) is not None:
        if stop.group() == ">":
            return stop.end()
        if stop.group() == "<":
            return Outcome.BAD
        quote = text.find(stop.group(), stop.end(), limit)
        if quote < 0:
            break
        position = quote + 1
    return Outcome.MORE if len(text) < limit else Outcome.BAD


def _attributes(inside: str) -> dict[str, str] | None:
    """`name="x" type='y'` as a dict; None when anything else is there (`/>` included: no empty tags here)."""
    attributes: dict[str, str] = {}
    position = 0
    while not _TAG_TAIL.match(inside, position):
        found = _ATTRIBUTE.match(inside, position)
        if found is None:
            return None
        key, *values = found.groups()
        attributes[key] = next(value for value in values if value is not None)
        position = found.end()
    return attributes
