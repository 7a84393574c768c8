"""Metrics: what one record counts, the exposition `/metrics` serves, and multiprocess mode summing workers."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from toolproxy.observe.metrics import MULTIPROC_ENV, Metrics, call_outcomes, mark_process_dead, upstream_error_kind
from toolproxy.observe.record import TransformRecord
from toolproxy.transform.response import EMPTY_ANSWER
from toolproxy.version import __version__

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def make_record(route: str = "tools", status: int | str = 200, **fields: Any) -> TransformRecord:
    return TransformRecord("req_0000000000000000", time.time(), route=route, status=status, **fields)


def call(name: str, dialect: str, valid: bool = True) -> dict[str, Any]:
    return {"name": name, "arguments": {}, "raw_arguments": "{}", "dialect": dialect, "valid": valid}


def parse(metrics: Metrics) -> Samples:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body.decode()) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over the series of `name` that have these labels (and any others), as PromQL's sum() would."""
    wanted = set(labels.items())
    return sum(found for (sample, series), found in samples.items() if sample == name and wanted <= series)


@pytest.fixture(autouse=True)
def _single_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)


def test_observed_records_are_counted() -> None:
    metrics = Metrics(models=("qwen*",))
    metrics.observe(make_record(model="qwen3", calls=[call("read", "native"), call("write", "hermes")],
                                attempts=[["native", "valid", False], ["hermes", "valid", False]], overhead_ms=2.0,
                                upstream_ms=800.0))
    metrics.observe(make_record(model="qwen3", calls=[call("read", "hermes", valid=False)], overhead_ms=3.0,
                                attempts=[["hermes", "schema_mismatch", False], ["hermes", "unknown_name", False],
                                          ["unknown", "invalid_json", False]], upstream_ms=900.0))
    metrics.observe(make_record(model="llama", calls=[call("read", "mistral")], repairs=1,
                                attempts=[["mistral", "valid", False]]))
    metrics.observe(make_record(model="llama", calls=[call("edit", "hermes")], attempts=[["hermes", "valid", True]],
                                issues=["hermes: arguments of 'edit' repaired (x)"]))
    metrics.observe(make_record(actions=["access policy: toolproxy refused the call to `rm`: denied."],
                                model="qwen2", denied=["pythonic"], attempts=[["pythonic", "valid", False]]))
    metrics.observe(make_record(model="qwen3", issues=[EMPTY_ANSWER]))
    metrics.observe(make_record("loop_guard"))
    metrics.observe(make_record("plain", 504, error_code="upstream_timeout", upstream_ms=30000.0))
    metrics.observe(make_record("plain", 502))
    metrics.observe(make_record("stream", "client_disconnected"))
    samples = parse(metrics)
    assert value(samples, "toolproxy_requests_total", route="tools", status="200") == 6
    assert value(samples, "toolproxy_requests_total", route="plain", status="504") == 1
    assert value(samples, "toolproxy_requests_total", route="stream", status="client_disconnected") == 1
    outcomes = {("qwen*", "native", "valid"): 1, ("qwen*", "hermes", "valid"): 1,
                ("qwen*", "hermes", "schema_mismatch"): 1, ("qwen*", "hermes", "unknown_name"): 1,
                ("qwen*", "unknown", "invalid_json"): 1, ("other", "mistral", "valid_repaired"): 1,
                ("other", "hermes", "valid_repaired"): 1, ("qwen*", "pythonic", "denied"): 1}
    for (model, dialect, outcome), count in outcomes.items():
        assert value(samples, "toolproxy_tool_calls_total", model=model, dialect=dialect, outcome=outcome) == count
    assert sum(v for (name, _), v in samples.items() if name == "toolproxy_tool_calls_total") == 8
    assert value(samples, "toolproxy_empty_answers_total", model="qwen*") == 1
    assert value(samples, "toolproxy_loop_guard_stops_total") == 1
    assert value(samples, "toolproxy_build_info", version=__version__) == 1
    assert value(samples, "toolproxy_upstream_errors_total", kind="upstream_timeout") == 1
    assert value(samples, "toolproxy_upstream_errors_total", kind="http_502") == 1
    assert value(samples, "toolproxy_overhead_seconds_count") == 10
    assert value(samples, "toolproxy_upstream_seconds_count") == 3
    assert value(samples, "toolproxy_upstream_seconds_bucket", le="1.0") == 2


