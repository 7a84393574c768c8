"""The formats of issue 11 (Gemma 4, LFM2, Llama 4, Apertus, Granite 20B FC, Seed-OSS, Functionary v3.1 and v3.2,
OLMo 3, Nemotron and Nemotron-Mini, Apriel/MiniMax-M1): properties over random text built from each one's own
markup (nothing lost, any chunking equal to one-shot), render round trips with any JSON values, linear time on
floods and unclosed values, and the corners of each notation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dialects.test_token_family import IDENTIFIERS, JSON_VALUES, TOOLS, fed, result_of, split
from toolproxy.dialects.base import Call, Text, parse, source_of
from toolproxy.dialects.gemma4 import QUOTE
from toolproxy.dialects.gemma4_values import QUOTES
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import accept, extract

CALL_JSON = '{"name": "add", "arguments": {"a": 1}}'
FRAGMENTS: dict[str, list[str]] = {
    "gemma4": ["<|tool_call>", "call:", "add", "{", "}", "a:", QUOTE, "x", ",", "1", "-2.5e3", "true", "null", "[", "]",
               "<tool_call|>", "<turn|>", " ", '"', "<|", "call:add{a:1}", "re", "\n"],
    "function_gemma": ["<start_function_call>", "call:", "add", "{", "}", "a:", "<escape>", "x", ",", "1", "true",
                       "<end_function_call>", "</end_function_call>", " ", '"', "<", "add{a:1}", "\n"],
    "lfm2": ["<|tool_call_start|>", "<|tool_call_end|>", "[", "]", "add(", "a=", "'x'", "1", ")", ", ", CALL_JSON, "{",
             ";", " ", "\n"],
    "llama4": ["<|python_start|>", "<|python_end|>", "[", "]", "add(", "a=", '"x"', "2", ")", ", ",
               '{"name": "add", "parameters": {"a": 1}}', "{", "; ", " "],
    "apertus": ["<|tools_prefix|>", "<|tools_suffix|>", "[", "]", '{"add": {"a": 1}}', '{"name": "add"}', "{", '"', " ",
                ", "],
    "granite_fc": ["<function_call>", " ", CALL_JSON, "{", '"', "x", "<function_calls>"],
    "seed_oss": ["<seed:tool_call>", "</seed:tool_call>", "<function=add>", "</function>", "<parameter=a>",
                 "</parameter>", "1", "\n", " ", "<tool_call>"],
    "functionary_v31": ["<function=", "add", ">", '{"a": 1}', "</function>", "{", " ", "<parameter=a>", "\n"],
    "olmo3": ["<function_calls>", "</function_calls>", "\n", "add(", "a=", "1", ")", "'x'", '<invoke name="add">', " ",
              "add"],
    "nemotron": ["<TOOLCALL>", "</TOOLCALL>", "[", "]", CALL_JSON, "{", " ", ", "],
    "nemotron_mini": ["<toolcall>", "</toolcall>", " ", CALL_JSON, "{", "<TOOLCALL>"],
    "apriel": ["<tool_calls>", "</tool_calls>", "\n", CALL_JSON, "[", "]", "{", " ", "<tool_call>"],
    "functionary_v3": [">>>", "all", "add", "\n", '{"a": 1}', "{", " ", "x", ">>> "],
    "tool_code": ["```tool_code", "```", "\n", "add(", "a=", "1", ")", "'x'", " ", "```python", "add"],
    "inkling": ["<|message_model|>", "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>", "<|end_message|>",
                "add", '{"name": "add", "args": {"a": 1}}', '{"a": 1}', "{", "\n", " ", "x", "<|", "ad", ">"],
}
NEW = sorted(FRAGMENTS)
PYTHON_RENDERED = {"lfm2", "llama4", "olmo3", "tool_code"}  # argument names must be identifiers
# Seed-OSS values are text typed by the schema: its round trip is the conformance suite's, with schemas.
TYPED_ROUND_TRIP = sorted(set(NEW) - {"seed_oss"})
GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def test_every_new_format_has_three_golden_cases() -> None:
    counts = {name: len(list((GOLDEN / name).glob("*.json"))) for name in NEW}
    assert min(counts.values()) >= 3, counts


@pytest.mark.parametrize("name", NEW)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_chunking_gives_the_one_shot_result_and_loses_nothing(name: str, data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.sampled_from(FRAGMENTS[name]) | st.text(max_size=3), max_size=16))
    text = "".join(pieces)
    dialect = DIALECTS[name]
    one_shot = parse(dialect, text, TOOLS)
    assert source_of(one_shot) == text
    assert fed(dialect, list(text), TOOLS) == one_shot
    assert fed(dialect, split(text, data.draw(st.lists(st.integers(0, 500), max_size=8))), TOOLS) == one_shot


def gemma_values() -> st.SearchStrategy[Any]:
    """JSON values Gemma's notation can carry: keys are bare words, strings hold no string token."""
    text = st.text(max_size=12).filter(lambda value: not any(quote in value for quote in QUOTES))
    return st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
        | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(IDENTIFIERS, inner, max_size=3),
        max_leaves=8,
    )


