"""Arguments written as an object that is almost JSON, in the ways models write objects when no grammar holds them:
keys without quotes, `=` for `:`, strings in single quotes or between quote tokens (Gemma 4's `<|"|>`) or quote
tags (FunctionGemma's `<escape>`), Python's literals, bare words for strings, parentheses for braces
(`call:search(query: "news")`).

Read by one hand-written pass that writes the JSON the model meant, then `json.loads` has the last word; what it
cannot read unambiguously (an unclosed string, a bracket that does not match, a key with no value) is refused. The
schema decides afterwards whether the object is the tool's arguments at all.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolproxy.meaning.json_strings import raw_string

_REACH = 65536  # the longest object read
_MAX_DEPTH = 32
_CLOSING = {"{": "}", "(": ")", "[": "]"}
# A string: in double or single quotes (backslash escapes), or between a pair of quote tokens (`<|"|>`, `<|'|>`)
# or typographic quotes, which a runtime that "smartens" text puts where the model wrote straight ones (Gemma 4 on
# LiteRT-web writes `<|\u201c|>x<|\u201d|>` and `path: \u201cx\u201d`): no escapes inside these.
_QUOTE_PAIRS = (('<|"|>', '<|"|>'), ("<|'|>", "<|'|>"), ("<|\u201c|>", "<|\u201d|>"), ("\u201c", "\u201d"))
_QUOTES = (*(opener for opener, _ in _QUOTE_PAIRS), '"', "'")
# A tag whose word says quote (FunctionGemma's `<escape>`): a string between two of them. Only such words, so
# that a value of HTML is not read as one, and a value whose tag never comes again costs one search.
_QUOTE_TAG = re.compile(r"<(?i:escape|esc|quote|q|str|string)>")
_KEY = re.compile(r"""[A-Za-z_][\w-]{0,63}[ \t]*[:=](?![=])|"(?:[^"\\\n]|\\.){0,64}"[ \t]*:|'[^'\n]{1,64}'[ \t]*:""")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,30})(?:\.\d{1,30})?(?:[eE][-+]?\d{1,4})?(?=[\s,})\]]|\Z)")
_LITERALS = {"true": "true", "false": "false", "null": "null", "True": "true", "False": "false", "None": "null"}
_LITERAL = re.compile(r"(?:true|false|null|True|False|None)(?=[\s,})\]]|\Z)")
_BARE = re.compile(r"[^,{}()\[\]\n\"']{1,4096}")
_SPACE = re.compile(r"[ \t\r\n]*")


class _Refused(ValueError):
    pass


def loose_object(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    """The object at `text[start]` (`{` or `(`) and where it ends, or None."""
    reader = _Reader(text, min(len(text), start + _REACH))
    try:
        written = reader.value(start, 0, object_only=True)
        value = json.loads(written)
    except (_Refused, ValueError, RecursionError):
        return None
    return (value, reader.position) if isinstance(value, dict) else None


class _Reader:
    def __init__(self, text: str, stop: int) -> None:
        self.text, self.stop, self.position = text, stop, 0

    def value(self, position: int, depth: int, object_only: bool = False, bare: bool = False) -> str:
        """`bare`: a word without quotes may be a string (after `key:`; after Python's `key=` it names a variable)."""
        self.position = _SPACE.match(self.text, position, self.stop).end()  # type: ignore[union-attr]
        char = self.text[self.position : self.position + 1]
        if char in ("{", "("):
            return self._members(depth)
        if object_only:
            raise _Refused
        if char == "[":
            return self._items(depth)
        for pattern in (_NUMBER, _LITERAL):
            found = pattern.match(self.text, self.position, self.stop)
            if found is not None:
                self.position = found.end()
                return _LITERALS.get(found.group(), found.group())
        return json.dumps(self._string(bare))

    def _members(self, depth: int) -> str:
        closer = self._open(depth)
        members: list[str] = []
        seen: set[str] = set()
        while not self._close(closer):
            key = _KEY.match(self.text, self.position, self.stop)
            if key is None:
                raise _Refused
            name = key.group().rstrip(" \t:=")
            name = json.loads(name) if name[0] == '"' else name.strip("'")
            if name in seen:
                raise _Refused  # a key twice: which value is meant?
            seen.add(name)
            bare = key.group().rstrip(" \t").endswith(":")
            members.append(json.dumps(name) + ":" + self.value(key.end(), depth + 1, bare=bare))
            self._separator(closer)
        return "{" + ",".join(members) + "}"

    def _items(self, depth: int) -> str:
        self._open(depth)
        items = []
        while not self._close("]"):
            items.append(self.value(self.position, depth + 1))
            self._separator("]")
        return "[" + ",".join(items) + "]"

    def _open(self, depth: int) -> str:
        if depth >= _MAX_DEPTH:
            raise _Refused
        closer = _CLOSING[self.text[self.position]]
        self.position += 1
        return closer

    def _close(self, closer: str) -> bool:
        self.position = _SPACE.match(self.text, self.position, self.stop).end()  # type: ignore[union-attr]
        if self.position >= self.stop:
            raise _Refused  # never closed
        if self.text.startswith(closer, self.position):
            self.position += 1
            return True
        return False

    def _separator(self, closer: str) -> None:
        self.position = _SPACE.match(self.text, self.position, self.stop).end()  # type: ignore[union-attr]
        if self.text.startswith(",", self.position):
            self.position += 1
        elif not self.text.startswith(closer, self.position):
            raise _Refused

    def _string(self, bare: bool) -> str:
        if opens_quote(self.text, self.position):
            read = quoted(self.text, self.position, self.stop)
            if read is None:
                raise _Refused
            value, self.position = read
            return value
        word = _BARE.match(self.text, self.position, self.stop) if bare else None
        if word is None or not word.group().strip():
            raise _Refused
        self.position = word.end()
        return word.group().strip()


def opens_quote(text: str, position: int) -> bool:
    return text.startswith(_QUOTES, position) or _quote_tag(text, position) is not None


def _quote_tag(text: str, position: int) -> str | None:
    """A tag used as a quote: the same tag again closes the string (FunctionGemma's `<escape>Paris<escape>`)."""
    tag = _QUOTE_TAG.match(text, position)
    return tag.group() if tag is not None else None


def quoted(text: str, position: int, stop: int) -> tuple[str, int] | None:
    """The string that opens at `position` and where it ends: between a pair of quote tokens (`<|"|>`), typographic
    quotes or two of the same tag, in double quotes with JSON's escapes, or in single quotes on one line; None when
    it does not close before `stop`."""
    tag = _quote_tag(text, position)
    for opener, closer in (*_QUOTE_PAIRS, *(((tag, tag),) if tag else ())):
        if text.startswith(opener, position):
            end = text.find(closer, position + len(opener), stop)
            return (text[position + len(opener) : end], end + len(closer)) if end >= 0 else None
    if text.startswith('"', position):
        try:
            value, end = json.JSONDecoder().raw_decode(text, position)
        except ValueError:
            return raw_string(text, position, stop)  # `"C:\Users\x"`: a Windows path's own backslashes
        return (value, end) if isinstance(value, str) else None
    end = text.find("'", position + 1, stop)
    return (text[position + 1 : end], end + 1) if end >= 0 and "\n" not in text[position:end] else None
