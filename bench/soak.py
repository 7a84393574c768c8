"""Soak: many mixed requests with faults through real gunicorn (one gevent worker) and a scripted upstream, all on
loopback. Prints the worker's RSS, open fds, threads and greenlets, and the outcomes by kind, at start, after
the warm-up and at the end. Bounded: a fixed number of requests, each with a deadline.

    .venv/bin/python bench/soak.py [requests] [clients]

Kinds, in equal shares: plain, tools, tools + stream, stream passthrough, upstream 500, stream cut by the
upstream (RST), slow drip, client gone mid-stream, client gone during a non-streaming wait.
"""

from __future__ import annotations

import collections
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gunicorn, make_body, make_tool
from tests.fake_upstream import FakeUpstream, Received, Wire, completion

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
TEXT = 'Reading it.\n<tool_call>{"name": "read", "arguments": {"path": "/src/app.py"}}</tool_call>'
KINDS = ("plain", "tools", "tools_stream", "stream", "upstream_500", "cut_stream", "drip", "gone_streaming",
         "gone_waiting")


def chunk(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def script(request: Received, wire: Wire) -> None:
    """The upstream's behaviour is named in the user's message."""
    body = request.json()
    kind = body["messages"][-1]["content"]
    if kind == "upstream_500":
        wire.send_raw(b"<html>engine died</html>", 500, {"Content-Type": "text/html"})
    elif kind == "cut_stream":
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        wire.send_chunk(f"data: {json.dumps(chunk('par'))}\n\n".encode())
        wire.reset()
    elif kind in ("drip", "gone_streaming"):
        wire.send_events([chunk("tok ")] * 10 + [chunk("", "stop")], delay=0.02)
    elif kind == "gone_waiting":
        wire.wait_for_close(5)
    elif body.get("stream"):
        wire.send_events([chunk("tok ")] * 20 + [chunk("", "stop")])
    else:
        wire.send_json(completion(TEXT))


def request_body(kind: str) -> dict[str, Any]:
    tools = [READ] if kind.startswith("tools") else None
    stream = kind in ("tools_stream", "stream", "cut_stream", "drip", "gone_streaming")
    return make_body(kind, tools, stream=stream)


def run_one(url: str, kind: str) -> str:
    """What the client saw, as a short label: 200, 502, `sse:<error code>`, `gone`, or the exception's name."""
    body = request_body(kind)
    try:
        if kind.startswith("gone"):
            return _leave_early(url, body, wait_for_bytes=kind == "gone_streaming")
        response = requests.post(f"{url}/v1/chat/completions", json=body, timeout=30)
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            errors = [line for line in response.text.split("\n\n") if line.startswith('data: {"error"')]
            return f"sse:{json.loads(errors[0][6:])['error']['code']}" if errors else "200"
        return str(response.status_code)
    except requests.RequestException as error:
        return type(error).__name__


def _leave_early(url: str, body: dict[str, Any], wait_for_bytes: bool) -> str:
    payload = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload))
        if wait_for_bytes:
            sock.recv(200)
        else:
            time.sleep(0.05)
    return "gone"


def worker_stats(server: Gunicorn, url: str) -> dict[str, Any]:
    pid = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()[0]
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    fds = list(Path(f"/proc/{pid}/fd").iterdir())
    sockets = sum(1 for fd in fds if _target(fd).startswith("socket:"))
    runtime = requests.get(f"{url}/debug/runtime", timeout=30)
    counts = runtime.json() if runtime.status_code == 200 else {}
    return {"rss_mib": int(status["VmRSS"].split()[0]) / 1024, "fds": len(fds), "sockets": sockets,
            "threads": int(status["Threads"]), "greenlets": counts.get("greenlets", "n/a"),
            "spawned": counts.get("spawned", "n/a")}


def _target(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:
        return ""


def settle(server: Gunicorn, url: str) -> dict[str, Any]:
    """Stats once the worker is idle: the last requests' cleanup (upstream closes, log writes) has run."""
    time.sleep(3)
    return worker_stats(server, url)


def run_batch(url: str, count: int, clients: int, outcomes: dict[str, collections.Counter[str]]) -> float:
    kinds = [KINDS[index % len(KINDS)] for index in range(count)]
    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        for kind, seen in zip(kinds, pool.map(lambda k: run_one(url, k), kinds), strict=True):
            outcomes[kind][seen] += 1
    return time.monotonic() - started


EXPECTED = {"plain": {"200"}, "tools": {"200"}, "tools_stream": {"200"}, "stream": {"200"}, "drip": {"200"},
            "upstream_500": {"500"}, "cut_stream": {"sse:upstream_disconnected"}, "gone_streaming": {"gone"},
            "gone_waiting": {"gone"}}


def main(total: int, clients: int) -> None:
    upstream = FakeUpstream().start()
    upstream.script = script
    server = Gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_DEBUG_ROUTES": "1"}).wait_ready()
    outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    warmup = max(total // 10, len(KINDS))
    try:
        rows = [("start", worker_stats(server, server.url), 0.0)]
        seconds = run_batch(server.url, warmup, clients, outcomes)
        rows.append((f"after warm-up ({warmup})", settle(server, server.url), seconds))
        seconds = run_batch(server.url, total - warmup, clients, outcomes)
        rows.append((f"after all ({total})", settle(server, server.url), seconds))
    finally:
        server.close()
        upstream.stop()
    _report(rows, outcomes, total, clients)


def _report(rows: list[tuple[str, dict[str, Any], float]], outcomes: dict[str, collections.Counter[str]],
            total: int, clients: int) -> None:
    print(f"{total} requests, {clients} concurrent clients, kinds in equal shares: {', '.join(KINDS)}")
    print(f"{'':24} {'RSS MiB':>8} {'fds':>5} {'sockets':>8} {'threads':>8} {'greenlets':>10} {'spawned':>8} "
          f"{'seconds':>8}")
    for label, stats, seconds in rows:
        print(f"{label:24} {stats['rss_mib']:8.1f} {stats['fds']:5} {stats['sockets']:8} {stats['threads']:8} "
              f"{stats['greenlets']!s:>10} {stats['spawned']!s:>8} {seconds:8.1f}")
    warm, end = rows[1][1]["rss_mib"], rows[2][1]["rss_mib"]
    print(f"RSS growth after warm-up: {end - warm:+.1f} MiB ({(end - warm) / warm * 100:+.1f} %)")
    unexpected = 0
    for kind in KINDS:
        seen = outcomes[kind]
        odd = {label: number for label, number in seen.items() if label not in EXPECTED[kind]}
        unexpected += sum(odd.values())
        print(f"  {kind:16} " + ", ".join(f"{label}: {number}" for label, number in sorted(seen.items())))
    print(f"unexpected outcomes: {unexpected}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, int(sys.argv[2]) if len(sys.argv) > 2 else 16)
