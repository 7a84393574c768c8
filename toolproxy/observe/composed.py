"""The client's text as the dashboard shows it: the answer's content, then its calls as indented JSON. It is composed
when a page asks for it, from parts the record keeps anyway; its size is known without composing it, so a 256 KB
answer is never written out a second time on the request path."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any

import orjson

ClientCall = tuple[Any, Any]  # (the tool's name, the arguments as the JSON text the client got)
# What `json.dumps(ensure_ascii=False)` writes in more than one character inside a string: the quote and the
# backslash (two), \b \t \n \f \r (two), any other control character (six: \u00XX).
_CONTROL = re.compile("[\x00-\x1f]")
_SHORT_ESCAPES = "\b\t\n\f\r"
# `_indented` of one call: '  {\n    "name": ' NAME ',\n    "arguments": ' ARGUMENTS '\n  }'
_CALL_FRAME = len('  {\n    "name": ') + len(',\n    "arguments": ') + len("\n  }")


def compose(content: str | None, calls: Sequence[ClientCall]) -> str:
    """The text itself: exactly what `fill_answer` wrote into every record before it was composed on demand."""
    listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return (content or "") + ("\n\n" + indented(listed) if listed else "")


def size(content: str | None, calls: Sequence[ClientCall], json_texts: Sequence[int] = ()) -> tuple[int, int]:
    """(characters, UTF-8 bytes with a lone surrogate as one '?') of `compose(content, calls)`, counted without
    writing it: two C-speed counts over each part. `json_texts`: the calls whose arguments are JSON text as
    `jsonwire.dumps_text` writes it, which holds no control character (the search for one cost 1 ms on 230 KB)."""
    if not all(isinstance(part, str) for call in calls for part in call):  # a server's own calls, not ours
        text = compose(content, calls)
        return len(text), len(text.encode("utf-8", errors="replace"))
    chars, extra = len(content or ""), _extra_bytes(content or "")
    if calls:
        chars += 2 + len("[\n") + len("\n]") + len(",\n") * (len(calls) - 1) + _CALL_FRAME * len(calls)
        for number, (name, arguments) in enumerate(calls):
            chars += _quoted_length(name) + _quoted_length(arguments, number in json_texts)
            extra += _extra_bytes(name) + _extra_bytes(arguments)
    return chars, chars + extra


def indented(calls: list[dict[str, Any]]) -> str:
    """`json.dumps(calls, ensure_ascii=False, indent=2)`, from orjson when every value is a string (always, but for
    a lone surrogate): the same text, byte for byte, where `json`'s indenting encoder runs in Python (0.4 ms for a
    256 KB call)."""
    if all(isinstance(value, str) for call in calls for value in call.values()):
        with contextlib.suppress(TypeError):  # orjson.JSONEncodeError: a lone surrogate
            return orjson.dumps(calls, option=orjson.OPT_INDENT_2).decode("utf-8")
    return json.dumps(calls, ensure_ascii=False, indent=2)


def _quoted_length(text: str, json_text: bool = False) -> int:
    """len(json.dumps(text, ensure_ascii=False))."""
    length = 2 + len(text) + text.count('"') + text.count("\\")
    if json_text or _CONTROL.search(text) is None:
        return length
    controls = len(_CONTROL.findall(text))
    short = sum(text.count(char) for char in _SHORT_ESCAPES)
    return length + short + 5 * (controls - short)


def _extra_bytes(text: str) -> int:
    """UTF-8 bytes beyond one per character (`isascii` is a flag: free for the ASCII text most answers are)."""
    return 0 if text.isascii() else len(text.encode("utf-8", errors="replace")) - len(text)
