"""Kimi-K2's special-token calls: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
<|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>`.

The format vLLM's `kimi_k2` parser reads, with the singular `<|tool_call_section_begin|>` spelling some
checkpoints write, and a lone `<|tool_call_begin|>...<|tool_call_end|>` when the section markers are missing.
The call id is `functions.NAME:INDEX`; the arguments are JSON, whose end a bracket tracker finds, so a marker
inside a string argument never ends a call. They go out raw: `extraction.py` decodes and judges them.

K2.5 to K2.7 also write the arguments after the id without their token, in a ```json fence, or as a Python-style
call, `functions.NAME:0({...})`, and the whole call as one JSON object right after `<|tool_call_begin|>`
(`{"name": ..., "arguments": ...}`, NousResearch/hermes-agent#29735).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import Enum, auto
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, call_from_json, decode_json
from toolproxy.dialects.block import BlockScanner, Outcome, Step, match_word, read_word, skip_space
from toolproxy.dialects.cursor import SPACE, ahead, either, literal, run
from toolproxy.dialects.json_span import JsonSpan, is_decoded

_SECTION_BEGIN = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_SECTION_END = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
_CALL_BEGIN, _CALL_END = "<|tool_call_begin|>", "<|tool_call_end|>"
_ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
_ID = re.compile(r"[^\s<>{}()`]{1,256}")
_FENCE, _FENCE_JSON, _OPEN_PAREN, _CLOSE_PAREN = "```", "```json", "(", ")"
# Between the id and the JSON: the argument token, a fence, or a parenthesis; nothing is as good as these.
_BEFORE_JSON = (_ARGUMENT_BEGIN, _FENCE_JSON, _FENCE, _OPEN_PAREN)
# An opener counts only when a whole call can follow: an id and what leads to a JSON object, or the object itself.
# Other `<|tool_call...` tokens (Granite's `<|tool_call|>`) and floods of section markers are skipped in C.
_CALL_AHEAD = either(ahead(SPACE, run(r"[^\s<>{}()`]", 256), SPACE, literal(*_BEFORE_JSON)), ahead(SPACE, literal("{")))
_HINT = re.compile(rf"<\|tool_call(?:s?_section_begin\|>(?={ahead(SPACE, literal(_CALL_BEGIN), _CALL_AHEAD)})"
                   rf"|_begin\|>(?={_CALL_AHEAD}))")


class KimiDialect:
    name = "kimi_k2"

    holds_only_markers = True

    markup = Markup((*_SECTION_BEGIN, _CALL_BEGIN), (_ARGUMENT_BEGIN, _CALL_END, *_SECTION_END),
                    tuple(zip(_SECTION_BEGIN, _SECTION_END, strict=True)))

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (*_SECTION_BEGIN, _CALL_BEGIN)

    def scanner(self, tools: ToolIndex) -> BlockScanner:
        return BlockScanner(self.name, _HINT, len(_SECTION_BEGIN[0]), KimiReader)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """One call as Kimi-K2's chat template writes it."""
        body = json.dumps(dict(arguments), ensure_ascii=False)
        return (f"{_SECTION_BEGIN[0]}{_CALL_BEGIN}functions.{name}:0{_ARGUMENT_BEGIN}{body}{_CALL_END}"
                f"{_SECTION_END[0]}")


class _State(Enum):
    OPENING = auto()
    SECTION = auto()  # after the section's begin: a call, or the section's end
    ID = auto()
    ARGUMENT_BEGIN = auto()
    FENCE_LANGUAGE = auto()  # after a fence: `json`, or the JSON itself
    JSON = auto()
    JSON_CLOSER = auto()  # the fence or parenthesis the arguments opened with
    CALL_END = auto()
    AFTER = auto()  # after a call inside the section: another call or the section's end


