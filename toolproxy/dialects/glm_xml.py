"""GLM-4.5/4.6/4.7 calls: `<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>`, and the
models that write the same tags behind a prefix of their own (K2 Horizon: `<ifm|tool_call>NAME<ifm|arg_key>k
</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type><ifm|arg_value>2</ifm|arg_value></ifm|tool_call>` inside
`<ifm|tool_calls>`, vLLM's k2_horizon parser): one class, the prefix and the optional type tag as data.

The format vLLM's `glm45` parser and llama.cpp read, one call per `<tool_call>`, with or without line breaks
between the pieces. The name must be one word, which is what tells this block from Hermes JSON
(`<tool_call>{...}`) and Qwen3-Coder XML (`<tool_call><function=...>`): those are handed on as text. A type tag's
word is not kept: the tool's schema types the value, as for every XML form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, trim_value
from toolproxy.dialects.block import (
    BlockScanner,
    Outcome,
    Step,
    match_word,
    pad_newlines,
    read_token,
    read_value,
    read_word,
    render_value,
    skip_space,
)
from toolproxy.dialects.cursor import SPACE, ahead, either, literal, run

_NAME_CHAR = r"[^\s<>\"'{}\[\]=,;]"
_NAME = re.compile(_NAME_CHAR + "{1,128}")
_KEY_TEXT = re.compile(r"[^<>\n]{0,128}")


@dataclass(frozen=True, slots=True)
class GlmTags:
    """The tags of one member of the family: `<{prefix}tool_call>` and so on."""

    prefix: str = ""
    wrapper: str | None = None  # the word of a block around the calls (`tool_calls`), absorbed as a wrapper

    def tag(self, word: str, closing: bool = False) -> str:
        return f"<{'/' if closing else ''}{self.prefix}{word}>"

    @property
    def opener(self) -> str:
        return self.tag("tool_call")

    @property
    def closer(self) -> str:
        return self.tag("tool_call", closing=True)

    def hint(self) -> re.Pattern[str]:
        """`<tool_call>` counts only when a name and then a key (with its value's or type's tag) or the closer can
        follow: Hermes' `<tool_call>{` and Qwen3-Coder's `<tool_call><function=` are skipped in C."""
        key_ahead = ahead(literal(self.tag("arg_key")), r"[^<>\n]{0,128}+", literal(self.tag("arg_key", True)),
                          SPACE, either(literal(self.tag("arg_value")), literal(self.tag("arg_type"))))
        call_ahead = ahead(SPACE, run(_NAME_CHAR, 128), SPACE, either(key_ahead, literal(self.closer)))
        return re.compile(re.escape(self.opener) + f"(?={call_ahead})")


class GlmXmlDialect:
    holds_only_markers = True

    # Its chat templates (GLM-4.6, 4.7) write each value right between its tags: a line break there is the value's.
    layout = False

    def __init__(self, name: str = "glm", tags: GlmTags = GlmTags()) -> None:
        self.name = name
        self.tags = tags
        around: tuple[tuple[str, str], ...] = () if tags.wrapper is None else (
            (tags.tag(tags.wrapper), tags.tag(tags.wrapper, closing=True)),)
        self.markup = Markup((tags.opener, *(opener for opener, _ in around)),
                             (tags.tag("arg_key"), tags.tag("arg_value"), tags.tag("arg_value", closing=True),
                              *(closer for _, closer in around)), ((tags.opener, tags.closer), *around))
        self._hint = tags.hint()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.tags.opener,)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        return BlockScanner(self.name, self._hint, len(self.tags.opener), partial(GlmReader, self.tags))

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call as GLM-4.5's chat template writes it."""
        tag = self.tags.tag
        pairs = "".join(f"{tag('arg_key')}{key}{tag('arg_key', True)}\n{tag('arg_value')}"
                        f"{pad_newlines(render_value(value), paired=True)}{tag('arg_value', True)}\n"
                        for key, value in arguments.items())
        return f"{self.tags.opener}{name}\n{pairs}{self.tags.closer}"


class _State(Enum):
    OPENING = auto()
    NAME = auto()
    ARGUMENTS = auto()  # a key, or the end of the call
    KEYED = auto()  # after a key: its value (or its type, then its value) must follow
    VALUE = auto()


class GlmReader:
    def __init__(self, tags: GlmTags) -> None:
        self._opener, self._closer = tags.opener, tags.closer
        self._key_tags = (tags.tag("arg_key"), tags.tag("arg_key", closing=True))
        self._value_tags = (tags.tag("arg_value"), tags.tag("arg_value", closing=True))
        self._type_tags = (tags.tag("arg_type"), tags.tag("arg_type", closing=True))
        self._state = _State.OPENING
        self._name = ""
        self._arguments: dict[str, str] = {}
        self._key = ""
        self._value: list[str] = []

    def calls(self) -> list[tuple[str, Any]]:
        return [(self._name, dict(self._arguments))] if self._name else []

    def is_whole(self) -> bool:
        # `</tool_call>` is the only end GLM writes, so a block without it was cut off.
        return False

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.VALUE:
            return self._read_value(text, position)
        if self._state is _State.OPENING:
            word = match_word(text, position, (self._opener,))
            if isinstance(word, Outcome):
                return Step(word, position)
            self._state = _State.NAME
            return Step(Outcome.TOKEN, position + len(self._opener))
        start = skip_space(text, position)
        if start == len(text):
            return Step(Outcome.MORE, start)
        if self._state is _State.NAME:
            return self._read_name(text, start)
        if self._state is _State.ARGUMENTS:
            return self._read_key(text, start)
        return self._read_value_opener(text, start)

    def _read_name(self, text: str, start: int) -> Step:
        word = read_word(text, start, _NAME)
        if isinstance(word, Outcome):
            return Step(word, start)
        self._name, self._state = word[0], _State.ARGUMENTS
        return Step(Outcome.TOKEN, word[1])

    def _read_key(self, text: str, start: int) -> Step:
        word = match_word(text, start, (self._key_tags[0], self._closer))
        if isinstance(word, Outcome):
            return Step(word, start)
        if word == 1:
            return Step(Outcome.DONE, start + len(self._closer))
        token = read_token(text, start + len(self._key_tags[0]), _KEY_TEXT, self._key_tags[1])
        if isinstance(token, Outcome):
            return Step(token, start)
        if not token[0].strip():
            return Step(Outcome.BAD, start)
        self._key, self._state = token[0].strip(), _State.KEYED
        return Step(Outcome.TOKEN, token[1])

    def _read_value_opener(self, text: str, start: int) -> Step:
        """The value's tag, or a type tag before it (its word is skipped: the schema types the value)."""
        word = match_word(text, start, (self._value_tags[0], self._type_tags[0]))
        if isinstance(word, Outcome):
            return Step(word, start)
        if word == 1:
            token = read_token(text, start + len(self._type_tags[0]), _KEY_TEXT, self._type_tags[1])
            return Step(token, start) if isinstance(token, Outcome) else Step(Outcome.TOKEN, token[1])
        self._state, self._value = _State.VALUE, []
        return Step(Outcome.TOKEN, start + len(self._value_tags[0]))

    def _read_value(self, text: str, position: int) -> Step:
        # Only `</arg_value>` ends a value: a `</tool_call>` written inside code stays in it.
        piece, end, found = read_value(text, position, self._value_tags[1])
        self._value.append(piece)
        if not found:
            return Step(Outcome.MORE, end)
        self._arguments[self._key] = trim_value("".join(self._value), paired=not GlmXmlDialect.layout)
        self._state = _State.ARGUMENTS
        return Step(Outcome.TOKEN, end)
