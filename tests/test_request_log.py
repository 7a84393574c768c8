"""Logs and ids: one line per request under real gunicorn (text or JSON), `X-Request-Id` on every response equal
to the dashboard's record id, the client's own id kept, the version in /health and /metrics."""

from __future__ import annotations

import json
import re
import string
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_body, make_tool, with_settings
from tests.fake_upstream import completion
from toolproxy import __version__
from toolproxy.observe.record import new_request_id

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
CALL = '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>'


def _records(url: str, count: int) -> list[dict]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = requests.get(f"{url}/dashboard/records.json", timeout=5).json()["records"]
        if len(rows) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} records")


def test_one_json_line_per_request_with_its_record_id(upstream, start_gunicorn):
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_LOG_FORMAT": "json"}).wait_ready()
    upstream.script = lambda request, wire: wire.send_json(completion(CALL))
    answer = requests.post(f"{server.url}/v1/chat/completions", json=make_body("x", [READ]), timeout=10,
                           headers={"X-Request-Id": "client-42"})
    rejected = requests.post(f"{server.url}/v1/chat/completions", json={"model": "m"}, timeout=10)
    listed = requests.get(f"{server.url}/v1/models", timeout=10)
    ours = answer.headers["X-Request-Id"]
    assert ours.startswith("req_") and rejected.headers["X-Request-Id"].startswith("req_")
    lines = [json.loads(line) for line in server.output().splitlines()]  # gunicorn's own lines are JSON too
    assert any("Booting worker" in line["message"] for line in lines)
    mine = [line for line in lines if line.get("request_id") == ours]
    assert len(mine) == 1, "exactly one line for the request"
    line = mine[0]
    assert (line["client_request_id"], line["model"], line["route"], line["status"]) == ("client-42", "test-model",
                                                                                        "tools", 200)
    assert line["calls"] == ["read"] and line["dialects"] == ["hermes"]
    assert line["upstream_ms"] >= 0 and line["overhead_ms"] >= 0 and line["level"] == "INFO"
    assert any(other.get("request_id") == rejected.headers["X-Request-Id"] and other["status"] == 400
               for other in lines), "a rejected request has its line too"
    (models,) = [line for line in lines if line.get("request_id") == listed.headers["X-Request-Id"]]
    assert (models["method"], models["path"], models["status"]) == ("GET", "/v1/models", 200)
    assert not any(line.get("path") == "/health" for line in lines), "probes only at DEBUG"


def test_text_lines_and_no_access_line(upstream, start_gunicorn):
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url}).wait_ready()
    upstream.script = lambda request, wire: wire.send_json(completion("hello"))
    ours = requests.post(f"{server.url}/v1/chat/completions", json=make_body(), timeout=10,
                         headers={"User-Agent": 'agent/1.0 "quoted"'}).headers["X-Request-Id"]
    output = server.output()
    (line,) = [line for line in output.splitlines() if ours in line]
    assert f"request request_id={ours} model=test-model client=" in line and " route=plain status=200" in line
    client = line.split(" client=", 1)[1].split(" route=", 1)[0]
    assert json.loads(client) == 'agent/1.0 "quoted"', "a client's text is quoted: it cannot forge fields"
    assert "/v1/chat/completions HTTP/1.1" not in output, "gunicorn's access line is off"


def test_every_response_carries_the_record_id(upstream, proxy):
    upstream.completion(CALL)
    streamed = proxy.post(make_body("x", [READ], stream=True), headers={"X-Request-Id": "abc-1"})
    assert streamed.headers["X-Request-Id"].startswith("req_")
    rows = _records(proxy.url, 1)
    assert rows[0]["request_id"] == streamed.headers["X-Request-Id"]
    assert rows[0]["client_request_id"] == "abc-1"
    for response in (requests.get(f"{proxy.url}/health", timeout=5), requests.get(f"{proxy.url}/nope", timeout=5),
                     requests.get(f"{proxy.url}/v1/models", timeout=5)):
        assert response.headers["X-Request-Id"].startswith("req_")


def test_health_and_metrics_name_the_version(upstream, serve, settings):
    proxy = serve(with_settings(settings, deny_tools=("read",)))
    assert requests.get(f"{proxy.url}/health", timeout=5).json() == {"status": "ok", "version": __version__}
    upstream.completion(CALL)
    proxy.post(make_body("x", [READ]))
    _records(proxy.url, 1)
    samples = {(sample.name, frozenset(sample.labels.items())): sample.value
               for family in text_string_to_metric_families(requests.get(f"{proxy.url}/metrics", timeout=5).text)
               for sample in family.samples}
    assert samples[("toolproxy_build_info", frozenset({("version", __version__)}))] == 1
    assert samples[("toolproxy_tool_calls_total", frozenset({("model", "other"), ("dialect", "hermes"),
                                                        ("outcome", "denied")}))] == 1
    assert ("toolproxy_loop_guard_stops_total", frozenset()) in samples



def test_a_request_id_leads_to_its_record_on_the_dashboard(upstream, proxy):
    upstream.completion("hello")
    ours = proxy.post(make_body(), headers={"X-Request-Id": "nginx-7f3a"}).headers["X-Request-Id"]
    _records(proxy.url, 1)
    page = requests.get(f"{proxy.url}/dashboard/request/{ours}", timeout=5)
    assert page.status_code == 200 and "/dashboard/record/" in page.url
    assert ours in page.text and "nginx-7f3a" in page.text
    assert requests.get(f"{proxy.url}/dashboard/request/req_unknown", timeout=5).status_code == 404


def test_request_ids_are_16_letters_or_digits_drawn_from_all_62() -> None:
    ids = [new_request_id() for _ in range(2000)]
    assert all(re.fullmatch(r"req_[A-Za-z0-9]{16}", value) for value in ids) and len(set(ids)) == len(ids)
    assert set("".join(value[4:] for value in ids)) == set(string.ascii_letters + string.digits)
