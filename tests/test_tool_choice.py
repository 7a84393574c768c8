"""tool_choice in both modes, streaming or not; the repair round; validation of what clients send; native calls
that come back broken."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make_body, make_tool, with_settings
from tests.fake_upstream import completion
from tests.sse_client import accumulate, read_stream

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
LIST = make_tool("list_dir", {"path": {"type": "string"}}, ["path"])
STRICT_READ = {"type": "function", "function": {"name": "read", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}}}
CALL_READ = 'Reading.\n<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'
CALL_LIST = '<tool_call>\n{"name": "list_dir", "arguments": {"path": "/"}}\n</tool_call>'
CHOICES = {"auto": "auto", "none": "none", "required": "required",
           "named": {"type": "function", "function": {"name": "read"}}}


def ask(proxy, stream: bool, **extra) -> dict:
    body = make_body("read /a", [READ, LIST], stream=stream, **extra)
    if stream:
        got = accumulate(read_stream(proxy.post(body)))
        return {"content": got["content"] or None, "calls": [(c["name"], json.loads(c["arguments"]))
                                                             for c in got["tool_calls"]],
                "finish": got["finish_reason"][0]}
    choice = proxy.post(body).json()["choices"][0]
    return {"content": choice["message"]["content"],
            "calls": [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                      for c in choice["message"].get("tool_calls", [])], "finish": choice["finish_reason"]}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("choice", list(CHOICES))
@pytest.mark.parametrize("mode", ["native", "prompt"])
def test_mode_by_tool_choice(upstream, serve, settings, mode, choice, stream):
    proxy = serve(with_settings(settings, tool_mode=mode))
    upstream.completion(CALL_READ)  # a backend that ignores tool_choice writes its call whatever was asked
    got = ask(proxy, stream, tool_choice=CHOICES[choice])
    sent = upstream.received[0].json()
    if mode == "native":
        assert sent["tools"] == [READ, LIST] and sent["tool_choice"] == CHOICES[choice]
    else:
        assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(sent)
        system = sent["messages"][0]["content"] if sent["messages"][0]["role"] == "system" else ""
        assert ("<tools>" in system) == (choice != "none")
        assert ('"list_dir"' in system) == (choice in ("auto", "required"))
        assert ("must call" in system) == (choice in ("required", "named"))
    if choice == "none":
        assert got == {"content": CALL_READ, "calls": [], "finish": "stop"}
    else:
        assert got == {"content": "Reading.", "calls": [("read", {"path": "/a"})], "finish": "tool_calls"}


@pytest.mark.parametrize("mode", ["native", "prompt"])
def test_named_choice_refuses_calls_to_other_tools(upstream, serve, settings, mode):
    proxy = serve(with_settings(settings, tool_mode=mode))
    upstream.completion(CALL_LIST)
    got = ask(proxy, False, tool_choice=CHOICES["named"])
    assert got["calls"] == [] and got["finish"] == "stop" and got["content"] == CALL_LIST


def test_native_calls_are_dropped_under_tool_choice_none(upstream, proxy):
    native = [{"id": "x", "type": "function", "function": {"name": "read", "arguments": '{"path": "/a"}'}}]
    upstream.completion("", finish_reason="tool_calls", tool_calls=native)
    got = ask(proxy, False, tool_choice="none")
    assert got["calls"] == [] and got["finish"] == "stop" and '"read"' in got["content"]


def test_repair_round_fixes_a_bad_call(upstream, serve, settings):
    proxy = serve(with_settings(settings, repair_rounds=1))
    answers = iter(['<tool_call>\n{"name": "read", "arguments": {"pth": "/a"}}\n</tool_call>', CALL_READ])
    upstream.script = lambda request, wire: wire.send_json(completion(next(answers)))
    body = make_body("read /a", [STRICT_READ], stream=True)
    got = accumulate(read_stream(proxy.post(body)))
    assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == [("read", {"path": "/a"})]
    assert len(upstream.received) == 2
    second = upstream.received[1].json()["messages"]
    assert second[-2] == {"role": "assistant", "content": '<tool_call>\n{"name": "read", "arguments": {"pth": '
                                                          '"/a"}}\n</tool_call>'}
    assert second[-1]["role"] == "user" and "'path' is a required property" in second[-1]["content"]


def test_without_repair_rounds_the_invalid_call_passes_with_one_request(upstream, proxy):
    upstream.completion('<tool_call>\n{"name": "read", "arguments": {"pth": "/a"}}\n</tool_call>')
    choice = proxy.post(make_body("x", [STRICT_READ])).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and len(upstream.received) == 1


def test_repair_round_asks_for_a_missing_required_call(upstream, serve, settings):
    proxy = serve(with_settings(settings, repair_rounds=1, tool_mode="prompt"))
    answers = iter(["I think I should read it.", CALL_READ])
    upstream.script = lambda request, wire: wire.send_json(completion(next(answers)))
    got = ask(proxy, False, tool_choice="required")
    assert got["calls"] == [("read", {"path": "/a"})]
    assert "You must call one of the tools" in upstream.received[1].json()["messages"][-1]["content"]


def test_repair_round_gives_up_after_its_budget(upstream, serve, settings):
    proxy = serve(with_settings(settings, repair_rounds=1))
    upstream.completion("No tools for me.")
    got = ask(proxy, False, tool_choice="required")
    assert got == {"content": "No tools for me.", "calls": [], "finish": "stop"}
    assert len(upstream.received) == 2


@pytest.mark.parametrize(("tools", "param"), [
    ([make_tool("read file", {})], "tools.[0].function.name"),
    ([make_tool("x" * 65, {})], "tools.[0].function.name"),
    ([READ, {"type": "function", "function": {"name": "bad", "parameters": {"type": "objekt"}}}],
     "tools.[1].function.parameters"),
    ([{"type": "function", "function": {"name": "bad", "parameters": {"type": "object", "properties": {
        "p": {"type": "string", "pattern": "("}}}}}], "tools.[0].function.parameters"),
    ([{"type": "function", "function": {"name": "bad", "parameters": {"type": "array"}}}],
     "tools.[0].function.parameters"),
])
def test_bad_tool_definitions_are_400_and_never_forwarded(upstream, proxy, tools, param):
    response = proxy.post(make_body("x", tools))
    assert response.status_code == 400 and response.json()["error"]["param"] == param
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert not upstream.received


@pytest.mark.parametrize(("messages", "param"), [
    ([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a", "content": "r"}], "messages.[1]"),
    ([{"role": "user", "content": "x"},
      {"role": "assistant", "tool_calls": [{"id": "a", "type": "function",
                                            "function": {"name": "read", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "b", "content": "r"}], "messages.[2]"),
])
def test_tool_results_must_answer_earlier_calls(upstream, proxy, messages, param):
    response = proxy.post({"model": "m", "messages": messages, "tools": [READ]})
    assert response.status_code == 400 and response.json()["error"]["param"] == param
    assert response.json()["error"]["code"] == "invalid_tool_call_id"


def test_tool_choice_must_name_a_declared_tool(upstream, proxy):
    response = proxy.post(make_body("x", [READ], tool_choice={"type": "function", "function": {"name": "zap"}}))
    assert response.status_code == 400 and response.json()["error"]["param"] == "tool_choice"


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"path": "/a"}, {"path": "/a"}),
    ('{"path": "/a",}', {"path": "/a"}),
    ('{"path": "/a"', {"path": "/a"}),
    ("{'path': '/a'}", {"path": "/a"}),
])
def test_broken_native_arguments_are_repaired(upstream, proxy, arguments, expected):
    native = [{"type": "function", "function": {"name": "read", "arguments": arguments}}]
    upstream.completion(None, finish_reason="tool_calls", tool_calls=native)
    message = proxy.post(make_body("x", [READ])).json()["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == expected
    assert message["tool_calls"][0]["id"].startswith("call_")


def test_unrepairable_native_arguments_become_content(upstream, proxy):
    native = [{"id": "x", "type": "function", "function": {"name": "read", "arguments": '{"path": "/a'}}]
    upstream.completion(None, finish_reason="tool_calls", tool_calls=native)
    choice = proxy.post(make_body("x", [READ])).json()["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"
    assert '{"path": "/a' in choice["message"]["content"]


def test_mistral_id_style_both_ways(upstream, serve, settings):
    proxy = serve(with_settings(settings, id_style="mistral"))
    upstream.completion(CALL_READ)
    [call] = proxy.post(make_body("x", [READ])).json()["choices"][0]["message"]["tool_calls"]
    assert len(call["id"]) == 9 and call["id"].isalnum()
    history = [{"role": "user", "content": "x"},
               {"role": "assistant", "tool_calls": [{"id": "call_0123456789abcdefghijklmn", "type": "function",
                                                     "function": {"name": "read", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "call_0123456789abcdefghijklmn", "content": "r"}]
    proxy.post({"model": "m", "messages": history, "tools": [READ]})
    sent = upstream.received[1].json()["messages"]
    short = sent[1]["tool_calls"][0]["id"]
    assert len(short) == 9 and sent[2]["tool_call_id"] == short


def test_parameters_the_backend_rejects_are_dropped(upstream, serve, settings):
    proxy = serve(with_settings(settings, drop_params=("logit_bias", "seed")))
    upstream.completion("ok")
    proxy.post(make_body("x", logit_bias={"1": 2}, seed=3, temperature=0.1))
    sent = upstream.received[0].json()
    assert "logit_bias" not in sent and "seed" not in sent and sent["temperature"] == 0.1
