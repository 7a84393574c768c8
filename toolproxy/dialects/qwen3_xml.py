"""Qwen3-Coder's XML calls: `<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>`.

The format vLLM's `qwen3_coder` parser and llama.cpp read. Several functions may follow each other, inside one
wrapper or in several, and the `<tool_call>` wrapper is sometimes left out: a bare `<function=NAME>` block counts
too. Values are raw text without their layout (`base.trim_value`); `schema.py` types them later, as for every dialect.
Seed-OSS writes the same calls inside `<seed:tool_call>`: an instance with that wrapper, which it requires.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
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
    render_value,
    skip_space,
)
from toolproxy.dialects.cursor import SPACE, ahead, either, literal

_WRAPPER = "<tool_call>"
_FUNCTION, _END_FUNCTION = "<function=", "</function>"
_PARAMETER, _END_PARAMETER = "<parameter=", "</parameter>"
_NAME_TEXT = re.compile(r"[^<>\n]{0,128}")  # what lies between `=` and `>`; a line break means it is prose
_NAME = re.compile(r"[^\s<>\"'=]{1,128}")
# A closing tag (group 1 set when whole); `</name` cut off by the end of the text so far may still become one.
_STRAY_CLOSER = re.compile(r"</[A-Za-z_][\w.\-]{0,63}(>)?")
# An opener counts only when the reader can go on after it: `<tool_call>` needs a function, a function needs its
# `>` and then a parameter or its end. Hermes' `<tool_call>{` and GLM's `<tool_call>name` are skipped in C.
_TAG_END = ahead(r"[^\S\n]{0,128}+", r"[^<>\s]", r"[^<>\n]{0,128}+", literal(">"))  # a name that is not blank
_FUNCTION_AHEAD = ahead(_TAG_END, SPACE, either(ahead(literal(_PARAMETER), _TAG_END), literal(_END_FUNCTION)))


@functools.cache
def _hint(wrapper: str, bare: bool) -> re.Pattern[str]:
    wrapped = rf"{re.escape(wrapper[1:])}(?={ahead(SPACE, literal(_FUNCTION), _FUNCTION_AHEAD)})"
    return re.compile(rf"<(?:{wrapped}|function=(?={_FUNCTION_AHEAD}))" if bare else f"<{wrapped}")


@dataclass(frozen=True, slots=True)
class Qwen3XmlDialect:
    name: str = "qwen3_coder"
    wrapper: str = _WRAPPER
    bare: bool = True  # whether a `<function=...>` block without the wrapper counts
    # Whether its chat template writes a line break after each value's tag and before its closer (Qwen3-Coder),
    # or none (Seed-OSS): then a line break on one side only is the value's own (`base.trim_value`).
    layout: bool = True

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        end_wrapper = f"</{self.wrapper[1:]}"
        return Markup((self.wrapper, _FUNCTION) if self.bare else (self.wrapper,),
                      (end_wrapper, _END_FUNCTION, _PARAMETER, _END_PARAMETER), ((self.wrapper, end_wrapper),))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.wrapper, _FUNCTION) if self.bare else (self.wrapper,)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        reader = functools.partial(Qwen3Reader, self.wrapper, self.bare, self.layout)
        return BlockScanner(self.name, _hint(self.wrapper, self.bare), len(_FUNCTION) + len(self.wrapper) + 130, reader)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call as Qwen3-Coder's (or Seed-OSS's) chat template writes it."""
        values = {key: f"\n{render_value(value)}\n" if self.layout else pad_newlines(render_value(value), paired=True)
                  for key, value in arguments.items()}
        parameters = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in values.items())
        return f"{self.wrapper}\n<function={name}>\n{parameters}</function>\n{self.wrapper[:1]}/{self.wrapper[1:]}"


class _State(Enum):
    OPENING = auto()
    WRAPPED = auto()  # after `<tool_call>`: a function must follow
    BODY = auto()  # inside a function: parameters or its end
    VALUE = auto()
    AFTER = auto()  # after a function inside the wrapper: another function or the wrapper's end


