"""Prometheus metrics derived from each finished `TransformRecord`, and `/metrics`. Under gunicorn the counts of
every worker are summed through prometheus-client's multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`)."""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

from toolproxy.clients.families import family
from toolproxy.dialects.registry import DIALECTS
from toolproxy.transform.response import EMPTY_ANSWER
from toolproxy.version import __version__

if TYPE_CHECKING:
    from toolproxy.observe.record import TransformRecord

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
FIRST_BYTE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
# Our own codes for a failed upstream (errors.py); anything else an upstream sends is not a label value, so an
# upstream cannot make the series count grow without bound.
UPSTREAM_CODES = frozenset({"upstream_error", "upstream_unavailable", "upstream_timeout", "bad_upstream_response",
                            "upstream_disconnected"})
_UPSTREAM_HTTP_CODE = re.compile(r"upstream_http_[1-5][0-9][0-9]")
# Every label value is one of a bounded set, so no client can grow the series by what it sends: models are the
# `models:` globs (model_label), clients their families (clients/families.py), and these.
DIALECT_NAMES = frozenset({*DIALECTS, "native", "unknown"})
PROTOCOLS = frozenset({"chat", "messages", "responses"})
# A right key; a wrong one; refused unheard while its address waits (web/attempts.py); a form without its token.
LoginOutcome = Literal["success", "wrong_key", "refused", "bad_token"]


@dataclass(frozen=True, slots=True)
class _Instruments:
    requests: Counter
    tool_calls: Counter
    empty_answers: Counter
    loop_guard: Counter
    upstream_errors: Counter
    overhead: Histogram
    upstream: Histogram
    first_byte: Histogram
    in_flight: Gauge
    queued: Gauge
    build_info: Gauge
    logins: Counter
    log_dropped: Counter


def _instruments(registry: CollectorRegistry | None) -> _Instruments:
    return _Instruments(
        Counter("toolproxy_requests", "Requests to the API's front ends by protocol, route, HTTP status (or "
                "client_disconnected), model (a configured `models:` glob, or other) and client family (or other)",
                ["protocol", "route", "status", "model", "client"], registry=registry),
        Counter("toolproxy_tool_calls", "Tool calls the upstream's answers attempted, by model (a configured "
                "`models:` glob, or other), dialect and outcome (valid, invalid_json, unknown_name, schema_mismatch, "
                "each with _repaired when mended or asked again; denied)", ["model", "dialect", "outcome"],
                registry=registry),
        Counter("toolproxy_empty_answers", "Answers with neither text nor a tool call, by model", ["model"],
                registry=registry),
        Counter("toolproxy_loop_guard_stops", "Requests the loop guard stopped", registry=registry),
        Counter("toolproxy_upstream_errors", "Requests that failed upstream, by kind", ["kind"], registry=registry),
        Histogram("toolproxy_overhead_seconds", "Time spent in the proxy itself, upstream waits excluded",
                  buckets=OVERHEAD_BUCKETS, registry=registry),
        Histogram("toolproxy_upstream_seconds", "Time spent waiting for the upstream", buckets=UPSTREAM_BUCKETS,
                  registry=registry),
        Histogram("toolproxy_first_byte_seconds", "Streams: from the request to the first content or call sent",
                  buckets=FIRST_BYTE_BUCKETS, registry=registry),
        Gauge("toolproxy_in_flight_requests", "Chat requests being answered", multiprocess_mode="livesum",
              registry=registry),
        Gauge("toolproxy_queued_requests", "Requests waiting for an upstream slot (max_in_flight)",
              multiprocess_mode="livesum", registry=registry),
        # "max": one series for the instance, not one per worker.
        Gauge("toolproxy_build_info", "Always 1; the labels say which toolproxy runs", ["version"],
              multiprocess_mode="max", registry=registry),
        Counter("toolproxy_dashboard_logins", "Dashboard sign-in attempts by outcome", ["outcome"],
                registry=registry),
        Counter("toolproxy_log_dropped_records", "Transform log records dropped: the queue for the store was full "
                "(queue_full: the store down, slow or full for too long) or the store refused them (refused)",
                ["reason"], registry=registry),
    )


@functools.cache
def _process_instruments() -> _Instruments:
    """Multiprocess mode: once per process (two objects with one name would overwrite each other's values in the
    worker's files), and registered nowhere: /metrics reads every worker's files instead."""
    return _instruments(None)


