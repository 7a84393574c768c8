"""The request check's quick pass agrees with its detailed one: a message passes the quick test exactly when the
detailed check finds nothing to name (the 400s themselves are tested through the server in test_errors.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.errors import InvalidRequest
from toolproxy.transform import chat_request

odd = st.sampled_from([None, 0, 1.5, True, "", "x", [], ["x"], {}, {"a": 1}])


def field(*valid: Any) -> st.SearchStrategy[Any]:
    """Mostly a valid value, sometimes an odd one: both outcomes come up often, calls included."""
    return st.sampled_from(valid) | st.sampled_from(valid) | odd


functions = st.fixed_dictionaries({}, optional={"name": field("read"), "arguments": field('{"a": 1}', {"a": 1})})
calls = st.fixed_dictionaries({}, optional={"id": field("call_1"), "type": field("function"),
                                            "function": functions | odd})
messages = st.fixed_dictionaries({}, optional={
    "role": st.sampled_from([*chat_request.ROLES, "wizard", None, 3]),
    "content": field("hi", [{"type": "text", "text": "hi"}]),
    "tool_calls": st.lists(calls | odd, max_size=3) | odd,
    "tool_call_id": field("call_1"), "name": field("read")}) | odd


def detailed_check_passes(message: Any) -> bool:
    try:
        chat_request._check_message(message, "messages.[0]")
    except InvalidRequest:
        return False
    return True


@settings(max_examples=1000, deadline=None)
@given(messages)
def test_the_quick_pass_accepts_exactly_what_the_detailed_check_accepts(message):
    assert chat_request._is_sound(message) == detailed_check_passes(message)


@settings(max_examples=1000, deadline=None)
@given(st.lists(calls, min_size=1, max_size=3))
def test_the_quick_pass_agrees_on_calls(tool_calls):
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    assert chat_request._is_sound(message) == detailed_check_passes(message)
