"""The backend kind: found from what each scripted server serves (never the model's name), by bounded probes that
never hold a request; shown in /health (for a caller with a key), on the dashboard and in each record; and what
each kind changes: constrained calls, llama-cpp-python's quirks."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests

from tests.backend_servers import CHAT_TEMPLATE, server
from tests.conftest import free_port, make_body, make_tool, with_settings
from tests.fake_upstream import FakeUpstream
from tests.sse_client import accumulate, read_stream
from tests.test_dashboard import wait_for_records
from toolproxy.upstream.probe import Backends, detect, props

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
TAGS = {"type": "function", "function": {"name": "tag", "parameters": {
    "type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}}}
WITH_REF = {"type": "function", "function": {"name": "node", "parameters": {
    "$defs": {"leaf": {"type": "string"}}, "type": "object", "properties": {"v": {"$ref": "#/$defs/leaf"}}}}}
VERSIONS = {"vllm": "0.11.2", "sglang": "0.5.4", "llamacpp": "b6700-3df1a2b", "ollama": "0.12.6",
            "llama-cpp-python": "", "lmstudio": "", "mlx": "", "generic": ""}


def _wait_for(check, what: str, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _latest(proxy, count: int = 1) -> tuple[dict, str]:
    """The newest record's summary row and its page, once `count` records are stored."""
    row = wait_for_records(proxy.url, count)[0]
    return row, requests.get(f"{proxy.url}/dashboard/record/{row['id']}", timeout=10).text


def _health(proxy, key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.get(f"{proxy.url}/health?detail=1", headers=headers, timeout=10).json()


@pytest.mark.parametrize("kind", list(VERSIONS))
def test_each_kind_is_found_from_what_its_server_serves(kind, upstream, serve, settings):
    upstream.script = server(kind)
    proxy = serve(with_settings(settings, backend="auto"))
    shown = _wait_for(lambda: [u for u in _health(proxy)["upstreams"] if u["found"] != "unknown"], "the probe")
    assert shown == [{"url": upstream.url.removesuffix("/v1"), "backend": kind, "version": VERSIONS[kind],
                      "found": "detected", "evidence": shown[0]["evidence"]}]
    assert all(request.method == "GET" for request in upstream.received), "a probe only reads"
    proxy.post(make_body("hi", model=f"{'qwen' if kind == 'vllm' else 'llama'}-is-not-a-hint"))
    row, _ = _latest(proxy)
    assert row["backend"] == f"{kind} {VERSIONS[kind]}".strip()


def test_a_configured_kind_is_never_probed(upstream, serve, settings):
    upstream.script = server("ollama")
    proxy = serve(with_settings(settings, backend="vllm"))
    proxy.post(make_body("hi"))
    assert [request.method for request in upstream.received] == ["POST"]
    assert _health(proxy)["upstreams"][0]["backend"] == "vllm"


def test_health_shows_kinds_only_to_a_caller_with_a_key(upstream, serve, settings):
    upstream.script = server("vllm")
    proxy = serve(with_settings(settings, backend="vllm", api_keys=("sk-health",)))
    assert _health(proxy) == {"status": "ok", "version": _health(proxy)["version"]}
    assert _health(proxy, "sk-health")["upstreams"][0]["backend"] == "vllm"


def test_a_hanging_probe_never_holds_a_request(upstream, serve, settings):
    release = threading.Event()

    def script(request, wire):
        if request.method == "GET":
            release.wait(30)  # a server that never answers its probes
            return
        wire.send_json({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "answered"}, "finish_reason": "stop"}]})

    upstream.script = script
    proxy = serve(with_settings(settings, backend="auto"))
    try:
        assert proxy.post(make_body("hi")).json()["choices"][0]["message"]["content"] == "answered"
        assert not release.is_set()  # answered while the probe still hung
    finally:
        release.set()