class Metrics:
    """The app's metrics. Outside multiprocess mode each instance has its own registry, so tests (and several
    apps in one process) never collide."""

    def __init__(self, models: tuple[str, ...] = ()) -> None:
        self._models = models  # the `models:` globs: the only model label values besides "other"
        self._directory = os.environ.get(MULTIPROC_ENV) or None
        if self._directory is not None and values.ValueClass is values.MutexValue:
            raise RuntimeError(f"{MULTIPROC_ENV} was set after prometheus_client was imported in this process; "
                               "set it before (gunicorn.conf.py does, before any worker starts)")
        if self._directory is not None:
            os.makedirs(self._directory, exist_ok=True)  # each worker's files go here from the first metric on
        self._registry = CollectorRegistry() if self._directory is None else None
        self._instruments = _process_instruments() if self._registry is None else _instruments(self._registry)
        self._instruments.build_info.labels(version=__version__).set(1)

    @property
    def multiprocess(self) -> bool:
        return self._directory is not None

    def observe(self, record: TransformRecord) -> None:
        """Count one finished request; never raises (metrics must not fail a request)."""
        try:
            self._observe(record)
        except Exception:  # the request is already answered: losing one observation is the lesser harm
            logger.exception("metrics: request %s not counted", record.request_id)

    def _observe(self, record: TransformRecord) -> None:
        meters = self._instruments
        model = model_label(record.model, self._models)
        meters.requests.labels(protocol=protocol_label(record.protocol), route=record.route or "unknown",
                               status=status_label(record.status), model=model, client=family(record.client)).inc()
        for dialect, outcome in call_outcomes(record):
            meters.tool_calls.labels(model=model, dialect=dialect_label(dialect), outcome=outcome).inc()
        if EMPTY_ANSWER in record.issues:
            meters.empty_answers.labels(model=model).inc()
        if record.route == "loop_guard":
            meters.loop_guard.inc()
        kind = upstream_error_kind(record)
        if kind is not None:
            meters.upstream_errors.labels(kind=kind).inc()
        meters.overhead.observe(max(0.0, record.overhead_ms) / 1000)
        if record.upstream_ms > 0:  # a request refused before the upstream would only pull the quantiles down
            meters.upstream.observe(record.upstream_ms / 1000)
        if record.first_byte_ms is not None:
            meters.first_byte.observe(record.first_byte_ms / 1000)

    @contextmanager
    def in_flight(self) -> Iterator[None]:
        """Around a request: the in-flight gauge (summed over live workers in multiprocess mode)."""
        self.request_started()
        try:
            yield
        finally:
            self.request_finished()

    def request_started(self) -> None:
        """For a request whose end comes later than its view returns (a stream): pair with request_finished."""
        self._instruments.in_flight.inc()

    def request_finished(self) -> None:
        self._instruments.in_flight.dec()

    def queued(self, change: int) -> None:
        """A request began (+1) or ended (-1) its wait for an upstream slot (upstream/gate.py)."""
        self._instruments.queued.inc(change)

    def refused(self, status: int, protocol: str = "", user_agent: str = "") -> None:
        """A request refused before any route ran (web/refusals.py): no record of its own comes to `observe`."""
        self._instruments.requests.labels(protocol=protocol_label(protocol), route="refused",
                                          status=status_label(status), model="none", client=family(user_agent)).inc()

    def login(self, outcome: LoginOutcome) -> None:
        """One dashboard sign-in attempt."""
        self._instruments.logins.labels(outcome=outcome).inc()

    def log_dropped(self, count: int, reason: str) -> None:
        """Records the transform log dropped (translog.py), by reason: queue_full or refused."""
        self._instruments.log_dropped.labels(reason=reason).inc(count)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type, for `GET /metrics`."""
        registry = self._registry
        if registry is None:
            # A fresh registry per scrape, as prometheus-client prescribes: the collector reads the files as they
            # are now, dead workers' counters included.
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self._directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST


def call_outcomes(record: TransformRecord) -> list[tuple[str, str]]:
    """(dialect, outcome) for each call the answer attempted, `_repaired` added where its arguments were mended or
    the upstream was asked again; (the dialect it was written in, "denied") for each the access policy refused."""
    denied = list(record.denied)
    found = []
    for dialect, outcome, repaired in record.attempts:
        if outcome == "valid" and dialect in denied:
            denied.remove(dialect)  # counted once, as denied
            found.append((dialect or "unknown", "denied"))
            continue
        found.append((dialect or "unknown", outcome + ("_repaired" if repaired or record.repairs > 0 else "")))
    return found + [(dialect or "unknown", "denied") for dialect in denied]


@functools.lru_cache(maxsize=1024)
def model_label(model: str, globs: tuple[str, ...]) -> str:
    """The `models:` glob the model matches (first wins, as for its settings), or "other": the label set stays
    bounded by the configuration, whatever names clients send."""
    return next((glob for glob in globs if fnmatch.fnmatchcase(model, glob)), "other")


def dialect_label(dialect: str) -> str:
    """A registry dialect, `native`, `unknown` (markup no dialect read), or `other`."""
    return dialect if dialect in DIALECT_NAMES else "other"


def protocol_label(protocol: str) -> str:
    return protocol if protocol in PROTOCOLS else "none" if not protocol else "other"


def status_label(status: int | str) -> str:
    """An HTTP status, `client_disconnected`, or `other`: whatever a record holds, never a new series per value."""
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return str(status)
    return status if status == "client_disconnected" else "other"


def upstream_error_kind(record: TransformRecord) -> str | None:
    """The `kind` label when the request failed upstream or with a 5xx, else None."""
    code = record.error_code or ""
    if code in UPSTREAM_CODES or _UPSTREAM_HTTP_CODE.fullmatch(code):
        return code
    if isinstance(record.status, int) and record.status >= 500:
        return f"http_{record.status}"
    return None


def mark_process_dead(pid: int, path: str | None = None) -> None:
    """For gunicorn's `child_exit` hook: drop the dead worker's live gauges. A no-op outside multiprocess mode."""
    directory = path or os.environ.get(MULTIPROC_ENV)
    if directory:
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]  # unannotated upstream
