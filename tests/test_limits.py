"""Limits that bound the work one request can cause, through a real HTTP server."""

from __future__ import annotations

import json
import socket
import time

from tests.conftest import make_body, with_settings


def test_a_body_of_many_tiny_arrays_is_refused_before_decoding(serve, settings, upstream):
    proxy = serve(with_settings(settings, max_json_containers=1000))
    upstream.completion("ok")
    flood = {"model": "m", "messages": [{"role": "user", "content": "x", "extra": [[] for _ in range(2000)]}]}
    response = proxy.post(flood)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert "1000 arrays and objects" in response.json()["error"]["message"]
    assert not upstream.received
    # Brackets inside strings are text, not containers: code full of them passes.
    code = "def f(a=[{}]): return [[{}]]\n" * 1000
    assert proxy.post(make_body(code)).status_code == 200
    assert json.loads(upstream.received[0].body)["messages"][-1]["content"] == code


def test_connect_timeout_is_504(serve, settings):
    """A listener that never accepts, its backlog full: further SYNs are dropped, so connecting times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # Linux queues backlog + 1; the rest wait in SYN retransmission, as the proxy will
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        proxy = serve(with_settings(settings, upstream=f"http://127.0.0.1:{port}/v1", connect_timeout=1))
        response = proxy.post(make_body())
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "upstream_timeout"
        assert "did not accept the connection" in response.json()["error"]["message"]
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_a_body_of_known_length_arriving_in_pieces_is_read_whole(gunicorn_proxy, upstream):
    """The body is asked for in one read of its declared length (web/body.py): pieces that arrive apart, and a
    pipelined request behind it on the same connection, must still come out exactly."""
    upstream.completion("ok")
    text = "".join(f"line {n}: [{{}}] \"quoted\" é\n" for n in range(20_000))
    data = json.dumps(make_body(text)).encode()
    host, port = gunicorn_proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(data))
        for start in range(0, len(data), 100_000):
            sock.sendall(data[start : start + 100_000])
            time.sleep(0.02)  # separate arrivals; no timing is asserted
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answers = _read_until(sock, b'"status":"ok"')
    assert answers.startswith(b"HTTP/1.1 200"), answers[:300]
    assert answers.count(b"HTTP/1.1 200") == 2
    assert json.loads(upstream.received[0].body)["messages"][-1]["content"] == text


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data and (chunk := sock.recv(65536)):
        data += chunk
    return data


def test_nesting_at_the_depth_limit_passes_and_one_level_more_is_refused(proxy, upstream):
    upstream.completion("ok")

    def body(depth: int) -> dict[str, object]:
        nested: list[object] = []
        for _ in range(depth - 2):  # the body is level 1, `extra` is 2 and more, [] the innermost level
            nested = [nested]
        return make_body("x", extra=nested)

    assert proxy.post(body(64)).status_code == 200
    assert len(upstream.received) == 1
    response = proxy.post(body(65))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"] == "could not parse the request: JSON nested deeper than 64 levels"
    assert len(upstream.received) == 1
