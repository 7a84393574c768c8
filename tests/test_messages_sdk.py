"""`POST /v1/messages` driven by the official `anthropic` Python SDK (pinned), through the proxy in front of a
scripted upstream that writes its calls as text (hermes, qwen3_coder, gemma4) or answers with native calls:
`messages.create` gets them as tool_use blocks, and the message `messages.stream` accumulates is the whole
answer, for the buffered and the incremental stream alike, the raw events in the order Claude Code relies on."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import Received, Wire, as_chunks, completion
from tests.messages_wire import check_order, read_events
from tests.test_dashboard import wait_for_records

PATH_TOOLS = {"path": {"type": "string"}, "limit": {"type": "integer"}}
TOOLS = [{"name": "read", "description": "Read a file", "input_schema": {"type": "object", "properties": PATH_TOOLS,
                                                                       "required": ["path"]}},
         {"name": "bash", "description": "Run a command", "input_schema": {
             "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
NATIVE_CALL = {"id": "chatcmpl-tool-7", "type": "function",
               "function": {"name": "read", "arguments": '{"path": "src/app.py", "limit": 20}'}}
# model name -> (the upstream's text, native calls, expected text, expected calls as (name, input))
CASES: dict[str, tuple[str | None, list[dict[str, Any]], str | None, list[tuple[str, dict[str, Any]]]]] = {
    "hermes": ('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "src/app.py", "limit": "20"}}\n'
               '</tool_call>\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>', [],
               "Let me look.", [("read", {"path": "src/app.py", "limit": 20}), ("bash", {"command": "ls -la"})]),
    "qwen3_coder": ("<tool_call>\n<function=read>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
                    "<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>", [],
                    None, [("read", {"path": "src/app.py", "limit": 20})]),
    "gemma4": ('I will read it.<|tool_call>call:read{path:<|"|>src/app.py<|"|>,limit:20}<tool_call|>', [],
               "I will read it.", [("read", {"path": "src/app.py", "limit": 20})]),
    "native": (None, [NATIVE_CALL], None, [("read", {"path": "src/app.py", "limit": 20})]),
    "plain_text": ("No tool needed: the answer is 42 ✓", [], "No tool needed: the answer is 42 ✓", []),
}
ASK = [{"role": "user", "content": "look at src/app.py"}]


def answer_by_model(request: Received, wire: Wire) -> None:
    """Each case by the request's model name, whole or streamed as the proxy asked."""
    text, native, _, _ = CASES[request.json()["model"]]
    answer(request, wire, completion(text, **({"tool_calls": native} if native else {}),
                                     finish_reason="tool_calls" if native else "stop"))


def answer(request: Received, wire: Wire, payload: dict[str, Any]) -> None:
    """`payload` whole, or streamed with the usage last when the request asks for it, as vLLM does."""
    body = request.json()
    if not body.get("stream"):
        wire.send_json(payload)
        return
    chunks = as_chunks(payload)
    thought = payload["choices"][0]["message"].get("reasoning_content")
    if thought:  # as_chunks streams the content only: the reasoning goes first, as servers send it
        chunks.insert(0, {**chunks[0], "choices": [{"index": 0, "delta": {"reasoning_content": thought},
                                                    "finish_reason": None}]})
    usage = [{**chunks[-1], "choices": [], "usage": payload["usage"]}]
    wire.send_events(chunks + (usage if (body.get("stream_options") or {}).get("include_usage") else []))


def client_of(url: str, **options: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0, timeout=30, **options)


def as_compared(message: anthropic.types.Message) -> dict[str, Any]:
    """A message without what differs between two requests by design (the message's and calls' ids)."""
    dumped = message.model_dump()
    dumped.pop("id")
    for block in dumped["content"]:
        if block["type"] == "tool_use":
            assert block.pop("id").startswith("toolu_")
    return dumped


@pytest.fixture(params=["buffered", "incremental"])
def messages_proxy(request, serve, settings, upstream):
    upstream.script = answer_by_model
    return serve(with_settings(settings, stream_strategy=request.param))


@pytest.mark.parametrize("model", list(CASES))
def test_create_returns_the_calls_as_tool_use_blocks(model, messages_proxy):
    _, _, text, calls = CASES[model]
    message = client_of(messages_proxy.url).messages.create(model=model, max_tokens=256, tools=TOOLS, messages=ASK)
    texts = [block.text for block in message.content if block.type == "text"]
    uses = [block for block in message.content if block.type == "tool_use"]
    assert texts == ([text] if text else [])
    assert [(use.name, use.input) for use in uses] == calls
    assert [block.type for block in message.content] == ["text"] * len(texts) + ["tool_use"] * len(uses)
    assert len({use.id for use in uses}) == len(uses) and all(use.id.startswith("toolu_") for use in uses)
    assert message.stop_reason == ("tool_use" if calls else "end_turn")
    assert message.id.startswith("msg_") and message.model == model
    assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 5)  # the upstream's counts


@pytest.mark.parametrize("model", list(CASES))
def test_the_streamed_message_is_the_whole_message(model, messages_proxy):
    client = client_of(messages_proxy.url)
    whole = client.messages.create(model=model, max_tokens=256, tools=TOOLS, messages=ASK)
    with client.messages.stream(model=model, max_tokens=256, tools=TOOLS, messages=ASK) as stream:
        streamed = stream.get_final_message()
    assert as_compared(streamed) == as_compared(whole)


