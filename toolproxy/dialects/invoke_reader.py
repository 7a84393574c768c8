"""Reading one block of the invoke family (`invoke_xml.py`) token by token, for `block.BlockScanner`.

A value is searched only for its own closing tag, so `</invoke>` inside code stays in it. Special tokens between
tags are read as tokens of the block (they go with the call, not into content). An argument tag other than the
dialect's `parameter` (MiniMax-M3's `<command>ls</command>`) counts only when it names a property of the tool's
schema, or the schema names none: the declared tool anchors what a tag may mean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum, auto
from typing import Any

from toolproxy.dialects.base import ToolIndex, declared_name
from toolproxy.dialects.block import Outcome, Step, match_word, skip_space
from toolproxy.dialects.invoke_tags import InvokeGrammar, Tag, read_tag
from toolproxy.dialects.invoke_values import (
    attribute_value,
    closer,
    is_json_typed,
    named_json_head,
    typed_value,
)
from toolproxy.dialects.json_span import JsonSpan
from toolproxy.dialects.tag_xml import parse_elements
from toolproxy.dialects.tokens import may_begin_token, token_end

_NEVER = re.compile("(?!)")
_CLOSER_REACH = 96  # the longest closing tag of an argument; what may begin one at the end of the text waits


class _State(Enum):
    OPENING = auto()
    WRAPPED = auto()  # after the wrapper's opening tag: an invoke must follow
    BODY = auto()  # inside an invoke: arguments or its end
    VALUE = auto()
    NAMED = auto()  # the body of a tag named after the tool (`<｜DSML｜read><path>a</path></｜DSML｜read>`)
    JSON = auto()  # a JSON object as the invoke's whole body, or after a tool's name (`named`)
    FENCE = auto()  # the code fence closing a named call's JSON
    AFTER = auto()  # after an invoke inside the wrapper: another invoke or the wrapper's end
    TRAILING = auto()  # after the wrapper's end: markup that goes with the block, or its end


class InvokeReader:
    def __init__(self, dialect: InvokeGrammar, tools: ToolIndex) -> None:
        self._dialect = dialect
        self._tools = tools
        self._state = _State.OPENING
        self._wrapper = ""  # the wrapper's name as written; empty for a bare invoke
        self._calls: list[tuple[str, dict[str, Any] | str]] = []
        self._key = ""
        self._closer = _NEVER  # the open argument's closing tag
        self._json_typed = False  # the open argument's attributes say its value is JSON
        self._value: list[str] = []
        self._span: JsonSpan | None = None
        self._tokens = False  # special tokens stood between this block's tags (MiniMax-M3): they mark its values
        self._led = False  # the dialect's lead markup was read before the wrapper
        self._ended = False  # the block is whole: the next step ends it where it stands
        self._fenced: bool | None = None  # a named call's JSON is read: whether a code fence opened before it

    def calls(self) -> list[tuple[str, Any]]:
        return [(name, dict(arguments) if isinstance(arguments, dict) else arguments)
                for name, arguments in self._calls]

    def is_whole(self) -> bool:
        return self._state is _State.AFTER or self._state is _State.TRAILING

    def step(self, text: str, position: int) -> Step:
        if self._ended:
            return Step(Outcome.DONE, position)
        if self._state is _State.VALUE or self._state is _State.NAMED:
            return self._read_value(text, position)
        if self._state is _State.JSON:
            return self._read_json(text, position)
        if self._state is _State.FENCE:
            return self._fence_end(text, position)
        if self._state is _State.TRAILING:
            return self._trailing(text, position)
        opening = self._state is _State.OPENING
        if opening and self._dialect.lead:
            lead = self._lead(text, position)
            if lead is not None:
                return lead
        start = position if opening and not self._led else skip_space(text, position)
        if start == len(text) and not opening:
            return Step(Outcome.MORE, start)
        if self._state is _State.BODY and text[start] == "{" and self._calls[-1][1] == {}:
            self._state, self._span, self._value = _State.JSON, JsonSpan(), []
            return self._read_json(text, start)
        tag = read_tag(text, start, self._dialect.syntax, self._dialect.prefix)
        if tag is Outcome.BAD and not opening:
            end = token_end(text, start)
            if end is not None:
                self._tokens = True
                return Step(Outcome.TOKEN, end)
            if may_begin_token(text, start):
                return Step(Outcome.MORE, start)
            if self._state is _State.WRAPPED and self._dialect.named:
                return self._named_json(text, start)
        if isinstance(tag, Outcome):
            if self._state is _State.AFTER and tag is Outcome.BAD:
                return Step(Outcome.DONE, start)  # see `_after`
            return Step(tag, start)
        return self._on_tag(tag, start)

    def _on_tag(self, tag: Tag, start: int) -> Step:
        if self._state is _State.OPENING:
            return self._open(tag, start)
        if self._state is _State.WRAPPED:
            return self._invoke_tag(tag, start)
        if self._state is _State.BODY:
            return self._in_body(tag, start)
        return self._after(tag, start)

    def _lead(self, text: str, position: int) -> Step | None:
        """Markup that leads the block, read before the wrapper; None when none stands here."""
        start = skip_space(text, position) if self._led else position
        if start == len(text) and self._led:
            return Step(Outcome.MORE, position)
        word = match_word(text, start, self._dialect.lead)
        if word is Outcome.MORE:
            return Step(word, position)
        if isinstance(word, int):
            self._led = True
            return Step(Outcome.TOKEN, start + len(self._dialect.lead[word]))
        return None

    def _trailing(self, text: str, position: int) -> Step:
        start = skip_space(text, position)
        word = match_word(text, start, self._dialect.trail) if start < len(text) else Outcome.MORE
        if word is Outcome.MORE:
            return Step(word, position)
        if isinstance(word, int):
            return Step(Outcome.DONE, start + len(self._dialect.trail[word]))
        return Step(Outcome.DONE, position)

    def _open(self, tag: Tag, start: int) -> Step:
        if not tag.closing and (tag.qualified in self._dialect.wrappers or tag.local in self._dialect.wrappers):
            self._state, self._wrapper = _State.WRAPPED, tag.qualified
            return Step(Outcome.TOKEN, tag.end)
        return self._invoke_tag(tag, start) if self._dialect.bare else Step(Outcome.BAD, start)

    def _invoke_tag(self, tag: Tag, start: int) -> Step:
        if self._is_named(tag):
            return self._named_tag(tag)
        name = tag.attributes.get(self._dialect.tool_attribute, "").strip()
        name = declared_name(name, self._tools) or name.rpartition(":")[2]  # `default_api:read_file`, `antml:tool:x`
        if tag.closing or tag.local != self._dialect.invoke or not name:
            return Step(Outcome.BAD, start)
        if tag.empty and set(tag.attributes) != {self._dialect.tool_attribute}:
            return Step(Outcome.BAD, start)  # attributes beside the name: an argument written as an invoke
        self._calls.append((name, {}))
        if tag.empty:  # `<invoke name="get_time"/>`: a call without arguments
            self._state = _State.AFTER
            self._ended = not self._wrapper  # a bare one is the whole block: it ends at the next step
            return Step(Outcome.CALL if self._wrapper else Outcome.TOKEN, tag.end)
        self._state = _State.BODY
        return Step(Outcome.TOKEN, tag.end)

    def _is_named(self, tag: Tag) -> bool:
        """A tag named after a declared tool, in a dialect whose token marks it (DSML, apmantza/pi-free#376)."""
        return (self._dialect.named and not tag.closing and not tag.empty and not tag.attributes
                and tag.local in self._tools and tag.local not in (self._dialect.invoke, *self._dialect.wrappers))

    def _named_tag(self, tag: Tag) -> Step:
        """Its body is read whole, up to its own closing tag, as elements named after the arguments (`tag_xml`)."""
        self._calls.append((tag.local, {}))
        self._value, self._state = [], _State.NAMED
        self._closer = closer(self._dialect.syntax, self._dialect.prefix, tag.local)
        return Step(Outcome.TOKEN, tag.end)

    def _in_body(self, tag: Tag, start: int) -> Step:
        dialect = self._dialect
        arguments = self._calls[-1][1]
        if tag.closing and tag.local == dialect.invoke:
            self._state = _State.AFTER
            return Step(Outcome.CALL if self._wrapper else Outcome.DONE, tag.end)
        if tag.closing or not isinstance(arguments, dict):
            return Step(Outcome.BAD, start)
        if tag.empty:
            return self._empty_argument(tag, start)
        if tag.local == dialect.parameter:
            key = tag.attributes.get(dialect.key_attribute, "").strip()
        elif dialect.tagged and tag.local not in (dialect.invoke, *dialect.wrappers) and self._may_be_argument(
                tag.local):
            key = tag.local  # the argument's own name as its tag (MiniMax-M3)
        else:
            key = ""
        if not key:
            return Step(Outcome.BAD, start)
        self._key, self._value = key, []
        self._closer = closer(dialect.syntax, dialect.prefix, tag.local)
        self._json_typed = is_json_typed(tag.attributes)
        self._state = _State.VALUE
        return Step(Outcome.TOKEN, tag.end)

    def _empty_argument(self, tag: Tag, start: int) -> Step:
        """A self-closing argument whose value is an attribute: `<parameter name="cmd" value="ls"/>`, and the
        invoke tag written for one (`<｜｜DSML｜｜invoke name="cmd" string="echo alpha" />`, DeepSeek V4-Flash,
        MetaFARS/codex-relay#49), which counts only where it names a property of the tool's schema."""
        dialect = self._dialect
        key = tag.attributes.get(dialect.key_attribute, "").strip()
        if tag.local == dialect.invoke and key not in self._properties():
            return Step(Outcome.BAD, start)
        value = attribute_value(tag.attributes, dialect.key_attribute)
        if tag.local not in (dialect.parameter, dialect.invoke) or not key or value is None:
            return Step(Outcome.BAD, start)
        arguments = self._calls[-1][1]
        assert isinstance(arguments, dict)
        self._json_typed = is_json_typed(tag.attributes)
        arguments[key] = self._typed(value, self._properties().get(key))
        return Step(Outcome.TOKEN, tag.end)

    def _may_be_argument(self, key: str) -> bool:
        properties = self._properties()
        return not properties or key in properties

    def _properties(self) -> Mapping[str, Any]:
        schema = self._tools.get(self._calls[-1][0])
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        return properties if isinstance(properties, Mapping) else {}

    def _read_value(self, text: str, position: int) -> Step:
        # Only the argument's own closing tag ends a value: `</invoke>` inside code stays in it. It is matched
        # by name, however its token is spaced (`</ | DSML | parameter >`).
        found = self._closer.search(text, position)
        if found is None:
            opener = self._dialect.syntax.close[0]
            # From the first `<` that may begin a closer not yet whole, the text waits for more.
            cut = text.find(opener, max(position, len(text) - _CLOSER_REACH))
            end = cut if cut >= 0 else len(text)
            self._value.append(text[position:end])
            return Step(Outcome.MORE, end)
        self._value.append(text[position : found.start()])
        end = found.end()
        if self._state is _State.NAMED:
            return self._close_named(end)
        arguments = self._calls[-1][1]
        assert isinstance(arguments, dict)
        arguments[self._key] = self._typed("".join(self._value), self._properties().get(self._key))
        self._state = _State.BODY
        return Step(Outcome.TOKEN, end)

    def _close_named(self, end: int) -> Step:
        name = self._calls[-1][0]
        arguments = parse_elements("".join(self._value), self._tools.get(name) or {})
        if arguments is None:
            return Step(Outcome.BAD, end)
        self._calls[-1] = (name, arguments)
        self._state = _State.AFTER
        return Step(Outcome.CALL if self._wrapper else Outcome.DONE, end)

    def _typed(self, raw: str, schema: Any) -> Any:
        return typed_value(raw, schema, self._json_typed, self._tokens, not self._dialect.layout)

    def _named_json(self, text: str, start: int) -> Step:
        """A declared tool's name and its arguments as a JSON object, perhaps fenced, right inside the wrapper."""
        head = named_json_head(text, start, self._tools)
        if not isinstance(head, tuple):
            return Step(Outcome.MORE if head else Outcome.BAD, start)
        name, body, self._fenced = head
        self._calls.append((name, {}))
        self._state, self._span, self._value = _State.JSON, JsonSpan(), []
        return Step(Outcome.TOKEN, body)

    def _fence_end(self, text: str, position: int) -> Step:
        start = skip_space(text, position)
        word = match_word(text, start, ("```",)) if start < len(text) else Outcome.MORE
        if word is Outcome.MORE:
            return Step(word, position)
        self._state = _State.AFTER
        return Step(Outcome.CALL, start + 3 if word == 0 else position)

    def _read_json(self, text: str, position: int) -> Step:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._value.append(text[position:stop])
        if end is None:
            return Step(Outcome.MORE, stop)
        self._calls[-1] = (self._calls[-1][0], "".join(self._value))
        self._span, self._state = None, _State.BODY
        if self._fenced is not None:  # a named call's JSON: its fence's end, or the wrapper's, follows
            self._state = _State.FENCE if self._fenced else _State.AFTER
            return Step(Outcome.TOKEN if self._fenced else Outcome.CALL, stop)
        return Step(Outcome.TOKEN, stop)

    def _after(self, tag: Tag, start: int) -> Step:
        if tag.closing and (tag.qualified == self._wrapper or tag.local in self._dialect.wrappers):  # (misspelt)
            if self._dialect.trail:
                self._state = _State.TRAILING
                return Step(Outcome.TOKEN, tag.end)
            return Step(Outcome.DONE, tag.end)
        step = self._invoke_tag(tag, start)
        # Anything else after a whole invoke: the wrapper's end was dropped (a stop string), the calls stand.
        return step if step.outcome is not Outcome.BAD else Step(Outcome.DONE, start)
