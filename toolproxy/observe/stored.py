"""What the transform log keeps of a record, and the record the pages read back from it.

A record used to hold one answer four times over: the model's text, each call's source (twice: as its source and as
its raw arguments), the arguments, and the client's text (content and calls again). Stored now (format 2): the
model's text once; each call's source as a span of it; the arguments only where its source does not give them back
(typing changed them, or the source is not JSON); the client's text not at all where it is the content and the calls
(`composed.py`), which the pages compose again. `expand` gives back the record as it was stored before, so pages and
exports do not change; a record written before format 2 is read as it is.

The parts are redacted and cut before they are referred to, and a reference is written only where following it gives
exactly the stored text of old, with one exception past the field limit: a call's source that runs beyond where the
model's text was cut is shown up to that cut.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

from toolproxy.dialects.base import call_from_json
from toolproxy.observe import composed
from toolproxy.observe.record import Span, full_length
from toolproxy.wire import jsonwire

FORMAT = 2
PROBE = 64  # characters of a part looked for first; the rest is compared where they are found
TRIES = 8  # places tried before a part is stored whole instead: linear whatever the text repeats
_DECODER = json.JSONDecoder()
_REFERRED = ("raw_text", "calls", "client_content", "client_calls", "client_text", "tools")


class Scrub(Protocol):
    """What the row makes of a value before it is stored (valid, redacted, cut); `changed` turns true when
    redaction (not a cut) changed anything, and is reset by whoever reads it."""

    changed: bool

    def __call__(self, value: Any) -> Any: ...


def encode(fields: dict[str, Any], scrub: Scrub | None, limit: int, composable: bool = True) -> dict[str, Any]:
    """The stored form of a record's fields, the tools aside (the row keeps their stored form apart). `scrub`: None
    where it would change nothing (the row found so). `composable`: False where a secret holds a quote or a
    backslash, which JSON-escaping a part could make."""
    raw, raw_intact = _scrubbed(scrub, fields["raw_text"])
    data = {name: value if scrub is None else scrub(value) for name, value in fields.items() if name not in _REFERRED}
    data["raw_text"] = raw
    given = fields["raw_text"] if isinstance(fields["raw_text"], str) else ""
    raw_cut = full_length(given) > limit
    text = raw if isinstance(raw, str) else ""
    calls = _Calls(text, limit if raw_cut and raw_intact else None, scrub, limit, given)
    data["calls"] = [calls.encode(call) for call in fields["calls"] or []]
    content, content_intact = _scrubbed(scrub, fields["client_content"])
    data["client_content"] = content
    _client(data, fields, calls.intact, content_intact and composable, scrub, limit)
    data["format"] = FORMAT
    return data


def _scrubbed(scrub: Scrub | None, value: Any) -> tuple[Any, bool]:
    """The value stored, and whether redaction left it as it was."""
    if scrub is None:
        return value, True
    scrub.changed = False
    stored = scrub(value)
    return stored, not scrub.changed


class _Calls:
    """Each call's source as a span of the model's text, its raw arguments as its source, its arguments as what its
    source gives back, wherever following that reference gives exactly what would be stored."""

    def __init__(self, raw: str, kept: int | None, scrub: Scrub | None, limit: int, given: str) -> None:
        self.raw, self.kept, self.scrub, self.limit = raw, kept, scrub, limit
        self.given = given  # the model's text as the record holds it (a `Span` is a place in it)
        self.position = 0  # where the last call's source ended: sources come in the order the model wrote them
        self.intact: list[Any] = []  # per call, its `wire` text where its name and arguments are stored unchanged

    def encode(self, call: Any) -> Any:
        if not isinstance(call, dict):
            self.intact.append(None)
            return _scrubbed(self.scrub, call)[0]
        call = self._placed(call)
        stored: dict[str, Any] = {key: value for key, value in call.items() if key != "wire"}
        changed: set[str] = set()
        if self.scrub is not None:
            for key, value in stored.items():
                stored[key], intact = _scrubbed(self.scrub, value)
                changed |= set() if intact else {key}
        refs = self._refs(call, stored, changed)
        for key in refs:
            stored[key] = None
        if refs:
            stored["ref"] = refs
        clean = not changed & {"name", "arguments"} and not _has_float(call.get("arguments"))
        self.intact.append(call.get("wire") if clean else None)
        return stored

    def _placed(self, call: dict[str, Any]) -> dict[str, Any]:
        """The call with a source kept as its place in the model's text (kept.py) read from there."""
        place = call.get("source")
        if not isinstance(place, Span):
            return call
        source = self.given[place.start : place.end]
        raw_arguments = {"raw_arguments": source} if call.get("raw_arguments") is place else {}
        return {**call, "source": source, **raw_arguments}

    def _refs(self, call: dict[str, Any], stored: dict[str, Any], changed: set[str]) -> dict[str, Any]:
        refs: dict[str, Any] = {}
        source, original = stored.get("source"), call.get("source")
        if not isinstance(source, str) or not isinstance(original, str) or not source:
            return refs
        whole = full_length(original) <= self.limit
        span = self._span(source) if whole else self._clipped(source, full_length(original), "source" in changed)
        if span is not None:
            refs["source"] = span
        raw_arguments = call.get("raw_arguments")
        if raw_arguments is original or raw_arguments == original:
            refs["raw_arguments"] = "source"
        if whole and "arguments" in call and same_json(arguments_in(source), stored["arguments"]):
            refs["arguments"] = "source"
        return refs

    def _span(self, source: str) -> list[int] | None:
        start = locate(self.raw, source, self.position)
        if start < 0:
            return None
        self.position = start + len(source)
        return [start, self.position]

    def _clipped(self, source: str, length: int, redacted: bool) -> list[int] | None:
        """A source past the field limit, where the model's text was cut too and redaction changed neither: the
        span of its beginning that the kept text holds (the rest is not stored anywhere)."""
        if self.kept is None or redacted:
            return None
        kept = self.raw[: self.kept]
        start = kept.find(source[:PROBE])
        if start < 0 or not source.startswith(kept[start:]):
            return None
        return [start, start + length, self.kept]


