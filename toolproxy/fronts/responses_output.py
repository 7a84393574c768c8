"""What a Responses client gets: the `response` object and its output items (reasoning as a summary, the
message, each call as a `function_call`, a namespace's with its namespace, or a freeform tool's as a
`custom_tool_call` with its raw input), the usage, the ids. Pure, no I/O."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from toolproxy.fronts.responses_tools import ToolNames, custom_input
from toolproxy.transform.turn import Answer, CallOut, Turn
from toolproxy.wire.ids import random_id

# Chat finish reasons that leave a response incomplete, and the reason Responses gives.
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_id(prefix: str) -> str:
    """resp_, msg_, rs_, fc_, ctc_: an item's kind is in its id, as OpenAI writes them."""
    return f"{prefix}_{random_id(24)}"


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    """What every snapshot of one response shares: its id, when it was made, the model, the request's echo."""

    id: str
    created_at: int
    model: str
    echo: dict[str, Any]

    @classmethod
    def new(cls, model: str, echo: dict[str, Any]) -> ResponseHeader:
        return cls(new_id("resp"), int(time.time()), model, echo)

    def response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                 *, error: dict[str, Any] | None = None, incomplete: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "background": False, "error": error,
                "incomplete_details": {"reason": incomplete} if incomplete else None, "model": self.model,
                "output": output, "previous_response_id": None, **self.echo, "usage": usage}


def whole_response(header: ResponseHeader, answer: Answer, names: ToolNames) -> dict[str, Any]:
    """A finished answer as one response object (the first choice: Responses has one)."""
    turns = answer.turns()
    status, reason = status_of(turns[0].finish if turns else None)
    output = output_items(turns[0], names) if turns else []
    return header.response(status, output, usage_of(answer.completion.get("usage")), incomplete=reason)


def status_of(finish: str | None) -> tuple[str, str | None]:
    """The response's status for the chat finish reason, and why it is incomplete (None: it is not)."""
    reason = INCOMPLETE.get(finish or "")
    return ("incomplete", reason) if reason else ("completed", None)


def output_items(turn: Turn, names: ToolNames) -> list[dict[str, Any]]:
    """A finished turn's items in order: its reasoning, its text, its calls."""
    items = [reasoning_item(new_id("rs"), turn.reasoning)] if turn.reasoning else []
    if turn.text:
        items.append(message_item(new_id("msg"), turn.text, status_of(turn.finish)[0]))
    return items + [call_item(call, names) for call in turn.calls]


def reasoning_item(item_id: str, text: str | None) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text is not None else []
    return {"id": item_id, "type": "reasoning", "summary": summary}


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    content = [text_part(text)] if text is not None else []
    return {"id": item_id, "type": "message", "status": status, "content": content, "role": "assistant"}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def call_item(call: CallOut, names: ToolNames, status: str = "completed") -> dict[str, Any]:
    """A validated call under the name the client gave its tool; a freeform tool's with the raw input."""
    ref = names.ref(call.name)
    if ref.kind == "custom":
        return {"id": new_id("ctc"), "type": "custom_tool_call", "status": status, "call_id": call.id,
                "name": ref.name, "input": custom_input(call.arguments)}
    item = {"id": new_id("fc"), "type": "function_call", "status": status, "arguments": call.arguments,
            "call_id": call.id, "name": ref.name}
    return item if ref.namespace is None else {**item, "namespace": ref.namespace}


def usage_of(usage: Any) -> dict[str, Any] | None:
    """The upstream's chat usage in Responses terms, every count a number (Codex refuses a null one)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    total = _count(usage.get("total_tokens")) or prompt + completion
    cached = _count(_detail(usage, "prompt_tokens_details", "cached_tokens"))
    reasoning = _count(_detail(usage, "completion_tokens_details", "reasoning_tokens"))
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": total}


def _detail(usage: dict[str, Any], group: str, key: str) -> Any:
    details = usage.get(group)
    return details.get(key) if isinstance(details, dict) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