@pytest.mark.parametrize("name", TYPED_ROUND_TRIP)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), tool=IDENTIFIERS)
def test_render_round_trip(name: str, data: st.DataObject, tool: str) -> None:
    gemma = name in ("gemma4", "function_gemma")
    keys = IDENTIFIERS if name in PYTHON_RENDERED or gemma else st.text(max_size=8)
    values = gemma_values() if gemma else JSON_VALUES
    arguments = data.draw(st.dictionaries(keys, values, max_size=4))
    dialect: Any = DIALECTS[name]
    rendered = dialect.render_call(tool, arguments)
    tools = {tool: {}}
    segments = parse(dialect, rendered, tools)
    assert [(type(segment), segment.source) for segment in segments] == [(Call, rendered)]
    assert result_of(accept(segments, tools)) == (None, [(tool, arguments)])
    assert fed(dialect, split(rendered, data.draw(st.lists(st.integers(0, 300), max_size=6))), tools) == segments


@pytest.mark.parametrize("name", NEW)
def test_adversarial_input_stays_linear(name: str) -> None:
    """CPU time, not wall time: the bound must hold on a loaded machine (bench/parse.py gives the figures)."""
    opener = FRAGMENTS[name][0]
    render = DIALECTS[name].render_call  # type: ignore[attr-defined]
    unclosed = render("add", {"a": "x" * 1_000_000})
    samples = [opener * 20_000, unclosed[: len(unclosed) // 2], opener + "[" * 200_000, opener + "{" * 200_000,
               (opener + "add(a=") * 20_000, render("add", {"a": 1}) * 5_000]
    for sample in samples:
        started = time.process_time()
        segments = parse(DIALECTS[name], sample, TOOLS)
        assert time.process_time() - started < 2, f"{name} is slow on {sample[:30]!r}..."
        assert source_of(segments) == sample


@pytest.mark.parametrize("name", NEW)
def test_streaming_a_long_call_one_character_at_a_time_stays_linear(name: str) -> None:
    text = DIALECTS[name].render_call("add", {"a": "x" * 30_000})  # type: ignore[attr-defined]
    started = time.process_time()
    segments = fed(DIALECTS[name], list(text), TOOLS)
    assert time.process_time() - started < 2
    assert [segment.source for segment in segments if isinstance(segment, Call)] == [text]


@pytest.mark.parametrize(
    "body",
    ["{a:x}", "{a:1,a:2}", "{:1}", "{a:1 b:2}", "{a:[1,}", "{a:01}", "{a:1e999}", "{a:{}",
     "{a:" + "[" * 40 + "]" * 40 + "}", "(a:1", "{a=1}", "(a:'x)", ":\nBEGIN_ARG:\n1"],
)
def test_gemma4_refuses_what_its_notation_does_not_allow(body: str) -> None:
    text = f"<|tool_call>call:add{body}<tool_call|>"
    assert parse(DIALECTS["gemma4"], text, TOOLS) == [Text(text)]


@pytest.mark.parametrize(
    ("body", "arguments"),
    [("{a:'x'}", {"a": "x"}), ('{a:"x\\"y"}', {"a": 'x"y'}), ("(a:1)", {"a": 1}),
     ("(a=1, b=True)", {"a": 1, "b": True}),
     ("(a: <|\"|>x<|\"|>, b: None)", {"a": "x", "b": None}), ("{a:'it's, here'}", {"a": "it's, here"}),
     (":\nBEGIN_ARG:\nfirst\nEND_ARG\nBEGIN_ARG:\n2\nEND_ARG", {"a": "first", "b": "2"})],
)
def test_gemma4_reads_the_forms_models_really_write(body: str, arguments: dict[str, Any]) -> None:
    """Quotes of both kinds, `call:NAME(...)` with `:` or `=` and Python's constants, positional `BEGIN_ARG` blocks
    (given to the declared properties in order), as public reports show them."""
    tools = {"add": {"type": "object", "properties": {"a": {}, "b": {}}}}
    text = f"<|tool_call>call:add{body}<tool_call|>"
    calls = [segment for segment in parse(DIALECTS["gemma4"], text, tools) if isinstance(segment, Call)]
    assert [(call.name, call.arguments, call.source) for call in calls] == [("add", arguments, text)]


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ("call:add{a:5}", [("add", {"a": 5})]),
        ("Writing it.\ncall:add{a: hello world }", [("add", {"a": "hello world"})]),
        ("recall:add{a:1}", []),  # inside a word
        ("call:add{b:1}", []),  # a key the schema does not name
        ("call:sub{a:1}", []),  # not a declared tool
        ("call:add{a:1,a:2}", []),
    ],
)
def test_gemma4_stripped_form_needs_a_declared_tool_and_its_keys(text: str, calls: list[tuple[str, Any]]) -> None:
    found = extract(text, TOOLS, ("gemma4",))
    assert [(call.name, call.arguments) for call in found.calls] == calls


