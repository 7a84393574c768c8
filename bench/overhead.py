"""Proxy overhead per route: median latency through real gunicorn vs. straight to the same scripted upstream,
in the same process and run. Prints medians, the ratio, and the added milliseconds.

    .venv/bin/python bench/overhead.py [requests_per_route]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gunicorn, make_body, make_tool
from tests.fake_upstream import FakeUpstream, completion

READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
TEXT = "Reading it.\n<tools>\n" + '{"name": "read", "arguments": {"path": "/src/app.py", "limit": "50"}}\n' * 3 + \
       "</tools>"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
         "choices": [{"index": 0, "delta": {"content": "token "}, "finish_reason": None}]}
LAST = {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def answer(request, wire):
    if request.json().get("stream"):
        wire.send_events([CHUNK] * 50 + [LAST])
    else:
        wire.send_json(completion(TEXT))


def timed(session: requests.Session, url: str, body: dict, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = session.post(f"{url}/chat/completions", json=body, timeout=30)
        response.content  # noqa: B018 (read the whole body, as a client would)
        assert response.status_code == 200, response.text
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(count: int) -> None:
    upstream = FakeUpstream().start()
    upstream.script = answer
    proxy = Gunicorn({"TOOLPROXY_UPSTREAM": upstream.url}).wait_ready()
    routes = {
        "plain (no tools, no stream)": make_body("hi"),
        "tools, no stream (3 calls extracted)": make_body("read", [READ]),
        "tools + stream (re-wrapped SSE)": make_body("read", [READ], stream=True),
        "stream passthrough (51 events)": make_body("hi", stream=True),
    }
    print(f"{count} requests per route, medians in ms; the upstream answers at once, so this is all proxy cost")
    print(f"{'route':40} {'direct':>8} {'proxy':>8} {'added':>8} {'ratio':>6}")
    try:
        with requests.Session() as session:
            for name, body in routes.items():
                direct_body = {**body, "stream": bool(body.get("stream"))} if "tools" not in body else \
                    {**body, "stream": False}
                timed(session, upstream.url, direct_body, 10)
                timed(session, f"{proxy.url}/v1", body, 10)
                direct = statistics.median(timed(session, upstream.url, direct_body, count))
                proxied = statistics.median(timed(session, f"{proxy.url}/v1", body, count))
                print(f"{name:40} {direct:8.2f} {proxied:8.2f} {proxied - direct:8.2f} {proxied / direct:6.2f}")
    finally:
        proxy.close()
        upstream.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
