"""Schema-anchored recovery (toolproxy/meaning/recovery.py): what each rule mends, the issue it records, and the
damaged calls it must leave as text. The real-world outputs these rules were written for are in
tests/golden/realworld (tests/test_realworld.py); these are the guards around them."""

from __future__ import annotations

from typing import Any

import pytest

from toolproxy.meaning.extraction import extract

READ = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
SQUARE = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS: dict[str, Any] = {"read": READ, "square": SQUARE}


def calls(text: str, tools: dict[str, Any] = TOOLS) -> list[tuple[str, Any]]:
    return [(call.name, call.arguments) for call in extract(text, tools).calls]


def recovered(text: str) -> list[str]:
    return [issue for issue in extract(text, TOOLS).issues if issue.startswith("recovered:")]


@pytest.mark.parametrize(("text", "rule"), [
    ('<function=read>\n<parameter=path>/a</parameter>\n</function>\n</tool_call>', "closer_without_opener"),
    ('{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>', "closer_without_opener"),
    ("<function=read>\n<parameter=path>/a</parameter>", "closer_missing"),
    ("<tool_call>\n<function=square>\n<parameter=n>\n4\n\n</tool_call>", "closer_missing"),
    ("<tool_call>read<arg_key>path</arg_key><arg_value>/a</arg_value></tool_cal", "truncated_closer"),
    # A closer cut by max_tokens after a whole JSON call (SmolLM2 on vLLM, Joakimpalm-Zen/xyntetik-runner).
    ('<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool', "truncated_closer"),
    ("<name>read\n</parameter>\n<parameter=path>\n/a\n</parameter>\n</function>", "stray_closer"),
    ('<tool_call>\n<function>read</function>\n{"path": "/a"}\n</tool_call>', "opener_variant"),
    ('<function name="read"><param name="path">/a</param></function>', "opener_variant"),
    ('<tool_call>\n{"name": "read", "args": {"path": "/a"}}\n</tool_call>', "args_key"),
    ('<function_calls>\n[{"tool_name": "read", "arguments": {"path": "/a"}}]\n</function_calls>', "tool_name_key"),
    # A call's own id or place beside its arguments (Command R's `tool_call_id`), read without the dialect.
    ('<tool_call>\n[{"tool_call_id": "0", "tool_name": "read", "parameters": {"path": "/a"}}]\n</tool_call>',
     "tool_name_key"),
    ('{"index": 0, "call_id": "c1", "name": "read", "arguments": {"path": "/a"}}', "lenient_reader"),
    # smolagents' ToolCallingAgent format: its `Action:` label line goes with the call (huggingface/smolagents#158).
    ('Action:\n{\n  "tool_name": "read",\n  "tool_arguments": {"path": "/a"}\n}', "tool_arguments_key"),
    # OpenAI's message written into content (Devstral, Gemma 3 through avante).
    ('{"tool_calls": [{"id": "1", "tool_name": "read", "parameters": {"path": "/a"}}]}', "tool_calls_object"),
    ('{"type": "function", "function": {"name": "read", "parameters": {"path": "/a"}}', "type_function_wrapper"),
    ('{"jsonrpc": "2.0", "method": "read", "params": {"path": "/a"}}', "jsonrpc_method"),
    ('<tool_call>\n{"name": "read", "path": "/a"}', "flat_arguments"),
    ('{"name": "read", "parameters": {"path": "/a"}', "missing_final_brace"),
    ('[TOOL_REQUEST]\n{"name": "read", "arguments": {"path": "/a"}}\n[END_TOOL_REQUEST]', "wrapper_absorbed"),
    ('[TOOL_CALL]\n{tool => "read", args => {\n  --path "/a"\n}}\n[/TOOL_CALL]', "arrow_pseudo_call"),
    ('<|tool_call_begin|>functions.read:0<|tool_call_argument_begin|>"{\\"path\\": \\"/a\\"}"<|tool_call_end|>',
     "double_encoded_arguments"),
])
def test_each_rule_mends_its_damage_and_is_named(text: str, rule: str) -> None:
    assert calls(text) == [("read", {"path": "/a"})] or calls(text) == [("square", {"n": 4})]
    assert f"recovered:{rule}" in recovered(text)


def test_the_mended_call_takes_its_markup_with_it() -> None:
    extraction = extract("Reading it.\n<function=read>\n<parameter=path>/a</parameter>\n</function>\n</tool_call>",
                         TOOLS)
    assert extraction.content() == "Reading it."


def test_several_bare_json_calls_on_one_line_each_judged_alone() -> None:
    text = '{"name": "slugify", "parameters": {}}; {"name": "read", "parameters": {"path": "/a"}}'
    extraction = extract(text, TOOLS)
    assert [(call.name, call.arguments) for call in extraction.calls] == [("read", {"path": "/a"})]
    assert extraction.content() == '{"name": "slugify", "parameters": {}};'


def test_kimi_id_without_a_name_goes_to_the_one_tool_whose_schema_accepts_the_arguments() -> None:
    text = "<|tool_call_begin|>call_0<|tool_call_argument_begin|>\"{\\\"n\\\": 3}\"<|tool_call_end|>"
    assert calls(text) == [("square", {"n": 3})]


def test_kimi_id_naming_an_undeclared_tool_is_never_given_another_tools_name() -> None:
    """`functions.invalid.0` names a tool, one not declared: the one tool whose schema takes the arguments must
    not be called in its place (vLLM's kimi_k2 test_extract_tool_calls_invalid_funcall_id)."""
    text = "<|tool_call_begin|>functions.cube.0<|tool_call_argument_begin|>\"{\\\"n\\\": 3}\"<|tool_call_end|>"
    assert calls(text) == []


