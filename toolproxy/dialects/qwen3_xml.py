"""Qwen3-Coder's XML calls: `<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>`.

The format vLLM's `qwen3_coder` parser and llama.cpp read. Several functions may follow each other, inside one
wrapper or in several, and the `<tool_call>` wrapper is sometimes left out: a bare `<function=NAME>` block counts
too. Values are raw text without their layout (`base.trim_value`); `schema.py` types them later, as for every dialect.
Seed-OSS writes the same calls inside `<seed:tool_call>`: an instance with that wrapper, which it requires.

Drift the family is read through, each anchored by the declared tool: inside the wrapper, `<parameter=NAME>` where
the function opener belongs, NAME a declared tool (Qwen 3.8, antirez/ds4#1050); and values with no closing tags at
all, each ending where the next `<parameter=KEY>` begins a line, KEY a property of the tool's schema (qwen3-coder
on Ollama, continuedev/continue#13057). Such a block, once a value has ended that way, stands at the end of the
text with its last value running to it: a model that writes no closers writes none at its end either.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, partial_suffix, trim_value
from toolproxy.dialects.block import (
    BlockScanner,
    Outcome,
    Step,
    match_word,
    pad_newlines,
    read_token,
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
_VALUE_END_REACH = 160  # the longest `\n<parameter=KEY>` that may still be arriving at the end of the text


@functools.lru_cache(maxsize=64)  # per wrapper, and per the tools' names a `<parameter=NAME>` opener may carry
def _hint(wrapper: str, bare: bool, names: tuple[str, ...] = ()) -> re.Pattern[str]:
    first = ahead(literal(_FUNCTION), _FUNCTION_AHEAD)
    if names:  # `<parameter=NAME>` opening the function, NAME a declared tool
        tool = either(rf"(?:{'|'.join(map(re.escape, sorted(names, key=len, reverse=True)))})>",
                      r"[^<>\n]{0,128}+\Z")
        first = either(first, ahead(literal(_PARAMETER), tool))
    wrapped = rf"{re.escape(wrapper[1:])}(?={ahead(SPACE, first)})"
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
        reader = functools.partial(Qwen3Reader, self.wrapper, self.bare, tools, self.layout)
        names = tuple(sorted(name for name in tools if _NAME.fullmatch(name)))
        return BlockScanner(self.name, _hint(self.wrapper, self.bare, names),
                            len(_FUNCTION) + len(self.wrapper) + 130, reader)

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
    def __init__(self, wrapper: str = _WRAPPER, bare: bool = True, tools: ToolIndex | None = None,
                 layout: bool = True) -> None:
        self._wrapper, self._end_wrapper, self._bare, self._paired = wrapper, f"</{wrapper[1:]}", bare, not layout
        self._tools: ToolIndex = tools or {}
        self._state = _State.OPENING
        self._wrapped = False
        self._calls: list[tuple[str, dict[str, str]]] = []
        self._parameter = ""
        self._value: list[str] = []
        self._unclosed = False  # a value ended where the next parameter began: the model writes no closers

    def calls(self) -> list[tuple[str, Any]]:
        calls = [(name, dict(arguments)) for name, arguments in self._calls]
        if self._state is _State.VALUE and self._unclosed:  # the last value runs to the end of the text
            calls[-1][1][self._parameter] = _unclosed_value("".join(self._value))
        return calls

    def is_whole(self) -> bool:
        return self._state is _State.AFTER or (self._state is _State.VALUE and self._unclosed)

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.VALUE:
            return self._read_value(text, position)
        if self._state is _State.OPENING:
            return self._open(text, position)
        start = skip_space(text, position)
        if start == len(text):
            return Step(Outcome.MORE, start)
        if self._state is _State.WRAPPED:
            word = match_word(text, start, (_FUNCTION, _PARAMETER))
            return Step(word, start) if isinstance(word, Outcome) else self._function(text, start, word == 1)
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

    def _function(self, text: str, position: int, as_parameter: bool = False) -> Step:
        """`<function=NAME>` at `position`, or `<parameter=NAME>` written in its place for a declared tool."""
        token = read_token(text, position + len(_PARAMETER if as_parameter else _FUNCTION), _NAME_TEXT, ">")
        if isinstance(token, Outcome):
            return Step(token, position)
        name = token[0].strip()
        if not _NAME.fullmatch(name) or (as_parameter and name not in self._tools):
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
        # Only `</parameter>` ends a value, or the next parameter of the tool at the start of a line: code that
        # mentions `</function>` or `</tool_call>` stays inside it. Once the model has shown it writes no closers,
        # the function's or the wrapper's end at the start of a line ends the value too: text after them is not it.
        search = position
        while (found := _value_end(self._end_wrapper, self._unclosed).search(text, search)) is not None:
            if found.group() == _END_PARAMETER:
                return self._end_value(text, position, found.start(), found.end(), _State.BODY)
            if found.lastindex:  # `</function>` (then the body's end is read) or the wrapper's end
                state = _State.BODY if found.group(1) == _END_FUNCTION else _State.AFTER
                return self._end_value(text, position, found.start(), found.start(), state)
            token = read_token(text, found.end(), _NAME_TEXT, ">")
            if token is Outcome.MORE:
                return self._wait(text, position, found.start())
            if isinstance(token, tuple) and self._is_next_key(token[0].strip()):
                self._unclosed = True
                return self._end_value(text, position, found.start(), found.start(), _State.BODY)
            search = found.end()
        return self._wait(text, position, _held_from(text, position, self._ends()))

    def _end_value(self, text: str, position: int, stop: int, end: int, state: _State) -> Step:
        self._value.append(text[position:stop])
        raw = "".join(self._value)
        closed = end > stop  # by `</parameter>`
        self._calls[-1][1][self._parameter] = trim_value(raw, self._paired) if closed else _unclosed_value(raw)
        self._state = state
        return Step(Outcome.TOKEN, end)

    def _ends(self) -> tuple[str, ...]:
        """What ends a value at the start of a line."""
        return (_PARAMETER, _END_FUNCTION, self._end_wrapper) if self._unclosed else (_PARAMETER,)

    def _wait(self, text: str, position: int, hold: int) -> Step:
        """The value up to `hold` is read; what may begin its end waits for more text."""
        self._value.append(text[position:hold])
        return Step(Outcome.MORE, hold)

    def _is_next_key(self, key: str) -> bool:
        """Whether `key` may end the open value without a closer: a property of the tool not given yet."""
        return key in self._properties() and key != self._parameter and key not in self._calls[-1][1]

    def _properties(self) -> Mapping[str, Any]:
        schema = self._tools.get(self._calls[-1][0])
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        return properties if isinstance(properties, Mapping) else {}

    def _after(self, text: str, start: int) -> Step:
        word = match_word(text, start, (self._end_wrapper, _FUNCTION, *((_PARAMETER,) if self._wrapped else ())))
        if word == 0:
            return Step(Outcome.DONE, start + len(self._end_wrapper))
        if word == 1 or word == 2:
            step = self._function(text, start, word == 2)
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


def _unclosed_value(raw: str) -> str:
    """A value with no closer, without its layout: the space after its tag (`<parameter=path> a.py`) and the line
    breaks before the next tag or the end of the text."""
    return trim_value(raw.lstrip(" \t")).rstrip("\r\n")


@functools.lru_cache(maxsize=16)
def _value_end(end_wrapper: str, unclosed: bool) -> re.Pattern[str]:
    """`</parameter>`, or a tag at the start of a line: the next parameter's, and where the model writes no closers,
    the function's or the wrapper's end (group 1)."""
    ends = rf"|\n[ \t]*+({re.escape(_END_FUNCTION)}|{re.escape(end_wrapper)})" if unclosed else ""
    return re.compile(rf"{_END_PARAMETER}|\n[ \t]*+<parameter={ends}")


def _held_from(text: str, position: int, ends: tuple[str, ...]) -> int:
    """Where what may still become a value's end begins at the end of the text (`</param`, `\n<parameter=pa`)."""
    hold = len(text) - partial_suffix(text[max(position, len(text) - len(_END_PARAMETER)) :], _END_PARAMETER)
    line = text.rfind("\n", max(position, len(text) - _VALUE_END_REACH))
    if line >= 0:
        rest = text[line + 1 :].lstrip(" \t")
        if any(end.startswith(rest) for end in ends) or (
                rest.startswith(_PARAMETER) and ">" not in rest and "<" not in rest[1:]):
            hold = min(hold, line)
    return hold
