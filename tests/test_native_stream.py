"""Native tool-call streams as servers really send them, repaired for strict clients: every malformation below
goes through the proxy (`stream_strategy: incremental`, so the upstream streams) to the official `openai`
Python SDK's streaming helper, which accumulates deltas by index and needs a finish chunk; the proxy's own
output is also read with the strict SSE reader of the tests."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import make_body, make_tool, with_settings
from tests.fake_upstream import Received, Wire
from tests.sse_client import accumulate, read_stream
from toolproxy.transform.native_stream import NativeCalls

READ = make_tool("read", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"])
HEAD = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "upstream-model"}
A_PY = {"path": "a.py"}


def call(function: dict[str, Any], index: int | None = 0, call_id: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {"type": "function", "function": function}
    if index is not None:
        delta["index"] = index
    if call_id is not None:
        delta["id"] = call_id
    return delta


# name: (tool-call deltas, one list per upstream chunk; the calls the client must get)
MALFORMED: dict[str, tuple[list[list[dict[str, Any]]], list[tuple[str, dict[str, Any]]]]] = {
    "deltas without index": (
        [[call({"name": "read", "arguments": ""}, None, "c1")], [call({"arguments": '{"path": '}, None)],
         [call({"arguments": '"a.py"}'}, None)], [call({"name": "read", "arguments": '{"path": "b.py"}'}, None, "c2")]],
        [("read", A_PY), ("read", {"path": "b.py"})]),
    "arguments as an object": ([[call({"name": "read", "arguments": A_PY}, 0, "c1")]], [("read", A_PY)]),
    "arguments encoded twice": (
        [[call({"name": "read", "arguments": json.dumps(json.dumps(A_PY))}, 0, "c1")]], [("read", A_PY)]),
    "arguments that do not parse, repairable": (
        [[call({"name": "read", "arguments": '{"path": "a.py",'}, 0, "c1")], [call({"arguments": "}"}, 0)]],
        [("read", A_PY)]),  # a trailing comma
    "name repeated in every delta": (
        [[call({"name": "read", "arguments": '{"path"'}, 0, "c1")], [call({"name": "read", "arguments": ': "a'}, 0)],
         [call({"name": "read", "arguments": '.py"}'}, 0)]], [("read", A_PY)]),
    "indices starting at 1": (
        [[call({"name": "read", "arguments": '{"path": "a.py"}'}, 1, "c1")],
         [call({"name": "read", "arguments": '{"path": "b.py"}'}, 2, "c2")]],
        [("read", A_PY), ("read", {"path": "b.py"})]),
    "arguments typed by the schema": (
        [[call({"name": "read", "arguments": '{"path": "a.py", "limit": "5"}'}, 0, "c1")]],
        [("read", {"path": "a.py", "limit": 5})]),
}


def native_stream(deltas: list[list[dict[str, Any]]], finish: str | None = "tool_calls") -> Any:
    def answer(request: Received, wire: Wire) -> None:
        events = [{**HEAD, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None},
                                        "finish_reason": None}]}]
        events += [{**HEAD, "choices": [{"index": 0, "delta": {"tool_calls": chunk}, "finish_reason": None}]}
                   for chunk in deltas]
        if finish:
            events.append({**HEAD, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        wire.send_events(events)

    return answer


@pytest.fixture
def incremental(serve, settings):
    return serve(with_settings(settings, stream_strategy="incremental"))


def sdk_calls(url: str) -> tuple[list[tuple[str, dict[str, Any]]], str | None, Any]:
    """What the official SDK's streaming helper assembles (it raises on deltas it cannot place)."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with client.chat.completions.stream(model="test-model", messages=[{"role": "user", "content": "read"}],
                                        tools=[READ]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    choice = final.choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
    assert all(c.id and c.type == "function" for c in choice.message.tool_calls or [])
    return calls, choice.finish_reason, choice.message.content


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_native_stream_reaches_the_sdk_whole(name, upstream, incremental):
    deltas, expected = MALFORMED[name]
    upstream.script = native_stream(deltas)
    assert sdk_calls(incremental.url)[:2] == (expected, "tool_calls")
    got = accumulate(read_stream(incremental.post(make_body("read", [READ], stream=True))))
    assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == expected
    assert got["finish_reason"] == ["tool_calls"]


def test_stream_without_finish_chunk_gets_one(upstream, incremental):
    upstream.script = native_stream([[call({"name": "read", "arguments": '{"path": "a.py"}'}, 0, "c1")]], None)
    assert sdk_calls(incremental.url)[:2] == ([("read", A_PY)], "tool_calls")


def test_arguments_that_never_parse_come_back_as_text(upstream, incremental):
    upstream.script = native_stream([[call({"name": "read", "arguments": "path is a.py"}, 0, "c1")]])
    calls, finish, content = sdk_calls(incremental.url)
    assert (calls, finish) == ([], "stop")
    assert content == '{"name": "read", "arguments": path is a.py}'


def test_each_call_is_sent_once_with_index_id_and_name(upstream, incremental):
    deltas, _ = MALFORMED["name repeated in every delta"]
    upstream.script = native_stream(deltas)
    events = read_stream(incremental.post(make_body("read", [READ], stream=True)))
    sent = [call for event in events[:-1] for choice in event["choices"]
            for call in choice["delta"].get("tool_calls") or []]
    assert len(sent) == 1 and sent[0]["index"] == 0 and sent[0]["function"]["name"] == "read"
    assert sent[0]["id"].startswith("call_") and json.loads(sent[0]["function"]["arguments"]) == A_PY


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns on the object-valued arguments
@pytest.mark.parametrize("name", [name for name in MALFORMED if name != "arguments typed by the schema"])
def test_the_sdk_alone_is_broken_by_each_malformation(name, upstream):
    """The same streams straight from the server: the SDK raises or assembles something unusable."""
    deltas, expected = MALFORMED[name]
    upstream.script = native_stream(deltas)
    client = openai.OpenAI(base_url=upstream.url, api_key="unused", max_retries=0)
    try:
        with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "read"}],
                                            tools=[READ]) as stream:
            for _ in stream:
                pass
            message = stream.get_final_completion().choices[0].message
    except (TypeError, IndexError):
        return
    got = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert got != [(name, json.dumps(arguments)) for name, arguments in expected]
    assert not all(isinstance(arguments, str) and _is_object(arguments) for _, arguments in got) or any(
        name != "read" for name, _ in got)


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@given(st.lists(st.integers(1, 60), max_size=6), st.booleans(), st.booleans(), st.integers(0, 2))
def test_native_deltas_any_split_any_shape_same_calls(cuts, with_index, repeat_name, first_index):
    """However a server cuts the arguments and whatever it repeats or leaves out, the calls come out the same."""
    texts = ['{"path": "a.py", "limit": 20}', '{"path": "b \\"quoted\\".py"}']
    collected = NativeCalls()
    for number, text in enumerate(texts):
        points = sorted({cut % len(text) for cut in cuts} - {0})
        pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
        for position, piece in enumerate(pieces):
            function = {"arguments": piece, **({"name": "read"} if position == 0 or repeat_name else {})}
            delta: dict[str, Any] = {"function": function, **({"id": f"c{number}"} if position == 0 else {})}
            if with_index:
                delta["index"] = first_index + number
            collected.add([delta])
    assert [(call.name, json.loads(call.arguments)) for call in collected.calls()] == [
        ("read", json.loads(text)) for text in texts]
