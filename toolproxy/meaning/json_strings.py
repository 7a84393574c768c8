"""The strings of almost-JSON text: where one ends, a single-quoted body as a double-quoted one, and bodies whose
backslashes are the text's own (a Windows path written without escaping). Shared by the repair of arguments
(`json_repair.py`) and the name-anchored fallback's strings (`anchor_object.py`); linear, no I/O."""

from __future__ import annotations

import json
import re


def string_end(text: str, start: int, quote: str, stop: int | None = None) -> int:
    """Index of the quote that closes a string whose body starts at `start`, or -1 when the text (or `stop`) ends
    first. Jumps with str.find instead of stepping per character; each search starts past the last, so it stays
    linear."""
    stop = len(text) if stop is None else stop
    pos = start
    close = text.find(quote, pos, stop)
    while close >= 0:
        escape = text.find("\\", pos, close)
        if escape < 0:
            return close
        pos = escape + 2  # a backslash escapes whatever follows it, the quote included
        if pos > close:
            close = text.find(quote, pos, stop)
    return -1


# A backslash before anything but a quote: in a string that is raw, each of them stands for itself.
_RAW_ESCAPES = re.compile(r"\\(?=[^\"'])")
_INVALID_ESCAPE = re.compile(r"\\(?:[^\"\\/bfnrtu']|u(?![0-9A-Fa-f]{4}))")


def is_raw(body: str) -> bool:
    """Whether a string's backslashes are the text's own, not escapes: one of them escapes nothing JSON knows
    (`C:\\Users\\imend\\Desktop\\test.txt` as Qwen3-Coder writes a Windows path; its `\\t` is then no tab either),
    and no `\\\\` pair says the writer did escape."""
    return "\\" in body and "\\\\" not in body and _INVALID_ESCAPE.search(body) is not None


def unraw(body: str) -> str:
    """A raw string's body as a JSON string's: each backslash doubled, but for one before a quote."""
    return _RAW_ESCAPES.sub(lambda _: "\\\\", body)


def raw_string(text: str, start: int, stop: int) -> tuple[str, int] | None:
    """The double-quoted string at `text[start]`, ending before `stop`, read as raw (`is_raw`) and where it ends, or
    None: for readers that decode one value at a time (the name-anchored fallback)."""
    end = string_end(text, start + 1, '"', stop)
    body = text[start + 1 : end] if end >= 0 else ""
    if not is_raw(body) or "\n" in body:
        return None
    try:
        return json.loads('"' + unraw(body) + '"'), end + 1
    except ValueError:
        return None


def requote(body: str) -> str:
    """The body of a single-quoted string as the body of a double-quoted one: `\\'` needs no escape any more and a
    bare `"` now does. Other escapes stay as written; json.loads refuses the Python-only ones such as `\\x41`."""
    if "\\" not in body:
        return body.replace('"', '\\"')
    parts: list[str] = []
    pos = 0
    while pos < len(body):
        char = body[pos]
        if char == "\\":
            pair = body[pos : pos + 2]
            parts.append("'" if pair == "\\'" else pair)
            pos += 2
        else:
            parts.append('\\"' if char == '"' else char)
            pos += 1
    return "".join(parts)
