"""The Responses stream encoder on any sequence of the core's events, cut into any batches: sequence numbers run
without a gap, every item opened is closed under the same id with what its deltas added up to, the response it
ends with holds exactly the items closed, and how the events were batched changes nothing."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolproxy.fronts.responses_output import ResponseHeader
from toolproxy.fronts.responses_stream import ResponsesEncoder
from toolproxy.fronts.responses_tools import ToolNames, chat_tools
from toolproxy.transform.turn import DONE, CallOut, CallReady, Delta, Finished, Item, UsageReport

NAMES = ToolNames()
chat_tools([{"type": "function", "name": "get_weather"}, {"type": "custom", "name": "apply_patch"}], NAMES, [])
HEADER = ResponseHeader("resp_fixed", 1, "qwen3", {"tools": []})
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}

texts = st.text(alphabet="ab \n\u00e9\u2028\"\\", max_size=6)
calls = st.builds(lambda name, value: CallOut(f"call_{value}", name, json.dumps({"input": value})),
                  st.sampled_from(["get_weather", "apply_patch"]), texts)
events = st.lists(st.one_of(st.builds(lambda text: Delta(0, text=text), texts),
                            st.builds(lambda text: Delta(0, reasoning=text), texts),
                            st.builds(lambda call: CallReady(0, 0, call), calls)), max_size=12)


def encoded(items: list[Item], cuts: list[int]) -> list[dict[str, Any]]:
    encoder, out, start = ResponsesEncoder(HEADER, NAMES), b"", 0
    for cut in [*sorted({min(cut, len(items)) for cut in cuts}), len(items)]:
        out += encoder.encode(items[start:cut])
        start = cut
    blocks = [block for block in out.decode().split("\n\n") if block]
    return [json.loads(block.split("\ndata: ", 1)[1]) for block in blocks]


def without_ids(sent: list[dict[str, Any]]) -> str:
    """The events with each item id replaced by its place (ids are random)."""
    text, seen = json.dumps(sent), {}
    return re.sub(r'"(msg|rs|fc|ctc)_\w+"', lambda found: seen.setdefault(found.group(), f'"#{len(seen)}"'), text)


def written(item: dict[str, Any]) -> str:
    """What an item holds of what was written: its text, its summary, its arguments or its input."""
    if item["type"] == "message":
        return str(item["content"][0]["text"])
    if item["type"] == "reasoning":
        return str(item["summary"][0]["text"])
    return str(item["arguments"] if item["type"] == "function_call" else item["input"])


@given(events, st.sampled_from(["stop", "length", "tool_calls"]), st.lists(st.integers(0, 16), max_size=5))
def test_every_batching_gives_the_same_well_formed_stream(body, finish, cuts):
    items: list[Item] = [*body, Finished(0, finish), UsageReport(USAGE), DONE]
    sent = encoded(items, cuts)
    assert without_ids(sent) == without_ids(encoded(items, []))
    assert [event["sequence_number"] for event in sent] == list(range(len(sent)))
    assert [event["type"] for event in sent[:2]] == ["response.created", "response.in_progress"]
    response = sent[-1]["response"]
    assert sent[-1]["type"] == ("response.incomplete" if finish == "length" else "response.completed")
    added = [event for event in sent if event["type"] == "response.output_item.added"]
    done = [event for event in sent if event["type"] == "response.output_item.done"]
    assert [event["output_index"] for event in added] == [event["output_index"] for event in done]
    assert [event["item"]["id"] for event in added] == [event["item"]["id"] for event in done]
    assert [event["item"] for event in done] == response["output"]
    assert response["usage"]["total_tokens"] == 10
    for item in response["output"]:
        deltas = "".join(event["delta"] for event in sent if event.get("item_id") == item["id"]
                         and event["type"].endswith(".delta"))
        assert deltas == written(item)
    said = "".join(event.text for event in body if isinstance(event, Delta))
    thought = "".join(event.reasoning for event in body if isinstance(event, Delta))
    assert "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"]) == said
    assert "".join(item["summary"][0]["text"] for item in response["output"] if item["type"] == "reasoning") == thought
    assert [item.get("arguments", item.get("input")) for item in response["output"] if "call_id" in item] == [
        event.call.arguments if event.call.name == "get_weather" else json.loads(event.call.arguments)["input"]
        for event in body if isinstance(event, CallReady)]
