"""Faults from both sides, on the real thing (gunicorn, gevent worker, scripted upstream on 127.0.0.1): total
deadlines on every route, clients that vanish while the proxy waits, slow and oversized bodies, a client that
stops reading, the cap on in-flight upstream requests, and gunicorn's own error answers.

Every wait is on an event with a generous deadline: these tests must pass on a loaded machine."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import Gunicorn, make_body, make_tool
from tests.fake_upstream import FakeUpstream, Received, Wire, as_chunks, completion

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
CLINE = {"User-Agent": "Cline/3.0"}
NON_STREAM = {  # every route that waits for a whole upstream answer before it writes a byte
    "tools": (make_body("x", [READ]), {}),
    "plain": (make_body("x"), {}),
    "vtc": (make_body("x"), CLINE),
}


def start(start_gunicorn: Callable[..., Gunicorn], upstream: FakeUpstream, **env: str) -> Gunicorn:
    base = {"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_COMMIT_AFTER": "0.5",
            "TOOLPROXY_HEARTBEAT_INTERVAL": "0.5", "TOOLPROXY_READ_TIMEOUT": "60", "TOOLPROXY_REQUEST_TIMEOUT": "60"}
    return start_gunicorn({**base, **{f"TOOLPROXY_{key.upper()}": value for key, value in env.items()}}).wait_ready()


def raw_request(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> socket.socket:
    """A client on a plain socket, so a test decides when it goes away."""
    payload = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    extra = "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"%sContent-Length: %d\r\n\r\n%s" % (extra.encode(), len(payload), payload))
    return sock


def read_answer(sock: socket.socket, timeout: float = 30) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and _is_complete(data):
                break
    except OSError:
        pass
    return data


def _is_complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def wait_until(condition: Callable[[], bool], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- 1. the total deadline holds on every route --------------------------------------------------------------

@pytest.mark.parametrize("route", [*NON_STREAM, "tools_stream"])
def test_total_deadline_holds_for_a_trickled_json_body(route, upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, request_timeout="3")

    def trickle(request: Received, wire: Wire) -> None:
        wire.send_head(200, {"Content-Type": "application/json", "Content-Length": "100000"}, chunked=False)
        for _ in range(100):  # 20 seconds, each gap far shorter than the read timeout
            wire.sock.sendall(b" ")
            time.sleep(0.2)

    upstream.script = trickle
    body, headers = NON_STREAM.get(route, (make_body("x", [READ], stream=True), {}))
    response = requests.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=30)
    if route == "tools_stream":  # committed after half a second: the deadline arrives in-band
        assert '"code":"upstream_timeout"' in response.text
    else:
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "upstream_timeout"


def test_models_answers_quickly_on_a_hung_upstream(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, models_timeout="2")
    upstream.script = lambda request, wire: wire.wait_for_close(25)
    response = requests.get(f"{server.url}/v1/models", timeout=20)
    assert response.status_code == 504 and response.json()["error"]["code"] == "upstream_timeout"


# --- 3. a client that leaves while nothing is being written -------------------------------------------------

@pytest.mark.parametrize("route", list(NON_STREAM))
def test_silent_disconnect_closes_the_upstream(route, upstream, start_gunicorn):
    server = start(start_gunicorn, upstream)
    arrived, closed = threading.Event(), threading.Event()

    def generating(request: Received, wire: Wire) -> None:
        arrived.set()
        if wire.wait_for_close(30):
            closed.set()

    upstream.script = generating
    body, headers = NON_STREAM[route]
    sock = raw_request(server.url, body, headers)
    assert arrived.wait(20)
    sock.close()
    assert closed.wait(5), "the upstream would generate on for a client that left"


# --- 4. slow clients ----------------------------------------------------------------------------------------

def test_a_body_that_never_finishes_is_408(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, body_timeout="2")
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"model\": ")
    answer = read_answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"code":"request_timeout"' in answer
    assert not upstream.received


@pytest.mark.timeout(300)
def test_dripping_sockets_do_not_starve_normal_clients(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, body_timeout="60")
    upstream.completion("ok")
    host, port = server.url.removeprefix("http://").split(":")
    drippers = [_dripper(host, int(port), body=index % 2 == 0) for index in range(400)]  # (socket, drop)
    stop = threading.Event()
    dripping = threading.Thread(target=_drip, args=(drippers, stop), daemon=True)
    dripping.start()
    try:
        statuses: list[int | str] = []
        threads = [threading.Thread(target=_normal_request, args=(server.url, statuses)) for _ in range(30)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        stop.set()
        dripping.join(10)
        for sock, _ in drippers:
            sock.close()
    assert statuses == [200] * 30


def _dripper(host: str, port: int, body: bool) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection((host, port))
    if body:  # headers complete, then the body one byte a second
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        return sock, b" "
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    return sock, b"X"


def _drip(drippers: list[tuple[socket.socket, bytes]], stop: threading.Event) -> None:
    while not stop.wait(1):
        for sock, drop in drippers:
            with contextlib.suppress(OSError):
                sock.send(drop)


def _normal_request(url: str, statuses: list[int | str]) -> None:
    try:
        statuses.append(requests.post(f"{url}/v1/chat/completions", json=make_body(), timeout=30).status_code)
    except requests.RequestException as error:
        statuses.append(type(error).__name__)


# --- 5. a chunked body over the limit ---------------------------------------------------------------------

def test_chunked_body_over_the_limit_is_413(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, max_body_bytes="1048576")
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 65536
    sender = threading.Thread(target=_send_chunks, args=(sock, [piece] + [b"x" * 65536] * 30), daemon=True)
    sender.start()
    answer = read_answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b'"code":"request_too_large"' in answer
    assert not upstream.received


def _send_chunks(sock: socket.socket, pieces: list[bytes]) -> None:
    try:
        for piece in pieces:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the proxy stopped reading: what the test wants


# --- 6. a client that stops reading -----------------------------------------------------------------------

def worker_rss_kib(server: Gunicorn) -> int:
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    assert len(children) == 1
    status = Path(f"/proc/{children[0]}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


@pytest.mark.timeout(300)
def test_memory_stays_bounded_when_the_client_stops_reading(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream)
    event = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "y" * 60000}, "finish_reason": None}]}
    data = f"data: {json.dumps(event)}\n\n".encode()
    sent = [0]

    def firehose(request: Received, wire: Wire) -> None:
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        while sent[0] < 300 * 1024 * 1024:
            wire.send_chunk(data)
            sent[0] += len(data)

    upstream.script = firehose
    requests.get(f"{server.url}/health", timeout=10)
    before = worker_rss_kib(server)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, port = server.url.removeprefix("http://").split(":")
    sock.connect((host, int(port)))
    payload = json.dumps(make_body(stream=True)).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
    # The upstream stalls once every buffer on the way is full: wait until it has sent nothing for a while.
    last = -1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and sent[0] != last:
        last = sent[0]
        time.sleep(2)
    grown = worker_rss_kib(server) - before
    sock.close()
    assert sent[0] < 300 * 1024 * 1024, "the proxy read the whole upstream answer for a client that reads nothing"
    assert grown < 32 * 1024, f"the worker grew by {grown} KiB"


# --- 13. capacity -----------------------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_in_flight_upstream_requests_are_capped_with_a_short_queue(upstream, start_gunicorn):
    server = start(start_gunicorn, upstream, max_in_flight="2", queue_size="2", queue_timeout="30")
    release, lock, now, peak = threading.Event(), threading.Lock(), [0], [0]

    def held(request: Received, wire: Wire) -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        release.wait(30)
        with lock:
            now[0] -= 1
        wire.send_json(completion("ok"))

    upstream.script = held
    results: list[requests.Response] = []
    threads = [threading.Thread(target=lambda: results.append(requests.post(
        f"{server.url}/v1/chat/completions", json=make_body(), timeout=60))) for _ in range(6)]
    for thread in threads:
        thread.start()
    assert wait_until(lambda: len(results) == 2 and len(upstream.received) == 2), (len(results),
                                                                                    len(upstream.received))
    for response in results:
        assert response.status_code == 503 and response.headers["Retry-After"]
        assert response.json()["error"]["code"] == "server_overloaded"
    release.set()
    for thread in threads:
        thread.join(60)
    assert sorted(response.status_code for response in results) == [200] * 4 + [503] * 2
    assert peak[0] == 2 and len(upstream.received) == 4


@pytest.mark.timeout(180)
def test_the_default_cap_lets_hundreds_of_concurrent_streams_through(upstream, start_gunicorn):
    """A vLLM server runs hundreds of sequences at once: with the default cap, 300 streams held open together by
    the upstream on one worker all reach it and all finish (the old default of 64 + 64 refused 172 of them)."""
    server = start(start_gunicorn, upstream, connect_timeout="60")  # a loaded machine accepts the burst slowly
    release = threading.Event()

    def held(request: Received, wire: Wire) -> None:
        release.wait(120)
        wire.send_events(as_chunks(completion("ok")))

    upstream.script = held
    clients = [raw_request(server.url, make_body(stream=True)) for _ in range(300)]
    try:
        assert wait_until(lambda: len(upstream.received) == 300, timeout=120), len(upstream.received)
        release.set()
        answers = [read_stream(sock) for sock in clients]
    finally:
        release.set()
        for sock in clients:
            sock.close()
    assert all(answer.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in answer for answer in answers)


def read_stream(sock: socket.socket, timeout: float = 60) -> bytes:
    sock.settimeout(timeout)
    data = b""
    with contextlib.suppress(OSError):
        while b"data: [DONE]" not in data and (chunk := sock.recv(65536)):
            data += chunk
    return data


# --- gunicorn's own answers ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("request_head", "status"), [
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10000 + b"\r\n\r\n", b"431"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n", b"431"),
    (b"NOT A REQUEST\r\n\r\n", b"400"),
])
def test_gunicorn_rejections_are_openai_errors(request_head, status, gunicorn_proxy):
    host, port = gunicorn_proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(request_head)
        answer = read_answer(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert b"content-type: application/json" in head.lower()
    assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}
