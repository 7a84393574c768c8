"""Python-style calls as Llama 3.2, 3.3 and 4 write them: `[get_weather(city="Paris"), get_time()]`.

Only a list that starts a line (or the reply) counts, and only when every name in it is one of the request's tools:
a Python list in an answer stays text. Calls without the list's brackets count only when the answer is nothing but
them, one a line (Granite 4 and 3.3 on vLLM, vllm-project/vllm#43104: `get_weather(location="San Francisco")`):
a call in prose or among lines of code stays text.

Arguments are keywords whose values are Python literals (strings in either quote style, numbers, True/False/None,
lists, tuples, dicts), read by a hand-written tokenizer in one pass: no `eval`, no `ast`, and no regular expression
with nested repetition (sglang#31912: a Pythonic detector that went exponential on 150 characters). Nesting is
bounded, and strings are read as they stream in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex
from toolproxy.dialects.cursor import (
    SPACE,
    SPACE_REACH,
    Cursor,
    Read,
    ahead,
    either,
    literal,
    marker,
    peek,
    space,
    word,
)
from toolproxy.dialects.pythonic_values import IDENTIFIER, NAME_LIMIT, keywords
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

_LINE_SPACE = re.compile(r"[ \t]*")
_SPACE = re.compile(r"\s*")
# JSON's spellings too: models trained on JSON calls write them inside Python calls.
# What a call's first argument needs, for the opener's lookahead: a key, `=`, and how a value begins (brackets and
# white space, then a quote, a number, a closer or a constant; an identifier at the end of the text may become one).
# A longer run of brackets and white space lets anything follow, as `ahead` does for white space.
IDENTIFIER_AHEAD = rf"[A-Za-z_]\w{{0,{NAME_LIMIT - 1}}}+"
_KEY_AHEAD = rf"[A-Za-z_]\w{{0,{NAME_LIMIT - 1}}}+"
_VALUE_AHEAD = (rf"(?:[\s\[({{]{{{SPACE_REACH}}}|[\s\[({{]{{0,{SPACE_REACH - 1}}}+(?:\Z|['\"\d+\-.\])}}]|"
                rf"(?:True|False|None|true|false|null)(?!\w)|[A-Za-z_]\w{{0,{NAME_LIMIT - 1}}}+\Z))")


class PythonicDialect:
    name = "pythonic"

    # A bare call's name may begin the answer: its scanner holds what may become one, not only a marker's start.
    holds_only_markers = False

    markup = Markup()

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return ("[", *(name for name in tools if IDENTIFIER.fullmatch(name)))  # a bare call holds its name

    def may_hold_call(self, text: str) -> bool:
        """A tool's name is a marker (a bare call begins with it), but it is often in prose too ("I will read
        it."): every call, listed or bare, also holds its parenthesis."""
        return "(" in text

    def scanner(self, tools: ToolIndex) -> PythonicScanner:
        return PythonicScanner(tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"[{render_call(name, arguments)}]"


class PythonicScanner(TokenBlockScanner):
    def __init__(self, tools: ToolIndex) -> None:
        super().__init__(PythonicDialect.name, ("[",))
        self._tools = tools
        self._line_start = True  # nothing but spaces and tabs since the last line break (or the start)
        self._answer_start = True  # nothing but white space so far: where bare calls may begin
        # A `[` counts only when a declared name, `(` and a first argument can follow: a Python list in an answer,
        # or a flood of `[tool(a=` lines, is skipped in C.
        self._bracket, self._line_bracket, self._bare = _openers(
            tuple(name for name in tools if IDENTIFIER.fullmatch(name)))

    def _find_opener(self) -> tuple[int, str] | None:
        cursor = self._cursor
        if self._line_start:
            lead = (_SPACE if self._answer_start else _LINE_SPACE).match(cursor.text, cursor.position)
            assert lead is not None
            if self._bracket.match(cursor.text, lead.end()):
                return lead.end(), "["
            if self._answer_start and self._bare.match(cursor.text, lead.end()):
                return lead.end(), ""
        found = self._line_bracket.search(cursor.text, cursor.position)
        return (found.end() - 1, "[") if found is not None else None

    def _resume_after(self, opener: str) -> int:
        return len(opener) or 1  # bare calls refused: read on after the name's first character

    def _hold(self) -> int:
        return 0  # the opener is one character; where a line starts is tracked in `_passed`

    def _passed(self, text: str) -> None:
        self._answer_start = self._answer_start and not text.strip()
        newline = text.rfind("\n")
        if newline >= 0 or self._line_start:
            blank = _LINE_SPACE.match(text, newline + 1)
            self._line_start = blank is not None and blank.end() == len(text)

    def _read(self, opener: str) -> Script:
        if not opener:
            return (yield from read_bare_calls(self._cursor, self._tools))
        return (yield from read_list(self._cursor, self._tools))


def read_bare_calls(cursor: Cursor, tools: ToolIndex) -> Read[list[Found] | None]:
    """Calls one a line, nothing else, to the end of the text (the answer's start is read already)."""
    found: list[Found] = []
    while True:
        call = yield from read_call(cursor, tools)
        if call is None:
            return None
        found.append(Found(*call, cursor.offset()))
        yield from line_space(cursor)
        if (yield from peek(cursor)) not in ("", "\n"):
            return None
        yield from space(cursor)
        if (yield from peek(cursor)) == "":
            return found


def read_list(cursor: Cursor, tools: ToolIndex | None) -> Read[list[Found] | None]:
    """`call, ...]` after the list's `[`; with `tools`, a list with a call to anything else is refused whole."""
    found: list[Found] = []
    while True:
        yield from space(cursor)
        call = yield from read_call(cursor, tools)
        if call is None:
            return None
        found.append(Found(*call, cursor.offset()))
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "]")
        if separator is None:
            return None
        if separator == ",":
            yield from space(cursor)
            separator = yield from marker(cursor, "]")  # a trailing comma
        if separator == "]":
            found[-1] = replace(found[-1], end=cursor.offset())
            return found


