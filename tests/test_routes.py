"""The four routes of POST /v1/chat/completions, through a real HTTP server and a scripted upstream."""

from __future__ import annotations

import collections
import json
import re
import string

from tests.conftest import make_body, make_tool, with_settings
from tests.fake_upstream import completion
from tests.sse_client import accumulate, read_stream
from toolproxy.transform.response import new_call_id, new_completion_id
from toolproxy.version import __version__
from toolproxy.wire.ids import random_id

READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
CALL_ID = re.compile(r"call_[A-Za-z0-9]{24}")
TOOLS_TEXT = 'Reading it now.\n<tools>\n{"name": "read", "arguments": {"path": "/a.txt", "limit": "5"}}\n</tools>'


def test_ids_draw_every_letter_and_digit_evenly():
    """Ids come from random bytes, those that would favour some characters dropped: each of the 62 is drawn
    about as often (2000 expected each; 400 off is nine standard deviations)."""
    drawn = collections.Counter("".join(random_id(62) for _ in range(2000)))
    assert set(drawn) == set(string.ascii_letters + string.digits)
    assert all(1600 < count < 2400 for count in drawn.values())
    assert CALL_ID.fullmatch(new_call_id()) and re.fullmatch(r"[A-Za-z0-9]{9}", new_call_id("mistral"))
    assert re.fullmatch(r"chatcmpl-[A-Za-z0-9]{24}", new_completion_id())


def test_tools_without_stream_become_tool_calls(upstream, proxy):
    upstream.completion(TOOLS_TEXT)
    response = proxy.post(make_body("read /a.txt", [READ], stream_options={"include_usage": True}))
    assert response.status_code == 200
    answer = response.json()
    message = answer["choices"][0]["message"]
    assert message["content"] == "Reading it now."
    [call] = message["tool_calls"]
    assert CALL_ID.fullmatch(call["id"]) and call["type"] == "function"
    assert call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"path": "/a.txt", "limit": 5}
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    sent = upstream.received[0].json()
    assert sent["stream"] is False and "stream_options" not in sent and sent["tools"] == [READ]


def test_tools_with_stream_are_rewrapped_as_sse(upstream, proxy):
    upstream.completion(TOOLS_TEXT)
    body = make_body("read /a.txt", [READ], stream=True, stream_options={"include_usage": True})
    events = read_stream(proxy.post(body))
    sent = upstream.received[0].json()
    assert sent["stream"] is False and "stream_options" not in sent
    chunks = events[:-1]
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[1]["choices"][0]["delta"] == {"content": "Reading it now."}
    [call] = chunks[2]["choices"][0]["delta"]["tool_calls"]
    assert call["index"] == 0 and CALL_ID.fullmatch(call["id"]) and call["function"]["name"] == "read"
    assert chunks[3]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    assert chunks[4]["choices"] == [] and chunks[4]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5,
                                                                 "total_tokens": 15}
    assert len(chunks) == 5
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)


def test_stream_and_non_stream_agree(upstream, proxy):
    text = 'First.\n{"name": "read", "arguments": {"path": "x"}}\n{"name": "read", "parameters": {"path": "y"}}'
    upstream.completion(text)
    whole = proxy.post(make_body("go", [READ])).json()["choices"][0]["message"]
    streamed = accumulate(read_stream(proxy.post(make_body("go", [READ], stream=True))))
    assert streamed["content"] == whole["content"] == "First."
    assert [(c["name"], c["arguments"]) for c in streamed["tool_calls"]] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in whole["tool_calls"]]
    assert len(whole["tool_calls"]) == 2 and streamed["finish_reason"] == ["tool_calls"]
    ids = [c["id"] for c in whole["tool_calls"]]
    assert len(set(ids)) == 2


