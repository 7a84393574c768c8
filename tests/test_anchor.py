"""The name-anchored fallback (meaning/anchor.py): a call in a form no dialect knows is read by the declared tool's
name standing in markup and arguments that validate; prose, examples, quotes and calls cut short stay text.

The cases in tests/golden/anchored/ are constructed (no real output writes these spellings yet, which is the
point: they stand for the next model's format); real output the fallback reads is in the real-world corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_body
from tests.corpus import Case, judge, load_cases, streaming_disagreement
from tests.sse_client import accumulate, read_stream
from tests.test_messages_sdk import client_of
from toolproxy.meaning.extraction import extract

CASES = load_cases(Path(__file__).parent / "golden" / "anchored")
TOOLS = {"read_file": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_read_one_shot_and_streamed(case: Case) -> None:
    judged = judge(case)
    assert judged.one_shot, extract(case.text, case.tools).content()
    assert streaming_disagreement(case) is None
    assert judged.false == 0


@pytest.mark.parametrize("case", [case for case in CASES if "pinned" in case.expected], ids=lambda case: case.name)
def test_a_pinned_format_keeps_its_dialects_reading(case: Case) -> None:
    """With the model's format pinned (configured, or derived from its chat template) the fallback is off: the
    pinned dialect's reading stands, and a spelling it does not write is not a call."""
    pinned = case.expected["pinned"]
    extraction = extract(case.text, case.tools, (pinned["dialect"],))
    assert extraction.content() == pinned["content"]
    assert [(call.name, call.arguments) for call in extraction.calls] == [
        (call["name"], call["arguments"]) for call in pinned["tool_calls"]]


def test_a_pinned_format_reads_no_other_spelling() -> None:
    case = next(case for case in CASES if case.name == "unknown_tokens_name_then_json")
    assert extract(case.text, case.tools, ("hermes",)).calls == []
    assert extract(case.text, case.tools).calls != []


def test_the_cases_hold_both_calls_and_text() -> None:
    """The set checks both sides of the rule: forms that are read, and lookalikes that must stay text."""
    assert sum(bool(case.expected["tool_calls"]) for case in CASES) >= 6
    assert sum(not case.expected["tool_calls"] for case in CASES) >= 5


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_through_the_proxy(case: Case, upstream, proxy) -> None:
    upstream.completion(case.text)
    body = make_body("do it", case.expected["tools"])
    message = proxy.post(body).json()["choices"][0]
    streamed = accumulate(read_stream(proxy.post({**body, "stream": True})))
    calls = [(call["name"], call["arguments"]) for call in case.expected["tool_calls"]]
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
           for c in message["message"].get("tool_calls", [])]
    assert (message["message"]["content"], got) == (case.expected["content"], calls)
    assert message["finish_reason"] == ("tool_calls" if calls else "stop")
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed["tool_calls"]] == calls
    assert streamed["content"] == (case.expected["content"] or "")


UNKNOWN_FORMAT = "Reading.\n<|start_tool|>read_file<|args|>path=src/app.py<|end_tool|>"


def test_the_anthropic_sdk_gets_a_tool_use_block_whole_and_streamed(serve, settings, upstream) -> None:
    """The Messages front over the same extraction: a spelling no dialect knows becomes a tool_use block."""
    upstream.completion(UNKNOWN_FORMAT)
    proxy = serve(settings)
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": TOOLS["read_file"]}]
    ask = [{"role": "user", "content": "read src/app.py"}]
    client = client_of(proxy.url)
    whole = client.messages.create(model="m", max_tokens=256, tools=tools, messages=ask)
    with client.messages.stream(model="m", max_tokens=256, tools=tools, messages=ask) as stream:
        streamed = stream.get_final_message()
    for message in (whole, streamed):
        assert [block.text for block in message.content if block.type == "text"] == ["Reading."]
        assert [(b.name, b.input) for b in message.content if b.type == "tool_use"] == [
            ("read_file", {"path": "src/app.py"})]
        assert message.stop_reason == "tool_use"


def test_the_rule_that_fired_is_recorded() -> None:
    case = next(case for case in CASES if case.name == "pairs_between_new_tokens")
    extraction = extract(case.text, case.tools)
    assert [call.dialect for call in extraction.calls] == ["recovered"]
    assert "recovered:anchored_pairs" in extraction.issues


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
@pytest.mark.parametrize("unit", [
    "read_file\n",  # names alone on their lines, no arguments ever
    "<x>read_file<y>{\"path\": ",  # JSON that never decodes
    "<x>read_file\n<path>",  # a key whose value never closes
    "read_file read_file ",  # mentions in prose
    "<|a|>read_file<|b|>path=",  # inline values at the end of each line
])
def test_stays_linear_on_floods(unit: str) -> None:
    text = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    assert extract(text, TOOLS).calls == []  # and it finished: a quadratic pass over 1 MB would not
