"""What the upstream gets for an Anthropic Messages request: one system message first (the top-level `system`,
then every `role: system` message in order: Qwen 3.6/3.8 templates refuse a system message anywhere else,
ollama/ollama#17774), tool results right after the calls they answer, images as image_url parts, thinking from
the history never, tools of other kinds left out with a note, tool_choice and the sampling fields in chat terms,
model aliases resolved; and the core's stages (prompt mode, the repair round, the loop guard) as on the chat
route."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import Received, Wire, completion
from tests.test_dashboard import wait_for_records
from tests.test_messages_sdk import ASK, TOOLS, client_of
from toolproxy.config.settings import ModelRule, load_settings
from toolproxy.routes import models

READ_CALL = '<tool_call>{"name": "read", "arguments": {"path": "src/app.py"}}</tool_call>'
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def sent(upstream: Any) -> dict[str, Any]:
    body: dict[str, Any] = upstream.received[-1].json()
    return body


def conversation() -> list[dict[str, Any]]:
    """A second turn as Claude Code sends it: a reminder and the task, a system message after the first user
    turn, the model's thinking and call, the result with an image, more text."""
    return [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>be brief</system-reminder>"},
                                     {"type": "text", "text": "look at src/app.py", "cache_control": {
                                         "type": "ephemeral"}}]},
        {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /work"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read it.", "signature": ""},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "src/app.py"}}]},
        {"role": "user", "content": [
            {"type": "text", "text": "and tell me"},
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": [
                {"type": "text", "text": "print('hi')"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}]}]},
        {"role": "system", "content": "Answer in English."},
    ]


def test_the_upstream_gets_one_system_message_first_and_tool_results_after_their_calls(upstream, proxy):
    upstream.completion("It prints hi.")
    message = client_of(proxy.url).messages.create(model="m", max_tokens=64, system="You are terse.", tools=TOOLS,
                                                   messages=conversation())
    assert message.content[0].text == "It prints hi."
    messages = sent(upstream)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[0]["content"] == "You are terse.\n\n# Environment\ncwd: /work\n\nAnswer in English."
    assert messages[1]["content"] == "<system-reminder>be brief</system-reminder>\n\nlook at src/app.py"
    assert messages[2] == {"role": "assistant", "content": "Reading.", "tool_calls": [
        {"id": "toolu_01", "type": "function", "function": {"name": "read", "arguments": '{"path":"src/app.py"}'}}]}
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_01", "content": "print('hi')"}
    assert messages[4]["content"] == [{"type": "text", "text": "and tell me"},
                                      {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}]
    assert "thinking" not in str(messages) and "opaque" not in str(messages)


def test_a_failed_tool_result_says_so_in_its_text(upstream, proxy):
    upstream.completion("Sorry.")
    history = [ASK[0], {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "bash",
                                                          "input": {"command": "false"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "is_error": True,
                                             "content": "exit status 1"}]}]
    client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=TOOLS, messages=history)
    assert sent(upstream)["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_9",
                                              "content": "Error: exit status 1"}


def test_tools_of_other_kinds_are_left_out_with_a_note_never_refused(upstream, proxy):
    upstream.completion(READ_CALL)
    server_tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
                    {"type": "bash_20250124", "name": "bash_builtin"}]
    message = client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=[*TOOLS, *server_tools],
                                                   messages=ASK)
    assert [block.name for block in message.content if block.type == "tool_use"] == ["read"]
    assert [tool["function"]["name"] for tool in sent(upstream)["tools"]] == ["read", "bash"]
    (row,) = wait_for_records(proxy.url, 1)
    assert row["issue_count"] == 2
    page = requests.get(f"{proxy.url}/dashboard/record/{row['id']}", timeout=10).text
    assert "the web_search_20250305 tool" in page and "the bash_20250124 tool" in page and "left out" in page


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, "auto"),
    ({"type": "any"}, "required"),
    ({"type": "none"}, "none"),
    ({"type": "tool", "name": "bash"}, {"type": "function", "function": {"name": "bash"}}),
])
def test_tool_choice_in_chat_terms(choice, expected, upstream, proxy):
    upstream.completion("ok")
    client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=TOOLS, tool_choice=choice, messages=ASK)
    assert sent(upstream)["tool_choice"] == expected