@pytest.mark.parametrize("text", [
    # undeclared names stay text, however damaged or mended the markup
    "<function=format_disk>\n<parameter=path>/</parameter>",
    '{"name": "format_disk", "args": {"path": "/"}}',
    '[TOOL_CALL]\n{tool => "format_disk", args => {\n  --path "/"\n}}\n[/TOOL_CALL]',
    # JSON that is data
    '{"name": "John", "age": 25}',
    # a list of calls with one member no call (an undeclared tool), or beside another field
    '{"tool_calls": [{"name": "read", "arguments": {"path": "/a"}}, {"name": "format_disk", "arguments": {}}]}',
    '{"tool_calls": [{"name": "read", "arguments": {"path": "/a"}}], "status": "planned"}',
    '{"tool_calls": []}',
    # arguments the schema refuses (a key it does not know, a wrong type)
    "<function=read>\n<parameter=file>/a</parameter>",
    '{"name": "square", "args": {"n": "four"}}',
    # a value cut inside (max_tokens): the call was never finished
    "<tool_call>\n<function=read>\n<parameter=path>\nconfig/sett",
    # a bare opener, closed by nothing, holding nothing
    "<function=read>\n<function=read>\n",
    # damaged markup followed by more than its closer
    "<function=read>\n<parameter=path>/a</parameter>\nand then I would read it",
    # a call shown inline in backticks or in the middle of a sentence is an example
    "You would write `<function=read><parameter=path>/a</parameter>` for that.",
    'The model answers like this: {"name": "read", "args": {"path": "/a"}} in its reply.',
])
def test_damaged_calls_that_are_not_calls_stay_text(text: str) -> None:
    extraction = extract(text, TOOLS)
    assert extraction.calls == []
    assert extraction.content() == text


def test_a_mended_call_with_arguments_the_schema_refuses_is_recorded() -> None:
    issues = extract('{"name": "square", "args": {"n": "four"}}', TOOLS).issues
    assert any("stays text" in issue and "'square'" in issue for issue in issues)


def test_a_call_considered_in_reasoning_and_followed_by_an_answer_is_not_made() -> None:
    text = '<think>I could call {"name": "read", "arguments": {"path": "/a"}} but I know it.</think>It holds "a".'
    extraction = extract(text, TOOLS)
    assert extraction.calls == []
    assert extraction.content() == 'It holds "a".'


def test_a_call_only_in_reasoning_with_no_answer_after_it_is_rescued() -> None:
    text = '<think>Reading it.\n{"name": "read", "arguments": {"path": "/a"}}</think>'
    assert calls(text) == [("read", {"path": "/a"})]


def test_strict_forms_are_not_reread() -> None:
    text = '<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>'
    extraction = extract(text, TOOLS)
    assert [call.dialect for call in extraction.calls] == ["hermes"]
    assert not [issue for issue in extraction.issues if issue.startswith("recovered:")]


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
@pytest.mark.parametrize("unit", [
    '<function=read>\n<parameter=path>',  # openers whose values never end
    "<function=read>",  # bare openers, nothing inside
    '{"name": "read", "args": ',  # JSON candidates that never decode
    "<tool_call>read<arg_key>path</arg_key>",
    '[TOOL_CALL]\n{tool => "read", args => {\n',
])
def test_recovery_stays_linear_on_floods_of_damaged_openers(unit: str) -> None:
    text = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    extraction = extract(text, TOOLS)
    assert extraction.calls == []  # and it finished: a quadratic pass over 1 MB of these would not


def test_a_label_line_before_a_recovered_call_is_its_markup_and_prose_is_not() -> None:
    call = '{"tool_name": "read", "tool_arguments": {"path": "/a"}}'
    assert extract(f"Action:\n{call}\nReading it now.", TOOLS).content() == "Reading it now."
    kept = extract(f"I will read the file first:\n{call}", TOOLS)
    assert calls(f"I will read the file first:\n{call}") == [("read", {"path": "/a"})]
    assert kept.content() == "I will read the file first:"


@pytest.mark.parametrize("tail", ["\n</tool and then", "\n<", "\n<b", "\n</think"])
def test_only_a_cut_known_closer_at_the_very_end_goes_with_the_call(tail: str) -> None:
    extraction = extract('<tool_call>\n{"name": "read", "arguments": {"path": "/a"}}\n</tool_call>' + tail, TOOLS)
    assert [(call.name, call.arguments) for call in extraction.calls] == [("read", {"path": "/a"})]
    assert extraction.content() == tail.strip()


def test_arguments_written_in_the_schemas_shape_are_its_properties() -> None:
    """A small model shown the schema copies its shape (Llama 3.2 3B through crewAI's converter)."""
    text = '{"name": "read", "arguments": {"type": "object", "properties": {"path": "/a"}, "required": ["path"]}}'
    assert calls(text) == [("read", {"path": "/a"})]
    assert calls('{"name": "read", "arguments": {"properties": {"path": "/a"}}}') == [("read", {"path": "/a"})]


def test_a_declared_properties_argument_is_an_argument() -> None:
    tools = {"define": {"type": "object", "properties": {"properties": {"type": "object"}, "type": {"type": "string"}},
                        "required": ["properties"]}}
    text = '{"name": "define", "arguments": {"type": "object", "properties": {"path": "/a"}}}'
    assert calls(text, tools) == [("define", {"type": "object", "properties": {"path": "/a"}})]
