"""Gemma 4's argument notation as models really write it, read as it streams (the steps of `cursor.py`).

The template's form: bare keys, strings between `<|"|>` tokens, bare numbers and `true`/`false`/`null`, nesting in
`{...}` and `[...]`. What models write besides (each seen in public reports): plain double quotes and single
quotes around strings (hermes-agent#7449, jundot/omlx#1830), Python's `key=value` and `True`/`None` inside
`call:NAME(...)` (vllm-project/vllm#53642, jundot/omlx#1886), and, with the special tokens stripped, strings with
no quotes at all (Gitlawb/openclaude#380), which then run to the next separator.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import partial_suffix
from toolproxy.dialects.cursor import Cursor, Read, marker, peek, space, word

QUOTE = '<|"|>'
QUOTES = (QUOTE, "<escape>")  # the family's string tokens: Gemma 4's, and FunctionGemma's
INVALID = object()
_KEY = re.compile(r"[^:={}\[\]()\s,<>\"']*")
_NUMBER_RUN = re.compile(r"[\w.+\-]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None, "True": True, "False": False,
                              "None": None}
_BARE_LIMIT = 4096
_LIMIT = 128
_DEPTH_LIMIT = 32
_QUOTED_LIMIT = 1 << 20
# The rest of a double-quoted string up to its closing quote (or a backslash that ends the text), escapes included.
_DOUBLE_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_SINGLE_END = re.compile(r"'(?=\s{0,16}+[,})\]])")  # a single quote ends its string only before a separator


@dataclass(frozen=True, slots=True)
class Notation:
    bare: bool  # the stripped form: a value that is not markup is text up to the next separator
    closer: str = "}"  # what ends the outer arguments: `}`, or `)` for `call:NAME(...)`
    assign: tuple[str, ...] = (":",)  # between a key and its value; `(...)` takes `=` too

    @property
    def bare_value(self) -> re.Pattern[str]:
        return _BARE_PAREN if self.closer == ")" else _BARE_BRACE


_BARE_BRACE = re.compile(r"[^,{}\[\]\n]*")
_BARE_PAREN = re.compile(r"[^,{}\[\]()\n]*")
BRACES, PARENS = Notation(False), Notation(False, ")", (":", "="))


def value(cursor: Cursor, depth: int, notation: Notation) -> Read[Any]:
    """One value, or INVALID."""
    first = yield from peek(cursor)
    if first == "<":
        return (yield from token_string(cursor))
    if first in ("\"", "'"):
        return (yield from quoted(cursor, first))
    if first in ("{", "["):
        if depth >= _DEPTH_LIMIT:
            return INVALID
        cursor.position += 1
        inner = Notation(notation.bare, "}" if first == "{" else "]", (":",))
        return (yield from (mapping(cursor, depth + 1, inner) if first == "{" else sequence(cursor, depth + 1, inner)))
    if notation.bare:
        text = yield from word(cursor, notation.bare_value, _BARE_LIMIT)
        found = _CONSTANTS.get(text, _number(text)) if text is not None else INVALID
        return text.strip() if found is INVALID and text is not None and text.strip() else found
    if first and (first.isdigit() or first == "-"):
        return _number((yield from word(cursor, _NUMBER_RUN, 64)))
    constant = yield from word(cursor, re.compile(r"\w*"), 8)
    return _CONSTANTS.get(constant, INVALID) if constant is not None else INVALID


def mapping(cursor: Cursor, depth: int, notation: Notation) -> Read[Any]:
    """`key:value, ...` up to the notation's closer (its opener read already); a key may be quoted too."""
    result: dict[str, Any] = {}
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, notation.closer)) is not None:
            return result
        first = yield from peek(cursor)
        if first == "<":
            key = yield from token_string(cursor)
        elif first in ("\"", "'"):
            key = yield from quoted(cursor, first)
        else:
            key = yield from word(cursor, _KEY, _LIMIT)
        yield from space(cursor)
        if not isinstance(key, str) or not key or key in result:
            return INVALID
        if (yield from marker(cursor, *notation.assign)) is None:
            return INVALID
        yield from space(cursor)
        item = yield from value(cursor, depth, notation)
        if item is INVALID:
            return INVALID
        result[key] = item
        yield from space(cursor)
        separator = yield from marker(cursor, ",", notation.closer)
        if separator != ",":
            return result if separator == notation.closer else INVALID