def test_probes_follow_no_redirect_and_read_a_bounded_body():
    hops = FakeUpstream().start()
    try:
        def script(request, wire):
            if request.path == "/props":
                wire.send_raw(b"", status=302, headers={"Location": f"http://127.0.0.1:{hops.port}/elsewhere"})
            elif request.path == "/version":
                wire.send_raw(b'{"version": "' + b"9" * 200_000 + b'"}', headers={"Content-Type": "application/json"})
            else:
                wire.send_json({"detail": "Not Found"}, status=404)

        hops.script = script
        backend = detect(hops.url)
        assert (backend.kind, backend.source) == ("generic", "detected")
        assert "/elsewhere" not in [request.path for request in hops.received]
    finally:
        hops.stop()


def test_a_server_that_is_down_is_unknown_and_probed_again_when_lost():
    backends = Backends()
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    assert backends.of(url, "auto").kind == "generic"
    _wait_for(lambda: not backends._states[url].probing, "the failed probe")
    assert backends.of(url, "auto").source == "unknown"
    seen = []
    backends._states[url].checked -= 60  # as if the retry interval had passed
    backends._detect = lambda probed, key: seen.append(probed) or detect(probed, key, seconds=0.5)
    backends.lost(url)
    backends.of(url, "auto")
    _wait_for(lambda: seen, "the probe after the loss")


def test_llamacpp_props_are_kept_for_template_readers(upstream):
    upstream.script = server("llamacpp")
    backend = detect(upstream.url)
    assert (backend.kind, backend.version) == ("llamacpp", "b6700-3df1a2b")
    assert props(upstream.url)["chat_template"] == CHAT_TEMPLATE
    assert props("http://127.0.0.1:1/v1") is None


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_tools_go_strict_where_the_grammar_engine_takes_them(kind, upstream, serve, settings):
    chats: list = []
    upstream.script = server(kind, chats=chats)
    proxy = serve(with_settings(settings, backend=kind))
    proxy.post(make_body("x", [READ, WITH_REF]))
    sent = {tool["function"]["name"]: tool["function"].get("strict") for tool in chats[0]["tools"]}
    assert sent == {"read": True, "node": None}, "a schema with $ref/$defs goes without strict"
    proxy_off = serve(with_settings(settings, backend=kind, constrain="off"))
    proxy_off.post(make_body("x", [READ]))
    assert "strict" not in chats[1]["tools"][0]["function"]


@pytest.mark.parametrize("kind", ["llamacpp", "ollama", "generic"])
def test_other_kinds_get_the_tools_as_sent(kind, upstream, serve, settings):
    chats: list = []
    upstream.script = server(kind, chats=chats)
    proxy = serve(with_settings(settings, backend=kind))
    proxy.post(make_body("x", [READ], tool_choice="required"))
    assert chats[0]["tools"] == [READ] and chats[0]["tool_choice"] == "required"


def test_a_strict_schema_the_server_refuses_is_asked_again_without_and_remembered(upstream, serve, settings):
    chats: list = []
    upstream.script = server("vllm", answers=lambda body: {"content": "ok"}, chats=chats)
    proxy = serve(with_settings(settings, backend="vllm"))
    answer = proxy.post(make_body("x", [READ, TAGS]))
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "ok"
    first, retried = chats
    assert [tool["function"].get("strict") for tool in first["tools"]] == [True, True]
    assert [tool["function"].get("strict") for tool in retried["tools"]] == [True, None]
    _, record = _latest(proxy)
    assert "constrain: the upstream refused strict schemas" in record and "without strict for tag" in record
    proxy.post(make_body("x", [READ, TAGS]))
    assert len(chats) == 3 and [tool["function"].get("strict") for tool in chats[2]["tools"]] == [True, None]


def test_a_strict_schema_the_client_set_is_not_retried(upstream, serve, settings):
    upstream.script = server("vllm")
    proxy = serve(with_settings(settings, backend="vllm"))
    mine = {"type": "function", "function": {**TAGS["function"], "strict": True}}
    assert proxy.post(make_body("x", [mine])).status_code == 400
    assert len(upstream.received) == 1


