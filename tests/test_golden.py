"""Golden cases: `tests/golden/<dialect>/<case>.txt` is a model's reply, `<case>.json` what the client must get.

Each case runs through the dialect alone, through automatic detection, fed one character at a time, and end to
end through the proxy, streaming and not. A new case is two files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_body
from tests.sse_client import accumulate, read_stream
from toolproxy.dialects.base import merge_text, source_of
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import accept, extract, scanner

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(path for path in GOLDEN.glob("*/*.json") if path.parent.name in DIALECTS)


def load(path: Path) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    expected = json.loads(path.read_text(encoding="utf-8"))
    text = path.with_suffix(".txt").read_text(encoding="utf-8")
    tools = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in expected["tools"]}
    return text, expected, tools


def result_of(extraction: Any) -> tuple[Any, list[tuple[str, Any]]]:
    return extraction.content(), [(call.name, call.arguments) for call in extraction.calls]


def expected_result(expected: dict[str, Any]) -> tuple[Any, list[tuple[str, Any]]]:
    return expected["content"], [(call["name"], call["arguments"]) for call in expected["tool_calls"]]


@pytest.fixture(params=CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def case(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, Any], dict[str, dict[str, Any]]]:
    text, expected, tools = load(request.param)
    return request.param.parent.name, text, expected, tools


def test_dialect_alone(case):
    dialect, text, expected, tools = case
    assert result_of(extract(text, tools, (dialect,))) == expected_result(expected)


def test_automatic_detection(case):
    _, text, expected, tools = case
    assert result_of(extract(text, tools)) == expected_result(expected)


def test_one_character_at_a_time_and_nothing_lost(case):
    """Fed one character at a time, the scanners find exactly what one-shot parsing finds (so the result, which
    is computed from those segments, is the same), and the segments give back every character."""
    _, text, _, tools = case
    scan = scanner(tools)
    segments = [segment for char in text for segment in scan.feed(char)] + scan.finish()
    assert source_of(segments) == text
    one_shot = scanner(tools)
    assert merge_text(segments) == merge_text(one_shot.feed(text) + one_shot.finish())
    assert source_of(accept(segments, tools).segments) == text


def test_end_to_end_through_the_proxy(case, upstream, proxy):
    _, text, expected, _ = case
    upstream.completion(text)
    body = make_body("do it", expected["tools"])
    message = proxy.post(body).json()["choices"][0]
    streamed = accumulate(read_stream(proxy.post({**body, "stream": True})))
    content, calls = expected_result(expected)
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["message"].get(
        "tool_calls", [])]
    assert (message["message"]["content"], got) == (content, calls)
    assert message["finish_reason"] == ("tool_calls" if calls else "stop")
    assert streamed["content"] == (content or "")
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed["tool_calls"]] == calls
    assert streamed["finish_reason"] == [message["finish_reason"]]


def test_seed_004_example_5_deltas():
    """The exact deltas of seed 004's streaming example, split inside the tag names."""
    deltas = ["I'll ", "read ", "the ", "file.\n\n<read", ">\n<file", "Path>/src/app.js</filePath>\n</read>"]
    tools = {"read": {"type": "object", "properties": {"filePath": {"type": "string"}}}}
    scan = scanner(tools)
    segments = [segment for delta in deltas for segment in scan.feed(delta)] + scan.finish()
    assert result_of(accept(segments, tools)) == ("I'll read the file.", [("read", {"filePath": "/src/app.js"})])
