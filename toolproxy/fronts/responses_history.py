"""The `input` items of a Responses request as chat messages: messages by role, calls (function, custom, or a
namespace's function under its flat name) gathered into the assistant turn that made them, their outputs as
tool messages. System and developer text is gathered apart, to lead the conversation as one message. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolproxy.errors import InvalidRequest
from toolproxy.fronts.responses_tools import CUSTOM_ARGUMENT, ToolNames
from toolproxy.wire import jsonwire

STATELESS = ("the proxy keeps no state between requests: send the whole conversation in `input` (with "
             "`store: false`, as Codex does)")
TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
SYSTEM_ROLES = ("system", "developer")
ROLES = ("user", "assistant", *SYSTEM_ROLES)
CALLS = {"function_call": "function", "custom_tool_call": "custom"}
OUTPUTS = ("function_call_output", "custom_tool_call_output")
# Items the upstream has no use for: the model's past reasoning (its encrypted content is never decoded).
SKIPPED = ("reasoning",)


class History:
    """The conversation built item by item; `system` holds the system and developer text in order."""

    def __init__(self, names: ToolNames, notes: list[str]) -> None:
        self.system: list[str] = []
        self._names = names
        self._notes = notes
        self._messages: list[dict[str, Any]] = []
        self._called: set[str] = set()
        self._handlers: dict[str, Callable[[dict[str, Any], str], None]] = {
            "message": self._message, **dict.fromkeys(CALLS, self._call), **dict.fromkeys(OUTPUTS, self._output)}

    def messages(self) -> list[dict[str, Any]]:
        system = [{"role": "system", "content": "\n\n".join(self.system)}] if self.system else []
        return [*system, *self._messages]

    def add(self, item: Any, where: str) -> None:
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where} must be an object", param=where, code="invalid_type")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "item_reference":
            raise InvalidRequest(f"{where}: item references cannot be resolved: {STATELESS}", param=where,
                                 code="unsupported_parameter")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(item, where)
        elif kind not in SKIPPED:
            self._notes.append(f"responses: {where} of type {kind!r} left out of the upstream request")

    def _message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        if role not in ROLES:
            raise InvalidRequest(f"{where}.role must be one of {', '.join(ROLES)}; got {role!r}",
                                 param=f"{where}.role", code="invalid_value")
        content = _content(item.get("content"), f"{where}.content", images=role == "user")
        if role in SYSTEM_ROLES:
            self.system.append(_text_of(content))
        elif role == "assistant":
            turn, text = self._assistant_turn(), _text_of(content)
            if text:
                turn["content"] = f"{turn['content']}\n\n{text}" if turn["content"] else text
        else:
            self._messages.append({"role": "user", "content": content})

    def _call(self, item: dict[str, Any], where: str) -> None:
        call_id, name = _text_field(item, "call_id", where), _text_field(item, "name", where)
        namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
        if CALLS[str(item["type"])] == "custom":
            arguments = jsonwire.dumps_text({CUSTOM_ARGUMENT: _text_field(item, "input", where, empty=True)})
        elif isinstance(item.get("arguments"), str):
            arguments = item["arguments"]
        else:
            raise InvalidRequest(f"{where}.arguments must be a string of JSON", param=f"{where}.arguments",
                                 code="invalid_type")
        turn = self._assistant_turn()
        turn.setdefault("tool_calls", []).append(
            {"id": call_id, "type": "function",
             "function": {"name": self._names.flat(name, namespace), "arguments": arguments}})
        self._called.add(call_id)

    def _output(self, item: dict[str, Any], where: str) -> None:
        call_id = _text_field(item, "call_id", where)
        if call_id not in self._called:
            raise InvalidRequest(f"{where}: no earlier call in input has the call_id {call_id!r}", param=where,
                                 code="invalid_tool_call_id")
        output = _content(item.get("output"), f"{where}.output", images=True)
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def _assistant_turn(self) -> dict[str, Any]:
        """The assistant message being written: consecutive assistant items (text and calls) are one turn."""
        if not self._messages or self._messages[-1]["role"] != "assistant":
            self._messages.append({"role": "assistant", "content": None})
        return self._messages[-1]


def _text_field(item: dict[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not (value or empty):
        raise InvalidRequest(f"{where}.{key} must be a{'' if empty else ' non-empty'} string", param=f"{where}.{key}",
                             code="invalid_type")
    return value


def _content(content: Any, where: str, *, images: bool) -> str | list[dict[str, Any]]:
    """Text, or the chat protocol's parts where there are images or files (only where the role may have them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where} must be a string or an array of parts", param=where, code="invalid_type")
    parts = [_part(part, f"{where}[{position}]", images) for position, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)  # as vLLM joins text parts
    return parts


def _part(part: Any, where: str, images: bool) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in TEXT_PARTS or kind == "refusal":
        text = part.get("refusal" if kind == "refusal" else "text")
        if isinstance(text, str):
            return {"type": "text", "text": text}
    elif images and kind == "input_image" and isinstance(part.get("image_url"), str):
        image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
        return {"type": "image_url", "image_url": image}
    elif images and kind == "input_file" and isinstance(part.get("file_data"), str):
        return {"type": "file", "file": {key: part[key] for key in ("file_data", "filename") if key in part}}
    if isinstance(part, dict) and part.get("file_id") is not None:
        raise InvalidRequest(f"{where}: files cannot be referred to by id: {STATELESS}; send the data",
                             param=where, code="unsupported_parameter")
    allowed = "a text part, an input_image with an image_url or an input_file with file_data" if images else \
        "a text part"
    raise InvalidRequest(f"{where} must be {allowed}; got {kind!r}", param=where, code="invalid_value")


def _text_of(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "\n".join(str(part.get("text", "")) for part in content)
