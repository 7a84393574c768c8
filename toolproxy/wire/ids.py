"""Random ids: a request's record id, a call's and a completion's (OpenAI's `call_...`, `chatcmpl-...`)."""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_letters + string.digits
# Random bytes to id characters: a byte below 248 (4 x 62) picks one of the 62 evenly, the rest are deleted, so
# every character is as likely as with secrets.choice, which read the OS's random source once per character.
_EVEN = len(_ALPHABET) * (256 // len(_ALPHABET))
_TABLE = bytes(ord(_ALPHABET[byte % len(_ALPHABET)]) if byte < _EVEN else 0 for byte in range(256))
_UNEVEN = bytes(range(_EVEN, 256))


def random_id(length: int) -> str:
    """`length` letters or digits from the OS's random source, in one read (almost always): 25 us -> 1 us."""
    chosen = b""
    while len(chosen) < length:
        chosen += secrets.token_bytes(length + 8).translate(_TABLE, _UNEVEN)
    return chosen[:length].decode("ascii")