def read_call(cursor: Cursor, tools: ToolIndex | None) -> Read[tuple[str, dict[str, Any]] | None]:
    """`name(key=value, ...)`: the name and the arguments, or None."""
    name = yield from word(cursor, IDENTIFIER, NAME_LIMIT)
    if name is None or (tools is not None and name not in tools):
        return None  # a list with anything but calls to this request's tools is text, whole
    yield from space(cursor)
    if (yield from marker(cursor, "(")) is None:
        return None
    arguments = yield from keywords(cursor)
    return None if arguments is None else (name, arguments)


def line_space(cursor: Cursor) -> Read[None]:
    """Read spaces and tabs up to the next other character, or the end of the text."""
    while True:
        found = _LINE_SPACE.match(cursor.text, cursor.position)
        assert found is not None
        cursor.position = found.end()
        if cursor.position < len(cursor.text) or cursor.ended:
            return
        yield


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """`repr` writes Python literals; argument names must be identifiers."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


@functools.lru_cache(maxsize=64)  # a scanner is made per reply and after every call; tool sets repeat
def _openers(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """`[` followed by what `_read` needs; the same at the start of a line, where the run of spaces before `[`
    ends at the next character; and a bare call's beginning."""
    follow = call_ahead(names)
    return (re.compile(rf"\[(?={follow})"), re.compile(rf"\n[ \t]*+\[(?={follow})"),
            re.compile(rf"(?={call_ahead(names, bare=True)})"))


def call_ahead(names: tuple[str, ...], bare: bool = False) -> str:
    """What `_read` needs after `[` before its first value, or at a bare call's name (never, without a tool that
    can be called)."""
    callable_names = sorted((name for name in names if len(name) <= NAME_LIMIT), key=len, reverse=True)
    if not callable_names:
        return "(?!)"
    whole = rf"(?:{'|'.join(map(re.escape, callable_names))})(?!\w)"
    if bare:  # only the beginning of a declared name waits: an answer's first word is held no longer than that
        arriving = "|".join(_beginnings(name) for name in callable_names)
        return rf"(?:{whole}{ARGUMENTS_AHEAD}|(?:{arriving})\Z)"
    name = either(whole, rf"[A-Za-z_]\w{{0,{NAME_LIMIT - 1}}}+\Z")
    return ahead(SPACE, name, ARGUMENTS_AHEAD)


def _beginnings(name: str) -> str:
    """A pattern for every non-empty beginning of `name`, one way each: `r(?:e(?:a(?:d)?)?)?`."""
    pattern = ""
    for character in reversed(name[1:]):
        pattern = f"(?:{re.escape(character)}{pattern})?"
    return re.escape(name[0]) + pattern


# What `read_call` needs after the name: `(`, then `)` or a first argument's key, `=` and how its value begins.
ARGUMENTS_AHEAD = ahead(SPACE, literal("("), SPACE,
                        either(literal(")"), ahead(_KEY_AHEAD, SPACE, literal("="), SPACE, _VALUE_AHEAD)))
