"""The dashboard and /metrics over HTTP: records of every route, the detail view, the test-case download, the
login when keys are configured, escaping and security headers."""

from __future__ import annotations

import json
import re
import time

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_body, make_tool, with_settings

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def wait_for_records(url: str, count: int, **kwargs) -> list[dict]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        rows = requests.get(f"{url}/dashboard/records.json", timeout=5, **kwargs).json()["records"]
        if len(rows) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} records")


def sign_in(session: requests.Session, url: str, key: str) -> requests.Response:
    """The dashboard's form as a browser fills it: its page first (which gives the session its token), then the
    post."""
    form = session.get(f"{url}/dashboard/login", timeout=10).text
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token, form
    return session.post(f"{url}/dashboard/login", data={"key": key, "csrf": token.group(1)}, timeout=10)


def test_records_detail_and_test_case(upstream, proxy):
    upstream.completion('Reading.\n<tool_call>{"name": "read", "arguments": {"path": "<b>x</b>"}}</tool_call>')
    proxy.post(make_body("read", [READ], stream=True))
    proxy.post({"model": "m"})  # rejected: still a record
    rows = wait_for_records(proxy.url, 2)
    # A record is written when its answer ends, so the two may land in either order.
    rejected, tools = sorted(rows, key=lambda row: row["route"] != "rejected")
    assert rejected["status"] == 400 and rejected["route"] == "rejected"
    assert tools["route"] == "tools_stream" and tools["calls"] == ["read"] and tools["dialects"] == ["hermes"]
    page = requests.get(f"{proxy.url}/dashboard/record/{tools['id']}", timeout=5)
    assert page.status_code == 200 and "&lt;b&gt;x&lt;/b&gt;" in page.text and "<b>x</b>" not in page.text
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    case = requests.get(f"{proxy.url}/dashboard/record/{tools['id']}/testcase.json", timeout=5)
    assert "attachment" in case.headers["Content-Disposition"]
    body = case.json()
    assert body["model_text"].startswith("Reading.") and body["tools"] == [READ]
    assert body["expected"]["tool_calls"] == [{"name": "read", "arguments": {"path": "<b>x</b>"}}]
    assert body["expected"]["content"] == "Reading."
    index = requests.get(f"{proxy.url}/dashboard/", timeout=5)
    assert index.status_code == 200 and "tools_stream" in index.text
    assert "/static/dashboard.js" in index.text and "<script>" not in index.text


def test_filters(upstream, proxy):
    upstream.completion("plain")
    proxy.post({**make_body(), "model": "alpha"})
    upstream.completion('<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    proxy.post({**make_body("x", [READ]), "model": "beta"})
    wait_for_records(proxy.url, 2)
    only = requests.get(f"{proxy.url}/dashboard/records.json?model=beta", timeout=5).json()["records"]
    assert [row["model"] for row in only] == ["beta"]
    issues = requests.get(f"{proxy.url}/dashboard/records.json?has_issues=1", timeout=5).json()["records"]
    assert [row["model"] for row in issues] == ["beta"]


def test_dashboard_needs_a_login_when_keys_are_set(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=("sk-dash",)))
    session = requests.Session()
    first = session.get(f"{proxy.url}/dashboard/", timeout=5)
    assert first.url.endswith("/dashboard/login") and "API key" in first.text
    assert session.get(f"{proxy.url}/dashboard/records.json", timeout=5).status_code == 401
    assert "not one of" in sign_in(session, proxy.url, "wrong").text
    signed_in = sign_in(session, proxy.url, "sk-dash")
    assert signed_in.url.endswith("/dashboard/") and "sk-dash" not in session.cookies.get("toolproxy_session")
    assert session.get(f"{proxy.url}/dashboard/records.json", timeout=5).status_code == 200
    assert requests.get(f"{proxy.url}/metrics", timeout=5).status_code == 401
    assert requests.get(f"{proxy.url}/metrics", headers={"Authorization": "Bearer sk-dash"}, timeout=5).ok


def test_metrics_count_requests_and_calls(upstream, proxy):
    upstream.completion('<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    proxy.post(make_body("x", [READ]))
    proxy.post(make_body("x", [READ]))
    text = requests.get(f"{proxy.url}/metrics", timeout=5).text
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(text) for sample in family.samples}
    assert samples[("toolproxy_requests_total", (("client", "python-requests"), ("model", "other"),
                                                 ("protocol", "chat"), ("route", "tools"), ("status", "200")))] == 2
    assert samples[("toolproxy_tool_calls_total", (("dialect", "hermes"), ("model", "other"),
                                                   ("outcome", "valid")))] == 2


