"""The special-token dialects (`mistral`, `llama3`, `pythonic`, `phi4_mini`, `deepseek`, `harmony`, `granite`,
`internlm`, `command_r`): golden cases, properties over random markup (nothing lost, any chunking equal to
one-shot), render round trips, the recommended automatic order over every golden case, and linear time on
adversarial input."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, merge_text, parse, source_of
from toolproxy.dialects.command_r import CommandRDialect
from toolproxy.dialects.deepseek import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP, DeepSeekDialect
from toolproxy.dialects.harmony import HarmonyDialect
from toolproxy.dialects.llama3 import Llama3Dialect
from toolproxy.dialects.marked_json import MarkedJsonDialect
from toolproxy.dialects.mistral import MistralDialect
from toolproxy.dialects.prefixed_json import PrefixedJsonDialect
from toolproxy.dialects.pythonic import PythonicDialect
from toolproxy.dialects.registry import AUTO_ORDER
from toolproxy.dialects.registry import DIALECTS as REGISTERED
from toolproxy.meaning import extraction, reasoning
from toolproxy.meaning.extraction import accept

DIALECTS: dict[str, Any] = {
    "mistral": MistralDialect(),
    "llama3": Llama3Dialect(),
    "pythonic": PythonicDialect(),
    "phi4_mini": PrefixedJsonDialect("phi4_mini", "functools"),
    "deepseek": DeepSeekDialect(),
    "harmony": HarmonyDialect(),
    "granite": PrefixedJsonDialect("granite", "<|tool_call|>"),
    "internlm": MarkedJsonDialect("internlm", "<|action_start|><|plugin|>", "<|action_end|>"),
    "command_r": CommandRDialect(),
}
RENDERING = sorted(name for name, dialect in DIALECTS.items() if hasattr(dialect, "render_call"))
# Recommended automatic order: special tokens first (they cannot be prose), then what is registered today in its
# own order, Pythonic lists just before bare JSON (both start a line with `[`; Pythonic needs declared names).
MARKERS = ["deepseek", "harmony", "mistral", "llama3", "command_r", "granite", "internlm", "phi4_mini"]
RECOMMENDED = [*MARKERS, *(name for name in AUTO_ORDER if name not in DIALECTS and name != "json"), "pythonic",
               *(name for name in AUTO_ORDER if name == "json")]
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = sorted(path for name in DIALECTS for path in (GOLDEN / name).glob("*.json"))
CHAINED = sorted(path for path in GOLDEN.glob("*/*.json") if path.parent.name in DIALECTS or
                 path.parent.name in REGISTERED)

# Pieces random replies are built from: each dialect's markers, whole and broken calls, and characters that matter.
FRAGMENTS: dict[str, list[str]] = {
    "mistral": ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "add", '{"a": 1}', '[{"name": "add", "arguments": {}}]', "[",
                "{", '"', " ", "\n", "x", "]"],
    "llama3": ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>", '{"name": "add", "parameters": {"a": "}"}}', "; ", ";",
               "{", "[", '"', " ", "<|", "x"],
    "pythonic": ["\n", "[", "]", "add(", "add", "(", ")", "a=", "'x'", '"y\\"', "'''", "1", "-2.5e3", "True", ", ",
                 "{", "}", ":", "\\", " ", "x"],
    "phi4_mini": ["functools", "[", '{"name": "add", "arguments": {"a": 1}}', "]", ", ", "{", '"', " ", "x"],
    "deepseek": [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, "function", "add", "\n", "```json\n", "```",
                 '{"a": 1}', "{", '"', " ", "x"],
    "harmony": ["<|start|>assistant", "<|channel|>", "commentary", " to=functions.add", " <|constrain|>json",
                "<|message|>", "analysis", '{"a": 1}', "<|call|>", "<|end|>", "{", " ", "x", "to=functions.",
                "add", " json", "addjson", "assistant"],
    "granite": ["<|tool_call|>", "[", '{"name": "add", "arguments": {"a": 1}}', "]", ", ", "{", " ", "x"],
    "internlm": ["<|action_start|>", "<|plugin|>", "<|action_end|>", '{"name": "add", "parameters": {}}', "{", " "],
    "command_r": ["<|START_ACTION|>", "<|END_ACTION|>", "[", "]", '{"tool_name": "add", "parameters": {"a": 1}}',
                  '{"tool_call_id": "0", "tool_name": "add"}', ", ", "{", " ", "<|START_THINKING|>", "x"],
}
TOOLS: ToolIndex = {"add": {"type": "object", "properties": {"a": {"type": "integer"}}}}
IDENTIFIERS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def load(path: Path) -> tuple[str, dict[str, Any], ToolIndex]:
    expected = json.loads(path.read_text(encoding="utf-8"))
    text = path.with_suffix(".txt").read_text(encoding="utf-8")
    tools = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in expected["tools"]}
    return text, expected, tools


def fed(dialect: Any, pieces: list[str], tools: ToolIndex) -> list[Segment]:
    scanner = dialect.scanner(tools)
    return merge_text([segment for piece in pieces for segment in scanner.feed(piece)] + scanner.finish())


def split(text: str, points: list[int]) -> list[str]:
    cuts = sorted({point % (len(text) + 1) for point in points})
    return [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def result_of(found: extraction.Extraction) -> tuple[str | None, list[tuple[str, Any]]]:
    return found.content(), [(call.name, call.arguments) for call in found.calls]


def expected_result(expected: dict[str, Any]) -> tuple[str | None, list[tuple[str, Any]]]:
    return expected["content"], [(call["name"], call["arguments"]) for call in expected["tool_calls"]]


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_golden(path):
    text, expected, tools = load(path)
    text = reasoning.split(text).answer  # what extraction gives the dialects: gpt-oss's analysis is reasoning
    scanner = DIALECTS[path.parent.name].scanner(tools)
    assert result_of(accept(scanner.feed(text) + scanner.finish(), tools)) == expected_result(expected)


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_golden_one_character_at_a_time(path):
    text, expected, tools = load(path)
    text = reasoning.split(text).answer
    dialect = DIALECTS[path.parent.name]
    segments = fed(dialect, list(text), tools)
    assert source_of(segments) == text
    assert segments == parse(dialect, text, tools)
    assert result_of(accept(segments, tools)) == expected_result(expected)


@pytest.mark.parametrize("path", CHAINED, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_recommended_automatic_order_keeps_every_golden_case(path, monkeypatch):
    """What registering these dialects in the recommended order would do, over every registered golden case."""
    monkeypatch.setattr(extraction, "DIALECTS", {**REGISTERED, **DIALECTS})
    text, expected, tools = load(path)
    assert result_of(extraction.extract(text, tools, RECOMMENDED)) == expected_result(expected)


def test_every_dialect_has_five_golden_cases():
    counts = {name: len(list((GOLDEN / name).glob("*.json"))) for name in DIALECTS}
    assert min(counts.values()) >= 5, counts


@pytest.mark.parametrize("name", sorted(DIALECTS))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_chunking_gives_the_one_shot_result_and_loses_nothing(name, data):
    pieces = data.draw(st.lists(st.sampled_from(FRAGMENTS[name]) | st.text(max_size=3), max_size=14))
    text = "".join(pieces)
    one_shot = parse(DIALECTS[name], text, TOOLS)
    assert source_of(one_shot) == text
    assert fed(DIALECTS[name], list(text), TOOLS) == one_shot
    assert fed(DIALECTS[name], split(text, data.draw(st.lists(st.integers(0, 500), max_size=8))), TOOLS) == one_shot


@pytest.mark.parametrize("name", RENDERING)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tool=IDENTIFIERS)
def test_render_round_trip(name, data, tool):
    keys = IDENTIFIERS if name == "pythonic" else st.text(max_size=8)  # Python keywords need identifiers
    arguments = data.draw(st.dictionaries(keys, JSON_VALUES, max_size=4))
    dialect = DIALECTS[name]
    rendered = dialect.render_call(tool, arguments)
    tools = {tool: {}}
    segments = parse(dialect, rendered, tools)
    assert [(type(segment), segment.source) for segment in segments] == [(Call, rendered)]
    assert result_of(accept(segments, tools)) == (None, [(tool, arguments)])
    assert fed(dialect, split(rendered, data.draw(st.lists(st.integers(0, 300), max_size=6))), tools) == segments


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[TOOL_CALLS]add[ARGS]{\"a\": 1}\n[TOOL_CALLS]add{\"a\": 2}", [1, 2]),
        ('[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"a": 2}}]', [1, 2]),
    ],
)
def test_mistral_calls_keep_their_own_sources(text, expected):
    segments = parse(DIALECTS["mistral"], text, TOOLS)
    calls = [segment for segment in segments if isinstance(segment, Call)]
    assert [call.name for call in calls] == ["add", "add"]
    assert [json.loads(call.arguments)["a"] if isinstance(call.arguments, str) else call.arguments["a"]
            for call in calls] == expected
    assert all(call.source for call in calls) and source_of(segments) == text


def test_a_refused_call_in_a_list_goes_back_as_text_on_its_own():
    text = '<|tool_call|>[{"name": "add", "arguments": {"a": 1}}, {"name": "rm", "arguments": {}}]'
    result = accept(parse(DIALECTS["granite"], text, TOOLS), TOOLS)
    assert result_of(result) == (', {"name": "rm", "arguments": {}}]', [("add", {"a": 1})])
    assert result.issues == ["granite: call to undeclared tool 'rm' kept as text"]


@pytest.mark.parametrize(
    "text",
    ["[add(a=1) + 1]", "[add(1)]", "[add(a=1, a=2)]", "[add(a=b'x')]", "[add(a=1e999)]", "[add(a={1, 2})]",
     "[add(a='\\N{NOT A NAME}')]", "[add(a='x\ny')]", "[add(a=1_0)]", "[add(a=1 if b else 2)]",
     "[add(a=" + "[" * 40 + "]" * 40 + ")]"],
)
def test_pythonic_refuses_what_is_not_a_literal_call(text):
    assert parse(DIALECTS["pythonic"], text, TOOLS) == [Text(text)]


def test_pythonic_reads_python_literals():
    text = ("[add(a='''one\n'two' \"\"\"''', b=\"\\x41\\u00e9\\U0001F600\\N{BULLET}\\101\\q\", c=(), d=(1),"
            " e={'k': [None]})]")
    [call] = parse(DIALECTS["pythonic"], text, TOOLS)
    assert isinstance(call, Call)
    assert call.arguments == {"a": "one\n'two' \"\"\"", "b": "A\u00e9\U0001f600\u2022A\\q", "c": [], "d": 1,
                              "e": {"k": [None]}}


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_adversarial_input_stays_linear(name):
    dialect = DIALECTS[name]
    opener = {"pythonic": "\n[", "deepseek": CALLS_BEGIN, "phi4_mini": "functools"}.get(
        name, getattr(dialect, "opener", None) or FRAGMENTS[name][0])
    samples = [opener * 20_000, opener + '{"a": "' + "x" * 1_000_000, opener + "[" * 200_000,
               "\n[add(a=" * 20_000, "[add(a='" + "\\" * 100_001]
    for sample in samples:
        segments = parse(dialect, sample, TOOLS)
        assert source_of(segments) == sample


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_streaming_a_long_call_one_character_at_a_time_stays_linear(name):
    dialect = DIALECTS[name]
    text = dialect.render_call("add", {"a": "x" * 30_000}) if hasattr(dialect, "render_call") else (
        '<|action_start|><|plugin|>{"name": "add", "parameters": {"a": "' + "x" * 30_000 + '"}}<|action_end|>')
    started = time.process_time()  # CPU time, which a loaded machine does not inflate the way it does wall time
    segments = fed(dialect, list(text), TOOLS)
    assert time.process_time() - started < 2  # a rescan of the held text per character would take far longer
    assert [segment.source for segment in segments if isinstance(segment, Call)] == [text]