def sequence(cursor: Cursor, depth: int, notation: Notation) -> Read[Any]:
    items: list[Any] = []
    while True:
        yield from space(cursor)
        if (yield from marker(cursor, "]")) is not None:
            return items
        item = yield from value(cursor, depth, notation)
        if item is INVALID:
            return INVALID
        items.append(item)
        yield from space(cursor)
        separator = yield from marker(cursor, ",", "]")
        if separator != ",":
            return items if separator == "]" else INVALID


def token_string(cursor: Cursor) -> Read[Any]:
    """`<|"|>text<|"|>` (or `<escape>text<escape>`), read as it streams: only a possible beginning of the closing
    token is held back."""
    quote = yield from marker(cursor, *QUOTES)
    if quote is None:
        return INVALID
    return (yield from raw_until(cursor, quote))


def raw_until(cursor: Cursor, stop: str) -> Read[Any]:
    """The text up to `stop`, which is read too; INVALID when the text ends first. Each piece is searched once."""
    pieces: list[str] = []
    while True:
        index = cursor.text.find(stop, cursor.position)
        if index >= 0:
            pieces.append(cursor.text[cursor.position : index])
            cursor.position = index + len(stop)
            return "".join(pieces)
        tail = cursor.text[max(cursor.position, len(cursor.text) - len(stop)) :]
        end = len(cursor.text) - partial_suffix(tail, stop)
        pieces.append(cursor.text[cursor.position : end])
        cursor.position = end
        if cursor.ended:
            return INVALID
        yield


def quoted(cursor: Cursor, quote: str) -> Read[Any]:
    """A string between double quotes (JSON escapes) or single quotes (raw: it ends at a quote before a separator,
    so an apostrophe inside stays text)."""
    start = cursor.position
    pieces: list[str] = []
    cursor.position += 1
    while True:
        end = _quote_end(cursor.text, cursor.position, quote)
        if end >= 0:
            pieces.append(cursor.text[cursor.position : end])
            cursor.position = end + 1
            return _unquoted("".join(pieces), quote)
        if cursor.ended or cursor.position - start > _QUOTED_LIMIT:
            return INVALID
        keep = _held(cursor.text, cursor.position, quote)
        pieces.append(cursor.text[cursor.position : keep])
        cursor.position = keep
        yield


def _quote_end(text: str, position: int, quote: str) -> int:
    if quote == "'":
        found = _SINGLE_END.search(text, position)
        return found.start() if found else -1
    rest = _DOUBLE_REST.match(text, position)  # always matches: escapes included, one way, linear
    end = rest.end() if rest else position
    return end if end < len(text) and text[end] == '"' else -1


def _held(text: str, position: int, quote: str) -> int:
    """Where the undecided end of a string still arriving begins: a quote, or an escape cut in half, at the end."""
    if quote == "'":
        index = text.rfind("'", position)
        return index if index >= 0 and not text[index + 1 :].strip() else len(text)
    rest = _DOUBLE_REST.match(text, position)
    return rest.end() if rest else position


def _unquoted(body: str, quote: str) -> str:
    if quote == "'":
        return body
    try:
        decoded = json.loads(f'"{body}"')
    except ValueError:
        return body
    return decoded if isinstance(decoded, str) else body


def _number(run: str | None) -> Any:
    if run is None or not _NUMBER.fullmatch(run):
        return INVALID
    if "." not in run and "e" not in run.lower():
        return int(run)  # at most 64 digits: no quadratic conversion
    number = float(run)
    return number if math.isfinite(number) else INVALID


def render_value(value: Any, quote: str = QUOTE) -> str:
    if isinstance(value, str):
        return f"{quote}{value}{quote}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{render_value(item, quote)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render_value(item, quote) for item in value) + "]"
    return json.dumps(value)
