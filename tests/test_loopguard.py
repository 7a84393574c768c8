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


OPENCLAW_CONTEXT = {"role": "user", "content": [{"type": "text", "text": (
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
    "\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")}]}


def openclaw_turn(command: str) -> list[dict]:
    """What OpenClaw sends per step: the call, its result, then a user message of its own internal context."""
    return [{"role": "assistant", "content": "",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "exec", "arguments": json.dumps({"command": command})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sh: 1: hello: not found"},
            OPENCLAW_CONTEXT]


def openclaw_history(*turns: list[dict]) -> list[dict]:
    messages = [{"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
                {"role": "user", "content": "hello"}]
    for item in turns:
        messages += item
    return messages


def test_openclaw_inserted_context_does_not_hide_a_loop():
    messages = openclaw_history(*[openclaw_turn("hello") for _ in range(125)])
    reason = loopguard.check(messages, repeats=4, max_tool_messages=500)
    assert reason is not None and "'exec'" in reason and "125 times" in reason


def test_system_messages_and_reminders_between_calls_do_not_hide_a_loop():
    reminder = {"role": "user", "content": "<system-reminder>\nkeep going\n</system-reminder>"}
    messages = conversation(turn("/a"), [{"role": "system", "content": "note"}], turn("/a"), [reminder], turn("/a"),
                            turn("/a"))
    assert loopguard.check(messages, repeats=4, max_tool_messages=500) is not None


def test_a_new_instruction_still_resets_even_with_context_around_it():
    instruction = {"role": "user", "content": [
        {"type": "text", "text": OPENCLAW_CONTEXT["content"][0]["text"]}, {"type": "text", "text": "now try ls"}]}
    messages = openclaw_history(*[openclaw_turn("hello") for _ in range(3)], [instruction],
                                *[openclaw_turn("hello") for _ in range(3)])
    assert loopguard.check(messages, repeats=4, max_tool_messages=500) is None


def test_an_openclaw_shaped_loop_is_stopped_by_the_proxy(serve, settings, upstream):
    proxy = serve(settings)
    exec_tool = make_tool("exec", {"command": {"type": "string"}}, ["command"])
    body = {**make_body("hello", [exec_tool]), "stream": True,
            "messages": openclaw_history(*[openclaw_turn("hello") for _ in range(6)])}
    streamed = accumulate(read_stream(proxy.post(body, headers={"User-Agent": "openclaw"})))
    assert "loop guard" in streamed["content"] and streamed["tool_calls"] == []
    assert streamed["finish_reason"] == ["stop"] and not upstream.received


# Issue 24: agents other than OpenClaw insert envelopes the guard does not know; identical calls that got identical
# results are a loop whatever sits between them, and only a user instruction with words of its own resets them.
UNKNOWN_ENVELOPE = {"role": "user", "content": "[agent-runtime] step finished; tools available: read, write"}


def test_identical_calls_with_identical_results_stop_whatever_sits_between_them():
    messages = conversation(*[[*turn("/a"), UNKNOWN_ENVELOPE] for _ in range(4)])
    reason = loopguard.check(messages, repeats=4, max_tool_messages=500)
    assert reason is not None and "'read'" in reason and "same result" in reason


def test_identical_calls_with_different_results_behind_an_unknown_envelope_go_on():
    turns = []
    for index in range(4):
        call, result = turn("/a")
        turns.append([call, {**result, "content": f"line {index}"}, UNKNOWN_ENVELOPE])
    assert loopguard.check(conversation(*turns), repeats=4, max_tool_messages=500) is None


def test_a_user_instruction_of_its_own_still_resets_identical_results():
    messages = conversation(turn("/a"), [UNKNOWN_ENVELOPE], turn("/a"), [{"role": "user", "content": "look again"}],
                            turn("/a"), [UNKNOWN_ENVELOPE], turn("/a"))
    assert loopguard.check(messages, repeats=4, max_tool_messages=500) is None
