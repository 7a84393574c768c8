"""The native tool-call malformations of test_native_stream.py, read by the JavaScript clients of tests/node: the
official `openai` npm package and the Vercel AI SDK (`@ai-sdk/openai-compatible`, the layer OpenCode and Kilo
are built on), streamed through the proxy under gunicorn with `stream_strategy: incremental`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Gunicorn
from tests.fake_upstream import FakeUpstream, Received, Wire, completion
from tests.test_native_stream import A_PY, MALFORMED, READ, call, native_stream
from tests.test_node_clients import FINISH, NODE_DIR, node_binary

NO_FINISH = "stream without a finish chunk"
STREAMS = {**{name: (deltas, expected, "tool_calls") for name, (deltas, expected) in MALFORMED.items()},
           NO_FINISH: ([[call({"name": "read", "arguments": '{"path": "a.py"}'}, 0, "c1")]], [("read", A_PY)],
                       None)}


def answer_by_model(request: Received, wire: Wire) -> None:
    """Streamed: the malformed native stream the model name picks; whole: the same calls, well formed."""
    body = request.json()
    deltas, expected, finish = STREAMS[body["model"]]
    if body.get("stream"):
        native_stream(deltas, finish)(request, wire)
        return
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
             for i, (name, arguments) in enumerate(expected)]
    wire.send_json(completion(None, "tool_calls", tool_calls=calls))


@pytest.fixture(scope="module")
def proxy(_upstream_server: FakeUpstream) -> Iterator[Gunicorn]:
    server = Gunicorn({"TOOLPROXY_UPSTREAM": _upstream_server.url, "TOOLPROXY_STREAM_STRATEGY": "incremental"})
    yield server.wait_ready()
    server.close()


@pytest.mark.parametrize("client", ["openai", "ai-sdk"])
def test_each_malformed_native_stream_reaches_the_js_clients_whole(client, upstream, proxy):
    upstream.script = answer_by_model
    cases = [{"model": name, "messages": [{"role": "user", "content": "read"}], "tools": [READ]} for name in STREAMS]
    request = {"client": client, "baseURL": f"{proxy.url}/v1", "apiKey": "sk-unused", "cases": cases}
    result = subprocess.run([node_binary(), "clients.mjs"], cwd=NODE_DIR, input=json.dumps(request), text=True,
                            capture_output=True, timeout=100, check=False)
    assert result.returncode == 0, result.stderr
    for outcome in json.loads(result.stdout)["results"]:
        _, expected, _ = STREAMS[outcome["model"]]
        streamed: dict[str, Any] = outcome["stream"]
        assert streamed["errors"] == [], outcome["model"]
        assert [(c["name"], c["arguments"]) for c in streamed["calls"]] == expected, outcome["model"]
        assert streamed["finish"] == FINISH[client][True], outcome["model"]