def test_llama_cpp_python_gets_auto_when_the_client_left_tool_choice_out(upstream, serve, settings):
    """llama-cpp-python ignores `tools` without `tool_choice`; OpenAI clients leave it out to mean auto."""
    chats: list = []
    upstream.script = server("llama-cpp-python", chats=chats,
                             answers=lambda body: {"content": None, "tool_calls": [
                                 {"id": "c1", "type": "function",
                                  "function": {"name": "read", "arguments": '{"path": "/a"}'}}]})
    proxy = serve(with_settings(settings, backend="llama-cpp-python"))
    choice = proxy.post(make_body("read /a", [READ])).json()["choices"][0]
    assert chats[0]["tool_choice"] == "auto"
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["tool_calls"][0]["function"]["name"] == "read"
    proxy.post(make_body("read /a", [READ], tool_choice="required"))
    assert chats[1]["tool_choice"] == {"type": "function", "function": {"name": "read"}}, "required is its 500"


def test_llama_cpp_python_streams_with_tools_buffered(upstream, serve, settings):
    """Its streamed answer with tools breaks after the 200: incremental falls back to buffered, and says so."""
    chats: list = []
    upstream.script = server("llama-cpp-python", chats=chats, answers=lambda body: {"content": "Hello."})
    proxy = serve(with_settings(settings, backend="llama-cpp-python", stream_strategy="incremental"))
    got = accumulate(read_stream(proxy.post(make_body("x", [READ], stream=True))))
    assert got["content"] == "Hello." and got["finish_reason"] == ["stop"]
    assert chats[0]["stream"] is False
    row, page = _latest(proxy)
    assert row["strategy"] == "buffered"
    assert "fell back to buffered: llama-cpp-python cannot stream an answer with tools" in page


def test_an_empty_answer_is_an_issue_and_counted(upstream, serve, settings):
    upstream.script = server("llama-cpp-python", answers=lambda body: {"content": ""})
    proxy = serve(with_settings(settings, backend="llama-cpp-python"))
    choice = proxy.post(make_body("x", [READ])).json()["choices"][0]
    assert choice["message"]["content"] == "" and choice["finish_reason"] == "stop"
    row, page = _latest(proxy)
    assert row["has_issues"] and row["failed"]
    assert "empty answer: the upstream returned neither text nor a tool call" in page
    metrics = requests.get(f"{proxy.url}/metrics", timeout=10).text
    assert 'toolproxy_empty_answers_total{model="other"} 1.0' in metrics


def test_tool_choice_none_sent_to_strict_kinds_keeps_no_call(upstream, serve, settings):
    upstream.script = server("vllm", answers=lambda body: {"content": '<tool_call>\n{"name": "read", "arguments": '
                                                                      '{"path": "/a"}}\n</tool_call>'})
    proxy = serve(with_settings(settings, backend="vllm"))
    choice = proxy.post(make_body("x", [READ], tool_choice="none")).json()["choices"][0]
    assert "tool_calls" not in choice["message"] and json.loads(
        choice["message"]["content"].split("\n")[1])["name"] == "read"


def test_the_dashboard_shows_each_model_s_failed_call_share(upstream, serve, settings):
    good = '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'
    bad = '<tool_call>\n{"name": "read", "arguments": {"path": 5, "x": }\n</tool_call>'
    answers = iter([good, bad, good])
    upstream.script = server("generic", answers=lambda body: {"content": next(answers, "hello")})
    proxy = serve(settings)
    for model in ("qwen", "qwen", "llama"):
        proxy.post(make_body("read /a", [READ], model=model))
    proxy.post(make_body("no tools", model="qwen"))  # a request without tools has no call to fail
    wait_for_records(proxy.url, 4)
    page = requests.get(f"{proxy.url}/dashboard/", timeout=10).text
    assert "qwen:\n    hour\n    50.0% (1/2) · day\n    50.0% (1/2)" in page
    assert "llama:\n    hour\n    0.0% (0/1)" in page
    from toolproxy.observe import queries

    later = queries.stats(str(next((settings_dir(settings)).glob("*.sqlite3"))), now=time.time() + 7200)
    assert later["failures"]["qwen"] == {"hour": (0, 0), "day": (1, 2)}
    metrics = requests.get(f"{proxy.url}/metrics", timeout=10).text
    assert 'toolproxy_tool_calls_total{dialect="hermes",model="other",outcome="valid"} 2.0' in metrics
    assert 'toolproxy_tool_calls_total{dialect="unknown",model="other",outcome="invalid_json"} 1.0' in metrics


def settings_dir(settings):
    from pathlib import Path

    return Path(settings.data_dir)
