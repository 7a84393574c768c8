"""`POST /v1/responses` with the official `openai` Python SDK: `client.responses.create` and
`client.responses.stream` with a function tool and a freeform (custom) tool, through the proxy in front of a
scripted upstream that writes its calls as text (hermes, qwen3_coder, gemma4) or natively. The stream's events
pair up as Codex pairs them, and the response it ends with equals the whole one."""

from __future__ import annotations

import json

import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import as_chunks, completion
from tests.responses_cases import FORMS, PATCH, TOOLS, answering, client_for, plain
from tests.test_dashboard import wait_for_records


@pytest.mark.parametrize("form", FORMS)
def test_create_answers_with_a_function_call_and_a_custom_tool_call(form, upstream, proxy):
    content, message, text = FORMS[form]
    upstream.completion(content, **message)
    response = client_for(proxy).responses.create(model="qwen3", input="Weather in Paris, then fix app.py",
                                                   tools=TOOLS)
    assert response.status == "completed" and response.id.startswith("resp_") and response.model == "qwen3"
    calls = [item for item in response.output if item.type != "message"]
    assert [(call.type, call.name) for call in calls] == [("function_call", "get_weather"),
                                                           ("custom_tool_call", "apply_patch")]
    weather, patch = calls
    assert json.loads(weather.arguments) == {"city": "Paris", "days": 3}  # "3" from text, typed by the schema
    assert patch.input == PATCH  # the raw patch, not JSON
    assert weather.id.startswith("fc_") and patch.id.startswith("ctc_")
    assert weather.call_id.startswith("call_") and patch.call_id.startswith("call_")
    assert weather.call_id != patch.call_id
    assert response.output_text == text
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (10, 5, 15)
    sent = upstream.received[-1].json()
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["get_weather", "apply_patch"]
    assert sent["tools"][1]["function"]["parameters"]["properties"] == {"input": {"type": "string"}}
    assert "lark grammar" in sent["tools"][1]["function"]["description"]


@pytest.mark.parametrize("strategy", ["buffered", "incremental"])
@pytest.mark.parametrize("form", FORMS)
def test_the_streamed_response_equals_the_whole_one(form, strategy, upstream, serve, settings):
    content, message, _ = FORMS[form]
    upstream.script = answering(content, **message)
    client = client_for(serve(with_settings(settings, stream_strategy=strategy)))
    whole = client.responses.create(model="qwen3", input="Weather in Paris, then fix app.py", tools=TOOLS)
    with client.responses.stream(model="qwen3", input="Weather in Paris, then fix app.py", tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert plain(final) == plain(whole)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed" and events[-1].response.id == events[0].response.id
    added = {event.output_index: event.item.id for event in events if event.type == "response.output_item.added"}
    done = {event.output_index: event.item for event in events if event.type == "response.output_item.done"}
    assert {index: item.id for index, item in done.items()} == added  # Codex pairs them by id
    finished = [item.to_dict() for _, item in sorted(done.items())]
    assert [item["id"] for item in finished] == [item.id for item in final.output]
    assert plain({"output": finished})["output"] == plain(final)["output"]
    custom = [event for event in events if event.type.startswith("response.custom_tool_call_input.")]
    assert [event.type for event in custom] == ["response.custom_tool_call_input.delta",
                                                "response.custom_tool_call_input.done"]
    assert custom[0].delta == custom[1].input == PATCH
    arguments = [event for event in events if event.type == "response.function_call_arguments.done"]
    assert [json.loads(event.arguments) for event in arguments] == [{"city": "Paris", "days": 3}]


def test_each_event_names_its_type_on_an_event_line(upstream, proxy):
    upstream.completion(*FORMS["hermes"][:1], **FORMS["hermes"][1])
    response = requests.post(f"{proxy.url}/v1/responses", timeout=30, stream=True,
                             json={"model": "qwen3", "input": "go", "tools": TOOLS, "stream": True})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    blocks = [block for block in response.content.decode().split("\n\n") if block.strip()]
    for block in blocks:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data.removeprefix("data: "))["type"] == name.removeprefix("event: ")
    assert name == "event: response.completed"


def test_a_stream_without_tools_is_relayed_with_its_reasoning_and_usage(upstream, proxy):
    """No tools: the upstream streams and each event goes on as it comes; reasoning becomes a reasoning item with
    its text as the summary, the usage the upstream was asked for ends in response.completed."""
    payload = completion("The answer is 42.", reasoning_content="Six times seven.")

    def answer(request, wire):
        if not request.json().get("stream"):
            wire.send_json(payload)
            return
        reasoning = {**as_chunks(payload)[0], "choices": [{"index": 0, "delta": {"reasoning_content": "Six times "
                                                                                  "seven."}, "finish_reason": None}]}
        usage = {**as_chunks(payload)[0], "choices": [], "usage": payload["usage"]}
        wire.send_events([reasoning, *as_chunks(payload), usage])

    upstream.script = answer
    client = client_for(proxy)
    whole = client.responses.create(model="qwen3", input="6 x 7?")
    with client.responses.stream(model="qwen3", input="6 x 7?") as stream:
        final = stream.get_final_response()
    assert plain(final) == plain(whole)
    assert [item.type for item in whole.output] == ["reasoning", "message"]
    assert whole.output[0].summary[0].text == "Six times seven." and whole.output_text == "The answer is 42."
    assert final.usage.total_tokens == 15
    sent = upstream.received[-1].json()
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_a_length_finish_is_an_incomplete_response(upstream, proxy):
    upstream.script = answering("Once upon a", finish_reason="length")
    client = client_for(proxy)
    whole = client.responses.create(model="qwen3", input="a story", tools=TOOLS, max_output_tokens=3)
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    assert whole.output[0].status == "incomplete"
    assert upstream.received[-1].json()["max_tokens"] == 3
    stream = client.responses.create(model="qwen3", input="a story", tools=TOOLS, max_output_tokens=3, stream=True)
    events = list(stream)
    assert events[-1].type == "response.incomplete"
    assert plain(events[-1].response) == plain(whole)


def test_the_record_and_the_metrics_count_a_responses_request_as_any_other(upstream, proxy):
    content, message, _ = FORMS["hermes"]
    upstream.completion(content, **message)
    client_for(proxy).responses.create(model="qwen3", input="Weather in Paris, then fix app.py", tools=TOOLS)
    (row,) = wait_for_records(proxy.url, 1)
    assert (row["protocol"], row["route"], row["status"]) == ("responses", "tools", 200)
    metrics = requests.get(f"{proxy.url}/metrics", timeout=5).text
    assert 'toolproxy_tool_calls_total{dialect="hermes",model="other",outcome="valid"} 2.0' in metrics
    assert ('toolproxy_requests_total{client="openai-python",model="other",protocol="responses",route="tools",'
            'status="200"} 1.0') in metrics
