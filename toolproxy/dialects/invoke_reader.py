"""Reading one block of the invoke family (`invoke_xml.py`) token by token, for `block.BlockScanner`.

A value is searched only for its own closing tag, so `</invoke>` inside code stays in it. Special tokens between
tags are read as tokens of the block (they go with the call, not into content). An argument tag other than the
dialect's `parameter` (MiniMax-M3's `<command>ls</command>`) counts only when it names a property of the tool's
schema, or the schema names none: the declared tool anchors what a tag may mean.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from enum import Enum, auto
from typing import Any, Protocol

from toolproxy.dialects.base import ToolIndex, decode_json, trim_value
from toolproxy.dialects.block import Outcome, Step, match_word, skip_space
from toolproxy.dialects.invoke_tags import NAMESPACE, Tag, TagSyntax, read_tag
from toolproxy.dialects.json_span import JsonSpan
from toolproxy.dialects.tag_xml import element_value
from toolproxy.dialects.tokens import TOKEN, remove_tokens, strip_trailing_token


class Grammar(Protocol):
    """What the reader needs of an invoke-family dialect (`invoke_xml.InvokeXmlDialect`)."""

    @property
    def syntax(self) -> TagSyntax: ...
    @property
    def prefix(self) -> str: ...
    @property
    def wrappers(self) -> tuple[str, ...]: ...
    @property
    def bare(self) -> bool: ...
    @property
    def invoke(self) -> str: ...
    @property
    def tool_attribute(self) -> str: ...
    @property
    def parameter(self) -> str: ...
    @property
    def key_attribute(self) -> str: ...
    @property
    def tagged(self) -> bool: ...
    @property
    def layout(self) -> bool: ...
    @property
    def lead(self) -> tuple[str, ...]: ...
    @property
    def trail(self) -> tuple[str, ...]: ...

_TOKEN = re.compile(TOKEN)
_PARTIAL_TOKEN = re.compile(r"(?:<[|｜][^\s<>|｜\[\]]{0,48}[|｜]?|\](?:<(?:\](?:[^\s<>|｜\[\]]{1,48}(?:\[>?)?)?)?)?)\Z")
_TEXT_TYPES = frozenset({"string", "str", "text"})
_NEVER = re.compile("(?!)")
_CLOSER_REACH = 96  # the longest closing tag of an argument; what may begin one at the end of the text waits


class _State(Enum):
    OPENING = auto()
    WRAPPED = auto()  # after the wrapper's opening tag: an invoke must follow
    BODY = auto()  # inside an invoke: arguments or its end
    VALUE = auto()
    JSON = auto()  # a JSON object as the invoke's whole body
    AFTER = auto()  # after an invoke inside the wrapper: another invoke or the wrapper's end
    TRAILING = auto()  # after the wrapper's end: markup that goes with the block, or its end


class InvokeReader:
    def __init__(self, dialect: Grammar, tools: ToolIndex) -> None:
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

    def calls(self) -> list[tuple[str, Any]]:
        return [(name, dict(arguments) if isinstance(arguments, dict) else arguments)
                for name, arguments in self._calls]

    def is_whole(self) -> bool:
        return self._state is _State.AFTER or self._state is _State.TRAILING

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.VALUE:
            return self._read_value(text, position)
        if self._state is _State.JSON:
            return self._read_json(text, position)
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
            token = _token_at(text, start)
            if isinstance(token, int):
                self._tokens = True
                return Step(Outcome.TOKEN, token)
            if token is not None:
                return Step(token, start)
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
        name = tag.attributes.get(self._dialect.tool_attribute, "").strip()
        if name not in self._tools and ":" in name:
            name = name.rpartition(":")[2]  # `default_api:read_file`, `antml:tool:read_file`
        if tag.closing or tag.local != self._dialect.invoke or not name:
            return Step(Outcome.BAD, start)
        self._calls.append((name, {}))
        self._state = _State.BODY
        return Step(Outcome.TOKEN, tag.end)

    def _in_body(self, tag: Tag, start: int) -> Step:
        dialect = self._dialect
        arguments = self._calls[-1][1]
        if tag.closing and tag.local == dialect.invoke:
            self._state = _State.AFTER
            return Step(Outcome.CALL if self._wrapper else Outcome.DONE, tag.end)
        if tag.closing or not isinstance(arguments, dict):
            return Step(Outcome.BAD, start)
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
        self._closer = _closer(dialect.syntax, dialect.prefix, tag.local)
        self._json_typed = tag.attributes.get("string") == "false" or tag.attributes.get(
            "type", "string").lower() not in _TEXT_TYPES
        self._state = _State.VALUE
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
        arguments = self._calls[-1][1]
        assert isinstance(arguments, dict)
        arguments[self._key] = self._typed("".join(self._value), self._properties().get(self._key))
        self._state = _State.BODY
        return Step(Outcome.TOKEN, end)

    def _typed(self, raw: str, schema: Any) -> Any:
        """The value as written, or the JSON it holds when its attributes say so and the schema does not
        declare a string; nested tags where the schema says object or array (or tokens mark them, MiniMax-M3)."""
        types = _types(schema)
        if self._json_typed and "string" not in types:
            try:
                return decode_json(raw.strip())
            except ValueError:
                pass
        value = strip_trailing_token(raw) if self._tokens else raw
        if self._tokens and _TOKEN.search(value) is not None:
            value = remove_tokens(value)
            if not types:
                schema = {"type": "array" if value.strip().startswith("<item>") else "object"}
        paired = not self._dialect.layout
        return element_value(value, schema, paired) if schema else trim_value(value, paired)

    def _read_json(self, text: str, position: int) -> Step:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._value.append(text[position:stop])
        if end is None:
            return Step(Outcome.MORE, stop)
        self._calls[-1] = (self._calls[-1][0], "".join(self._value))
        self._span, self._state = None, _State.BODY
        return Step(Outcome.TOKEN, stop)

    def _after(self, tag: Tag, start: int) -> Step:
        if tag.closing and tag.qualified == self._wrapper:
            if self._dialect.trail:
                self._state = _State.TRAILING
                return Step(Outcome.TOKEN, tag.end)
            return Step(Outcome.DONE, tag.end)
        step = self._invoke_tag(tag, start)
        # Anything else after a whole invoke: the wrapper's end was dropped (a stop string), the calls stand.
        return step if step.outcome is not Outcome.BAD else Step(Outcome.DONE, start)


@functools.lru_cache(maxsize=256)
def _closer(syntax: TagSyntax, prefix: str, local: str) -> re.Pattern[str]:
    """An argument's closing tag, with or without its prefix, spaced or not; where the dialect's tags carry a
    token, the token alone closes it too (`</｜DSML｜>`, as DeepSeek V4 sometimes writes)."""
    name = rf"(?:(?:{prefix})?{re.escape(local)}|{prefix})" if prefix != NAMESPACE else rf"{prefix}{re.escape(local)}"
    return re.compile(rf"{re.escape(syntax.close)}[ \t]{{0,4}}{name}[ \t]{{0,4}}{re.escape(syntax.end)}")


def _types(schema: Any) -> set[str]:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):
        return {str(item) for item in kind}
    return {kind} if isinstance(kind, str) else set()


def _token_at(text: str, position: int) -> int | Outcome | None:
    """The end of a special token at `position`; MORE when the text ends inside what may become one."""
    found = _TOKEN.match(text, position)
    if found is not None:
        return found.end()
    return Outcome.MORE if _PARTIAL_TOKEN.match(text, position, position + 64) and len(text) - position < 64 \
        else None
