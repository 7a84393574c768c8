"""The Messages stream encoder as a property: whatever pieces the text and the reasoning come in, and however the
items are batched into writes, the events keep the order Claude Code relies on, and the message the `anthropic`
SDK's own accumulator builds from them is the whole message of the same answer."""

from __future__ import annotations

import json
from typing import Any

from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.messages_wire import check_order, parse_events
from toolproxy.fronts.messages_answer import Framing, MessagesEncoder, message_of
from toolproxy.transform.turn import DONE, Answer, CallOut, CallReady, Delta, Finished, Item, UsageReport

FRAMING = Framing("m", thinking=True, prompt_tokens=lambda: 42)
pieces = st.lists(st.text(min_size=1, max_size=12), max_size=6)
calls = st.lists(st.builds(lambda name, path: CallOut(f"call_{name}{len(path)}", name, json.dumps({"path": path})),
                           st.sampled_from(["read", "bash"]), st.text(max_size=10)), max_size=3)


def completion(reasoning: list[str], text: list[str], made: list[CallOut]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None,
                               "reasoning_content": "".join(reasoning) or None}
    if made:
        message["tool_calls"] = [{"id": call.id, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments}} for call in made]
    return {"model": "m", "choices": [{"index": 0, "message": message,
                                       "finish_reason": "tool_calls" if made else "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}


def accumulated(raw: bytes) -> dict[str, Any]:
    events = parse_events(raw)
    check_order(events)
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for name, payload in events:
        if name != "ping":  # the SDK's stream drops pings before it accumulates
            snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs=buffers)
    dumped: dict[str, Any] = snapshot.model_dump(exclude_none=True)
    return dumped


def without_ids(message: dict[str, Any]) -> dict[str, Any]:
    return {**message, "id": None, "content": [{**block, "id": None} if block["type"] == "tool_use" else block
                                               for block in message["content"]]}


@settings(max_examples=200, deadline=None)  # no timing: the machine may be loaded
@given(pieces, pieces, calls, st.lists(st.integers(1, 4), min_size=1, max_size=8))
def test_any_pieces_in_any_batches_accumulate_to_the_whole_message(reasoning, text, made, cuts):
    items: list[Item] = [*(Delta(0, reasoning=piece) for piece in reasoning), *(Delta(0, piece) for piece in text),
                         *(CallReady(0, position, call) for position, call in enumerate(made)),
                         Finished(0, "tool_calls" if made else "stop"),
                         UsageReport({"prompt_tokens": 7, "completion_tokens": 3}), DONE]
    encoder, raw, start = MessagesEncoder(FRAMING), b"", 0
    for cut in [*cuts, len(items)]:  # the items in batches of these sizes, the rest in one
        raw += encoder.encode(items[start:start + cut])
        start += cut
    whole = message_of(Answer(completion(reasoning, text, made)), FRAMING)
    streamed = accumulated(raw)
    assert without_ids(streamed) == without_ids({key: value for key, value in whole.items() if value is not None})