def test_in_flight_counts_requests_being_answered() -> None:
    metrics = Metrics()
    with metrics.in_flight(), metrics.in_flight():
        assert value(parse(metrics), "toolproxy_in_flight_requests") == 2
    with pytest.raises(ValueError), metrics.in_flight():
        raise ValueError
    assert value(parse(metrics), "toolproxy_in_flight_requests") == 0


def test_instances_do_not_share_counts() -> None:
    first, second = Metrics(), Metrics()
    first.observe(make_record())
    assert value(parse(first), "toolproxy_requests_total", route="tools", status="200") == 1
    assert value(parse(second), "toolproxy_requests_total", route="tools", status="200") == 0


def test_observe_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    broken = make_record(repairs=None, attempts=[["hermes", "valid", False]])  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="toolproxy.observe.metrics"):
        Metrics().observe(broken)
    assert "not counted" in caplog.text


def test_an_upstream_cannot_mint_label_values() -> None:
    assert upstream_error_kind(make_record(status=400, error_code="context_length_exceeded")) is None
    assert upstream_error_kind(make_record(status=503, error_code="whatever-the-server-said")) == "http_503"
    assert upstream_error_kind(make_record(status=429, error_code="upstream_http_429")) == "upstream_http_429"
    assert upstream_error_kind(make_record(status=502, error_code="upstream_unavailable")) == "upstream_unavailable"
    assert upstream_error_kind(make_record(status="client_disconnected")) is None


def test_denied_calls_keep_the_dialect_they_were_written_in() -> None:
    record = make_record(actions=["Stopped by toolproxy's loop guard: ...", "access policy: refused `a`",
                                  "access policy: refused `b`"], denied=["hermes", "glm"],
                         attempts=[["hermes", "valid", False], ["glm", "valid", False]])
    assert call_outcomes(record) == [("hermes", "denied"), ("glm", "denied")]


def test_mark_process_dead_outside_multiprocess_mode_does_nothing() -> None:
    mark_process_dead(os.getpid())


def _worker(requests: int, hold: Any, done: Any) -> None:
    """A spawned process (so prometheus-client sees PROMETHEUS_MULTIPROC_DIR before its import): one worker."""
    metrics = Metrics()
    assert metrics.multiprocess
    for _ in range(requests):
        metrics.observe(make_record(calls=[call("read", "hermes")], attempts=[["hermes", "valid", False]],
                                    overhead_ms=1.0))
    with metrics.in_flight():
        done.set()
        hold.wait(60)
        os._exit(0)  # dies mid-request, like a killed worker: its live gauge stays until mark_process_dead


def _render(path: str) -> None:
    body, _ = Metrics().render()
    Path(path).write_bytes(body)


def _scrape(context: Any, path: Path) -> Samples:
    process = context.Process(target=_render, args=(str(path),))
    process.start()
    process.join(60)
    assert process.exitcode == 0
    process.close()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(path.read_text()) for sample in family.samples}


def test_multiprocess_mode_sums_every_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    monkeypatch.setenv(MULTIPROC_ENV, str(directory))  # inherited by the spawned children only
    context = multiprocessing.get_context("spawn")
    hold, started = context.Event(), [context.Event(), context.Event()]
    workers = [context.Process(target=_worker, args=(count, hold, done))
               for count, done in zip((2, 3), started, strict=True)]
    for worker in workers:
        worker.start()
    assert all(done.wait(60) for done in started)
    samples = _scrape(context, tmp_path / "live.txt")
    assert value(samples, "toolproxy_requests_total", route="tools", status="200") == 5
    assert value(samples, "toolproxy_tool_calls_total", model="other", dialect="hermes", outcome="valid") == 5
    assert value(samples, "toolproxy_overhead_seconds_count") == 5
    assert value(samples, "toolproxy_in_flight_requests") == 2
    hold.set()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert value(_scrape(context, tmp_path / "stale.txt"), "toolproxy_in_flight_requests") == 2
    for worker in workers:
        mark_process_dead(worker.pid or 0, str(directory))
        worker.close()
    samples = _scrape(context, tmp_path / "after.txt")
    assert value(samples, "toolproxy_requests_total", route="tools", status="200") == 5  # dead workers still count
    assert value(samples, "toolproxy_in_flight_requests") == 0