class KimiReader:
    def __init__(self) -> None:
        self._state = _State.OPENING
        self._in_section = False
        self._calls: list[tuple[str, str]] = []
        self._span: JsonSpan | None = None
        self._json: list[str] = []
        self._closer = ""  # what must follow the arguments: a fence's end or `)`
        self._whole_object = False  # the call is one JSON object, name and arguments

    def calls(self) -> list[tuple[str, Any]]:
        return list(self._calls)

    def is_whole(self) -> bool:
        return self._state is _State.AFTER

    def step(self, text: str, position: int) -> Step:
        if self._state is _State.OPENING:
            return self._open(text, position)
        if self._span is not None:
            return self._read_json(text, position)
        start = skip_space(text, position)
        if start == len(text):
            return Step(Outcome.MORE, start)
        if self._state is _State.ID:
            return self._read_id(text, start)
        if self._state is _State.FENCE_LANGUAGE:
            word = match_word(text, start, ("json",))
            if word is Outcome.MORE:
                return Step(word, start)
            self._state = _State.JSON
            if word == 0:
                return Step(Outcome.TOKEN, start + len("json"))
        if self._state is _State.JSON:
            if text[start] != "{":
                return Step(Outcome.BAD, start)
            self._span, self._json = JsonSpan(), []
            return self._read_json(text, start)
        if self._state is _State.SECTION or self._state is _State.AFTER:
            return self._between_calls(text, start)
        if self._state is _State.ARGUMENT_BEGIN:
            return self._before_json(text, start)
        expected = self._closer if self._state is _State.JSON_CLOSER else _CALL_END
        word = match_word(text, start, (expected,))
        if isinstance(word, Outcome):
            return Step(word, start)
        if self._state is _State.JSON_CLOSER:
            self._state = _State.CALL_END
            return Step(Outcome.TOKEN, start + len(expected))
        self._state = _State.AFTER
        return Step(Outcome.CALL if self._in_section else Outcome.DONE, start + len(expected))

    def _before_json(self, text: str, start: int) -> Step:
        word = match_word(text, start, (_ARGUMENT_BEGIN, _FENCE, _OPEN_PAREN))
        if isinstance(word, Outcome):
            return Step(word, start)
        self._closer = ("", _FENCE, _CLOSE_PAREN)[word]
        self._state = _State.FENCE_LANGUAGE if word == 1 else _State.JSON
        return Step(Outcome.TOKEN, start + len((_ARGUMENT_BEGIN, _FENCE, _OPEN_PAREN)[word]))

    def _open(self, text: str, position: int) -> Step:
        word = match_word(text, position, (*_SECTION_BEGIN, _CALL_BEGIN))
        if isinstance(word, Outcome):
            return Step(word, position)
        self._in_section = word < len(_SECTION_BEGIN)
        self._state = _State.SECTION if self._in_section else _State.ID
        return Step(Outcome.TOKEN, position + len((*_SECTION_BEGIN, _CALL_BEGIN)[word]))

    def _between_calls(self, text: str, start: int) -> Step:
        word = match_word(text, start, (_CALL_BEGIN, *_SECTION_END))
        if word == 0:
            self._state = _State.ID
            return Step(Outcome.TOKEN, start + len(_CALL_BEGIN))
        if isinstance(word, int):
            return Step(Outcome.DONE, start + len(_SECTION_END[word - 1]))
        if word is Outcome.MORE or self._state is _State.SECTION:
            return Step(word, start)
        # Anything else after a whole call: the section's end was dropped (a stop string), the calls stand.
        return Step(Outcome.DONE, start)

    def _read_id(self, text: str, start: int) -> Step:
        if text[start] == "{":  # the whole call as one JSON object
            self._calls.append(("", ""))
            self._whole_object, self._state = True, _State.JSON
            self._span, self._json = JsonSpan(), []
            return self._read_json(text, start)
        word = read_word(text, start, _ID)
        if isinstance(word, Outcome):
            return Step(word, start)
        name = _name_of(word[0])
        if not name:
            return Step(Outcome.BAD, start)
        self._calls.append((name, ""))
        self._state = _State.ARGUMENT_BEGIN
        return Step(Outcome.TOKEN, word[1])

    def _read_json(self, text: str, position: int) -> Step:
        assert self._span is not None
        end = self._span.feed(text, position)
        stop = len(text) if end is None else end
        self._json.append(text[position:stop])
        if end is None:
            return Step(Outcome.MORE, stop)
        self._calls[-1] = (self._calls[-1][0], "".join(self._json))
        if self._whole_object:
            shape = _whole_call(self._calls[-1][1], self._span.value)
            if shape is None:
                return Step(Outcome.BAD, position)
            self._calls[-1], self._whole_object = shape, False
        self._span = None
        self._state = _State.JSON_CLOSER if self._closer else _State.CALL_END
        return Step(Outcome.TOKEN, stop)


def _whole_call(text: str, decoded: Any) -> tuple[str, str] | None:
    """(name, arguments as JSON text) of a call written as one object; None when it is not one."""
    try:
        shape = call_from_json(decoded if is_decoded(decoded) else decode_json(text))
    except ValueError:
        return None
    if shape is None:
        return None
    name, arguments = shape
    return name, arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})


def _name_of(call_id: str) -> str:
    """`functions.get_weather:0` -> `get_weather`; an id without the prefix or the index is taken as it is."""
    name, colon, index = call_id.rpartition(":")
    if not colon or not index.isdigit():
        name = call_id
    return name.removeprefix("functions.")
