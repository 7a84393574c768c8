"""One base URL for everything (issue 24): the upstream's other /v1 endpoints are passed on with the same keys,
limits and cleaning, to the upstream that serves the request's model; paths that could leave /v1 are refused."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import Received

EMBEDDING = {"object": "list", "model": "upstream-model", "kv_transfer_params": None,
             "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}],
             "usage": {"prompt_tokens": 2, "total_tokens": 2}}


def answer_json(upstream, payload, status=200):
    upstream.script = lambda request, wire: wire.send_json(payload, status=status)


def test_embeddings_go_to_the_upstream_and_come_back_cleaned(upstream, proxy):
    answer_json(upstream, EMBEDDING)
    response = requests.post(f"{proxy.url}/v1/embeddings", json={"model": "m", "input": "hello"}, timeout=30)
    assert response.status_code == 200
    assert response.json() == {key: value for key, value in EMBEDDING.items() if key != "kv_transfer_params"}
    received: Received = upstream.received[-1]
    assert (received.method, received.path, received.json()) == ("POST", "/v1/embeddings",
                                                                   {"model": "m", "input": "hello"})


def test_a_model_is_looked_up_at_its_upstream(upstream, proxy):
    answer_json(upstream, {"id": "qwen2.5-coder:7b", "object": "model"})
    assert requests.get(f"{proxy.url}/v1/models/qwen2.5-coder:7b", timeout=30).json()["id"] == "qwen2.5-coder:7b"
    assert upstream.received[-1].path == "/v1/models/qwen2.5-coder:7b"


def test_a_completions_stream_is_passed_on_as_it_comes(upstream, proxy):
    events = [{"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": piece}]}
              for piece in ("Hello", " world")]
    upstream.script = lambda request, wire: wire.send_events(events)
    response = requests.post(f"{proxy.url}/v1/completions", json={"model": "m", "prompt": "x", "stream": True},
                             timeout=30)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    data = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
    assert [json.loads(item)["choices"][0]["text"] for item in data[:-1]] == ["Hello", " world"]
    assert data[-1] == "[DONE]"


def test_the_upstreams_error_keeps_its_status(upstream, proxy):
    answer_json(upstream, {"error": {"message": "no such endpoint", "type": "not_found"}}, status=404)
    response = requests.post(f"{proxy.url}/v1/rerank", json={"model": "m"}, timeout=30)
    assert response.status_code == 404 and response.json()["error"]["message"] == "no such endpoint"


def test_the_same_keys_and_body_limit_apply(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=("sk-proxy-key-1",), max_body_bytes=100))
    answer_json(upstream, EMBEDDING)
    assert requests.post(f"{proxy.url}/v1/embeddings", json={"model": "m"}, timeout=30).status_code == 401
    big = requests.post(f"{proxy.url}/v1/embeddings", json={"model": "m", "input": "x" * 200}, timeout=30,
                        headers={"Authorization": "Bearer sk-proxy-key-1"})
    assert big.status_code == 413 and not upstream.received


@pytest.mark.parametrize("path", ["../admin", "embeddings/../../x", "http:%2F%2Fevil", "a//b", ".hidden"])
def test_a_path_that_could_leave_v1_is_refused(upstream, proxy, path):
    response = requests.post(f"{proxy.url}/v1/{path}", json={"model": "m"}, timeout=30)
    assert response.status_code in (400, 404) and not upstream.received


def test_the_demo_model_says_what_it_does_not_serve(serve, settings):
    proxy = serve(with_settings(settings, upstream=None))
    response = requests.post(f"{proxy.url}/v1/embeddings", json={"model": "m", "input": "x"}, timeout=30)
    assert response.status_code == 404 and "demo model" in response.json()["error"]["message"]