def test_sampling_fields_in_chat_terms_and_the_rest_not_sent(upstream, proxy):
    upstream.completion("ok")
    # SDK 2.x dropped the sampling arguments (newer Claude models refuse them); older clients still send them.
    client_of(proxy.url).messages.create(
        model="m", max_tokens=77, stop_sequences=["END"], tools=TOOLS, messages=ASK, metadata={"user_id": "someone"},
        tool_choice={"type": "auto", "disable_parallel_tool_use": True}, output_config={"effort": "medium"},
        extra_body={"temperature": 0.2, "top_p": 0.9, "top_k": 40, "context_management": {"edits": []}})
    body = sent(upstream)
    assert {key: body[key] for key in ("max_tokens", "temperature", "top_p", "top_k", "stop",
                                       "parallel_tool_calls")} == {"max_tokens": 77, "temperature": 0.2, "top_p": 0.9,
                                                                   "top_k": 40, "stop": ["END"],
                                                                   "parallel_tool_calls": False}
    assert not {"metadata", "context_management", "output_config", "thinking", "system"} & set(body)


def test_model_aliases_send_claude_names_to_a_configured_model(upstream, serve, settings):
    upstream.completion("ok")
    rules = (ModelRule("qwen3-coder", {"upstream": upstream.url}),)
    proxy = serve(with_settings(settings, upstream=None, models=rules, model_aliases=(("claude-*", "qwen3-coder"),)))
    client = client_of(proxy.url)
    message = client.messages.create(model="claude-haiku-4-5-20251001", max_tokens=64, messages=ASK)
    assert sent(upstream)["model"] == "qwen3-coder"
    assert message.model == "claude-haiku-4-5-20251001"  # the client's own name back
    with pytest.raises(anthropic.NotFoundError) as raised:
        client.messages.create(model="gpt-5", max_tokens=64, messages=ASK)
    assert raised.value.body["error"]["type"] == "not_found_error"
    assert "qwen3-coder" in raised.value.body["error"]["message"]


def test_model_aliases_from_the_environment_and_yaml(tmp_path):
    assert load_settings({"TOOLPROXY_MODEL_ALIASES": "claude-*=qwen3, gpt-?=llama"}).model_aliases == (
        ("claude-*", "qwen3"), ("gpt-?", "llama"))
    path = tmp_path / "config.yaml"
    path.write_text('model_aliases:\n  "claude-haiku*": small\n  "claude-*": big\n')
    loaded = load_settings({"TOOLPROXY_CONFIG": str(path)})
    names = ("claude-haiku-4-5", "claude-opus-5", "qwen")
    assert [models.alias(loaded, name) for name in names] == ["small", "big", "qwen"]


def test_prompt_mode_emulates_tool_choice_any_for_a_backend_without_tools(upstream, serve, settings):
    upstream.completion(READ_CALL)
    proxy = serve(with_settings(settings, tool_mode="prompt"))
    message = client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=TOOLS,
                                                   tool_choice={"type": "any"}, messages=ASK)
    assert [(block.name, block.input) for block in message.content] == [("read", {"path": "src/app.py"})]
    body = sent(upstream)
    assert "tools" not in body and "<tools>" in body["messages"][0]["content"]


def test_the_repair_round_asks_again_with_the_error(upstream, serve, settings):
    answers = iter(['<tool_call>{"name": "read", "arguments": {"limit": 3}}</tool_call>', READ_CALL])

    def script(request: Received, wire: Wire) -> None:
        wire.send_json(completion(next(answers)))

    upstream.script = script
    proxy = serve(with_settings(settings, repair_rounds=1, invalid_arguments="text"))
    message = client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=TOOLS,
                                                   tool_choice={"type": "any"}, messages=ASK)
    assert [(block.name, block.input) for block in message.content] == [("read", {"path": "src/app.py"})]
    assert len(upstream.received) == 2 and "path" in str(upstream.received[1].json()["messages"][-1])


def test_the_loop_guard_stops_a_model_repeating_a_call(upstream, proxy):
    upstream.completion(READ_CALL)
    history: list[dict[str, Any]] = [ASK[0]]
    for turn in range(5):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{turn}", "name": "read",
                                                       "input": {"path": "src/app.py"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                                                  "content": "print('hi')"}]}]
    message = client_of(proxy.url).messages.create(model="m", max_tokens=64, tools=TOOLS, messages=history)
    assert message.stop_reason == "end_turn" and message.content[0].type == "text"
    assert "toolproxy" in message.content[0].text.lower() and upstream.received == []
    assert message.usage.input_tokens > 0  # counted by the estimate: never 0 for a prompt
