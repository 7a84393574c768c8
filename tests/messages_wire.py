"""A strict reader of the proxy's Anthropic Messages streams: every event is `event: NAME` then `data: <json>`
whose `type` is NAME, then a blank line; sseclient-py, which shares no code with the proxy, must read the same.
`check_order` holds a stream to the order the issue spells out (Claude Code relies on every rule of it)."""

from __future__ import annotations

import json
from typing import Any

import requests
import sseclient

Event = tuple[str, dict[str, Any]]


def parse_events(raw: bytes) -> list[Event]:
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), f"stream does not end with a blank line: {text[-80:]!r}"
    events: list[Event] = []
    for block in text[:-2].split("\n\n"):
        name_line, _, data_line = block.partition("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: "), f"not an event: {block!r}"
        assert "\n" not in data_line, f"multi-line data: {block!r}"
        name, payload = name_line[len("event: "):], json.loads(data_line[len("data: "):])
        assert payload["type"] == name, block
        events.append((name, payload))
    reads = (raw[start:start + 7] for start in range(0, len(raw), 7))
    assert [(event.event, json.loads(event.data)) for event in sseclient.SSEClient(reads).events()] == events
    return events


def read_events(response: requests.Response) -> list[Event]:
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return parse_events(response.content)


def check_order(events: list[Event]) -> None:
    """message_start first (with a prompt count), blocks one at a time with consecutive indices, each a start,
    its deltas, a stop; a thinking block's last delta its signature; a tool_use block opened with an empty input
    and filled only by input_json_delta; message_delta, then message_stop last. Pings anywhere after the start."""
    names = [name for name, _ in events if name != "ping"]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], names
    assert events[0][0] == "message_start"
    assert events[0][1]["message"]["usage"]["input_tokens"] > 0
    open_block: dict[str, Any] | None = None
    last_delta = ""
    index = 0
    for name, payload in events[1:-2]:
        if name == "content_block_start":
            assert open_block is None and payload["index"] == index, (name, payload)
            open_block = payload["content_block"]
            if open_block["type"] == "tool_use":
                assert open_block["input"] == {}
        elif name == "content_block_delta":
            assert open_block is not None and payload["index"] == index
            assert payload["delta"]["type"] == _DELTAS[open_block["type"]] or (
                open_block["type"] == "thinking" and payload["delta"]["type"] == "signature_delta")
            last_delta = payload["delta"]["type"]
        elif name == "content_block_stop":
            assert open_block is not None and payload["index"] == index
            if open_block["type"] == "thinking":
                assert last_delta == "signature_delta", "a thinking block must end with its signature"
            open_block, index = None, index + 1
        else:
            assert name == "ping", name
    assert open_block is None
    assert events[-2][1]["delta"]["stop_reason"] is not None


_DELTAS = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}
