"""The floor of toolproxy's stack: bare Flask + requests forwarding bytes, no JSON work, nothing recorded.

Run under toolproxy's own gunicorn.conf.py (gevent workers, the same worker count and connection settings), so
the difference between the two in a run is what toolproxy does per request and per event, not the stack.

    BENCH_FLOOR_UPSTREAM=http://127.0.0.1:PORT/v1 gunicorn -c gunicorn.conf.py bench.floor:app
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import requests
from flask import Flask, Response, request
from requests.adapters import HTTPAdapter

UPSTREAM = os.environ.get("BENCH_FLOOR_UPSTREAM", "http://127.0.0.1:8000/v1")

app = Flask(__name__)
session = requests.Session()
session.mount("http://", HTTPAdapter(pool_connections=4, pool_maxsize=1024, max_retries=0))


@app.get("/health")
def health() -> Response:
    return Response(b'{"status":"ok"}', content_type="application/json")


@app.post("/v1/chat/completions")
def forward() -> Response:
    upstream = session.post(f"{UPSTREAM}/chat/completions", data=request.get_data(),
                            headers={"Content-Type": "application/json"}, stream=True, timeout=(5, 600))
    content_type = upstream.headers.get("Content-Type", "application/json")
    if "text/event-stream" not in content_type:
        try:
            return Response(upstream.content, status=upstream.status_code, content_type=content_type)
        finally:
            upstream.close()
    return Response(relay(upstream), status=upstream.status_code, content_type=content_type,
                     headers={"Cache-Control": "no-cache"})


def relay(upstream: requests.Response) -> Iterator[bytes]:
    """Each read as it arrives (read1 returns what is there, never waits to fill a buffer)."""
    try:
        while data := upstream.raw.read1(64 * 1024):
            yield data
    finally:
        upstream.close()
