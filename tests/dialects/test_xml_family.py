"""The XML-family dialects (`qwen3_coder`, `glm`, `kimi_k2`, `minimax`, `invoke_xml`): golden cases, properties
over random markup, render round trips, the hand-offs between dialects that share an opener, and linear time on
adversarial input."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, merge_text, parse, source_of
from toolproxy.dialects.chain import ChainScanner
from toolproxy.dialects.glm_xml import GlmXmlDialect
from toolproxy.dialects.invoke_xml import InvokeXmlDialect
from toolproxy.dialects.kimi_tokens import KimiDialect
from toolproxy.dialects.qwen3_xml import Qwen3XmlDialect
from toolproxy.dialects.registry import DIALECTS as REGISTERED
from toolproxy.meaning import reasoning
from toolproxy.meaning.extraction import accept, settle

Dialect = Qwen3XmlDialect | GlmXmlDialect | KimiDialect | InvokeXmlDialect

DIALECTS: dict[str, Dialect] = {
    "qwen3_coder": Qwen3XmlDialect(),
    "glm": GlmXmlDialect(),
    "kimi_k2": KimiDialect(),
    "minimax": REGISTERED["minimax"],  # type: ignore[dict-item]
    "invoke_xml": InvokeXmlDialect("invoke_xml", ("function_calls",), bare=True),
    "dsml": REGISTERED["dsml"],  # type: ignore[dict-item]
    "kimi_k3": REGISTERED["kimi_k3"],  # type: ignore[dict-item]
}
# The automatic order recommended for the registry. Dialects whose values are raw text (code, several lines) go
# first: another dialect's markup written inside such a value must stay in it, and a JSON string cannot hold a raw
# line break, so the reverse nesting is rarer. MiniMax before invoke_xml, which would take its bare `<invoke>`.
RECOMMENDED = ["dsml", "kimi_k2", "kimi_k3", "minimax", "qwen3_coder", "glm", "invoke_xml", "hermes", "qwen_tools",
               "roo_xml", "json"]
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CASES = sorted(path for name in DIALECTS for path in (GOLDEN / name).glob("*.json"))


def load(path: Path) -> tuple[str, dict[str, Any], ToolIndex]:
    expected = json.loads(path.read_text(encoding="utf-8"))
    text = path.with_suffix(".txt").read_text(encoding="utf-8")
    tools = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in expected["tools"]}
    return text, expected, tools


def fed(dialect: Dialect, pieces: list[str], tools: ToolIndex) -> list[Segment]:
    scanner = dialect.scanner(tools)
    return merge_text([segment for piece in pieces for segment in scanner.feed(piece)] + scanner.finish())


def split(text: str, points: list[int]) -> list[str]:
    cuts = sorted({point % (len(text) + 1) for point in points})
    return [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def decoded(arguments: Any) -> Any:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


# Golden cases


def test_every_dialect_has_its_golden_cases() -> None:
    counts = {name: len(list((GOLDEN / name).glob("*.json"))) for name in DIALECTS}
    assert all(count >= 6 for count in counts.values()), counts
    seed = {path.stem for path in (GOLDEN / "invoke_xml").glob("seed000_*.json")}
    assert len(seed) == 5, seed


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_golden(path: Path) -> None:
    text, expected, tools = load(path)
    dialect = DIALECTS[path.parent.name]
    answer = reasoning.split(text).answer  # as extraction does: reasoning aside first (Kimi K3's think channel)
    scanner = dialect.scanner(tools)
    segments = scanner.feed(answer) + scanner.finish()
    extraction = accept(settle(segments, tools)[0], tools)  # settled as extraction does: tokens beside calls go too
    assert extraction.content() == expected["content"]
    assert [(call.name, call.arguments) for call in extraction.calls] == [
        (call["name"], call["arguments"]) for call in expected["tool_calls"]]
    assert source_of(segments) == answer


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_golden_split_anywhere(path: Path) -> None:
    """h11-style: the text split at every position, and fed one character at a time, parses as in one piece."""
    text, _, tools = load(path)
    dialect = DIALECTS[path.parent.name]
    whole = parse(dialect, text, tools)
    assert fed(dialect, list(text), tools) == whole
    for cut in range(1, len(text)):
        assert fed(dialect, [text[:cut], text[cut:]], tools) == whole, cut


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_golden_in_the_recommended_automatic_order(path: Path) -> None:
    text, expected, tools = load(path)
    everything: dict[str, Any] = {**REGISTERED, **DIALECTS}
    chain = ChainScanner([everything[name] for name in RECOMMENDED if name in everything], tools)
    answer = reasoning.split(text).answer
    extraction = accept(settle(chain.feed(answer) + chain.finish(), tools)[0], tools)
    assert extraction.content() == expected["content"]
    assert [(call.name, call.arguments) for call in extraction.calls] == [
        (call["name"], call["arguments"]) for call in expected["tool_calls"]]


# Properties over random text made of each dialect's markers

TOOLS: ToolIndex = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                                    "days": {"type": "integer"}}}}
INVOKE_PIECES = ["<function_calls>", "</function_calls>", "<minimax:tool_call>", "</minimax:tool_call>",
                 '<invoke name="get_weather">', "<invoke name='ns:get_weather' note='a > b'>", "<invoke", ' name="',
                 "</invoke>", '<parameter name="city">', "<parameter", "</parameter>", '<ns:invoke name="get_weather">',
                 "</ns:invoke>", '<ns:parameter name="city">', "</ns:parameter>", "<ns:function_calls>",
                 "</ns:function_calls>", '"', "'", "/>", "]<]minimax[>[", "<tool_call>", "</tool_call>", "<city>",
                 "</city>", "<|im_end|>", "<｜DSML｜invoke name=\"get_weather\">", "]<]mini", '{"city": "x"}']
DSML_PIECES = ["<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<|DSML|function_calls>", "</|DSML|function_calls>",
               "<｜DSML｜ calls>", "</｜DSML｜ calls>", '<｜DSML｜invoke name="get_weather">', "</｜DSML｜invoke>",
               '<｜DSML｜ invoke name="get_weather">', "</｜DSML｜ invoke>",
               '<｜DSML｜parameter name="city" string="true">', '<|DSML|parameter name="city" string="false">',
               "</｜DSML｜parameter>", "</|DSML|parameter>",
               "<｜DSML｜", "<｜DS", '{"city": "x"}', '"x"', "<｜end▁of▁sentence｜>",
               # self-closing arguments and invokes, typographic quotes, a tag named after the tool
               '<｜DSML｜parameter name="city" value="x"/>', '<｜｜DSML｜｜invoke name="city" string="y" />', "/>",
               "<｜DSML｜invoke name=“get_weather”>", "<｜DSML｜get_weather>", "</｜DSML｜get_weather>", "<city>",
               "</city>", "<｜DSML｜toolcall>", "</｜DSML｜toolcall>", "<｜DSML｜toolcalls>", "get_weather",
               "get_weather\n```json\n", "\n```", "``"]
K3_PIECES = ["<|open|>tools<|sep|>", "<|close|>tools<|sep|>", '<|open|>call tool="get_weather" index="0"<|sep|>',
             "<|close|>call<|sep|>", '<|open|>argument key="city" type="string"<|sep|>',
             '<|open|>argument key="city" type="object"<|sep|>', "<|close|>argument<|sep|>", "<|open|>", "<|close|>",
             "<|sep|>", "<|se", "<|close|>message<|sep|>", '{"a": 1}']
PIECES: dict[str, list[str]] = {
    "qwen3_coder": ["<tool_call>", "</tool_call>", "<function=", "<function=get_weather>", "</function>",
                    "<parameter=", "<parameter=city>", "</parameter>", "get_weather", "=", "<tool_", "</func",
                    # the function opened by <parameter=NAME>; values without closers
                    "<parameter=get_weather>", "\n<parameter=city>", "\n<parameter=days> ", "\n<param",
                    "\n</function>", "\n</func", "\n</tool_call>", "\n</tool", "Done."],
    "glm": ["<tool_call>", "</tool_call>", "get_weather", "<arg_key>", "city", "</arg_key>", "<arg_value>",
            "</arg_value>", "{", '"', "<arg_", "</tool"],
    "kimi_k2": ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>", "<|tool_calls_section_end|>",
                "<|tool_call_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                "<|tool_call_end|>", "functions.get_weather:0", "{", "}", "[", "]", '"', "\\", '{"city": "x"}',
                "<|tool_call"],
    "minimax": INVOKE_PIECES,
    "invoke_xml": INVOKE_PIECES,
    "dsml": DSML_PIECES,
    "kimi_k3": K3_PIECES,
}
COMMON = ["\n", " ", "<", "</", ">", "x", "é", "😀"]
# Whole calls among the pieces, so that random text holds calls to find and not only broken markup.
WHOLE = {name: [dialect.render_call("get_weather", {"city": "Oslo"}), dialect.render_call("get_weather", {})]
         for name, dialect in DIALECTS.items()}
WHOLE["qwen3_coder"].append("<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>")
WHOLE["kimi_k2"].append('<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "}"}'
                        "<|tool_call_end|>")
WHOLE["invoke_xml"].append('<ns:invoke name="x:get_weather"><ns:parameter name="city">a</ns:parameter></ns:invoke>')
WHOLE["minimax"].append('<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Oslo'
                        ']<]minimax[>[</city>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>')
WHOLE["dsml"].append('<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">{"city": "x"}</｜DSML｜ invoke>\n'
                     "</｜DSML｜ calls>")
WHOLE["dsml"].append("<｜DSML｜get_weather>\n<city>Oslo</city>\n</｜DSML｜get_weather>")
WHOLE["dsml"].append('<｜DSML｜toolcall>get_weather\n```json\n{"city": "Oslo"}\n```\n</｜DSML｜toolcall>')
WHOLE["dsml"].append('<｜｜DSML｜｜tool_calls><｜｜DSML｜｜invoke name="get_weather">'
                     '<｜｜DSML｜｜invoke name="city" string="Oslo" /></｜｜DSML｜｜invoke></｜｜DSML｜｜tool_calls>')
WHOLE["qwen3_coder"].append("<tool_call>\n<parameter=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                            "</function>\n</tool_call>")
WHOLE["qwen3_coder"].append("<function=get_weather>\n<parameter=days> 3\n<parameter=city> Oslo")


def texts(name: str) -> st.SearchStrategy[str]:
    piece = st.sampled_from(PIECES[name] + COMMON) | st.text(alphabet="ab <>/=\"'\n", max_size=4)
    return st.lists(piece | st.sampled_from(WHOLE[name]), max_size=40).map("".join)


@pytest.mark.parametrize("name", list(DIALECTS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_chunking_matches_one_shot_and_loses_nothing(name: str, data: st.DataObject) -> None:
    text = data.draw(texts(name))
    points = data.draw(st.lists(st.integers(min_value=0), max_size=12))
    dialect = DIALECTS[name]
    whole = parse(dialect, text, TOOLS)
    assert source_of(whole) == text
    assert fed(dialect, split(text, points), TOOLS) == whole
    assert fed(dialect, list(text), TOOLS) == whole
    assert source_of(accept(whole, TOOLS).segments) == text


# Render round trips: parse(render(call)) gives the call back, with the text around it untouched

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)
VALUE_PIECES = ["</function>", "</tool_call>", "</invoke>", "</arg_key>", "<parameter=", "</para", "<|tool_call_end|>",
                "\n", "\t", " ", "<", ">", "/", "=", '"', "'", "{", "}", "x", "é"]
VALUES = st.lists(st.sampled_from(VALUE_PIECES), max_size=12).map("".join) | st.text(max_size=20)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | VALUES,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(VALUES, inner, max_size=3),
                           max_leaves=8)
PROSE = st.text(alphabet="abc .,:\n", max_size=12)
VALUE_CLOSERS = {"qwen3_coder": "</parameter>", "glm": "</arg_value>", "minimax": "</parameter>",
                 "invoke_xml": "</parameter>"}


@pytest.mark.parametrize("name", list(DIALECTS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_render_round_trip(name: str, data: st.DataObject) -> None:
    dialect = DIALECTS[name]
    tool = data.draw(NAMES)
    arguments = data.draw(st.dictionaries(NAMES, JSON_VALUES if name == "kimi_k2" else VALUES, max_size=4))
    if name in VALUE_CLOSERS:  # the one text a value of these formats cannot hold
        assume(not any(isinstance(value, str) and VALUE_CLOSERS[name] in value for value in arguments.values()))
    before, after = data.draw(PROSE), data.draw(PROSE)
    rendered = dialect.render_call(tool, arguments)
    segments = parse(dialect, before + rendered + after, {tool: {}})
    calls = [segment for segment in segments if isinstance(segment, Call)]
    assert [(call.name, decoded(call.arguments), call.source) for call in calls] == [(tool, arguments, rendered)]
    assert [segment for segment in segments if isinstance(segment, Text)] == [
        Text(piece) for piece in (before, after) if piece]


# Hand-offs between dialects that share an opener, and dialect quirks


def test_shared_openers_are_handed_on_as_text() -> None:
    hermes = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    glm = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    qwen = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    bare_invoke = '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>'
    for name, text in [("glm", hermes), ("qwen3_coder", hermes), ("glm", qwen), ("qwen3_coder", glm),
                       ("minimax", bare_invoke)]:
        assert parse(DIALECTS[name], text, TOOLS) == [Text(text)], name


def test_minimax_goes_before_invoke_xml() -> None:
    """invoke_xml alone takes the bare `<invoke>` inside a MiniMax block and leaves its wrapper in the content."""
    text = '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>\n' \
           "</minimax:tool_call>"
    wrong = accept(parse(DIALECTS["invoke_xml"], text, TOOLS), TOOLS)
    assert wrong.content() == "<minimax:tool_call>\n\n</minimax:tool_call>"
    chain = ChainScanner([DIALECTS["minimax"], DIALECTS["invoke_xml"]], TOOLS)
    right = accept(chain.feed(text) + chain.finish(), TOOLS)
    assert (right.content(), [call.dialect for call in right.calls]) == (None, ["minimax"])


def test_a_declared_prefixed_name_keeps_its_prefix() -> None:
    text = '<invoke name="default_api:read_file"><parameter name="path">a</parameter></invoke>'
    declared = parse(DIALECTS["invoke_xml"], text, {"default_api:read_file": {}})
    stripped = parse(DIALECTS["invoke_xml"], text, {"read_file": {}})
    assert [call.name for call in declared if isinstance(call, Call)] == ["default_api:read_file"]
    assert [call.name for call in stripped if isinstance(call, Call)] == ["read_file"]


def test_a_quoted_angle_bracket_does_not_end_a_tag() -> None:
    text = '<invoke name="get_weather" note="a > b"><parameter name="city" hint=\'<x>\'>Oslo</parameter></invoke>'
    assert parse(DIALECTS["invoke_xml"], text, TOOLS) == [Call("get_weather", {"city": "Oslo"}, text, "invoke_xml")]


def test_text_before_a_call_streams_live_and_the_call_goes_out_whole() -> None:
    scanner = DIALECTS["qwen3_coder"].scanner(TOOLS)
    assert scanner.feed("Checking the weather. <tool_") == [Text("Checking the weather. ")]
    assert scanner.feed("call>\n<function=get_weather>\n<parameter=city>\nOslo</para") == []
    [call] = scanner.feed("meter>\n</function>\n</tool_call>")
    assert isinstance(call, Call) and (call.name, call.arguments) == ("get_weather", {"city": "Oslo"})
    assert merge_text(scanner.finish()) == []


def test_a_cut_off_block_is_text_at_finish() -> None:
    for name, text in [("qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs"),
                       ("glm", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Os"),
                       ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.x:0"
                                   '<|tool_call_argument_begin|>{"a'),
                       ("invoke_xml", '<function_calls>\n<invoke name="get_weather">\n<parameter name="ci')]:
        assert fed(DIALECTS[name], [text], TOOLS) == [Text(text)], name


def test_whole_calls_stand_when_the_wrapper_never_closes_and_the_rest_stays_text() -> None:
    call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
    assert parse(DIALECTS["qwen3_coder"], call + "</tool_c", TOOLS) == [
        Call("get_weather", {"city": "Oslo"}, call, "qwen3_coder"), Text("</tool_c")]
    invoke = '<function_calls>\n<invoke name="get_weather">\n</invoke>\n'
    assert parse(DIALECTS["invoke_xml"], invoke + "Done.", TOOLS) == [
        Call("get_weather", {}, invoke, "invoke_xml"), Text("Done.")]


# Linear time: adversarial input parses fast. A smoke check, not a benchmark: quadratic scanning would take
# minutes here. CPU time of this process, so that a busy machine does not fail it.

OPENERS = {
    "qwen3_coder": "<tool_call><function=x>",
    "glm": "<tool_call>x",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>",
    "minimax": '<minimax:tool_call><invoke name="x">',
    "invoke_xml": '<function_calls><invoke name="x">',
    "dsml": '<｜DSML｜tool_calls><｜DSML｜invoke name="x">',
    "kimi_k3": '<|open|>tools<|sep|><|open|>call tool="x" index="0"<|sep|>',
}


@pytest.mark.parametrize("name", list(DIALECTS))
def test_many_openers_without_closers_parse_in_linear_time(name: str) -> None:
    text = OPENERS[name] * 50_000  # 100 000 openers
    started = time.process_time()
    segments = parse(DIALECTS[name], text, TOOLS)
    assert time.process_time() - started < 2.0
    assert segments == [Text(text)]


def test_the_briefs_example_parses_fast() -> None:
    text = "<tool_call><function=x>" * 20_000
    started = time.process_time()
    assert parse(DIALECTS["qwen3_coder"], text, TOOLS) == [Text(text)]
    assert time.process_time() - started < 1.0


@pytest.mark.parametrize(("name", "opener"), [
    ("qwen3_coder", "<tool_call>\n<function=x>\n<parameter=p>\n"),
    ("glm", "<tool_call>x<arg_key>p</arg_key><arg_value>"),
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.x:0<|tool_call_argument_begin|>{\"p\": \""),
    ("invoke_xml", '<function_calls><invoke name="x"><parameter name="p">'),
])
def test_a_long_unclosed_value_streams_in_linear_time(name: str, opener: str) -> None:
    """Each piece is searched once: only a possible beginning of the closer is held back between pieces."""
    body = "a</b<" * 200_000
    pieces = [opener] + [body[start : start + 1000] for start in range(0, len(body), 1000)]
    started = time.process_time()
    assert fed(DIALECTS[name], pieces, TOOLS) == [Text(opener + body)]
    assert time.process_time() - started < 2.0


def test_an_unclosed_attribute_quote_is_not_held_forever() -> None:
    text = '<invoke name="' + "x" * 1_000_000
    started = time.process_time()
    assert parse(DIALECTS["invoke_xml"], text, TOOLS) == [Text(text)]
    assert time.process_time() - started < 2.0