def test_stream_without_tools_passes_events_through_cleaned(upstream, proxy):
    events = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "system_fingerprint": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                       "finish_reason": None, "stop_reason": None,
                                                       "token_ids": [1]}]},
              {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": "Hi ✨ there", "reasoning": "hmm"},
                            "finish_reason": None}]},
              {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"tool_calls": []}, "finish_reason": "stop"}]}]
    upstream.script = lambda request, wire: wire.send_events(events)
    got = read_stream(proxy.post(make_body("hi", stream=True, stream_options={"include_usage": True})))
    sent = upstream.received[0].json()
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert len(got) == 4
    assert "system_fingerprint" not in got[0]
    assert got[0]["choices"][0] == {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    assert got[1]["choices"][0]["delta"] == {"content": "Hi ✨ there", "reasoning_content": "hmm"}
    assert got[2]["choices"][0]["delta"] == {}


def test_plain_request_is_forwarded_and_cleaned(upstream, proxy):
    upstream.completion("Just text.", refusal=None, annotations=[])
    answer = proxy.post(make_body("hi")).json()
    assert set(answer) == {"id", "object", "created", "model", "choices", "usage"}
    assert answer["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "Just text."},
                                    "logprobs": None, "finish_reason": "stop"}
    assert answer["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert upstream.received[0].json()["stream"] is False


def test_json_that_is_not_a_declared_call_stays_text(upstream, proxy):
    text = '{"name": "Bob", "age": 3}'
    upstream.completion(text)
    message = proxy.post(make_body("who", [READ])).json()["choices"][0]
    assert message["message"]["content"] == text and "tool_calls" not in message["message"]
    assert message["finish_reason"] == "stop"


def test_call_to_undeclared_tool_stays_text(upstream, proxy):
    text = '<tools>\n{"name": "format_disk", "arguments": {"disk": "/dev/sda"}}\n</tools>'
    upstream.completion(text, finish_reason="tool_calls")
    choice = proxy.post(make_body("clean up", [READ])).json()["choices"][0]
    assert choice["message"]["content"] == text and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"


def test_native_tool_calls_are_normalized(upstream, proxy):
    native = [{"id": "chatcmpl-tool-abc", "type": "function",
               "function": {"name": "read", "arguments": {"path": "/n"}}},
              {"id": "chatcmpl-tool-abc", "function": {"name": "read", "arguments": '{"path": "/m"}'}}]
    upstream.completion(None, finish_reason="tool_calls", tool_calls=native)
    message = proxy.post(make_body("x", [READ])).json()["choices"][0]["message"]
    assert message["content"] is None
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"path": "/n"}, {"path": "/m"}]
    ids = [c["id"] for c in message["tool_calls"]]
    assert all(CALL_ID.fullmatch(i) for i in ids) and len(set(ids)) == 2
    assert all(c["type"] == "function" for c in message["tool_calls"])


def test_model_rules_route_and_rename(upstream, serve, settings):
    from toolproxy.config.settings import ModelRule

    rules = (ModelRule("qwen*", {"upstream": upstream.url, "upstream_model": "Qwen/Real-Name",
                                 "upstream_api_key": "sk-upstream-secret"}),)
    proxy = serve(with_settings(settings, upstream=None, models=rules))
    upstream.completion("ok")
    answer = proxy.post({**make_body("hi"), "model": "qwen2.5-coder"}).json()
    assert answer["model"] == "qwen2.5-coder"
    sent = upstream.received[0]
    assert sent.json()["model"] == "Qwen/Real-Name"
    assert sent.headers["authorization"] == "Bearer sk-upstream-secret"
    # A model no rule matches, with no global upstream: 404 naming what is served, never the demo model.
    typo = proxy.post({**make_body("hi"), "model": "gwen2.5-coder"})
    error = typo.json()["error"]
    assert typo.status_code == 404 and error["code"] == "model_not_found" and error["param"] == "model"
    assert "'gwen2.5-coder'" in error["message"] and "qwen*" in error["message"]
    streamed = proxy.post({**make_body("hi", stream=True), "model": "gwen2.5-coder"})
    assert streamed.status_code == 404 and streamed.json()["error"]["code"] == "model_not_found"
    assert len(upstream.received) == 1


def test_models_lists_what_the_routes_serve(upstream, serve, settings):
    import requests

    from toolproxy.config.settings import ModelRule

    rules = (ModelRule("qwen2.5-coder", {"upstream": upstream.url}), ModelRule("llama*", {"upstream": upstream.url}))
    proxy = serve(with_settings(settings, upstream=None, models=rules))
    listed = {"object": "list", "data": [{"id": "llama-3.3-70b", "object": "model"},
                                         {"id": "mistral-small", "object": "model"}]}
    upstream.script = lambda request, wire: wire.send_json(listed)
    names = [entry["id"] for entry in requests.get(f"{proxy.url}/v1/models", timeout=10).json()["data"]]
    # the upstream's llama (a route sends it there), not its mistral (nothing would), and the configured name
    assert names == ["llama-3.3-70b", "qwen2.5-coder"]
    assert len(upstream.received) == 1  # one upstream, asked once


