"""Every failure on the Messages paths in Anthropic's error shape (`{"type": "error", "error": {"type", "message"}}`)
with the status the chat routes give it: a bad key, a bad body, an unknown model, a body too large, a wrong
method, an upstream that refuses, is overloaded or unreachable; mid-stream as an `error` event. Never an OpenAI
body on these paths, never a 500."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
import requests

from tests.conftest import free_port, with_settings
from tests.fake_upstream import Received, Wire, completion
from tests.messages_wire import check_order, parse_events
from tests.test_messages_sdk import ASK, TOOLS, client_of

BODY = {"model": "m", "max_tokens": 64, "messages": ASK}
READ_CALL = '<tool_call>{"name": "read", "arguments": {"path": "a.py"}}</tool_call>'


def assert_anthropic_error(response: requests.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert body["error"]["type"] == kind and set(body["error"]) == {"type", "message"}
    message: str = body["error"]["message"]
    return message


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_keys_from_x_api_key_or_bearer_and_refusals_in_anthropics_shape(path, upstream, serve, settings):
    upstream.completion("ok")
    proxy = serve(with_settings(settings, api_keys=("sk-good",)))
    url = f"{proxy.url}{path}?beta=true"
    message = assert_anthropic_error(requests.post(url, json=BODY, timeout=10), 401, "authentication_error")
    assert "x-api-key" in message
    assert_anthropic_error(requests.post(url, json=BODY, headers={"x-api-key": "sk-bad"}, timeout=10), 401,
                           "authentication_error")
    for headers in ({"x-api-key": "sk-good"}, {"Authorization": "Bearer sk-good"}):
        assert requests.post(url, json=BODY, headers=headers, timeout=10).status_code == 200
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=proxy.url, api_key="sk-bad", max_retries=0).messages.create(**BODY)


@pytest.mark.parametrize(("data", "named"), [
    (b"", "empty"),
    (b"{not json", "could not parse"),
    (b"[1, 2]", "JSON object"),
    (b'{"max_tokens": 5, "messages": []}', "model"),
    (b'{"model": "m", "messages": []}', "messages"),
    (b'{"model": "m", "messages": [{"role": "tool", "content": "x"}]}', "messages.0.role"),
    (b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', "messages.0.content"),
    (b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]}', "messages.0.content.0.text"),
    (b'{"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}', "max_tokens"),
    (b'{"model": "m", "system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]}', "system.0"),
    (b'{"model": "m", "tools": [{"name": "bad name", "input_schema": {}}], "messages": [{"role": "user", '
     b'"content": "x"}]}', "tools.0.name"),
    (b'{"model": "m", "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": '
     b'"some"}, "messages": [{"role": "user", "content": "x"}]}', "tool_choice"),
    (b'{"model": "m", "thinking": {"type": "maybe"}, "messages": [{"role": "user", "content": "x"}]}', "thinking"),
    (b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", '
     b'"content": "orphan"}]}]}', "toolu_x"),
])
def test_a_bad_request_is_named_in_anthropics_shape(data, named, upstream, proxy):
    response = requests.post(f"{proxy.url}/v1/messages", data=data, timeout=10,
                             headers={"Content-Type": "application/json"})
    assert named in assert_anthropic_error(response, 400, "invalid_request_error")
    assert upstream.received == []


def test_too_large_a_body_a_wrong_method_path_or_type(serve, settings):
    proxy = serve(with_settings(settings, max_body_bytes=1000))
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 2000}]}
    assert_anthropic_error(requests.post(f"{proxy.url}/v1/messages", json=big, timeout=10), 413, "request_too_large")
    assert_anthropic_error(requests.get(f"{proxy.url}/v1/messages", timeout=10), 405, "invalid_request_error")
    assert_anthropic_error(requests.get(f"{proxy.url}/v1/messages/count_tokens", timeout=10), 405,
                           "invalid_request_error")
    assert_anthropic_error(requests.delete(f"{proxy.url}/v1/messages/msg_1", timeout=10), 405,
                           "invalid_request_error")
    assert_anthropic_error(requests.post(f"{proxy.url}/v1/messages", data="{}", timeout=10,
                                         headers={"Content-Type": "text/plain"}), 415, "invalid_request_error")


@pytest.mark.parametrize(("status", "kind", "sdk_error"), [
    (400, "invalid_request_error", anthropic.BadRequestError),
    (429, "rate_limit_error", anthropic.RateLimitError),
    (500, "api_error", anthropic.InternalServerError),
    (503, "overloaded_error", anthropic.InternalServerError),
])
def test_an_upstream_refusal_keeps_its_status(status, kind, sdk_error, upstream, proxy):
    upstream.script = lambda request, wire: wire.send_json(
        {"error": {"message": "prompt is too long", "type": "BadRequestError"}}, status=status,
        headers={"Retry-After": "7"} if status == 429 else None)
    response = requests.post(f"{proxy.url}/v1/messages", json={**BODY, "tools": TOOLS}, timeout=10)
    assert assert_anthropic_error(response, status, kind) == "prompt is too long"
    if status == 429:
        assert response.headers["Retry-After"] == "7"
    with pytest.raises(sdk_error):
        client_of(proxy.url).messages.create(**BODY)


def test_an_unreachable_upstream_is_an_api_error(serve, settings):
    proxy = serve(with_settings(settings, upstream=f"http://127.0.0.1:{free_port()}/v1"))
    assert_anthropic_error(requests.post(f"{proxy.url}/v1/messages", json=BODY, timeout=10), 502, "api_error")


def held(answer: Callable[[Wire], None]) -> tuple[threading.Event, Callable[[Received, Wire], None]]:
    """An upstream that answers only once the client has heard what the test waits for (the stream open, pings:
    the proxy must have committed the stream and sent them while it waited): ordered by events, never timed."""
    heard = threading.Event()

    def script(request: Received, wire: Wire) -> None:
        if heard.wait(30):
            answer(wire)

    return heard, script


def read_while_held(url: str, heard: threading.Event) -> list[tuple[str, dict[str, Any]]]:
    raw = b""
    body = {**BODY, "tools": TOOLS, "stream": True}
    with requests.post(f"{url}/v1/messages", json=body, stream=True, timeout=30) as response:
        assert response.status_code == 200
        for piece in response.iter_content(chunk_size=None):
            raw += piece
            if raw.startswith(b"event: message_start\n") and raw.count(b"event: ping\n") >= 2:
                heard.set()
    assert heard.is_set()
    return parse_events(raw)


def test_pings_hold_a_buffered_stream_and_message_start_counts_the_prompt(upstream, gunicorn_proxy):
    heard, upstream.script = held(lambda wire: wire.send_json(completion(READ_CALL)))
    events = read_while_held(gunicorn_proxy.url, heard)
    check_order(events)
    assert [name for name, _ in events][:3] == ["message_start", "ping", "ping"]
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0  # estimated: the answer was not in yet
    assert events[-2][1]["usage"]["input_tokens"] == 10  # the upstream's count, once it came


def test_a_failure_after_the_stream_is_committed_is_an_error_event(upstream, gunicorn_proxy):
    heard, upstream.script = held(lambda wire: wire.send_json({"error": {"message": "the model crashed"}}, 500))
    events = read_while_held(gunicorn_proxy.url, heard)
    assert events[0][0] == "message_start" and events[-1][0] == "error"
    assert events[-1][1]["error"] == {"type": "api_error", "message": "the model crashed"}


def test_the_sdk_raises_the_error_event(upstream, gunicorn_proxy):
    heard, upstream.script = held(lambda wire: wire.send_json({"error": {"message": "the model crashed"}}, 500))
    stream = client_of(gunicorn_proxy.url).messages.create(**BODY, tools=TOOLS, stream=True)
    with pytest.raises(anthropic.APIStatusError) as raised:
        for event in stream:
            assert event.type == "message_start"  # the stream is committed: now the upstream fails
            heard.set()
    assert "the model crashed" in str(raised.value)
