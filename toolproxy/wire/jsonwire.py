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
from collections.abc import Callable
from typing import Any

import orjson


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


# Values (numbers, strings, keys, containers...) decoded from one body at most: decoding costs a tenth of a
# microsecond each and more, and orjson cannot be interrupted, so this keeps one decode well within the 100 ms a
# request may hold a worker's event loop (16 MiB of `"a",` would be 4 million strings: 270 ms). An agent's long
# transcript holds tens of thousands.
MAX_VALUES = 250_000
PAUSE_BYTES = 256 * 1024  # a body this large pauses between its decode and the checks on what it decoded


def loads(data: bytes | bytearray, max_depth: int, max_containers: int = 100_000, *, keep_wire: bool = False,
          pause: Callable[[], None] | None = None) -> Any:
    """Decode a body. Nesting deeper than `max_depth` is refused whatever Python's own recursion limit is,
    so the answer to a JSON bomb does not change between Python releases; more than `max_containers` arrays
    and objects, or more than MAX_VALUES values, are refused before decoding (9 MB of `[],` would otherwise hold
    the worker for seconds). With `keep_wire`, an object that orjson decoded (strict JSON: no NaN, no UTF-16)
    comes as `Encoded`. `pause`: called between the steps of a large body's decode (the counts, a slice at a time;
    the decode; the walk over what it holds), so the caller may let others run (a 7 MiB body costs tens of
    milliseconds in each)."""
    _refuse_too_many(data, max_containers, pause)
    value, strict, too_deep = _loads_strictly(data, max_depth, pause if len(data) > PAUSE_BYTES else None)
    if not strict:
        value = _loads_slowly(data, max_depth)
        too_deep = depth_exceeds(value, max_depth)
    if too_deep:
        raise JsonWireError(f"JSON nested deeper than {max_depth} levels")
    if keep_wire and strict and type(value) is dict:
        return Encoded(value, data if isinstance(data, bytes) else bytes(data))
    return value


