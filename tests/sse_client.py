"""A strict reader of the proxy's SSE output: anything but `data: <json>`, `data: [DONE]` and comments, each
followed by a blank line, fails the test. Every stream is also read by sseclient-py, a reader the proxy does not
share code with, which must see the same events."""

from __future__ import annotations

import json
from typing import Any

import requests
import sseclient

DONE = "[DONE]"


def parse_stream(raw: bytes) -> tuple[list[Any], int]:
    """(events, heartbeat count): JSON objects in order, DONE as the string "[DONE]"."""
    text = raw.decode("utf-8")
    assert text.endswith("\n\n"), f"stream does not end with a blank line: {text[-80:]!r}"
    events: list[Any] = []
    heartbeats = 0
    for block in text[:-2].split("\n\n"):
        assert "\n" not in block, f"multi-line event: {block!r}"
        if block.startswith(":"):
            heartbeats += 1
            continue
        assert block.startswith("data: "), f"not a data line: {block!r}"
        data = block[len("data: "):]
        events.append(DONE if data == DONE else json.loads(data))
    assert events and events[-1] == DONE, "stream does not end with [DONE]"
    assert events.count(DONE) == 1
    assert independent_read(raw) == events, "sseclient-py reads other events"
    return events, heartbeats


def independent_read(raw: bytes, read_size: int = 7) -> list[Any]:
    """The events as sseclient-py sees them, fed in small reads the way a socket may deliver them."""
    reads = (raw[start:start + read_size] for start in range(0, len(raw), read_size))
    return [DONE if event.data == DONE else json.loads(event.data)
            for event in sseclient.SSEClient(reads).events()]


def read_stream(response: requests.Response) -> list[Any]:
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert "Content-Length" not in response.headers
    events, _ = parse_stream(response.content)
    return events


def accumulate(events: list[Any]) -> dict[str, Any]:
    """What a client assembles from the chunks: content, tool calls by index, finish_reason, usage."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = []
    usage = None
    for event in events[:-1]:
        assert "error" not in event, event
        if event.get("usage") is not None and event["choices"] == []:
            usage = event["usage"]
        for choice in event["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call["index"], {"id": None, "name": "", "arguments": ""})
                if "id" in call:
                    assert slot["id"] is None, "id repeated in a later delta"
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                finish.append(choice["finish_reason"])
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)], "finish_reason": finish,
            "usage": usage}
