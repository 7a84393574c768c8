"""The byte path of a passthrough stream: most events of a stream differ from each other only in their text.

One event that went the full way (decoded, shape checked, cleaned, renamed) teaches a stencil: its bytes before
and after the text, and the bytes the proxy made of them. A later network read that is those same bytes around one
well-formed JSON string is the same event with other text, so it goes out without being decoded: as it came when
the proxy changes nothing in it, else with the learnt bytes around its text. Anything else (another field, a
finish, an error, a malformed string) does not fit and takes the full path, which decides as before. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolproxy.wire import cleaning, jsonwire, sse

# One JSON string as RFC 8259 (and orjson) has it: no raw control characters, only the defined escapes. Possessive
# runs, so a match is linear and never backtracks over model text.
_LITERAL = re.compile(rb'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*+"')
# Where the text may sit: the delta's content, or its reasoning under either name.
_SLOT = re.compile(rb'"(content|reasoning_content|reasoning)"[ \t]*:[ \t]*(?=")')
_PREFIX, _END = b"data: ", b"\n\n"
# Stands in for the text while a stencil is learnt: starts with an escape, so it cannot continue a string of the
# bytes around it, and no model writes it.
_SENTINEL = "\x00toolproxy-stencil\x00"
_SENTINEL_JSON = jsonwire.dumps(_SENTINEL)
_TRIES = 3  # slot candidates tried per event: the key names may also occur inside a string


@dataclass(frozen=True, slots=True)
class Stencil:
    head: bytes  # `data: ` and the event's bytes up to its text
    tail: bytes  # its bytes after the text, and the blank line
    out_head: bytes  # the same, as the client gets them
    out_tail: bytes
    is_content: bool  # the text is the delta's content (what the record keeps), not reasoning

    def fill(self, read: bytes) -> tuple[bytes, bytes | None] | None:
        """The event for the client and its content as a JSON string (None for reasoning), when `read` fits;
        else None."""
        start, end = len(self.head), len(read) - len(self.tail)
        if end - start <= 2 or not read.startswith(self.head) or not read.endswith(self.tail):
            return None  # `""` too: whether an empty text is dropped or kept is the full path's to say
        if _LITERAL.fullmatch(read, start, end) is None:
            return None
        literal = read[start:end]
        if not literal.isascii() and not _is_utf8(literal):
            return None  # the full path replaces what is not UTF-8; bytes are never forwarded broken
        text = literal if self.is_content else None
        if self.out_head is self.head and self.out_tail is self.tail:
            return read, text
        return self.out_head + literal + self.out_tail, text


def lone_data(read: bytes) -> bytes | None:
    """The data of a network read that is exactly one event of one `data: ` line; None for anything else."""
    if read.startswith(_PREFIX) and read.endswith(_END) and read.find(b"\n") == len(read) - 2 and b"\r" not in read:
        return read[len(_PREFIX):-len(_END)]
    return None


def learn(data: bytes, chunk: dict[str, Any], convert: Callable[[dict[str, Any]], dict[str, Any]]
          ) -> Stencil | None:
    """The stencil of one decoded event (`data` its UTF-8 bytes on one line, `chunk` what they decode to, already
    checked), or None when it has no text slot a later event could fill; `convert` is what the route does to a
    chunk, minus the record (a pure function of the chunk)."""
    key = _slot_key(chunk)
    if key is None:
        return None
    for tries, match in enumerate(_SLOT.finditer(data)):
        literal = _LITERAL.match(data, match.end())
        if tries >= _TRIES:
            return None
        if literal is None or match.group(1).decode() != key:
            continue
        head, tail = data[: literal.start()], data[literal.end():]
        probe = _probe(head, tail, key, chunk)
        if probe is not None:
            return _stencil(head, tail, convert(probe), key == "content")
    return None


def _slot_key(chunk: dict[str, Any]) -> str | None:
    """The delta field holding text, when the event is one choice that only carries text: no finish, no calls, no
    content beside reasoning (the record would miss it)."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("finish_reason") or not isinstance(delta, dict) or delta.get("tool_calls"):
        return None
    for key in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(key), str) and delta[key]:
            return key if key == "content" or not delta.get("content") else None
    return None


def _probe(head: bytes, tail: bytes, key: str, chunk: dict[str, Any]) -> dict[str, Any] | None:
    """The event with the sentinel as its text, when the bytes around the literal decode to exactly `chunk` with
    that literal in the `key` slot: then any string there gives the same event with that string."""
    try:
        probe = jsonwire.loads_fast(head + _SENTINEL_JSON + tail)
    except (ValueError, RecursionError):
        return None
    if not isinstance(probe, dict) or _slot_key(probe) != key:
        return None
    delta = probe["choices"][0]["delta"]
    if delta[key] != _SENTINEL:
        return None
    delta[key] = chunk["choices"][0]["delta"][key]
    same = probe == chunk
    delta[key] = _SENTINEL
    return probe if same else None


def _stencil(head: bytes, tail: bytes, converted: dict[str, Any], is_content: bool) -> Stencil | None:
    out = sse.encode_event(converted)
    at = out.find(_SENTINEL_JSON)
    if at < 0 or out.find(_SENTINEL_JSON, at + 1) >= 0:
        return None  # the text is dropped or doubled: not a slot
    full_head, full_tail = _PREFIX + head, tail + _END
    out_head, out_tail = out[:at], out[at + len(_SENTINEL_JSON):]
    same = out_head == full_head and out_tail == full_tail
    return Stencil(full_head, full_tail, full_head if same else out_head, full_tail if same else out_tail,
                   is_content)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def clean(reasoning: str, rename: str | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What a passthrough stream does to a chunk: backend-only fields removed, the model renamed."""
    def convert(chunk: dict[str, Any]) -> dict[str, Any]:
        cleaned = cleaning.clean_chunk(chunk, reasoning)
        if rename:
            cleaned = cleaned if cleaned is not chunk else dict(chunk)
            cleaned["model"] = rename
        return cleaned

    return convert
