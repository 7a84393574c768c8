"""Rows of the reliability table that no other module covers: tool history with reused ids (#22), very long
input (#23), a call cut off by `max_tokens` and a parameterless call (#28), and an open proxy that was told to
listen on the network anyway (#36)."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import free_port, make_body, make_tool, with_settings
from tests.sse_client import accumulate, read_stream

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
NOW = make_tool("now")


def call_turn(call_id: str, path: str) -> list[dict]:
    function = {"name": "read", "arguments": json.dumps({"path": path})}
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function",
                                                                   "function": function}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"contents of {path}"}]


@pytest.mark.parametrize("tool_mode", ["native", "prompt"])
def test_reused_tool_call_ids_are_accepted_and_rendered(upstream, serve, settings, tool_mode):
    """One documented behaviour (#22): an id used twice, in one turn or across turns, answers the latest call."""
    proxy = serve(with_settings(settings, tool_mode=tool_mode))
    upstream.completion("done")
    messages = [{"role": "user", "content": "read both"}, *call_turn("call_1", "a.py"), *call_turn("call_1", "b.py"),
                {"role": "user", "content": "and?"}]
    response = proxy.post({"model": "m", "messages": messages, "tools": [READ]})
    assert response.status_code == 200, response.text
    sent = json.dumps(upstream.received[0].json()["messages"])
    assert "contents of a.py" in sent and "contents of b.py" in sent


@pytest.mark.parametrize("tool_mode", ["native", "prompt"])
def test_long_input_is_accepted_up_to_the_body_limit(upstream, serve, settings, tool_mode):
    """#23: one 2 MB message, 10 000 short messages, 500 tools: all answered, all sent on whole."""
    proxy = serve(with_settings(settings, tool_mode=tool_mode))
    upstream.completion("ok")
    tools = [make_tool(f"tool_{index}", {"x": {"type": "string"}}) for index in range(500)]
    many = [{"role": "user" if index % 2 == 0 else "assistant", "content": f"message {index}"}
            for index in range(10_000)]
    for body in ({"model": "m", "messages": [{"role": "user", "content": "x" * 2_000_000}], "tools": [READ]},
                 {"model": "m", "messages": many, "tools": [READ]},
                 make_body("x", tools)):
        response = proxy.post(body)
        assert response.status_code == 200, response.text[:300]
    received = [request.json() for request in upstream.received]
    assert "x" * 2_000_000 in json.dumps(received[0])
    assert len(received[1]["messages"]) >= 10_000
    assert tool_mode == "prompt" or len(received[2]["tools"]) == 500


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_cut_off_by_max_tokens_is_text_with_finish_reason_length(upstream, proxy, stream):
    cut = 'Reading.\n<tool_call>{"name": "read", "arguments": {"pa'
    upstream.script = lambda request, wire: wire.send_json(_completion(cut, "length"))
    response = proxy.post(make_body("x", [READ], stream=stream))
    if stream:
        message, finish = _streamed(response)
    else:
        choice = response.json()["choices"][0]
        message, finish = choice["message"], choice["finish_reason"]
    assert finish == "length"
    assert message["content"] == cut and not message.get("tool_calls")


@pytest.mark.parametrize("written", ['<tool_call>{"name": "now"}</tool_call>',
                                     '<tool_call>{"name": "now", "arguments": {}}</tool_call>',
                                     '<tool_call>{"name": "now", "arguments": ""}</tool_call>'])
def test_a_parameterless_call_has_empty_object_arguments(upstream, proxy, written):
    upstream.completion(written)
    for stream in (False, True):
        response = proxy.post(make_body("x", [NOW], stream=stream))
        message = _streamed(response)[0] if stream else response.json()["choices"][0]["message"]
        [call] = message["tool_calls"]
        assert call["function"] == {"name": "now", "arguments": "{}"}


def test_an_open_proxy_on_the_network_starts_only_when_told_and_says_so(upstream, start_gunicorn):
    """#36: with TOOLPROXY_ALLOW_OPEN=1 and no keys, binding all addresses starts, with a WARNING in the log.
    (The refusal without the flag is test_gunicorn's.) The test talks to it on 127.0.0.1 only."""
    port = free_port()
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_ALLOW_OPEN": "1"},
                            ["-b", f"0.0.0.0:{port}"])
    server.url = f"http://127.0.0.1:{port}"
    assert requests.get(f"{server.wait_ready().url}/health", timeout=10).status_code == 200
    log = server.output()
    assert "TOOLPROXY_ALLOW_OPEN=1: serving without API keys" in log
    assert any("WARNING" in line and "ALLOW_OPEN" in line for line in log.splitlines())


def _completion(content: str, finish_reason: str) -> dict:
    from tests.fake_upstream import completion

    return completion(content, finish_reason=finish_reason)


def _streamed(response: requests.Response) -> tuple[dict, str | None]:
    """The streamed answer as a message (content, tool calls with `function`) and its one finish_reason."""
    assembled = accumulate(read_stream(response))
    assert len(assembled["finish_reason"]) == 1
    calls = [{"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
             for call in assembled["tool_calls"]]
    return {"content": assembled["content"] or None, "tool_calls": calls}, assembled["finish_reason"][0]
