"""What held only in part when probed from outside (issue 24): a byte-order mark before the first upstream event,
malformed native calls, a body over the limit on a kept-alive connection, hung upstreams behind /v1/models, and
upstream errors that must say which URL was called (never a key)."""

from __future__ import annotations

import json
import queue
import socket
import threading
import time

import pytest
import requests

from tests.conftest import make_body, make_tool, with_settings
from tests.fake_upstream import completion
from tests.sse_client import accumulate, read_stream
from tests.test_dashboard import wait_for_records
from toolproxy.config.settings import load_settings

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def chunk(content: str, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]}


@pytest.mark.parametrize("split", [0, 1, 2, 3])
def test_a_byte_order_mark_before_the_first_event_is_ignored_as_sse_says(upstream, proxy, split):
    """One leading U+FEFF is no part of the stream (the SSE standard); before, the first event was lost."""
    def script(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        first = b"\xef\xbb\xbf" + b"data: " + json.dumps(chunk("bom ")).encode() + b"\n\n"
        wire.send_chunk(first[:split]) if split else None
        wire.send_chunk(first[split:])
        wire.send_chunk(b"data: " + json.dumps(chunk("ok", "stop")).encode() + b"\n\ndata: [DONE]\n\n")
        wire.end_chunks()

    upstream.script = script
    assert accumulate(read_stream(proxy.post(make_body("hi", stream=True))))["content"] == "bom ok"


@pytest.mark.parametrize("calls", [[5], [{"type": "function", "function": None}], ["read"], [None],
                                   [{"id": "x", "type": "function", "function": {"name": 7, "arguments": "{}"}}]])
def test_a_malformed_native_call_is_never_turned_into_content(upstream, proxy, calls):
    """Text the model never wrote must not appear: a native call that is no call is dropped, with an issue."""
    upstream.completion("Let me look.", tool_calls=calls)
    message = proxy.post(make_body("hi", [READ])).json()["choices"][0]["message"]
    assert message["content"] == "Let me look." and "tool_calls" not in message
    records = wait_for_records(proxy.url, 1)
    detail = requests.get(f"{proxy.url}/dashboard/record/{records[0]['id']}", timeout=5).text
    assert "malformed native call dropped" in detail


@pytest.mark.parametrize("server", ["werkzeug", "gunicorn"])
def test_a_body_over_the_limit_is_answered_413_and_the_connection_closed(upstream, serve, settings, start_gunicorn,
                                                                          server):
    if server == "gunicorn":
        limited = {"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_MAX_BODY_BYTES": "1000"}
        port = start_gunicorn(limited).wait_ready().port
    else:
        port = int(serve(with_settings(settings, max_body_bytes=1000)).url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n" + b"x" * 5000)
        head = sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 413") and b"connection: close" in head.lower()
        sock.settimeout(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the server stops reading and closes: the read ends
            try:
                if not sock.recv(65536):
                    break
            except ConnectionResetError:
                break


def test_models_from_hung_upstreams_are_asked_at_once(upstream, serve, settings, tmp_path):
    """Two upstreams that do not answer are asked together, within one deadline: when the second is asked, the
    first is still being waited on (in turn, the first would have timed out and been closed by then)."""
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    asked: queue.Queue[socket.socket] = queue.Queue()

    def accept(server: socket.socket) -> None:
        connection, _ = server.accept()
        connection.recv(65536)  # the request; no answer
        asked.put(connection)

    for server in servers:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    config = tmp_path / "models.yaml"
    config.write_text("models:\n" + "".join(f"  - {{match: model-{index}, upstream: 'http://127.0.0.1:"
                                              f"{server.getsockname()[1]}/v1'}}\n" for index, server in
                                              enumerate(servers)))
    rules = load_settings({"TOOLPROXY_CONFIG": str(config)}).models
    proxy = serve(with_settings(settings, upstream=None, models=rules, models_timeout=20))
    listed: list[requests.Response] = []
    asking = threading.Thread(target=lambda: listed.append(requests.get(f"{proxy.url}/v1/models", timeout=60)))
    asking.start()
    first, second = asked.get(timeout=60), asked.get(timeout=60)
    first.setblocking(False)
    try:
        still_waited_on = first.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        still_waited_on = True
    for connection in (first, second, *servers):
        connection.close()
    asking.join(60)
    assert still_waited_on
    assert listed[0].status_code == 200
    assert {entry["id"] for entry in listed[0].json()["data"]} == {"model-0", "model-1"}


def operator_view(proxy) -> str:
    """What the operator sees of the last request: its record's error on the dashboard."""
    record = wait_for_records(proxy.url, 1)[0]
    return requests.get(f"{proxy.url}/dashboard/record/{record['id']}", timeout=5).text


def test_an_upstream_error_names_the_url_called_for_the_operator_and_never_the_key(upstream, serve, settings):
    """The client gets the upstream's own message (its host may be internal); the record and the log line name the
    URL that was called, so an operator with several upstreams knows which failed."""
    proxy = serve(with_settings(settings, upstream_api_key="sk-upstream-secret-1234"))
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "boom"}}, status=500)
    error = proxy.post(make_body("hi")).json()["error"]
    assert error["message"] == "boom" and "sk-upstream-secret" not in json.dumps(error)
    page = operator_view(proxy)
    assert f"boom (upstream: {upstream.url}/chat/completions)" in page and "sk-upstream-secret" not in page


def test_a_refused_connection_names_the_url_for_the_operator(serve, settings):
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    proxy = serve(with_settings(settings, upstream=f"http://user:pw@127.0.0.1:{port}/v1"))
    error = proxy.post(make_body("hi", stream=True)).json()["error"]
    assert "127.0.0.1" not in error["message"]
    page = operator_view(proxy)
    assert f"(upstream: http://127.0.0.1:{port}/v1/chat/completions)" in page and "pw@" not in page


def test_native_calls_of_the_right_shape_still_pass(upstream, proxy):
    native = [{"id": "x", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}]
    upstream.completion(None, tool_calls=native, finish_reason="tool_calls")
    message = proxy.post(make_body("hi", [READ])).json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["read"]
    assert completion  # the fake's own shape, used above through upstream.completion
