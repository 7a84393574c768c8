"""What a Responses request becomes upstream: one leading system message, the history as chat messages (calls
gathered into the assistant turn that made them, their outputs as tool messages, reasoning left out), tools
(functions, freeform tools as one string parameter, a namespace's functions under flat names), parameters, and
what is ignored or left out. Checked on the body the scripted upstream receives."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import with_settings
from tests.responses_cases import APPLY_PATCH, PATCH, TOOLS, WEATHER, answering, client_for
from tests.test_dashboard import wait_for_records


def post(proxy, body: dict) -> requests.Response:
    return requests.post(f"{proxy.url}/v1/responses", json={"model": "qwen3", **body}, timeout=30)


def sent(upstream) -> dict:
    return upstream.received[-1].json()


def message(role: str, text: str, part: str = "input_text") -> dict:
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def test_instructions_and_every_system_or_developer_item_fold_into_one_leading_system_message(upstream, proxy):
    """Codex sends two developer messages first and more after compaction: all of it, in order, leads."""
    upstream.completion("ok")
    items = [message("developer", "Be precise."), message("system", "Use tools."), message("user", "hi"),
             message("assistant", "Hello.", "output_text"), message("developer", "Compacted: the user said hi."),
             {"role": "user", "content": "and now?"}]
    assert post(proxy, {"instructions": "You are Codex.", "input": items}).status_code == 200
    assert sent(upstream)["messages"] == [
        {"role": "system", "content": "You are Codex.\n\nBe precise.\n\nUse tools.\n\nCompacted: the user said hi."},
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "and now?"}]


def test_history_items_become_chat_messages(upstream, proxy):
    upstream.completion("done")
    items = [message("user", "fix it"),
             {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}],
              "encrypted_content": "gAAAA-opaque"},
             message("assistant", "Looking.", "output_text"),
             {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
              "arguments": '{"city": "Oslo"}', "status": "completed"},
             {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "apply_patch", "input": PATCH},
             {"type": "function_call_output", "call_id": "call_1", "output": "Rain."},
             {"type": "custom_tool_call_output", "call_id": "call_2",
              "output": [{"type": "input_text", "text": "Success."}, {"type": "input_text", "text": "M app.py"}]}]
    assert post(proxy, {"input": items, "tools": TOOLS}).status_code == 200
    assert sent(upstream)["messages"] == [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "apply_patch", "arguments": json.dumps({"input": PATCH}, separators=(",", ":"))}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Rain."},
        {"role": "tool", "tool_call_id": "call_2", "content": "Success.\nM app.py"}]
    assert "gAAAA" not in upstream.received[-1].body.decode()  # reasoning stays out; never decoded


def test_images_reach_the_upstream_as_chat_image_parts(upstream, proxy):
    upstream.completion("a cat")
    content = [{"type": "input_text", "text": "what is this?"},
               {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}]
    assert post(proxy, {"input": [{"role": "user", "content": content}]}).status_code == 200
    assert sent(upstream)["messages"][0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}]


def test_a_namespace_goes_upstream_flat_and_its_call_comes_back_with_its_namespace(upstream, proxy):
    spawn = {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
             "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}
    group = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [spawn]}
    upstream.completion('<tool_call>{"name": "multi_agent_v1__spawn_agent", "arguments": {"task": "tests"}}'
                        "</tool_call>")
    history = [message("user", "delegate"),
               {"type": "function_call", "call_id": "call_9", "namespace": "multi_agent_v1", "name": "spawn_agent",
                "arguments": '{"task": "lint"}'},
               {"type": "function_call_output", "call_id": "call_9", "output": "started"}]
    response = client_for(proxy).responses.create(model="qwen3", input=history, tools=[group, WEATHER])
    (call,) = response.output
    assert (call.type, call.namespace, call.name, json.loads(call.arguments)) == (
        "function_call", "multi_agent_v1", "spawn_agent", {"task": "tests"})
    body = sent(upstream)
    assert [tool["function"]["name"] for tool in body["tools"]] == ["get_weather", "multi_agent_v1__spawn_agent"]
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__spawn_agent"


def test_tools_the_upstream_cannot_run_are_left_out_with_a_note_on_the_record(upstream, proxy):
    upstream.completion("ok")
    tools = [{"type": "web_search", "external_web_access": False}, WEATHER, {"type": "image_generation"},
             {"type": "local_shell"}]
    assert post(proxy, {"input": "hi", "tools": tools}).status_code == 200
    assert [tool["function"]["name"] for tool in sent(upstream)["tools"]] == ["get_weather"]
    (row,) = wait_for_records(proxy.url, 1)
    detail = requests.get(f"{proxy.url}/dashboard/record/{row['id']}", timeout=5).text
    assert row["protocol"] == "responses"
    for kind in ("web_search", "image_generation", "local_shell"):
        assert f"of type &#39;{kind}&#39; left out" in detail


def test_parameters_reach_the_upstream_in_chat_terms(upstream, proxy):
    upstream.completion('{"city": "Oslo"}')
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    body = {"input": "hi", "tools": TOOLS, "tool_choice": {"type": "custom", "name": "apply_patch"},
            "parallel_tool_calls": False, "max_output_tokens": 64, "temperature": 0.2, "top_p": 0.9,
            "text": {"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True},
                     "verbosity": "low"}}
    assert post(proxy, body).status_code == 200
    upstream_body = sent(upstream)
    assert upstream_body["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    assert (upstream_body["parallel_tool_calls"], upstream_body["max_tokens"], upstream_body["temperature"],
            upstream_body["top_p"]) == (False, 64, 0.2, 0.9)
    assert upstream_body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "place", "schema": schema, "strict": True}}


def test_fields_a_stateless_proxy_has_no_use_for_are_ignored_not_refused(upstream, proxy):
    upstream.completion("ok")
    body = {"input": "hi", "store": False, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k1",
            "metadata": {"a": "b"}, "client_metadata": {"x": "y"}, "service_tier": "auto", "truncation": "auto",
            "reasoning": {"effort": "high", "summary": "auto"}, "a_field_from_next_year": 1}
    response = post(proxy, body)
    assert response.status_code == 200 and response.json()["metadata"] == {"a": "b"}
    assert set(sent(upstream)) == {"model", "messages", "stream"}


@pytest.mark.parametrize(("switch", "effort", "expected"), [
    ("reasoning_effort", "high", {"reasoning_effort": "high"}),
    ("enable_thinking", "minimal", {"chat_template_kwargs": {"enable_thinking": False}}),
    ("enable_thinking", "medium", {"chat_template_kwargs": {"enable_thinking": True}}),
    ("thinking", "none", {"chat_template_kwargs": {"thinking": False}}),
])
def test_reasoning_effort_reaches_the_upstream_as_the_models_switch_says(switch, effort, expected, upstream, serve,
                                                                         settings):
    upstream.completion("ok")
    proxy = serve(with_settings(settings, reasoning_switch=switch))
    assert post(proxy, {"input": "hi", "reasoning": {"effort": effort}}).status_code == 200
    body = sent(upstream)
    assert {key: body[key] for key in expected} == expected


def test_prompt_mode_teaches_the_freeform_tool_and_answers_a_custom_tool_call(upstream, serve, settings):
    upstream.script = answering(f"<tool_call>\n{json.dumps({'name': 'apply_patch', 'arguments': {'input': PATCH}})}"
                                "\n</tool_call>")
    proxy = serve(with_settings(settings, tool_mode="prompt"))
    response = client_for(proxy).responses.create(model="qwen3", input="fix app.py", tools=[APPLY_PATCH])
    assert [(item.type, item.input) for item in response.output] == [("custom_tool_call", PATCH)]
    body = sent(upstream)
    assert "tools" not in body and "apply_patch" in body["messages"][0]["content"]


def test_the_loop_guard_stops_a_model_that_repeats_its_call(upstream, proxy):
    upstream.completion("should not be asked")
    items = [message("user", "weather?")]
    for turn in range(4):
        items += [{"type": "function_call", "call_id": f"call_{turn}", "name": "get_weather",
                   "arguments": '{"city": "Oslo"}'},
                  {"type": "function_call_output", "call_id": f"call_{turn}", "output": "Rain."}]
    response = client_for(proxy).responses.create(model="qwen3", input=items, tools=TOOLS)
    assert response.output_text.startswith("Stopped") and upstream.received == []
