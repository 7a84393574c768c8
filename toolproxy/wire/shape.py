"""What an upstream answer must look like before any stage reads it: a chat completion, or one stream chunk.

Checked once, where the answer comes in, so no stage meets `{"choices": 5}` or a `tool_calls` string and fails
with a 500: a wrong shape is the upstream's fault, a 502 `bad_upstream_response` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolproxy.errors import UpstreamBadResponse

Types = tuple[type, ...]
_TEXT: Types = (str, type(None))
# Fields of a message (or a delta) that the proxy reads, and the types they may have.
_MESSAGE_FIELDS: dict[str, Types] = {"content": _TEXT, "role": _TEXT, "reasoning_content": _TEXT, "reasoning": _TEXT,
                   "tool_calls": (list, type(None))}
_TOP_FIELDS: dict[str, Types] = {"id": _TEXT, "model": _TEXT, "usage": (dict, type(None))}


def check_completion(completion: Any) -> dict[str, Any]:
    """The completion, when every field the proxy reads has the right type; else UpstreamBadResponse."""
    _check_object(completion, _TOP_FIELDS, "answer")
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        raise UpstreamBadResponse("the upstream's answer has no choices")
    for index, choice in enumerate(choices):
        where = f"choices[{index}]"
        _check_choice(choice, where)
        if not isinstance(choice.get("message"), dict):
            raise UpstreamBadResponse(f"the upstream's answer has no message in {where}")
        _check_message(choice["message"], f"{where}.message")
    checked: dict[str, Any] = completion
    return checked


def check_forwardable(completion: dict[str, Any]) -> None:
    """A completion forwarded as it is (no tools were asked for, so nothing mends its native calls): each call
    must already be a complete OpenAI call, or the client would be the one to fail on it."""
    for index, choice in enumerate(completion["choices"]):
        for position, call in enumerate(choice["message"].get("tool_calls") or []):
            if not _is_complete_call(call):
                raise UpstreamBadResponse(f"the upstream's answer has choices[{index}].message.tool_calls[{position}]"
                                          " that is not a complete call (id, type, function name and arguments)")


def _is_complete_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return (isinstance(function, dict) and isinstance(call.get("id"), str) and call.get("type") == "function"
            and isinstance(function.get("name"), str) and isinstance(function.get("arguments"), str))


def check_chunk(chunk: Any) -> dict[str, Any]:
    """One stream chunk, checked like a completion; `choices` may be empty (a usage chunk) and a delta absent."""
    _check_object(chunk, {**_TOP_FIELDS, "choices": (list, type(None))}, "chunk")
    for index, choice in enumerate(chunk.get("choices") or []):
        where = f"chunk choices[{index}]"
        _check_choice(choice, where)
        delta = choice.get("delta")
        if delta is not None:
            _check_message(delta, f"{where}.delta")
    checked: dict[str, Any] = chunk
    return checked


def _check_choice(choice: Any, where: str) -> None:
    _check_object(choice, {"finish_reason": _TEXT, "index": (int, type(None))}, where)
    if isinstance(choice.get("index"), bool):
        raise UpstreamBadResponse(f"the upstream's answer has {where}.index of the wrong type")


def _check_message(message: Any, where: str) -> None:
    # The calls themselves are not checked here: on the tool routes an unusable native call is kept as text
    # (response.py), and a forwarded answer is held to complete calls by `check_forwardable`.
    _check_object(message, _MESSAGE_FIELDS, where)


def _check_object(value: Any, fields: Mapping[str, Types], where: str) -> None:
    if not isinstance(value, dict):
        raise UpstreamBadResponse(f"the upstream's answer has {where} that is not a JSON object")
    for name, types in fields.items():
        if not isinstance(value.get(name), types):
            raise UpstreamBadResponse(f"the upstream's answer has {where}.{name} of the wrong type "
                                      f"({type(value.get(name)).__name__})")
