"""The proxy under real gunicorn with a gevent worker: heartbeats while a forced non-stream call generates,
commit timing, live passthrough, and the upstream connection closed when the client goes away."""

from __future__ import annotations

import json
import socket
import threading
import time

import requests

from tests.conftest import make_body, make_tool
from tests.fake_upstream import completion
from tests.sse_client import accumulate, parse_stream

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def chunk(content: str, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def test_slow_answer_gets_committed_stream_with_heartbeats(upstream, gunicorn_proxy):
    """Ordered by events, not timed: the upstream answers only once the client has seen the role chunk and two
    heartbeats, which the proxy must therefore send while it waits."""
    heard = threading.Event()

    def slow(request, wire):
        if heard.wait(30):
            wire.send_json(completion('<tools>{"name": "read", "arguments": {"path": "/x"}}</tools>'))

    upstream.script = slow
    raw = b""
    with requests.post(f"{gunicorn_proxy.url}/v1/chat/completions", stream=True, timeout=30,
                       json=make_body("x", [READ], stream=True)) as response:
        assert response.status_code == 200
        for piece in response.iter_content(chunk_size=None):
            raw += piece
            if raw.count(b": keep-alive\n\n") >= 2 and b'"role":"assistant"' in raw:
                heard.set()
    events, heartbeats = parse_stream(raw)
    assert heard.is_set() and heartbeats >= 2
    assembled = accumulate(events)
    assert assembled["tool_calls"][0]["name"] == "read" and assembled["finish_reason"] == ["tool_calls"]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}


def test_fast_upstream_error_keeps_its_http_status(upstream, gunicorn_proxy):
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "bad tools", "type": "x"}}, 422)
    response = requests.post(f"{gunicorn_proxy.url}/v1/chat/completions", timeout=10,
                             json=make_body("x", [READ], stream=True))
    assert response.status_code == 422 and response.json()["error"]["message"] == "bad tools"


def test_late_upstream_error_is_an_sse_error_tail(upstream, gunicorn_proxy):
    def late(request, wire):
        time.sleep(1.2)
        wire.send_json({"error": {"message": "engine died", "type": "server_error"}}, 500)

    upstream.script = late
    response = requests.post(f"{gunicorn_proxy.url}/v1/chat/completions", timeout=10,
                             json=make_body("x", [READ], stream=True))
    events, _ = parse_stream(response.content)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert events[-2]["error"]["message"] == "engine died"


def test_total_deadline_ends_a_trickling_stream(upstream, gunicorn_proxy):
    def trickle(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        for _ in range(40):
            wire.send_chunk(b": still thinking\n\n")
            time.sleep(0.5)

    upstream.script = trickle  # 20 s of comments: the 8 s deadline must end it first
    response = requests.post(f"{gunicorn_proxy.url}/v1/chat/completions", timeout=30,
                             json=make_body(stream=True))
    events, _ = parse_stream(response.content)
    assert events[-2]["error"]["code"] == "upstream_timeout"


def test_passthrough_is_live(upstream, gunicorn_proxy):
    """Lock-step: the upstream sends each event only after the client has received the one before, so a proxy
    that held events back would never finish (each wait would run out and the stream would end short)."""
    received = [threading.Event() for _ in range(3)]
    stalled = []

    def drip(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        for index, event in enumerate([chunk("one "), chunk("two "), chunk("three", "stop")]):
            wire.send_chunk(f"data: {json.dumps(event)}\n\n".encode())
            if not received[index].wait(20):
                stalled.append(index)
                break
        wire.send_chunk(b"data: [DONE]\n\n")
        wire.end_chunks()

    upstream.script = drip
    seen = 0
    with requests.post(f"{gunicorn_proxy.url}/v1/chat/completions", stream=True, timeout=30,
                       json=make_body(stream=True)) as response:
        for line in response.iter_lines():
            if line.startswith(b"data: {"):
                received[seen].set()
                seen += 1
    assert seen == 3 and not stalled, "each event leaves as it arrives"


def _disconnect_after_first_bytes(url: str, body: dict) -> None:
    """A client that reads the start of the answer and then vanishes."""
    payload = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
    sock.recv(100)
    sock.close()


def test_client_disconnect_closes_the_streaming_upstream(upstream, gunicorn_proxy):
    closed = threading.Event()

    def endless(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        try:
            for _ in range(200):
                wire.send_chunk(f"data: {json.dumps(chunk('tok '))}\n\n".encode())
                time.sleep(0.1)
        except OSError:
            closed.set()

    upstream.script = endless
    _disconnect_after_first_bytes(gunicorn_proxy.url, make_body(stream=True))
    assert closed.wait(3), "the upstream connection was not closed after the client left"


def test_client_disconnect_closes_the_forced_non_stream_upstream(upstream, gunicorn_proxy):
    saw_close = threading.Event()

    def generating(request, wire):
        if wire.wait_for_close(6):
            saw_close.set()

    upstream.script = generating
    _disconnect_after_first_bytes(gunicorn_proxy.url, make_body("x", [READ], stream=True))
    assert saw_close.wait(4), "vLLM would still be generating for a client that left"


def test_health_answers_while_the_upstream_hangs(upstream, gunicorn_proxy):
    release = threading.Event()
    upstream.script = lambda request, wire: release.wait(20)
    statuses = []
    hung = threading.Thread(target=lambda: statuses.append(requests.post(
        f"{gunicorn_proxy.url}/v1/chat/completions", json=make_body(), timeout=30).status_code))
    hung.start()
    deadline = time.monotonic() + 20
    while not upstream.received and time.monotonic() < deadline:
        time.sleep(0.05)
    # Answered while the completion is still held by the hung upstream: health never waits on it.
    assert requests.get(f"{gunicorn_proxy.url}/health", timeout=10).status_code == 200
    assert hung.is_alive() and not statuses
    release.set()
    hung.join(30)
    assert statuses == [502], "the upstream closed without answering"
