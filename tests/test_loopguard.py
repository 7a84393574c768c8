"""The loop guard: the same call again and again, or too many tool results, ends in a plain assistant answer."""

from __future__ import annotations

import json

from tests.conftest import make_body, make_tool, with_settings
from tests.sse_client import accumulate, read_stream
from toolproxy.meaning import loopguard

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def turn(path: str, arguments_text: str | None = None) -> list[dict]:
    arguments = arguments_text or json.dumps({"path": path})
    return [{"role": "assistant", "content": None,
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "read", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c", "content": "same as before"}]


def conversation(*turns: list[dict]) -> list[dict]:
    messages = [{"role": "user", "content": "go"}]
    for item in turns:
        messages += item
    return messages


def test_repeats_at_the_end_fire_whatever_the_spacing():
    messages = conversation(turn("/a"), turn("/a", '{"path":"/a"}'), turn("/a", '{ "path" : "/a" }'), turn("/a"))
    reason = loopguard.check(messages, repeats=4, max_tool_messages=500)
    assert reason is not None and "'read'" in reason and "4 times" in reason


def test_fewer_repeats_or_a_different_call_do_not_fire():
    assert loopguard.check(conversation(turn("/a"), turn("/a"), turn("/a")), repeats=4, max_tool_messages=500) is None
    mixed = conversation(turn("/a"), turn("/a"), turn("/b"), turn("/a"), turn("/a"))
    assert loopguard.check(mixed, repeats=4, max_tool_messages=500) is None


def test_a_user_turn_breaks_the_run():
    messages = conversation(turn("/a"), turn("/a"), [{"role": "user", "content": "try again"}], turn("/a"), turn("/a"))
    assert loopguard.check(messages, repeats=4, max_tool_messages=500) is None


def test_tool_message_cap():
    messages = conversation(*[turn(f"/{i}") for i in range(5)])
    assert loopguard.check(messages, repeats=4, max_tool_messages=5) is not None
    assert loopguard.check(messages, repeats=4, max_tool_messages=6) is None


def test_fired_guard_answers_without_the_upstream(serve, settings, upstream):
    proxy = serve(with_settings(settings, loop_repeats=3))
    body = make_body("go", [READ])
    body["messages"] = conversation(turn("/a"), turn("/a"), turn("/a"))
    answer = proxy.post(body).json()
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert "loop guard" in answer["choices"][0]["message"]["content"]
    assert "tool_calls" not in answer["choices"][0]["message"]
    streamed = accumulate(read_stream(proxy.post({**body, "stream": True,
                                                  "stream_options": {"include_usage": True}})))
    assert "loop guard" in streamed["content"] and streamed["finish_reason"] == ["stop"]
    assert streamed["usage"] is not None
    assert not upstream.received
