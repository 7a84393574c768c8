"""The dashboard's charts, declared once, and their data: the transform log's records of a window counted into equal
time buckets (requests by outcome, the failed-call share per model and dialect, overhead and first-byte percentiles,
requests per instance). Pure: the rows come from the store (queries.activity), so any store can feed it."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Chart:
    key: str
    title: str
    unit: str


CHARTS = (
    Chart("outcomes", "Requests per minute by outcome", "requests/min"),
    Chart("failed_share", "Failed-call share by model and dialect (requests with tools)", "%"),
    Chart("latency", "Proxy overhead and time to first byte, percentiles", "ms"),
    Chart("instances", "Requests per minute by instance", "requests/min"),
)
# The outcome of a record, the most telling first: the loop guard answered; the upstream failed (a 5xx); the request
# was refused (a 4xx); the client went away; a call failed; the upstream was asked again; else ok.
OUTCOMES = ("ok", "repaired", "failed call", "upstream error", "loop-guard stop", "rejected", "client gone")
WINDOWS = ((300, "5 minutes"), (3600, "hour"), (86400, "day"))  # seconds, and how the page names them
BUCKETS = 60
MOST_SHARES = 8  # model and dialect pairs charted, the busiest first


@dataclass(frozen=True, slots=True)
class Activity:
    """One record as the charts see it (queries.activity's row)."""

    started: float
    route: str
    status: int | str
    repairs: int
    overhead_ms: float
    first_byte_ms: float | None
    failed: bool
    model: str
    dialects: tuple[str, ...]
    instance: str | None

    @classmethod
    def of(cls, row: Sequence[Any]) -> Activity:
        started, route, status, repairs, overhead, first_byte, failed, model, dialects, instance = row
        names = json.loads(dialects) if isinstance(dialects, str) else []
        return cls(float(started), str(route or ""), status, int(repairs or 0), float(overhead or 0),
                   float(first_byte) if isinstance(first_byte, (int, float)) else None, bool(failed),
                   str(model or ""), tuple(str(name) for name in names), instance)

    @property
    def outcome(self) -> str:
        status = self.status if isinstance(self.status, int) else 0
        if self.route == "loop_guard":
            return "loop-guard stop"
        if status >= 500:
            return "upstream error"
        if status >= 400:
            return "rejected"
        if self.status == "client_disconnected":
            return "client gone"
        if self.repairs:
            return "repaired"
        return "failed call" if self.failed else "ok"

    @property
    def offered_tools(self) -> bool:
        return self.route.startswith(("tools", "vtc"))


def window_of(text: str | None) -> int:
    """The window a query string asks for, one of WINDOWS (the hour by default)."""
    choices = {str(seconds): seconds for seconds, _ in WINDOWS}
    return choices.get(text or "", 3600)


def chart_data(rows: Iterable[Sequence[Any]], now: float, window: int, local_instance: str) -> dict[str, Any]:
    """The charts' series over the `window` seconds before `now`, in BUCKETS buckets (oldest first)."""
    step = window / BUCKETS
    start = now - window
    buckets: list[list[Activity]] = [[] for _ in range(BUCKETS)]
    for row in rows:
        item = Activity.of(row)
        index = math.floor((item.started - start) / step)
        if 0 <= index < BUCKETS:
            buckets[index].append(item)
    per_minute = 60 / step
    return {"window": window, "step": step, "times": [round(start + step * (index + 1), 3) for index in range(BUCKETS)],
            "charts": {"outcomes": _outcomes(buckets, per_minute), "failed_share": _shares(buckets),
                       "latency": _latency(buckets),
                       "instances": _instances(buckets, per_minute, local_instance)}}


def _series(label: str, values: list[float | None]) -> dict[str, Any]:
    return {"label": label, "values": values}


def _outcomes(buckets: list[list[Activity]], per_minute: float) -> list[dict[str, Any]]:
    counts = [Counter(item.outcome for item in bucket) for bucket in buckets]
    return [_series(outcome, [round(count[outcome] * per_minute, 3) for count in counts]) for outcome in OUTCOMES]


def _shares(buckets: list[list[Activity]]) -> list[dict[str, Any]]:
    """Per model and dialect (`none`: no call found), the share of requests with tools that had a failed call."""
    totals: Counter[tuple[str, str]] = Counter()
    per_bucket: list[dict[tuple[str, str], list[int]]] = []
    for bucket in buckets:
        found: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for item in bucket:
            if item.offered_tools:
                for dialect in item.dialects or ("none",):
                    found[(item.model, dialect)][0] += int(item.failed)
                    found[(item.model, dialect)][1] += 1
                    totals[(item.model, dialect)] += 1
        per_bucket.append(found)
    return [_series(f"{key[0]} · {key[1]}", [_share(found.get(key)) for found in per_bucket])
            for key, _ in totals.most_common(MOST_SHARES)]


def _share(counts: list[int] | None) -> float | None:
    """Failed of all, in percent; None where there were none (a gap in the line, not a zero)."""
    return round(100 * counts[0] / counts[1], 1) if counts else None


def _latency(buckets: list[list[Activity]]) -> list[dict[str, Any]]:
    overhead = [sorted(item.overhead_ms for item in bucket) for bucket in buckets]
    first_byte = [sorted(item.first_byte_ms for item in bucket if item.first_byte_ms is not None) for bucket in buckets]
    return [_series(f"{name} p{percent}", [percentile(values, percent) for values in source])
            for name, source in (("overhead", overhead), ("first byte", first_byte)) for percent in (50, 95)]


def _instances(buckets: list[list[Activity]], per_minute: float, local_instance: str) -> list[dict[str, Any]]:
    counts = [Counter(item.instance or local_instance for item in bucket) for bucket in buckets]
    names = sorted({name for count in counts for name in count})
    return [_series(name, [round(count[name] * per_minute, 3) for count in counts]) for name in names]


def percentile(sorted_values: list[float], percent: float) -> float | None:
    """Nearest-rank percentile of values in ascending order; None for none (a gap in the line, not a zero)."""
    if not sorted_values:
        return None
    return round(float(sorted_values[max(0, math.ceil(percent / 100 * len(sorted_values)) - 1)]), 3)
