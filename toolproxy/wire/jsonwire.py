"""JSON as it crosses the wire: decoding client and upstream bodies with a depth limit, encoding compactly.

orjson does the work (4 to 50 times faster than `json` here: a 1 MB transcript decodes in 0.4 ms instead of 4, a
stream event encodes in 0.2 us instead of 9). Whatever it refuses (NaN, infinities, lone surrogates, very deep
nesting, non-string keys, UTF-16) goes through `json` as before, so what is accepted and every error message stay
the same. One difference it does not refuse: an integer past 64 bits comes out of orjson 3.13 as a float
(2**64 as 1.8446744073709552e19), where `json` keeps it whole; JSON that may hold one goes to `json`.
"""

from __future__ import annotations

import gc
import json
import re
from typing import Any

import orjson

# A JSON string, matched without backtracking (possessive runs): used to blank strings out before counting
# brackets, at C speed.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


class JsonWireError(ValueError):
    """A body that is not acceptable JSON; the message says why in words a client can act on."""


class Encoded(dict[str, Any]):
    """A JSON object with its encoding at hand: `wire` is strict UTF-8 JSON of exactly this object (the client's
    own bytes), sent on as they are instead of encoding the object again (a 1 MB transcript cost 0.45 ms). Never
    changed in place, nor what it holds: a changed body is a new dict, which `encode` encodes."""

    __slots__ = ("wire",)

    def __init__(self, value: dict[str, Any], wire: bytes) -> None:
        super().__init__(value)
        self.wire = wire


def loads(data: bytes, max_depth: int, max_containers: int = 100_000, *, keep_wire: bool = False) -> Any:
    """Decode a body. Nesting deeper than `max_depth` is refused whatever Python's own recursion limit is,
    so the answer to a JSON bomb does not change between Python releases; more than `max_containers` arrays
    and objects are refused before decoding (9 MB of `[],` would otherwise hold the worker for seconds).
    With `keep_wire`, an object that orjson decoded (strict JSON: no NaN, no UTF-16) comes as `Encoded`."""
    if has_too_many_containers(data, max_containers):
        raise JsonWireError(f"JSON with more than {max_containers} arrays and objects")
    value, strict = _loads_strictly(data)
    if not strict:
        value = _loads_slowly(data, max_depth)
    if depth_exceeds(value, max_depth):
        raise JsonWireError(f"JSON nested deeper than {max_depth} levels")
    return Encoded(value, data) if keep_wire and strict and type(value) is dict else value


def _loads_strictly(data: bytes) -> tuple[Any, bool]:
    """(value, True) when orjson decodes `data` as json would, else (None, False)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, False
    return (None, False) if _may_have_lost_an_integer(value) else (value, True)


def loads_fast(data: bytes | str) -> Any:
    """Decode trusted-shape data (an upstream's stream event): ValueError when it is not JSON."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
    return json.loads(data) if _may_have_lost_an_integer(value) else value


# orjson reads integers from -2**63 to 2**64 - 1 exactly, and one past them as a float (2**64 as
# 1.8446744073709552e19), where json keeps every integer whole.
_INT64_EDGE = 2.0**63


def _may_have_lost_an_integer(value: Any) -> bool:
    """Whether orjson's value holds a float at or past the 64-bit range, which it may have made of an integer: that
    JSON is decoded again by json (a genuine float that large costs only the second decode). A 19-digit search of
    the bytes instead cost 2.4 ms on a 256 KB answer and sent every body with a long number in a string (a hash, a
    timestamp) to json."""
    return _has_float(value, _INT64_EDGE)


def _has_float(value: Any, at_least: float = 0.0) -> bool:
    """Whether a float (NaN included) of at least `at_least` in size is anywhere in `value`, a decoded JSON value.
    Level by level as in `depth_exceeds`; a level's values are looked at in Python only when it holds a float at
    all (`float in map(type, ...)` runs in C): 32 us for a 1 MB transcript."""
    level = [value]
    while level:
        if float in map(type, level) and any(type(item) is float and not abs(item) < at_least for item in level):
            return True
        level = gc.get_referents(*level)
    return False


def _loads_slowly(data: bytes, max_depth: int) -> Any:
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonWireError(f"JSON nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError:
        raise JsonWireError("body is not UTF-8 text") from None
    except ValueError as error:
        raise JsonWireError(f"body is not valid JSON: {error}") from None
    return value


def has_too_many_containers(data: bytes, limit: int) -> bool:
    """Whether `data` opens more than `limit` arrays and objects. Brackets are counted at C speed: all of them
    first (an upper bound; deleting them is one pass, where `count` took one per bracket and a quarter longer),
    then, only when that is over the limit, those outside strings."""
    if len(data) <= limit:  # fewer bytes than the limit: fewer brackets too
        return False
    if len(data) - len(data.translate(None, b"[{")) <= limit:
        return False
    skeleton = _STRING.sub(b"", data)
    return skeleton.count(b"[") + skeleton.count(b"{") > limit


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when containers nest deeper than `max_depth` (the outermost one is level 1). For what a decoder
    returns: plain dicts and lists (an instance of a class of our own would lead the walk into its class).

    Level by level, at C speed: `gc.get_referents` of a level's containers is the next level (a dict gives its
    values, a list its items; strings, numbers, booleans and None are not tracked by the collector, so they give
    nothing). Linear in the number of values, with one Python step per level instead of one per value: a 1 MB
    transcript in 16 us instead of 380."""
    level = [value]
    for _ in range(max_depth):
        level = gc.get_referents(*level)
        if not level:
            return False
    return any(isinstance(node, (dict, list)) for node in level)


def encode(value: Any) -> bytes:
    """`value` as JSON: an `Encoded` object's own bytes, anything else through `dumps`."""
    return value.wire if isinstance(value, Encoded) else dumps(value)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. A lone surrogate (legal in a JSON escape, illegal in UTF-8) falls back to ASCII
    escapes instead of raising, so a strange model output can never turn into a 500. NaN and infinities come out
    as null (orjson's choice; `json` wrote `NaN`, which no strict client parses)."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def dumps_text(value: Any) -> str:
    """Exactly `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, a call's `arguments` as clients
    have always received them, written by orjson where its text is the same (3x faster on a 256 KB argument).
    It is the same for every string, integer, boolean, null and container; it differs for some floats (1e-05
    is `0.00001` in orjson, NaN is `null`), so a value holding a float goes to `json`, and so does anything
    orjson refuses (integers past 64 bits, lone surrogates, non-string keys). A test compares the two."""
    if not _has_float(value):
        try:
            return orjson.dumps(value).decode()
        except (TypeError, orjson.JSONEncodeError):
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