class Qwen3Reader:
    def __init__(self, wrapper: str = _WRAPPER, bare: bool = True, layout: bool = True) -> None:
        self._wrapper, self._end_wrapper, self._bare, self._paired = wrapper, f"</{wrapper[1:]}", bare, not layout
        self._state = _State.OPENING
        self._wrapped = False
        self._calls: list[tuple[str, dict[str, str]]] = []
        self._parameter = ""
        self._value: list[str] = []

    def calls(self) -> list[tuple[str, Any]]:
        return [(name, dict(arguments)) for name, arguments in self._calls]

    def is_whole(self) -> bool:
        return self._state is _State.AFTER

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.VALUE:
            return self._read_value(text, position)
        if self._state is _State.OPENING:
            return self._open(text, position)
        start = skip_space(text, position)
        if start == len(text):
            return Step(Outcome.MORE, start)
        if self._state is _State.WRAPPED:
            word = match_word(text, start, (_FUNCTION,))
            return Step(word, start) if isinstance(word, Outcome) else self._function(text, start)
        if self._state is _State.BODY:
            return self._in_body(text, start)
        return self._after(text, start)

    def _open(self, text: str, position: int) -> Step:
        word = match_word(text, position, (self._wrapper, _FUNCTION) if self._bare else (self._wrapper,))
        if isinstance(word, Outcome):
            return Step(word, position)
        if word == 1:
            return self._function(text, position)
        self._state, self._wrapped = _State.WRAPPED, True
        return Step(Outcome.TOKEN, position + len(self._wrapper))

    def _function(self, text: str, position: int) -> Step:
        """`<function=NAME>` at `position`."""
        token = read_token(text, position + len(_FUNCTION), _NAME_TEXT, ">")
        if isinstance(token, Outcome):
            return Step(token, position)
        name = token[0].strip()
        if not _NAME.fullmatch(name):
            return Step(Outcome.BAD, position)
        self._calls.append((name, {}))
        self._state = _State.BODY
        return Step(Outcome.TOKEN, token[1])

    def _in_body(self, text: str, start: int) -> Step:
        word = match_word(text, start, (_PARAMETER, _END_FUNCTION))
        if isinstance(word, Outcome):
            return Step(word, start)
        if word == 1:
            self._state = _State.AFTER
            return Step(Outcome.CALL if self._wrapped else Outcome.DONE, start + len(_END_FUNCTION))
        token = read_token(text, start + len(_PARAMETER), _NAME_TEXT, ">")
        if isinstance(token, Outcome):
            return Step(token, start)
        if not token[0].strip():
            return Step(Outcome.BAD, start)
        self._state, self._parameter, self._value = _State.VALUE, token[0].strip(), []
        return Step(Outcome.TOKEN, token[1])

    def _read_value(self, text: str, position: int) -> Step:
        # Only `</parameter>` ends a value: code that mentions `</function>` or `</tool_call>` stays inside it.
        piece, end, found = read_value(text, position, _END_PARAMETER)
        self._value.append(piece)
        if not found:
            return Step(Outcome.MORE, end)
        self._calls[-1][1][self._parameter] = trim_value("".join(self._value), self._paired)
        self._state = _State.BODY
        return Step(Outcome.TOKEN, end)

    def _after(self, text: str, start: int) -> Step:
        word = match_word(text, start, (self._end_wrapper, _FUNCTION))
        if word == 0:
            return Step(Outcome.DONE, start + len(self._end_wrapper))
        if word == 1:
            step = self._function(text, start)
            if step.outcome is not Outcome.BAD:
                return step
        elif word is Outcome.MORE:
            return Step(Outcome.MORE, start)
        elif self._wrapped and (stray := _STRAY_CLOSER.match(text, start)) is not None:
            # Qwen3.6 drifts into closers nothing opened (`</function>` twice, `</function_invocation>`) before
            # its wrapper's end (QwenLM/Qwen3.8#178): inside the wrapper they are markup of the call.
            if stray.group(1) is None:
                return Step(Outcome.MORE if stray.end() == len(text) else Outcome.DONE, start)
            return Step(Outcome.TOKEN, stray.end())
        # Anything else after a whole function: `</tool_call>` was dropped (a stop string), the calls stand.
        return Step(Outcome.DONE, start)
