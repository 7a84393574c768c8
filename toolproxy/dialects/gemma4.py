"""Gemma 4 calls: `<|tool_call>call:NAME{key:<|"|>text<|"|>,count:5,on:true}<tool_call|>`.

Arguments are Gemma's own notation, not JSON (`gemma4_values.py`): keys are bare, strings sit between `<|"|>`
tokens, numbers, `true`, `false` and `null` are bare, and values nest in `{...}` and `[...]`, as in llama.cpp's
Gemma 4 grammar. Each call has its own opener; some servers end one with `<turn|>` instead of `<tool_call|>`, or
cut the closer as a stop token. Anything else inside makes the block text.

As it is really written, besides: plain or single quotes around strings, `call:NAME(key: value)` and
`call:NAME(key=value)` (vllm-project/vllm#53642), a namespaced name (`call:google:mcp:srv:create-pdf-file`,
jundot/omlx#1830) for a declared tool it ends with, and positional arguments, one per `BEGIN_ARG:` ... `END_ARG`
block after `call:NAME:` (ollama/ollama#18275), given to the declared tool's properties in their order.

Servers that strip special tokens leave `call:NAME{key:value,...}` with bare strings (Gitlawb/openclaude#380). That
form counts only for a declared tool whose schema names every key; a bare value runs to the next separator and is
a number, `true`, `false` or `null` when it reads as one, else text.

FunctionGemma writes the same calls between `<start_function_call>` and `<end_function_call>` with `<escape>`
around strings: one instance of this family with those markers (`function_gemma`). After either opener `call:` may
be left out before a declared tool's name, and FunctionGemma's closer written as a closing tag
(`<start_function_call>get_financial_overview{}</end_function_call>`, Gemma 4 E2B, DenisovAV/flutter_gemma#238).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import Markup, ToolIndex, declared_name, trim_value
from toolproxy.dialects.cursor import SPACE, Cursor, Read, ahead, either, literal, marker, peek, run, space, word
from toolproxy.dialects.gemma4_values import (
    BRACES,
    INVALID,
    PARENS,
    QUOTE,
    Notation,
    mapping,
    raw_until,
    render_value,
)
from toolproxy.dialects.token_block import Found, Script, TokenBlockScanner

__all__ = ["CLOSERS", "OPENER", "QUOTE", "Gemma4Dialect", "render_value"]

OPENER = "<|tool_call>"
CLOSERS = ("<tool_call|>", "<turn|>")
_CALL = "call:"
# After the opener, `call:` as written, or its colon alone (`<|tool_call>:get_weather{...}`, the bare opener vLLM's
# Gemma 4 parser reads, tests/tool_parsers/test_gemma4_tool_parser.py); the stripped form still needs `call:`.
_CALLED = (_CALL, ":")
_MISSPELT_CALL = ("call-", "call_")  # Gemma 4 31B on vLLM (stevelittlefish/llm_proxy, production request #3077)
_NAME = re.compile(r"[\w.\-:]*")
_BEGIN_ARG, _END_ARG = "BEGIN_ARG:", "END_ARG"
_WORD_CHAR = re.compile(r"[\w.\-:>]")  # `>`: right after a refused <|tool_call> is not the stripped form
_LIMIT = 128
# What follows the name: braces, parentheses, or (the name's own `:` read by a name run) positional blocks.
_ARGUMENTS = either(literal("{"), literal("("), ahead(r":?", SPACE, literal(_BEGIN_ARG)))
# After the opener: a name run (`call:` and a name, `:` and a name, or a name alone), then the arguments; whether
# the name means a declared tool is judged once it is read.
_FOLLOW = ahead(SPACE, run(r"[\w.\-:]", _LIMIT), SPACE, _ARGUMENTS)


@dataclass(frozen=True, slots=True)
class Gemma4Dialect:
    """The family's members differ in their markers: the opener, the closers, the string quote they write."""

    name: str = "gemma4"
    opener: str = OPENER
    closers: tuple[str, ...] = CLOSERS
    quote: str = QUOTE
    stripped: bool = True  # whether `call:NAME{...}` with the special tokens stripped counts (for a declared tool)

    holds_only_markers = True

    @property
    def markup(self) -> Markup:
        return Markup((self.opener,), self.closers[:1])

    def markers(self, tools: ToolIndex) -> tuple[str, ...]:
        return (self.opener, _CALL) if self.stripped else (self.opener,)

    def scanner(self, tools: ToolIndex) -> Gemma4Scanner:
        return Gemma4Scanner(self, tools)

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        return f"{self.opener}{_CALL}{name}{render_value(dict(arguments), self.quote)}{self.closers[0]}"


