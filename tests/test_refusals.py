"""Requests refused before routing (issue 24): 401, 403, 413, 415 each counted in /metrics and shown on the
dashboard, at most ten records a minute so that a flood cannot fill the transform log."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.serving import make_server

from tests.conftest import ProxyServer, make_body, with_settings
from tests.test_dashboard import sign_in, wait_for_records
from tests.test_dashboard_login import Clock
from toolproxy import create_app
from toolproxy.web import refusals

KEY = "sk-refusals"
BEARER = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def keyed(settings, clock: Clock) -> Iterator[ProxyServer]:
    """The app with a key and a 1 KiB body limit, its refusal records on a clock the test moves."""
    app = create_app(with_settings(settings, api_keys=(KEY,), max_body_bytes=1024))
    app.extensions[refusals.REFUSALS] = refusals.Refusals(app.extensions["toolproxy"], clock=clock)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield ProxyServer(f"http://127.0.0.1:{server.server_port}")
    server.shutdown()


def counted(url: str) -> dict[tuple[str, str], float]:
    """Requests counted per (route, status), summed over their other labels."""
    text = requests.get(f"{url}/metrics", headers=BEARER, timeout=10).text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "toolproxy_requests_total":
                key = (sample.labels["route"], sample.labels["status"])
                found[key] = found.get(key, 0.0) + sample.value
    return found


def records(url: str, count: int) -> list[dict]:
    session = requests.Session()
    sign_in(session, url, KEY)
    return wait_for_records(url, count, cookies=session.cookies)


def test_each_refusal_is_counted_and_recorded(upstream, keyed):
    chat = f"{keyed.url}/v1/chat/completions"
    answers = [
        requests.post(chat, json=make_body(), headers={"Authorization": "Bearer wrong"}, timeout=10),
        requests.post(chat, data="hi", headers={**BEARER, "Content-Type": "text/plain"}, timeout=10),
        requests.post(chat, json=make_body("x" * 2000), headers=BEARER, timeout=10),
        requests.get(f"{keyed.url}/v1/models", headers={**BEARER, "Host": "evil.example"}, timeout=10),
    ]
    assert [answer.status_code for answer in answers] == [401, 415, 413, 403]
    assert {key: value for key, value in counted(keyed.url).items() if key[0] == "refused"} == {
        ("refused", "401"): 1, ("refused", "415"): 1, ("refused", "413"): 1, ("refused", "403"): 1}
    rows = records(keyed.url, 4)
    assert [(row["route"], row["status"]) for row in reversed(rows)] == [
        ("refused", 401), ("refused", 415), ("refused", 413), ("refused", 403)]
    assert [row["request_id"] for row in reversed(rows)] == [answer.headers["X-Request-Id"] for answer in answers]
    session = requests.Session()
    sign_in(session, keyed.url, KEY)
    page = session.get(f"{keyed.url}/dashboard/record/{rows[-1]['id']}", timeout=10).text
    assert "Incorrect or missing API key" in page
    assert "refused: 4" in session.get(f"{keyed.url}/dashboard/", timeout=10).text


def test_a_flood_is_counted_whole_and_recorded_ten_a_minute(upstream, keyed, clock):
    for _ in range(25):
        requests.post(f"{keyed.url}/v1/chat/completions", json=make_body(), timeout=10)
    assert counted(keyed.url)[("refused", "401")] == 25
    assert len(records(keyed.url, refusals.RECORDS_PER_MINUTE)) == refusals.RECORDS_PER_MINUTE
    clock.now += 60
    requests.post(f"{keyed.url}/v1/chat/completions", json=make_body(), timeout=10)
    rows = records(keyed.url, refusals.RECORDS_PER_MINUTE + 1)
    assert len(rows) == refusals.RECORDS_PER_MINUTE + 1
    session = requests.Session()
    sign_in(session, keyed.url, KEY)
    latest = session.get(f"{keyed.url}/dashboard/record/{rows[0]['id']}", timeout=10).text
    assert "15 more refusals came since the last one recorded" in latest


def test_an_upstreams_own_401_is_no_refusal(upstream, serve, settings):
    proxy = serve(settings)
    upstream.script = lambda request, wire: wire.send_json(
        {"error": {"message": "bad key", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}},
        status=401)
    assert proxy.post(make_body()).status_code == 401
    [row] = wait_for_records(proxy.url, 1)
    assert row["route"] != "refused"
    assert not [key for key in counted(proxy.url) if key[0] == "refused"]