def test_models_names_the_configured_models_when_the_upstream_is_down(serve, settings):
    import requests

    from tests.conftest import free_port
    from toolproxy.config.settings import ModelRule

    dead = f"http://127.0.0.1:{free_port()}/v1"
    proxy = serve(with_settings(settings, upstream=None, models=(ModelRule("qwen2.5-coder", {"upstream": dead}),)))
    answer = requests.get(f"{proxy.url}/v1/models", timeout=30).json()
    assert [entry["id"] for entry in answer["data"]] == ["qwen2.5-coder"]


def test_client_key_is_not_forwarded_when_the_proxy_has_keys(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=("sk-client",), upstream_api_key="sk-up"))
    upstream.completion("ok")
    assert proxy.post(make_body(), headers={"Authorization": "Bearer sk-client"}).status_code == 200
    assert upstream.received[0].headers["authorization"] == "Bearer sk-up"


def test_open_proxy_forwards_the_client_key(upstream, proxy):
    upstream.completion("ok")
    proxy.post(make_body(), headers={"Authorization": "Bearer sk-for-vllm"})
    assert upstream.received[0].headers["authorization"] == "Bearer sk-for-vllm"


def test_several_choices_are_each_transformed(upstream, proxy):
    payload = completion('{"name": "read", "arguments": {"path": "1"}}')
    payload["choices"].append({**payload["choices"][0], "index": 1,
                               "message": {"role": "assistant", "content": "plain"}})
    upstream.script = lambda request, wire: wire.send_json(payload)
    events = read_stream(proxy.post(make_body("x", [READ], stream=True, n=2)))
    by_index: dict[int, list] = {0: [], 1: []}
    for event in events[:-1]:
        for choice in event["choices"]:
            by_index[choice["index"]].append(choice)
    assert by_index[0][-1]["finish_reason"] == "tool_calls"
    assert by_index[1][-1]["finish_reason"] == "stop"
    assert by_index[1][1]["delta"] == {"content": "plain"}


def test_health_and_models(upstream, proxy):
    import requests

    health = requests.get(f"{proxy.url}/health", timeout=5)
    assert health.json() == {"status": "ok", "version": __version__} and not upstream.received
    models = {"object": "list", "data": [{"id": "qwen", "object": "model"}]}
    upstream.script = lambda request, wire: wire.send_json(models)
    answer = requests.get(f"{proxy.url}/v1/models", timeout=5).json()
    # The upstream's list, each model with what reads its replies: here every dialect (no template is served).
    assert [{key: value for key, value in entry.items() if key != "toolproxy"} for entry in answer["data"]] \
        == models["data"]
    assert answer["data"][0]["toolproxy"]["dialects"] == [] and answer["data"][0]["toolproxy"]["from"] == "automatic"
    assert upstream.received[0].path == "/v1/models"


def test_server_reasoning_is_kept_beside_native_calls(upstream, proxy):
    native = [{"id": "x", "type": "function", "function": {"name": "read", "arguments": '{"path": "/a"}'}}]
    upstream.completion(None, finish_reason="tool_calls", tool_calls=native, reasoning_content="check /a first")
    message = proxy.post(make_body("x", [READ])).json()["choices"][0]["message"]
    assert message["reasoning_content"] == "check /a first" and len(message["tool_calls"]) == 1


def test_unusable_native_calls_are_dropped_never_made_content(upstream, proxy):
    """The model never wrote this as text (issue 24): it is dropped with an issue (tests/test_hostile_edges.py)."""
    upstream.completion("", finish_reason="tool_calls", tool_calls=[{"id": "x", "function": "read"}])
    choice = proxy.post(make_body("x", [READ])).json()["choices"][0]
    assert "tool_calls" not in choice["message"] and not choice["message"]["content"]
    assert choice["finish_reason"] == "stop"


def test_plain_route_refuses_a_malformed_answer(upstream, proxy):
    upstream.script = lambda request, wire: wire.send_json({"choices": 5})
    response = proxy.post(make_body())
    assert response.status_code == 502 and response.json()["error"]["code"] == "bad_upstream_response"
