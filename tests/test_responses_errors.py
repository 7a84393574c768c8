"""Errors on `/v1/responses`: the OpenAI error object the chat path sends, with the same statuses, never a 500;
state the proxy does not keep is refused with a 400 that says so; a stream that is already committed (real
gunicorn, gevent worker) ends with `response.failed`, and keeps its client with comments while a buffered answer
is made."""

from __future__ import annotations

import json
import threading

import openai
import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import completion
from tests.responses_cases import TOOLS, client_for


def post(proxy, body: dict, **kwargs) -> requests.Response:
    return requests.post(f"{proxy.url}/v1/responses", json=body, timeout=30, **kwargs)


def events_of(raw: bytes) -> tuple[list[dict], int]:
    """The data of each event, and how many comments came between them."""
    blocks = [block for block in raw.decode().split("\n\n") if block.strip()]
    comments = sum(block.startswith(":") for block in blocks)
    return [json.loads(block.split("data: ", 1)[1]) for block in blocks if not block.startswith(":")], comments


@pytest.mark.parametrize(("field", "value"), [("previous_response_id", "resp_123"), ("conversation", "conv_1"),
                                              ("prompt", {"id": "pmpt_1"}), ("background", True)])
def test_state_the_proxy_does_not_keep_is_a_400_that_says_so(field, value, upstream, proxy):
    response = post(proxy, {"model": "qwen3", "input": "hi", field: value})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == field and error["type"] == "invalid_request_error"
    assert "keeps no state" in error["message"] and "whole conversation" in error["message"]
    assert upstream.received == []


def test_the_sdk_raises_its_bad_request_error_for_previous_response_id(upstream, proxy):
    with pytest.raises(openai.BadRequestError) as raised:
        client_for(proxy).responses.create(model="qwen3", input="more", previous_response_id="resp_1")
    assert "keeps no state" in str(raised.value)


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "hi"}, "model"),
    ({"model": "qwen3"}, "input"),
    ({"model": "qwen3", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"model": "qwen3", "input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
    ({"model": "qwen3", "input": [{"role": "user", "content": 7}]}, "input[0].content"),
    ({"model": "qwen3", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f1"}]}]},
     "input[0].content[0]"),
    ({"model": "qwen3", "input": [{"type": "function_call_output", "call_id": "call_x", "output": "?"}]},
     "input[0]"),
    ({"model": "qwen3", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]},
     "input[0].arguments"),
    ({"model": "qwen3", "input": "hi", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name"),
    ({"model": "qwen3", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {"type": "array"}}]},
     "tools[0].parameters"),
    ({"model": "qwen3", "input": "hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
     "tool_choice"),
    ({"model": "qwen3", "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "qwen3", "input": "hi", "temperature": "hot"}, "temperature"),
    ({"model": "qwen3", "input": "hi", "stream": "yes"}, "stream"),
    ({"model": "qwen3", "input": "hi", "text": {"format": {"type": "xml"}}}, "text.format"),
    ({"model": "qwen3", "input": [], "instructions": None}, "input"),
])
def test_a_bad_request_is_a_400_naming_the_field(body, param, upstream, proxy):
    response = post(proxy, body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param and upstream.received == []


@pytest.mark.parametrize("data", [b"", b"{not json", b"[1, 2]"])
def test_a_body_that_is_not_a_json_object_is_a_400(data, proxy):
    response = requests.post(f"{proxy.url}/v1/responses", data=data, timeout=30,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_a_missing_key_is_a_401_in_the_openai_shape(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=("sk-right",)))
    response = post(proxy, {"model": "qwen3", "input": "hi"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
    upstream.completion("ok")
    assert post(proxy, {"model": "qwen3", "input": "hi"}, headers={"Authorization": "Bearer sk-right"}).ok


def test_an_upstream_error_keeps_the_status_the_chat_path_gives_it(upstream, proxy):
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "context too long"}}, 400)
    chat = requests.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                         json={"model": "qwen3", "messages": [{"role": "user", "content": "hi"}]})
    for stream in (False, True):
        response = post(proxy, {"model": "qwen3", "input": "hi", "tools": TOOLS, "stream": stream})
        assert (response.status_code, response.json()) == (chat.status_code, chat.json())
        assert response.json()["error"]["message"] == "context too long"


def test_a_buffered_answer_keeps_its_client_with_comments_until_it_is_in(upstream, gunicorn_proxy):
    """Ordered by events, not timed: the upstream answers only once the client has heard the response begin and
    two keep-alive comments, which the proxy must therefore send while it waits."""
    heard = threading.Event()

    def slow(request, wire):
        if heard.wait(30):
            wire.send_json(completion('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'))

    upstream.script = slow
    raw = b""
    with post(gunicorn_proxy, {"model": "qwen3", "input": "hi", "tools": TOOLS, "stream": True},
              stream=True) as response:
        for piece in response.iter_content(chunk_size=None):
            raw += piece
            if raw.count(b": keep-alive\n\n") >= 2 and b"response.in_progress" in raw:
                heard.set()
    events, comments = events_of(raw)
    assert heard.is_set() and comments >= 2
    assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["name"] == "get_weather"


def test_a_failure_after_the_stream_is_committed_is_response_failed(upstream, gunicorn_proxy):
    heard = threading.Event()

    def failing(request, wire):
        if heard.wait(30):
            wire.send_json({"error": {"message": "engine died", "type": "server_error"}}, 500)

    upstream.script = failing
    raw = b""
    with post(gunicorn_proxy, {"model": "qwen3", "input": "hi", "tools": TOOLS, "stream": True},
              stream=True) as response:
        assert response.status_code == 200
        for piece in response.iter_content(chunk_size=None):
            raw += piece
            if b": keep-alive" in raw:
                heard.set()
    events, _ = events_of(raw)
    failed = events[-1]
    assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["message"] == "engine died"
    assert failed["response"]["id"] == events[0]["response"]["id"]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
