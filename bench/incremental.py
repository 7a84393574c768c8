"""`stream_strategy: incremental` against `buffered`, through real gunicorn on loopback:

1. time to the first content byte with a slow upstream (a token every GAP seconds, text then a tool call), next
   to the upstream's own first byte;
2. requests per second with an upstream that answers at once (all proxy cost), CONCURRENCY clients at a time.

    .venv/bin/python bench/incremental.py [rounds]
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gunicorn, make_body, make_tool
from tests.fake_upstream import FakeUpstream, completion

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
TEXT = "Let me look at the configuration first, then I will read the file that defines the routes."
CALL = '<tool_call>\n{"name": "read", "arguments": {"path": "/src/app/routes.py"}}\n</tool_call>'
TOKENS = [word + " " for word in TEXT.split()] + [CALL[i : i + 8] for i in range(0, len(CALL), 8)]
GAP = 0.02  # seconds between tokens: 50 tokens/s, a local model's pace
CONCURRENCY = 8
HEAD = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def script(gap: float) -> Any:
    def answer(request: Any, wire: Any) -> None:
        if request.path.endswith("/models"):
            wire.send_json({"object": "list", "data": []})
        elif request.json().get("stream"):
            wire.send_head(200, {"Content-Type": "text/event-stream"})
            for token in TOKENS:
                event = {**HEAD, "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}]}
                wire.send_chunk(f"data: {json.dumps(event)}\n\n".encode())
                time.sleep(gap)
            last = {**HEAD, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            wire.send_chunk(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            wire.end_chunks()
        else:  # the same generation, answered whole
            time.sleep(gap * len(TOKENS))
            wire.send_json(completion("".join(TOKENS)))

    return answer


def first_byte(session: requests.Session, url: str) -> float:
    """Milliseconds to the first event that carries content or a call; the rest is read to the end."""
    started, seen = time.perf_counter(), None
    with session.post(f"{url}/chat/completions", json=make_body("read", [READ], stream=True), stream=True,
                      timeout=60) as response:
        for line in response.iter_lines(chunk_size=1):
            if seen is None and line.startswith(b"data: {"):
                delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content") or delta.get("tool_calls"):
                    seen = time.perf_counter()
    assert seen is not None, "no content arrived"
    return (seen - started) * 1000


def throughput(url: str, total: int) -> float:
    """Requests per second, CONCURRENCY clients at a time, each reading its whole stream."""
    def client(count: int) -> None:
        with requests.Session() as session:
            for _ in range(count):
                response = session.post(f"{url}/chat/completions", json=make_body("read", [READ], stream=True),
                                        timeout=60)
                assert response.status_code == 200 and b"[DONE]" in response.content, response.text[:200]

    threads = [threading.Thread(target=client, args=(total // CONCURRENCY,)) for _ in range(CONCURRENCY)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (total // CONCURRENCY * CONCURRENCY) / (time.perf_counter() - started)


def main(rounds: int) -> None:
    upstream = FakeUpstream().start()
    # Dialects on automatic (every one in play), then incremental with the model's dialect pinned.
    settings = {"buffered": {}, "incremental": {"TOOLPROXY_STREAM_STRATEGY": "incremental"},
                "incremental, hermes": {"TOOLPROXY_STREAM_STRATEGY": "incremental", "TOOLPROXY_DIALECTS": "hermes"}}
    servers = {name: Gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, **env}) for name, env in settings.items()}
    try:
        for server in servers.values():
            server.wait_ready()
        upstream.script = script(GAP)
        targets = {"upstream itself": upstream.url, **{f"proxy, {name}": s.url + "/v1" for name, s in servers.items()}}
        print(f"1. time to first content byte, ms (median of {rounds}); {len(TOKENS)} tokens {GAP * 1000:g} ms apart, "
              f"the call last; generation takes {len(TOKENS) * GAP * 1000:.0f} ms")
        with requests.Session() as session:
            for label, url in targets.items():
                times = [first_byte(session, url) for _ in range(rounds)]
                print(f"   {label:30} {statistics.median(times):8.1f}   (min {min(times):.1f}, max {max(times):.1f})")
        upstream.script = script(0.0)
        total = rounds * 20
        print(f"2. requests per second, {total} streamed requests with tools, {CONCURRENCY} at a time, "
              "upstream instant")
        for label, url in targets.items():
            print(f"   {label:30} {throughput(url, total):8.1f}")
    finally:
        for server in servers.values():
            server.close()
        upstream.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
