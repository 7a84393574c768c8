"""Fuzzed bodies through a real HTTP server: upstream answers of every wrong shape on all four routes, and
request fields of every wrong type. Neither may ever produce a 500: a bad upstream answer is a 502
`bad_upstream_response`, a bad request field a 400 naming its `param`."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.conftest import make_tool
from tests.fake_upstream import as_chunks, completion
from tests.sse_client import parse_stream

READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
ODD_VALUES: list[Any] = [None, 5, -1, 1.5, True, "x", "", [], [5], ["x"], {}, {"a": 1}, [{}], [[]], "\ud800"]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every position inside a JSON value, the root included, parents before children."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, (*prefix, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    result = copy.deepcopy(value)
    node = result
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return result


def removed(value: Any, path: tuple[Any, ...]) -> Any:
    result = copy.deepcopy(value)
    node = result
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return result


def mutations(value: Any) -> list[Any]:
    """Each position replaced by each odd value, and each key removed."""
    found = []
    for path in paths(value):
        found += [replaced(value, path, odd) for odd in ODD_VALUES]
        if path and isinstance(path[-1], str):
            found.append(removed(value, path))
    return found


# --- upstream answers --------------------------------------------------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "/a"}'}}
VALID_ANSWER = completion('<tool_call>{"name": "read", "arguments": {"path": "/b"}}</tool_call> done',
                          tool_calls=[CALL], reasoning_content="hmm")


ANSWERS = mutations(VALID_ANSWER)
ROUTES = {
    "tools_stream": {"tools": [READ], "stream": True},
    "tools": {"tools": [READ]},
    "stream": {"stream": True},
    "plain": {},
}


def answer_problem(response: requests.Response) -> str | None:
    """None for a usable answer or a 502 naming a bad upstream response; a 500 or a half answer is a problem."""
    if response.status_code == 502:
        error = response.json()["error"]
        return None if error["code"] == "bad_upstream_response" else f"502 with {error}"
    if response.status_code != 200:
        return f"{response.status_code}: {response.text[:300]}"
    if response.headers["Content-Type"].startswith("text/event-stream"):
        events, _ = parse_stream(response.content)
        errors = [event["error"] for event in events if isinstance(event, dict) and "error" in event]
        return None if all(error["code"] == "bad_upstream_response" for error in errors) else f"stream: {errors}"
    body = response.json()
    for choice in body["choices"]:
        message = choice["message"]
        if not isinstance(message.get("content"), (str, type(None))):
            return f"content {message.get('content')!r}"
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list) or not all(_is_wire_call(call) for call in calls):
            return f"tool_calls {calls!r}"
    return None


def _is_wire_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return (isinstance(function, dict) and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments"), str) and isinstance(call.get("id"), str)
            and call.get("type") == "function")


@pytest.mark.timeout(600)
def test_every_malformed_upstream_answer_is_502_never_500(proxy, upstream):
    assert len(ANSWERS) >= 300
    state: dict[str, Any] = {}

    def answer(request, wire):
        if request.json().get("stream"):
            payload = state["answer"]
            chunks = as_chunks(payload) if _is_streamable(payload) else [payload]
            # A malformed chunk: the answer's own (mutated) values placed where chunk fields go.
            wire.send_events([json.dumps(chunk) for chunk in [*chunks[:1], _as_chunk(payload), *chunks[1:]]])
        else:
            wire.send_raw(json.dumps(state["answer"]).encode(), headers={"Content-Type": "application/json"})

    upstream.script = answer
    failures = []
    with requests.Session() as session:
        for sent in ANSWERS:
            state["answer"] = sent
            for route, extra in ROUTES.items():
                body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **extra}
                problem = answer_problem(session.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=30))
                if problem:
                    failures.append((route, problem, sent))
    assert not failures, f"{len(failures)} of {len(ANSWERS) * len(ROUTES)}: {[f[:2] for f in failures]}"


def _is_streamable(payload: Any) -> bool:
    try:
        as_chunks(payload)
    except (KeyError, TypeError, IndexError, AttributeError):
        return False
    return True


def _as_chunk(payload: Any) -> Any:
    """The mutated answer as one chunk: its message moved to where a delta goes."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        return payload
    choices = [{**choice, "delta": choice.get("message")} if isinstance(choice, dict) else choice
               for choice in payload["choices"]]
    return {**payload, "object": "chat.completion.chunk", "choices": choices}


# --- request fields ----------------------------------------------------------------------------------------

VALID_REQUEST: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "read /a"}]},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "file a"},
        {"role": "user", "content": "now /b", "name": "me"},
    ],
    "tools": [READ],
    "tool_choice": {"type": "function", "function": {"name": "read"}},
    "parallel_tool_calls": True,
    "stream": False,
    "stream_options": {"include_usage": True},
    "n": 1,
    "max_tokens": 100,
    "temperature": 0.5,
}


def request_mutations() -> list[Any]:
    found = mutations(VALID_REQUEST)
    # The same with streaming on: the stream routes read the fields too.
    found += [{**m, "stream": True} for m in found if isinstance(m, dict) and m.get("stream") is False]
    return found


REQUESTS = request_mutations()


@pytest.mark.timeout(900)
def test_every_fuzzed_request_field_is_checked_never_500(proxy, upstream):
    assert len(REQUESTS) >= 1600
    upstream.completion('<tool_call>{"name": "read", "arguments": {"path": "/b"}}</tool_call>')
    failures = []
    with requests.Session() as session:
        for sent in REQUESTS:
            response = session.post(f"{proxy.url}/v1/chat/completions", data=json.dumps(sent), timeout=30,
                                    headers={"Content-Type": "application/json"})
            problem = _request_problem(response)
            if problem:
                failures.append((problem, sent))
    assert not failures, f"{len(failures)} of {len(REQUESTS)}: {failures[:20]}"


def _request_problem(response: requests.Response) -> str | None:
    if response.status_code >= 500:
        return f"{response.status_code}: {response.text[:300]}"
    if response.status_code >= 400:
        error = response.json().get("error") or {}
        if set(error) != {"message", "type", "param", "code"}:
            return f"not an OpenAI error: {response.text[:300]}"
        if response.status_code == 400 and error["code"] != "invalid_json" and not error["param"]:
            return f"400 without param: {error}"
        return None
    if response.headers["Content-Type"].startswith("text/event-stream"):
        events, _ = parse_stream(response.content)
        errors = [event["error"] for event in events if isinstance(event, dict) and "error" in event]
        return f"error in the stream: {errors}" if errors else None
    return None


def test_tool_call_id_as_a_list_is_400_naming_it(proxy, upstream):
    body = copy.deepcopy(VALID_REQUEST)
    body["messages"][3]["tool_call_id"] = ["call_1"]
    response = proxy.post(body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "messages.[3].tool_call_id"
    assert not upstream.received