def test_gemma4_reads_quoted_keys_and_strings_holding_markup() -> None:
    text = f'<|tool_call>call:add{{{QUOTE}a{QUOTE}: {QUOTE}}}, <tool_call|> "x"{QUOTE} , b : [ ] }}<tool_call|>'
    [call] = parse(DIALECTS["gemma4"], text, TOOLS)
    assert isinstance(call, Call)
    assert call.arguments == {"a": '}, <tool_call|> "x"', "b": []}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # Qwen3-Coder's XML and Functionary's JSON share `<function=`; each dialect takes only its own.
        ('<function=add>{"a": 1}</function><function=add>\n<parameter=a>2</parameter>\n</function>',
         [("functionary_v31", {"a": 1}), ("qwen3_coder", {"a": 2})]),
        # Cline's <invoke> and OLMo 3's Python calls share `<function_calls>`.
        ('<function_calls>\nadd(a=1)\n</function_calls>\n<function_calls><invoke name="add"><parameter name="a">2'
         "</parameter></invoke></function_calls>", [("olmo3", {"a": 1}), ("invoke_xml", {"a": 2})]),
        # A Seed-OSS wrapper is taken whole, not left around a Qwen3-Coder call.
        ("<seed:tool_call><function=add><parameter=a>3</parameter></function></seed:tool_call>",
         [("seed_oss", {"a": 3})]),
        # Apriel's `<tool_calls>` is not Hermes' `<tool_call>`.
        ('<tool_calls>[{"name": "add", "arguments": {"a": 4}}]</tool_calls><tool_call>{"name": "add", "arguments": '
         '{"a": 5}}</tool_call>', [("apriel", {"a": 4}), ("hermes", {"a": 5})]),
    ],
)
def test_dialects_that_share_a_marker_take_only_their_own_blocks(text: str, names: list[tuple[str, Any]]) -> None:
    found = extract(text, TOOLS)
    assert [(call.dialect, call.arguments) for call in found.calls] == names
    assert found.content() is None
