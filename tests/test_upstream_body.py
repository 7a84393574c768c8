"""What goes upstream, byte for byte: the client's own bytes when the body is theirs as sent (a stream flag they
left out is appended, last, as the re-encoded dict had it), and a fresh encoding whenever the proxy changed
anything, or decoded the body with `json` (NaN, lone surrogates, UTF-16). Through the real server."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import make_tool, with_settings
from toolproxy.config.settings import ModelRule

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
# Spaces, an escaped é, a slash escaped: what a client may write and a re-encoding would not.
SENT = (b'{ "model" : "m",\n  "messages": [ {"role": "user", "content": "caf\\u00e9 \\/ [x]"} ],\n'
        b'  "temperature": 0.70 }\n')


def post(proxy, data: bytes) -> requests.Response:
    return requests.post(f"{proxy.url}/v1/chat/completions", data=data, timeout=30,
                         headers={"Content-Type": "application/json"})


def received(upstream) -> bytes:
    assert len(upstream.received) == 1
    return upstream.received[0].body


def test_the_clients_bytes_go_upstream_with_the_stream_flag_appended(proxy, upstream):
    upstream.completion("ok")
    assert post(proxy, SENT).status_code == 200
    assert received(upstream) == SENT.rstrip()[:-1] + b',"stream":false}'
    assert list(json.loads(received(upstream))) == ["model", "messages", "temperature", "stream"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_that_says_how_it_streams_goes_as_it_is(proxy, upstream, stream):
    upstream.completion("ok")
    data = SENT.rstrip()[:-1] + (b', "stream": true}' if stream else b', "stream": false}')
    assert post(proxy, data).status_code == 200
    assert received(upstream) == data


def test_tools_and_a_transcript_go_as_they_are(proxy, upstream):
    upstream.completion(None, tool_calls=[{"id": "call_1", "type": "function",
                                           "function": {"name": "read", "arguments": '{"path": "a"}'}}])
    body = {"model": "m", "tools": [READ], "stream": False, "messages": [
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "read", "arguments": '{"path": "b"}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "text of b"}]}
    data = json.dumps(body, indent=1).encode()
    response = post(proxy, data)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
    assert received(upstream) == data


def encoded_again(upstream, expected: dict) -> None:
    """Compact JSON of what the proxy made of the body: never the client's bytes."""
    data = received(upstream)
    assert data == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_rename_is_encoded_again(upstream, serve, settings):
    rules = (ModelRule("m", {"upstream": upstream.url, "upstream_model": "Real/Name"}),)
    proxy = serve(with_settings(settings, upstream=None, models=rules))
    upstream.completion("ok")
    assert post(proxy, SENT).status_code == 200
    encoded_again(upstream, {**json.loads(SENT), "model": "Real/Name", "stream": False})


def test_a_dropped_parameter_is_encoded_again(upstream, serve, settings):
    proxy = serve(with_settings(settings, drop_params=("temperature",)))
    upstream.completion("ok")
    assert post(proxy, SENT).status_code == 200
    expected = {key: value for key, value in json.loads(SENT).items() if key != "temperature"}
    encoded_again(upstream, {**expected, "stream": False})


def test_stream_options_on_a_request_that_does_not_stream_are_dropped(proxy, upstream):
    upstream.completion("ok")
    data = SENT.rstrip()[:-1] + b', "stream_options": {"include_usage": true}}'
    assert post(proxy, data).status_code == 200
    expected = {key: value for key, value in json.loads(data).items() if key != "stream_options"}
    encoded_again(upstream, {**expected, "stream": False})


def test_a_stream_flag_the_route_overrides_is_encoded_again(proxy, upstream):
    """`"stream": null` reads as no stream: the upstream gets `false`, as before."""
    upstream.completion("ok")
    data = SENT.rstrip()[:-1] + b', "stream": null}'
    assert post(proxy, data).status_code == 200
    encoded_again(upstream, {**json.loads(data), "stream": False})


@pytest.mark.parametrize("change", [{"tool_mode": "prompt"}, {"id_style": "mistral"}])
def test_rewritten_messages_are_encoded_again(upstream, serve, settings, change):
    proxy = serve(with_settings(settings, **change))
    upstream.completion("ok")
    body = {"model": "m", "tools": [READ], "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "x"}]}
    assert post(proxy, json.dumps(body).encode()).status_code == 200
    sent = json.loads(received(upstream))
    assert sent["messages"] != body["messages"]
    assert b", " not in received(upstream).split(b'"messages"')[0]  # compact: encoded by the proxy


def test_a_body_json_decoded_is_encoded_again(proxy, upstream):
    """NaN is not JSON: `json` reads it, and the upstream gets what the proxy writes (null), as before."""
    upstream.completion("ok")
    data = SENT.rstrip()[:-1] + b', "top_p": NaN}'
    assert post(proxy, data).status_code == 200
    encoded_again(upstream, {**json.loads(SENT), "top_p": None, "stream": False})