def _loads_strictly(data: bytes | bytearray, max_depth: int,
                    pause: Callable[[], None] | None) -> tuple[Any, bool, bool]:
    """(value, True, too deep) when orjson decodes `data` as json would, else (None, False, False). One walk
    over the levels answers both how deep it nests and whether an integer may have been lost."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, False, False
    if pause is not None:
        pause()
    too_deep, lost = _survey(value, max_depth)
    return (None, False, False) if lost else (value, True, too_deep)


def _survey(value: Any, max_depth: int) -> tuple[bool, bool]:
    """(nested deeper than `max_depth`, holds a float orjson may have made of an integer past 64 bits): the
    level walks of `depth_exceeds` and `_has_float` as one (each cost a tenth of a 7 MiB body's decode)."""
    level = [value]
    for _ in range(max_depth):
        if float in map(type, level) and any(type(item) is float and not abs(item) < _INT64_EDGE for item in level):
            return False, True
        level = gc.get_referents(*level)
        if not level:
            return False, False
    too_deep = any(isinstance(node, (dict, list)) for node in level)
    return too_deep, not too_deep and _has_float(level, _INT64_EDGE)


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


def _loads_slowly(data: bytes | bytearray, max_depth: int) -> Any:
    try:
        value = json.loads(data)
    except RecursionError:
        raise JsonWireError(f"JSON nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError:
        raise JsonWireError("body is not UTF-8 text") from None
    except ValueError as error:
        raise JsonWireError(f"body is not valid JSON: {error}") from None
    return value


def _refuse_too_many(data: bytes | bytearray, max_containers: int, pause: Callable[[], None] | None) -> None:
    """Refuse too many containers or values before decoding. One pass counts every value mark, brackets among
    them: a bound on both counts that settles almost every body at once (a 1 MB agent transcript holds some
    26,000), where a pass per count cost 0.6 ms a MB each on every request."""
    if len(data) <= min(max_containers, MAX_VALUES):
        return
    bound = _structural(data, _VALUE_MARKS)
    if bound > max_containers and has_too_many_containers(data, max_containers, pause):
        raise JsonWireError(f"JSON with more than {max_containers} arrays and objects")
    if bound > MAX_VALUES and _outside_strings(data, _VALUE_MARKS, pause) > MAX_VALUES:
        raise JsonWireError(f"JSON with more than {MAX_VALUES} values")


def has_too_many_values(data: bytes | bytearray, limit: int, pause: Callable[[], None] | None = None) -> bool:
    """Whether `data` holds more than about `limit` values: one after each `,` or `:` outside strings, one more
    per container. All of them first (an upper bound, at C speed), then, only when that is over the limit, those
    outside strings (prose in strings is full of commas)."""
    if len(data) <= limit or _structural(data, _VALUE_MARKS) <= limit:
        return False
    return _outside_strings(data, _VALUE_MARKS, pause) > limit


def has_too_many_containers(data: bytes | bytearray, limit: int, pause: Callable[[], None] | None = None) -> bool:
    """Whether `data` opens more than `limit` arrays and objects: all brackets first (an upper bound; deleting
    them is one pass, where `count` took one per bracket and a quarter longer), then, only when that is over the
    limit, those outside strings."""
    if len(data) <= limit or _structural(data, _CONTAINER_MARKS) <= limit:  # fewer bytes: fewer brackets too
        return False
    return _outside_strings(data, _CONTAINER_MARKS, pause) > limit


_VALUE_MARKS, _CONTAINER_MARKS = b",:[{", b"[{"
SLICE_BYTES = 512 * 1024  # what `_outside_strings` reads between two pauses: a few milliseconds


def _structural(data: bytes | bytearray, marks: bytes) -> int:
    return len(data) - len(data.translate(None, marks))


def _outside_strings(data: bytes | bytearray, marks: bytes, pause: Callable[[], None] | None) -> int:
    """How many of `marks` stand outside strings, a slice at a time (pausing between slices): escaped
    backslashes and quotes are dropped, then the quotes that remain split each slice into what is outside and
    inside strings, alternately. A string left open at the end counts as outside (it is not JSON anyway). A
    regular expression over the strings did the same in one go, and took 95 ms on a 7 MiB body of short strings."""
    count = open_count = start = 0
    inside = False
    while start < len(data):
        end = _slice_end(data, start, start + SLICE_BYTES)
        piece = data[start:end]
        if b"\\" in piece:
            piece = piece.replace(b"\\\\", b"").replace(b'\\"', b"")
        parts = piece.split(b'"')
        first, *rest = parts
        if inside:
            open_count += _structural(first, marks)
        else:
            count += _structural(first, marks)
        for part in rest:
            inside = not inside
            if inside:
                open_count = _structural(part, marks)
            else:
                count += _structural(part, marks)
        start = end
        if pause is not None and start < len(data):
            pause()
    return count + (open_count if inside else 0)


def _slice_end(data: bytes | bytearray, start: int, end: int) -> int:
    """A cut that does not part a backslash from the character it escapes. The slice began where no escape was
    cut in two, so its backslashes pair up from its start."""
    if end >= len(data):
        return len(data)
    before = end
    while before > start and data[before - 1] == 0x5C:  # backslashes just before the cut
        before -= 1
    return end + 1 if (end - before) % 2 else end


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
        return fitted(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


# orjson (3.13) hands back its output in the buffer it grew, never shrunk: 8 to 16 times the JSON's size (a 283 KB
# answer held 2 MiB, a 20 KB one 254 KiB) for as long as the bytes live. Past this size they are copied out.
FIT_BYTES = 4096


def fitted(data: bytes) -> bytes:
    """`data` in memory of its own size: a copy (41 us for 283 KB) where orjson's buffer would be kept alive (a
    response body until it is sent, a row until it is written); small outputs as they are."""
    return bytes(memoryview(data)) if len(data) > FIT_BYTES else data


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
