"""No single request holds a worker's event loop for more than 100 ms (issue 24, broke 1): hostile input within
the configured limits, through real gunicorn, with the worker's loop watched on its own CPU clock
(observe/blocking.py; a wall-clock watch would fire whenever this machine is busy). Tool schemas too costly to
check are a 400 naming the tool and the limit; big replies are extracted off the loop and come back right."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import Gunicorn, make_body, make_tool
from tests.fake_upstream import FakeUpstream, completion
from toolproxy.meaning.schema_shape import MAX_DEPTH, MAX_SUBSCHEMAS
from toolproxy.transform.chat_request import MAX_REQUEST_SUBSCHEMAS
from toolproxy.wire.jsonwire import MAX_VALUES

LOOP_BUDGET_MS = 100


@pytest.fixture(scope="module")
def watched(_upstream_server: FakeUpstream) -> Iterator[Gunicorn]:
    server = Gunicorn({"TOOLPROXY_UPSTREAM": _upstream_server.url, "TOOLPROXY_DEBUG_ROUTES": "1",
                       "TOOLPROXY_WORKERS": "1", "TOOLPROXY_REQUEST_TIMEOUT": "120",
                       "TOOLPROXY_READ_TIMEOUT": "120"}).wait_ready()
    # A worker's first requests import what they use (RE2, the validators): a one-time cost of its start, not of
    # the input; these warm it up as any agent's first turns would.
    _upstream_server.completion('<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    for stream in (False, True):
        post(server, make_body("hi", [make_tool("read", {"path": {"type": "string", "pattern": "^a"}})],
                               stream=stream))
    yield server
    server.close()


def worst_blocked_ms(server: Gunicorn) -> float:
    return float(requests.get(f"{server.url}/debug/runtime", timeout=60).json()["worst_blocked_ms"])


def post(server: Gunicorn, body: Any) -> requests.Response:
    worst_blocked_ms(server)  # start the watch afresh
    return requests.post(f"{server.url}/v1/chat/completions", data=json.dumps(body),
                         headers={"Content-Type": "application/json"}, timeout=120)


def wide_tool(name: str, properties: int) -> dict[str, Any]:
    return make_tool(name, {f"p{i}": {"type": "string", "description": "a field " * 8} for i in range(properties)})


def deep_tool(name: str, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def test_a_7_mib_schema_is_a_400_naming_the_limit_it_passed(watched, upstream):
    body = make_body("hi", [wide_tool("huge", 70_000)])
    assert len(json.dumps(body)) > 7 * 1024 * 1024
    response = post(watched, body)
    assert response.status_code == 400, response.text[:300]
    assert f"more than {MAX_VALUES} values" in response.json()["error"]["message"]
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS
    assert not upstream.received


def test_a_schema_past_the_limit_is_a_400_naming_the_tool_and_the_limit(watched, upstream):
    response = post(watched, make_body("hi", [make_tool("small"), wide_tool("huge", MAX_SUBSCHEMAS)]))
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_tool_schema" and error["param"] == "tools.[1].function.parameters"
    assert "'huge'" in error["message"] and str(MAX_SUBSCHEMAS) in error["message"]
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS
    assert not upstream.received


def test_tools_over_the_request_bound_together_are_a_400(watched, upstream):
    per_tool = MAX_SUBSCHEMAS - 2
    tools = [wide_tool(f"t{index}", per_tool) for index in range(MAX_REQUEST_SUBSCHEMAS // per_tool + 1)]
    response = post(watched, make_body("hi", tools))
    assert response.status_code == 400, response.text[:300]
    message = response.json()["error"]["message"]
    assert str(MAX_REQUEST_SUBSCHEMAS) in message and f"'t{len(tools) - 1}'" in message
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS


def test_a_schema_just_within_the_limits_is_checked_and_used(watched, upstream):
    upstream.completion('<tool_call>{"name": "wide", "arguments": {"p7": "x"}}</tool_call>')
    response = post(watched, make_body("hi", [wide_tool("wide", MAX_SUBSCHEMAS - 2), deep_tool("deep", MAX_DEPTH)]))
    assert response.status_code == 200, response.text[:300]
    call = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("wide", {"p7": "x"})
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS


def test_a_schema_nested_too_deep_is_a_400(watched, upstream):
    response = post(watched, make_body("hi", [deep_tool("deep", MAX_DEPTH + 1)]))
    assert response.status_code == 400 and str(MAX_DEPTH) in response.json()["error"]["message"]


def test_a_schema_naming_no_string_as_its_draft_is_a_400_not_a_500(watched, upstream):
    tool = {"type": "function", "function": {"name": "odd", "parameters": {"$schema": 5, "type": "object"}}}
    response = post(watched, make_body("hi", [tool]))
    assert response.status_code == 400 and "$schema" in response.json()["error"]["message"]


def test_an_8_mb_reply_with_tools_comes_back_right_without_holding_the_loop(watched, upstream):
    prose = ("The file holds many lines of ordinary text, and no call among them. " * 120_000)[: 8 * 1024 * 1024]
    call = '<tool_call>{"name": "read", "arguments": {"path": "a.py"}}</tool_call>'
    upstream.script = lambda request, wire: wire.send_json(completion(prose + "\n\n" + call))
    response = post(watched, make_body("hi", [make_tool("read", {"path": {"type": "string"}}, ["path"])]))
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert message["content"] == prose.strip()
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["read"]
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS


def test_a_body_near_the_size_limit_is_read_without_holding_the_loop(watched, upstream):
    upstream.completion("ok")
    turns = [{"role": "user" if index % 2 == 0 else "assistant", "content": "word " * 2000} for index in range(1500)]
    body = {"model": "m", "messages": turns}
    assert 14 * 1024 * 1024 < len(json.dumps(body)) < 16 * 1024 * 1024
    assert post(watched, body).status_code == 200
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS


def test_a_messages_body_near_the_size_limit_is_read_without_holding_the_loop(watched, upstream):
    """The same for Anthropic's Messages API: its decode and conversion pause between their steps too."""
    upstream.completion("ok")
    turns = [{"role": "user" if index % 2 == 0 else "assistant",
              "content": [{"type": "text", "text": "word " * 2000}]} for index in range(1500)]
    body = {"model": "m", "max_tokens": 64, "system": "be brief", "messages": turns}
    assert 14 * 1024 * 1024 < len(json.dumps(body)) < 16 * 1024 * 1024
    worst_blocked_ms(watched)  # start the watch afresh
    response = requests.post(f"{watched.url}/v1/messages", data=json.dumps(body), timeout=120,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 200 and response.json()["content"] == [{"type": "text", "text": "ok"}]
    assert worst_blocked_ms(watched) < LOOP_BUDGET_MS