@pytest.mark.parametrize("model", list(CASES))
def test_stream_events_come_in_the_order_claude_code_reads(model, messages_proxy):
    body = {"model": model, "max_tokens": 256, "tools": TOOLS, "messages": ASK, "stream": True}
    events = read_events(requests.post(f"{messages_proxy.url}/v1/messages?beta=true", json=body, timeout=30))
    check_order(events)
    uses = [payload for name, payload in events if name == "content_block_start"
            and payload["content_block"]["type"] == "tool_use"]
    assert [use["content_block"]["name"] for use in uses] == [name for name, _ in CASES[model][3]]
    assert events[-2][1]["usage"]["output_tokens"] == 5


def test_a_stream_without_tools_is_relayed_event_by_event(serve, settings, upstream):
    text = "Hello from upstream, <tool_call> and all"
    upstream.script = lambda request, wire: answer(request, wire, completion(text))
    proxy = serve(settings)
    client = client_of(proxy.url)
    with client.messages.stream(model="m", max_tokens=64, messages=ASK) as stream:
        pieces = list(stream.text_stream)
        streamed = stream.get_final_message()
    assert pieces == [text[:len(text) // 2], text[len(text) // 2:]]  # as the upstream split them (as_chunks)
    assert as_compared(streamed) == as_compared(client.messages.create(model="m", max_tokens=64, messages=ASK))
    assert upstream.received[0].json()["stream_options"] == {"include_usage": True}  # usage for message_delta


THOUGHT = "The user wants src/app.py; reading it first."


def thinking_upstream(request: Received, wire: Wire) -> None:
    answer(request, wire, completion('<tool_call>{"name": "read", "arguments": {"path": "src/app.py"}}</tool_call>',
                                     reasoning_content=THOUGHT))


@pytest.mark.parametrize("strategy", ["buffered", "incremental"])
def test_thinking_comes_first_and_is_closed_by_its_signature(strategy, serve, settings, upstream):
    upstream.script = thinking_upstream
    proxy = serve(with_settings(settings, stream_strategy=strategy))
    client = client_of(proxy.url)
    ask: dict[str, Any] = {"model": "m", "max_tokens": 2048, "tools": TOOLS, "messages": ASK,
                           "thinking": {"type": "enabled", "budget_tokens": 1024}}
    whole = client.messages.create(**ask)
    assert [block.type for block in whole.content] == ["thinking", "tool_use"]
    assert whole.content[0].thinking == THOUGHT and whole.content[0].signature
    with client.messages.stream(**ask) as stream:
        assert as_compared(stream.get_final_message()) == as_compared(whole)
    check_order(read_events(requests.post(f"{proxy.url}/v1/messages", json={**ask, "stream": True}, timeout=30)))
    plain = client.messages.create(**{**ask, "thinking": {"type": "disabled"}})
    assert [block.type for block in plain.content] == ["tool_use"]  # not asked for: not shown


@pytest.mark.parametrize(("switch", "sent"), [
    ("enable_thinking", [{"chat_template_kwargs": {"enable_thinking": value}} for value in (True, True, True, False)]),
    ("reasoning_effort", [{"reasoning_effort": effort} for effort in ("medium", "low", "high", "none")]),
])
def test_thinking_switches_the_upstreams_reasoning_where_the_model_says_how(switch, sent, serve, settings, upstream):
    upstream.completion("ok")
    client = client_of(serve(with_settings(settings, reasoning_switch=switch)).url)
    asked: list[dict[str, Any]] = [{"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}},
                                   {"thinking": {"type": "enabled", "budget_tokens": 2048}},
                                   {"thinking": {"type": "enabled", "budget_tokens": 32000}},
                                   {"thinking": {"type": "disabled"}}, {}]
    for extra in asked:
        client.messages.create(model="m", max_tokens=64, messages=ASK, **extra)
    bodies = [request.json() for request in upstream.received]
    assert [{key: body[key] for key in ("chat_template_kwargs", "reasoning_effort") if key in body}
            for body in bodies] == [*sent, {}]  # not said: the model's default


def test_create_through_the_beta_path_claude_code_calls(messages_proxy):
    message = client_of(messages_proxy.url).beta.messages.create(
        model="hermes", max_tokens=256, tools=TOOLS, messages=ASK, betas=["interleaved-thinking-2025-05-14"])
    assert [block.name for block in message.content if block.type == "tool_use"] == ["read", "bash"]


def test_every_record_names_the_messages_protocol(messages_proxy):
    client_of(messages_proxy.url).messages.create(model="hermes", max_tokens=256, tools=TOOLS, messages=ASK)
    rows = wait_for_records(messages_proxy.url, 1, params={"protocol": "messages"})
    assert len(rows) == 1 and rows[0]["protocol"] == "messages"
    assert rows[0]["model"] == "hermes"


def test_without_the_upstreams_counts_both_are_estimated_never_zero(serve, settings, upstream):
    payload = {key: value for key, value in completion("Twelve chars").items() if key != "usage"}
    upstream.script = lambda request, wire: wire.send_json(payload)
    message = client_of(serve(settings).url).messages.create(model="m", max_tokens=64, messages=ASK)
    assert message.usage.input_tokens > 0 and message.usage.output_tokens == 4  # 12 characters, 3 a token
