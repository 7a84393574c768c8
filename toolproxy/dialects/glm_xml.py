"""GLM-4.5/4.6/4.7 calls: `<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>`.

The format vLLM's `glm45` parser and llama.cpp read, one call per `<tool_call>`, with or without line breaks
between the pieces. The name must be one word, which is what tells this block from Hermes JSON
(`<tool_call>{...}`) and Qwen3-Coder XML (`<tool_call><function=...>`): those are handed on as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum, auto
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

_OPENER, _CLOSER = "<tool_call>", "</tool_call>"
_KEY, _END_KEY = "<arg_key>", "</arg_key>"
_VALUE, _END_VALUE = "<arg_value>", "</arg_value>"
_NAME_CHAR = r"[^\s<>\"'{}\[\]=,;]"
_NAME = re.compile(_NAME_CHAR + "{1,128}")
_KEY_TEXT = re.compile(r"[^<>\n]{0,128}")
# `<tool_call>` counts only when a name and then a key (with its value's tag) or the closer can follow: Hermes'
# `<tool_call>{` and Qwen3-Coder's `<tool_call><function=` are skipped in C.
_KEY_AHEAD = ahead(literal(_KEY), r"[^<>\n]{0,128}+", literal(_END_KEY), SPACE, literal(_VALUE))
_HINT = re.compile(re.escape(_OPENER)
                   + f"(?={ahead(SPACE, run(_NAME_CHAR, 128), SPACE, either(_KEY_AHEAD, literal(_CLOSER)))})")


class GlmXmlDialect:
    name = "glm"

    holds_only_markers = True

    markup = Markup((_OPENER,), (_KEY, _VALUE, _END_VALUE), ((_OPENER, _CLOSER),))

    # Its chat templates (GLM-4.6, 4.7) write each value right between its tags: a line break there is the value's.
    layout = False

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (_OPENER,)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        return BlockScanner(self.name, _HINT, len(_OPENER), GlmReader)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call as GLM-4.5's chat template writes it."""
        pairs = "".join(f"<arg_key>{key}</arg_key>\n<arg_value>{pad_newlines(render_value(value), paired=True)}"
                        "</arg_value>\n" for key, value in arguments.items())
        return f"<tool_call>{name}\n{pairs}</tool_call>"


class _State(Enum):
    OPENING = auto()
    NAME = auto()
    ARGUMENTS = auto()  # a key, or the end of the call
    KEYED = auto()  # after a key: its value must follow
    VALUE = auto()


class GlmReader:
    def __init__(self) -> None:
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
            word = match_word(text, position, (_OPENER,))
            if isinstance(word, Outcome):
                return Step(word, position)
            self._state = _State.NAME
            return Step(Outcome.TOKEN, position + len(_OPENER))
        start = skip_space(text, position)
        if start == len(text):
            return Step(Outcome.MORE, start)
        if self._state is _State.NAME:
            return self._read_name(text, start)
        if self._state is _State.ARGUMENTS:
            return self._read_key(text, start)
        word = match_word(text, start, (_VALUE,))
        if isinstance(word, Outcome):
            return Step(word, start)
        self._state, self._value = _State.VALUE, []
        return Step(Outcome.TOKEN, start + len(_VALUE))

    def _read_name(self, text: str, start: int) -> Step:
        word = read_word(text, start, _NAME)
        if isinstance(word, Outcome):
            return Step(word, start)
        self._name, self._state = word[0], _State.ARGUMENTS
        return Step(Outcome.TOKEN, word[1])

    def _read_key(self, text: str, start: int) -> Step:
        word = match_word(text, start, (_KEY, _CLOSER))
        if isinstance(word, Outcome):
            return Step(word, start)
        if word == 1:
            return Step(Outcome.DONE, start + len(_CLOSER))
        token = read_token(text, start + len(_KEY), _KEY_TEXT, _END_KEY)
        if isinstance(token, Outcome):
            return Step(token, start)
        if not token[0].strip():
            return Step(Outcome.BAD, start)
        self._key, self._state = token[0].strip(), _State.KEYED
        return Step(Outcome.TOKEN, token[1])

    def _read_value(self, text: str, position: int) -> Step:
        # Only `</arg_value>` ends a value: a `</tool_call>` written inside code stays in it.
        piece, end, found = read_value(text, position, _END_VALUE)
        self._value.append(piece)
        if not found:
            return Step(Outcome.MORE, end)
        self._arguments[self._key] = trim_value("".join(self._value), paired=not GlmXmlDialect.layout)
        self._state = _State.ARGUMENTS
        return Step(Outcome.TOKEN, end)