class Gemma4Scanner(TokenBlockScanner):
    def __init__(self, dialect: Gemma4Dialect, tools: ToolIndex) -> None:
        names = tuple(sorted((name for name in tools if _NAME.fullmatch(name) and name), key=len, reverse=True))
        follow = {dialect.opener: _FOLLOW}
        if dialect.stripped:
            follow[_CALL] = _bare_ahead(names)
        super().__init__(dialect.name, tuple(follow), follow)
        self._closers = dialect.closers
        self._tools = tools
        self._last = ""  # the last character that went out, to tell `call:` from `recall:`

    def _find_opener(self) -> tuple[int, str] | None:
        """As the base, but a bare `call:` must begin a word."""
        cursor = self._cursor
        start = cursor.position
        while (found := self._search(start)) is not None:
            before = cursor.text[found.start() - 1] if found.start() > cursor.position else self._last
            if found.group() != _CALL or not _WORD_CHAR.match(before):
                return found.start(), found.group()
            start = found.start() + 1
        return None

    def _passed(self, text: str) -> None:
        self._last = text[-1:] or self._last

    def _read(self, opener: str) -> Script:
        cursor = self._cursor
        bare = opener == _CALL
        called = True  # `call:` was written (the bare form's opener is `call:` itself)
        if not bare:
            yield from space(cursor)
            called = (yield from marker(cursor, *_CALLED)) is not None
        written = yield from word(cursor, _NAME, _LIMIT)
        name = None if written is None else self._named(written.rstrip(":"), called)
        if written is None or name is None:
            return None
        if written.endswith(":"):
            arguments = yield from _positional(cursor, self._tools.get(name))
        else:
            arguments = yield from _braced(cursor, bare)
        if arguments is INVALID or arguments is None or (bare and not _fits(arguments, self._tools.get(name))):
            return None
        end = cursor.offset()
        yield from space(cursor)
        if (yield from marker(cursor, *self._closers)) is not None:
            end = cursor.offset()
        return [Found(name, arguments, end)]

    def _named(self, written: str, called: bool) -> str | None:
        """The declared tool the name means (`base.declared_name`: `google:mcp:srv:create-pdf-file` for
        `create-pdf-file`), also after `call:` misspelt as `call-` (`call-execute-code`); else after `call:` the
        name as written (extraction refuses it), and without it none."""
        declared = declared_name(written, self._tools)
        if declared is None and written.startswith(_MISSPELT_CALL):  # each as long as `call:`
            declared = declared_name(written[len(_CALL) :], self._tools)
        return declared if declared is not None or not called else written


def _braced(cursor: Cursor, bare: bool) -> Read[Any]:
    """`{key:value,...}` or `(key: value, ...)` / `(key=value, ...)`."""
    yield from space(cursor)
    opening = yield from marker(cursor, "{", "(")
    if opening is None:
        return INVALID
    notation = PARENS if opening == "(" else BRACES
    return (yield from mapping(cursor, 1, Notation(bare, notation.closer, notation.assign)))


def _positional(cursor: Cursor, schema: Any) -> Read[Any]:
    """`BEGIN_ARG:` value `END_ARG`, repeated, given to the declared tool's properties in their order."""
    values: list[str] = []
    while True:
        yield from space(cursor)
        if (yield from peek(cursor)) != _BEGIN_ARG[0] or (yield from marker(cursor, _BEGIN_ARG)) is None:
            break
        raw = yield from raw_until(cursor, _END_ARG)
        if raw is INVALID:
            return INVALID
        values.append(trim_value(raw))
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not values or not isinstance(properties, Mapping) or len(values) > len(properties):
        return INVALID
    return dict(zip(properties, values, strict=False))


def _declared(names: tuple[str, ...]) -> str:
    return either(rf"(?:{'|'.join(map(re.escape, names))})(?![\w.\-])", rf"[\w.\-]{{1,{_LIMIT}}}+\Z")


def _bare_ahead(names: tuple[str, ...]) -> str:
    """A declared name and its arguments after a bare `call:` (never, without a declared tool)."""
    if not names:
        return "(?!)"
    return ahead(_declared(names), SPACE, _ARGUMENTS)


def _fits(arguments: Any, schema: Any) -> bool:
    """Whether the bare form's keys are all among the declared tool's properties (its one anchor against prose)."""
    if not isinstance(schema, Mapping):
        return False
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and isinstance(arguments, dict) and set(arguments) <= set(properties)