def test_secrets_stay_out_of_the_log(upstream, serve, settings):
    proxy = serve(with_settings(settings, upstream_api_key="sk-SENTINEL-up", api_keys=("sk-SENTINEL-client",)))
    upstream.completion("the key is sk-SENTINEL-up, honest")
    headers = {"Authorization": "Bearer sk-SENTINEL-client"}
    proxy.post(make_body("my key is sk-SENTINEL-client"), headers=headers)
    session = requests.Session()
    sign_in(session, proxy.url, "sk-SENTINEL-client")
    rows = wait_for_records(proxy.url, 1, cookies=session.cookies)
    detail = session.get(f"{proxy.url}/dashboard/record/{rows[0]['id']}", timeout=5).text
    assert "SENTINEL" not in detail and "SENTINEL" not in json.dumps(rows)


def test_two_workers_share_one_log(upstream, start_gunicorn):
    import threading

    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_WORKERS": "2"}).wait_ready()

    def slow(request, wire):
        time.sleep(0.3)
        wire.send_json({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})

    upstream.script = slow
    workers: set[int] = set()
    for _ in range(5):  # the kernel hands connections to either worker; a few rounds make both show up
        threads = [threading.Thread(target=lambda: requests.post(f"{server.url}/v1/chat/completions",
                                                                 json=make_body(), timeout=10)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rows = wait_for_records(server.url, 8)
        workers = {row["worker"] for row in requests.get(f"{server.url}/dashboard/records.json",
                                                         timeout=5).json()["records"]}
        if len(workers) >= 2:
            break
    assert len(workers) >= 2, "records from both workers on one page"
    page = requests.get(f"{server.url}/dashboard/", timeout=5).text
    assert page.count('<tr data-id=') >= len(rows)
    text = requests.get(f"{server.url}/metrics", timeout=5).text
    total = sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                if sample.name == "toolproxy_requests_total")
    assert total >= 8, "metrics cover both workers"


def test_in_flight_gauge_covers_a_stream_until_its_end(upstream, gunicorn_proxy):
    proxy = gunicorn_proxy  # under gevent, as in production: the stream goes on after the view has returned
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
    release = __import__("threading").Event()

    def slow(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        wire.send_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        release.wait(5)
        wire.send_chunk(f"data: {json.dumps({**chunk, 'choices': [{**chunk['choices'][0], 'finish_reason': 'stop'}]})}"
                        "\n\ndata: [DONE]\n\n".encode())
        wire.end_chunks()

    def gauge() -> float:
        text = requests.get(f"{proxy.url}/metrics", timeout=5).text
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == "toolproxy_in_flight_requests")

    upstream.script = slow
    with requests.post(f"{proxy.url}/v1/chat/completions", json=make_body(stream=True), stream=True,
                       timeout=10) as response:
        next(response.iter_lines())
        assert gauge() == 1
        release.set()
        response.content  # noqa: B018 (read to the end)
    time.sleep(0.2)
    assert gauge() == 0


def test_the_login_is_a_signed_session_that_cannot_be_forged(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=("sk-dash",)))
    other = serve(with_settings(settings, api_keys=("sk-other",)))
    session = requests.Session()
    sign_in(session, proxy.url, "sk-dash")
    cookie = session.cookies.get("toolproxy_session")
    payload, _, signature = cookie.rpartition(".")
    assert session.get(f"{proxy.url}/dashboard/records.json", timeout=5).status_code == 200
    for forged in (f"{payload}.{signature[:-2]}xx", "eyJkYXNoYm9hcmQiOnRydWV9.AAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAA"):
        response = requests.get(f"{proxy.url}/dashboard/records.json", cookies={"toolproxy_session": forged},
                                timeout=5)
        assert response.status_code == 401
    elsewhere = requests.get(f"{other.url}/dashboard/records.json", cookies={"toolproxy_session": cookie}, timeout=5)
    assert elsewhere.status_code == 401, "a session signed under other keys is refused"


BIG = "9" * 20  # past 64 bits: SQLite cannot even compare with it
MALFORMED = [
    (f"/dashboard/record/{BIG}", 404), ("/dashboard/record/9223372036854775808", 404),
    (f"/dashboard/record/{BIG}/testcase.json", 404), ("/dashboard/record/" + "9" * 5000, 404),
    (f"/dashboard/records.json?after_id={BIG}", 400), (f"/dashboard/records.json?after_id=-{BIG}", 400),
    ("/dashboard/records.json?after_id=x", 400), ("/dashboard/records.json?after_id=%EF%BC%91", 400),
    ("/dashboard/records.json?after_id=" + "9" * 5000, 400), (f"/dashboard/records.json?status={BIG}", 400),
    (f"/dashboard/?status={BIG}", 400), ("/dashboard/records.json?has_issues=%FF", 400),
    ("/dashboard/records.json?status=%C2%B2", 200), ("/dashboard/record/9223372036854775807", 404),
]


def test_malformed_ids_and_filters_are_404_or_400_never_500(upstream, proxy):
    proxy.post({"model": "m"})
    wait_for_records(proxy.url, 1)
    answers = {path: requests.get(f"{proxy.url}{path}", timeout=10) for path, _ in MALFORMED}
    assert {path: answer.status_code for path, answer in answers.items()} == dict(MALFORMED)
    for path, answer in answers.items():
        if answer.status_code != 200:
            assert answer.json()["error"]["message"], path
