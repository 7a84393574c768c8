"""The charts' data (observe/charts.py) from the transform log's rows, /dashboard/charts.json over a real log, and
the table's columns and filters as declared once (web/columns.py) in the page the server writes."""

from __future__ import annotations

import html
import json
import re

import requests

from tests.conftest import make_body, make_tool
from tests.test_dashboard_pages import wait_for_records
from toolproxy.observe.charts import BUCKETS, CHARTS, OUTCOMES, chart_data, window_of
from toolproxy.web.columns import COLUMNS, FILTERS, script_columns

NOW = 1_800_000_000.0
READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def row(seconds_ago: float, route: str = "tools", status: int | str = 200, repairs: int = 0, overhead: float = 1.0,
        first_byte: float | None = None, failed: int = 0, model: str = "m", dialects: str = '["hermes"]',
        instance: str | None = None) -> tuple:
    return (NOW - seconds_ago, route, status, repairs, overhead, first_byte, failed, model, dialects, instance)


def series(data: dict, chart: str) -> dict[str, list]:
    return {item["label"]: item["values"] for item in data["charts"][chart]}


def test_each_record_counts_once_in_its_bucket_by_its_outcome():
    rows = [row(290), row(290, repairs=1), row(290, failed=1), row(290, status=503, route="plain"),
            row(290, route="loop_guard"), row(290, status=400, route="rejected"),
            row(290, status="client_disconnected", route="stream"), row(10), row(400), row(-5)]
    data = chart_data(rows, NOW, 300, "here")
    assert data["step"] == 5 and len(data["times"]) == BUCKETS and data["times"][-1] == NOW
    outcomes = series(data, "outcomes")
    assert list(outcomes) == list(OUTCOMES)
    per_minute = 60 / 5
    assert {label: values[2] for label, values in outcomes.items()} == {label: per_minute for label in OUTCOMES}
    assert outcomes["ok"][58] == per_minute  # ten seconds ago; the records before the window and after now: none
    assert sum(sum(values) for values in outcomes.values()) == 8 * per_minute


def test_shares_percentiles_and_instances():
    rows = [row(100, failed=1, model="qwen"), row(100, model="qwen"), row(100, dialects="[]", failed=1),
            row(100, route="plain", failed=0), row(30, overhead=2.0, first_byte=40.0, instance="b"),
            row(30, overhead=4.0, first_byte=None, instance="b"), row(30, overhead=9.0, first_byte=80.0)]
    data = chart_data(rows, NOW, 300, "here")
    shares = series(data, "failed_share")
    assert shares["qwen · hermes"][40] == 50.0 and shares["m · none"][40] == 100.0  # the plain request: no tools
    assert shares["qwen · hermes"][0] is None  # no request then: a gap, not a zero
    latency = series(data, "latency")
    assert (latency["overhead p50"][54], latency["overhead p95"][54]) == (4.0, 9.0)
    assert (latency["first byte p50"][54], latency["first byte p95"][54]) == (40.0, 80.0)
    assert latency["first byte p50"][40] is None
    instances = series(data, "instances")
    assert set(instances) == {"b", "here"} and instances["b"][54] == 24.0  # two in five seconds: 24 a minute


def test_the_window_is_one_of_the_offered_ones():
    assert window_of("300") == 300 and window_of("86400") == 86400
    assert window_of(None) == window_of("12") == window_of("1e9") == window_of("3600") == 3600


def test_charts_json_over_the_transform_log(upstream, proxy):
    upstream.completion('<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    proxy.post(make_body("x", [READ], model="qwen3"))
    upstream.completion('<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    proxy.post(make_body("x", [READ], model="qwen3"))
    wait_for_records(proxy.url, 2)
    data = requests.get(f"{proxy.url}/dashboard/charts.json?window=300", timeout=10).json()
    assert data["window"] == 300 and set(data["charts"]) == {chart.key for chart in CHARTS}
    outcomes = series(data, "outcomes")
    assert sum(outcomes["ok"]) == sum(outcomes["failed call"]) == 12  # one each, in 5 s buckets: 12 a minute
    shares = series(data, "failed_share")  # the call to an undeclared tool came out as no call: dialect none
    assert {label: max(value or 0 for value in values) for label, values in shares.items()} == {
        "qwen3 · hermes": 0.0, "qwen3 · none": 100.0}


def test_the_page_draws_the_declared_columns_and_filters(proxy):
    page = requests.get(f"{proxy.url}/dashboard/", timeout=10).text
    header = re.search(r'<table id="records"[^>]*data-columns="([^"]*)"[^>]*>\s*<thead><tr>(.*?)</tr>', page, re.S)
    assert header is not None
    assert json.loads(html.unescape(header.group(1))) == json.loads(script_columns())
    assert re.findall(r"<th>(.*?)</th>", header.group(2)) == [html.escape(column.title) for column in COLUMNS]
    for item in FILTERS:
        assert f'name="{item.key}"' in page
    assert all(f'id="chart-{chart.key}"' in page for chart in CHARTS)