def _has_float(value: Any) -> bool:
    """Whether a float is in a call's arguments (one would not come back the same through the stored JSON: NaN)."""
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    return isinstance(value, float)


def _client(data: dict[str, Any], fields: dict[str, Any], intact: list[Any], content_intact: bool,
            scrub: Scrub | None, limit: int) -> None:
    """The client's text: stored as it is when it was given as a text, or when composing it from the stored parts
    would not give what storing it would (redaction changed a part); else its calls, each a reference to the
    record's call it is, with where it was cut."""
    if fields["client_text"] is not None:
        data["client_text"] = _scrubbed(scrub, fields["client_text"])[0]
        return
    calls, parts_intact = [], content_intact
    for name, arguments in fields["client_calls"] or []:
        found = next((index for index, wire in enumerate(intact) if wire is not None and wire is arguments
                      and fields["calls"][index].get("name") == name), None)
        if found is None:
            (name, arguments), same = _scrubbed(scrub, (name, arguments))
            parts_intact = parts_intact and same
        calls.append({"name": name, "arguments": arguments} if found is None else found)
    if not parts_intact:
        text = composed.compose(fields["client_content"], fields["client_calls"])
        data["client_text"] = _scrubbed(scrub, text)[0]
        data["response_bytes"] = len(text.encode("utf-8", errors="replace"))
        return
    data["client_calls"] = calls
    ours = [number for number, call in enumerate(calls) if isinstance(call, int)]  # written by dumps_text
    length, data["response_bytes"] = composed.size(fields["client_content"], fields["client_calls"], ours)
    if length > limit:
        data["client_cut"] = [limit, length]


def expand(stored: dict[str, Any]) -> dict[str, Any]:
    """The record as the pages and exports read it: every reference followed."""
    if stored.get("format") != FORMAT:
        return stored
    record = {key: value for key, value in stored.items() if key not in ("format", "client_calls", "client_cut")}
    raw = record.get("raw_text") or ""
    record["calls"] = [_expand_call(call, raw) for call in stored.get("calls") or []]
    if "client_text" not in stored:
        record["client_text"] = client_text(stored, record["calls"])
    return record


def client_text(stored: dict[str, Any], calls: list[dict[str, Any]]) -> str:
    """The client's text composed from its content and calls, cut where the stored text of old was cut."""
    parts = [(calls[call]["name"], jsonwire.dumps_text(calls[call]["arguments"])) if isinstance(call, int)
             else (call["name"], call["arguments"]) for call in stored.get("client_calls") or []]
    text = composed.compose(stored.get("client_content"), parts)
    cut = stored.get("client_cut")
    if cut:
        limit, length = cut
        return f"{text[:limit]}\n[… {length - limit} more characters cut]"
    return text


def _expand_call(call: dict[str, Any], raw: str) -> dict[str, Any]:
    refs = call.get("ref") or {}
    out = {key: value for key, value in call.items() if key != "ref"}
    if "source" in refs:
        out["source"] = _span(raw, refs["source"])
    if refs.get("raw_arguments") == "source":
        out["raw_arguments"] = out.get("source")
    if refs.get("arguments") == "source":
        out["arguments"] = arguments_in(out.get("source") or "")
    return out


def _span(raw: str, span: list[int]) -> str:
    """A span of the model's text; [start, end, kept]: a source that runs past the `kept` characters of the text,
    shown up to them, with how much more there was."""
    if len(span) == 3:
        start, end, kept = span
        return f"{raw[start:kept]}\n[… {end - kept} more characters cut]"
    start, end = span
    return raw[start:end]


def locate(text: str, part: str, start: int = 0) -> int:
    """Where `part` is in `text`, from `start` on (else anywhere), or -1. `str.find` of a 230 KB part took 4.7 ms;
    this looks for its first characters and compares the rest there, at a bounded number of places."""
    if not part:
        return -1
    head = part[:PROBE]
    for origin in (start, 0) if start else (0,):
        position = text.find(head, origin)
        for _ in range(TRIES):
            if position < 0:
                break
            if text.startswith(part, position):
                return position
            position = text.find(head, position + 1)
    return -1


def arguments_in(source: str) -> Any:
    """The arguments a call's source gives back, read by one rule for every dialect: the JSON object at the first
    `{` of the source, and in it the call's arguments where it has the shape of a whole call. None where there is
    none."""
    start = source.find("{")
    if start < 0:
        return None
    try:
        value, _ = _DECODER.raw_decode(source, start)
    except (ValueError, RecursionError):
        return None
    call = call_from_json(value)
    return call[1] if call is not None else value


def same_json(left: Any, right: Any) -> bool:
    """Whether two decoded values are the same JSON: the same types (1, 1.0 and True differ), keys in the same
    order, no float that JSON cannot hold (NaN is stored as null)."""
    if type(left) is not type(right):
        return False
    if type(left) is dict:
        return len(left) == len(right) and all(
            left_key == right_key and same_json(left_value, right_value)
            for (left_key, left_value), (right_key, right_value) in zip(left.items(), right.items(), strict=True))
    if type(left) is list:
        return len(left) == len(right) and all(same_json(a, b) for a, b in zip(left, right, strict=True))
    if type(left) is float:
        return math.isfinite(left) and repr(left) == repr(right)
    return bool(left == right)
