"""What a finished record keeps until its row is written: a text longer than the row can store is cut to what it
can (the field limit, and the margin redaction looks past it), its length kept beside it (`Clipped`); a call's
source is its place in the model's text (`Span`). The rest of a 256 KB answer is freed with the request, not when
its record is stored after the response (a worker held each answer three more times meanwhile).

Only a record whose model text is past what the row keeps is touched: the others are stored as they are."""

from __future__ import annotations

from typing import Any

from toolproxy.observe.record import REDACT_MARGIN, Clipped, Span, TransformRecord
from toolproxy.observe.stored import locate


def keep(record: TransformRecord, limit: int) -> None:
    """Cut what its row cannot store from a finished record, in place."""
    kept = limit + REDACT_MARGIN
    raw = record.raw_text
    if not isinstance(raw, str) or len(raw) <= kept:
        return
    position = 0
    calls = []
    for call in record.calls:
        if isinstance(call, dict):
            call, position = _kept_call(call, raw, kept, position)
        calls.append(call)
    record.calls = calls
    record.raw_text = Clipped(raw[:kept], len(raw))


def _kept_call(call: dict[str, Any], raw: str, kept: int, position: int) -> tuple[dict[str, Any], int]:
    out = {key: _clipped(value, kept) for key, value in call.items() if key not in ("source", "raw_arguments", "wire")}
    if "wire" in call:
        out["wire"] = call["wire"]  # kept whole: the client's own arguments, which its text is counted from
    source = call.get("source")
    where = locate(raw, source, position) if isinstance(source, str) else -1
    if isinstance(source, str) and where >= 0 and where + len(source) <= kept:
        place, position = Span(where, where + len(source)), where + len(source)
        out["source"] = place
        if "raw_arguments" in call:
            out["raw_arguments"] = place if call["raw_arguments"] is source else _clipped(call["raw_arguments"], kept)
    else:
        if "source" in call:
            out["source"] = _clipped(source, kept)
        if "raw_arguments" in call:  # most often the source itself: one copy of its beginning for both
            same = call["raw_arguments"] is source and "source" in call
            out["raw_arguments"] = out["source"] if same else _clipped(call["raw_arguments"], kept)
    return {key: out[key] for key in call if key in out}, position


def _clipped(value: Any, kept: int) -> Any:
    if isinstance(value, str):
        return Clipped(value[:kept], len(value)) if len(value) > kept else value
    if isinstance(value, dict):
        return {key: _clipped(item, kept) for key, item in value.items()}
    if isinstance(value, list):
        return [_clipped(item, kept) for item in value]
    return value
