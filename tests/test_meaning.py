"""One place for meaning, whatever the dialect: types from the schema, validation, the unknown-tool and
invalid-argument policies, parallel_tool_calls, and reasoning kept out of calls."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make_body, make_tool, with_settings
from toolproxy.meaning import schema
from toolproxy.meaning.extraction import Policy, extract

TOOLS = {
    "bash": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"},
                                              "background": {"type": "boolean"}, "id": {"type": "string"},
                                              "env": {"type": "object"}, "args": {"type": "array"},
                                              "count": {"type": "integer"}},
             "required": ["command"], "additionalProperties": False},
}


def call(name: str, arguments: dict) -> str:
    return "<tools>" + json.dumps({"name": name, "arguments": arguments}) + "</tools>"


@pytest.mark.parametrize(("given", "expected"), [
    ({"command": "ls", "timeout": "60000"}, {"command": "ls", "timeout": 60000}),
    ({"command": "ls", "timeout": "2.5"}, {"command": "ls", "timeout": 2.5}),
    ({"command": "ls", "background": "True"}, {"command": "ls", "background": True}),
    ({"command": "ls", "background": "false"}, {"command": "ls", "background": False}),
    ({"command": "ls", "id": "12345"}, {"command": "ls", "id": "12345"}),
    ({"command": "12345"}, {"command": "12345"}),
    ({"command": "ls", "env": '{"A": "1"}'}, {"command": "ls", "env": {"A": "1"}}),
    ({"command": "ls", "args": '["-l", "-a"]'}, {"command": "ls", "args": ["-l", "-a"]}),
    ({"command": "ls", "count": "230.0"}, {"command": "ls", "count": 230}),
    ({"command": "ls", "count": "many"}, {"command": "ls", "count": "many"}),
])
def test_the_declared_type_decides(given, expected):
    [found] = extract(call("bash", given), TOOLS).calls
    assert found.arguments == expected


OPTIONAL = {"type": "object", "properties": {
    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    "tags": {"oneOf": [{"type": "array"}, {"type": "null"}]},
    "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "ratio": {"type": "float"},
    "window": {"oneOf": [{"type": "integer"}, {"type": "object", "properties": {"max": {"type": "integer"}}}]},
    "either": {"anyOf": [{"type": "object", "properties": {"n": {"type": "integer"}}},
                         {"type": "object", "properties": {"n": {"type": "string"}}}]},
}}


@pytest.mark.parametrize(("given", "expected"), [
    ({"limit": "5"}, {"limit": 5}),
    ({"tags": '["a", "b"]'}, {"tags": ["a", "b"]}),
    ({"nickname": "12345"}, {"nickname": "12345"}),  # a string branch keeps what looks like a number
    ({"nickname": "null"}, {"nickname": None}),
    ({"nickname": "None"}, {"nickname": "None"}),  # only JSON's null word is taken for null beside a string
    ({"ratio": "3.14"}, {"ratio": 3.14}),
    ({"window": {"max": "10"}}, {"window": {"max": 10}}),  # an object typed by its one branch with properties
    ({"window": "10"}, {"window": 10}),
    ({"either": {"n": "10"}}, {"either": {"n": "10"}}),  # two such branches: neither is guessed
])
def test_the_branches_of_anyof_and_hand_written_type_names_type_values_too(given, expected):
    """Pydantic writes Optional[T] as anyOf [T, null] (vLLM's and SGLang's parser tests, tests/golden/reference)."""
    assert schema.coerce(given, OPTIONAL) == expected


def test_invalid_arguments_pass_by_default_with_an_issue():
    extraction = extract(call("bash", {"timeout": 5}), TOOLS)
    assert [c.arguments for c in extraction.calls] == [{"timeout": 5}]
    assert any("'command' is a required property" in issue for issue in extraction.issues)


def test_invalid_arguments_can_stay_text():
    text = call("bash", {"command": "ls", "colour": "red"})
    extraction = extract(text, TOOLS, policy=Policy(invalid_arguments="text"))
    assert not extraction.calls and extraction.content() == text
    assert any("colour" in issue for issue in extraction.issues)


def test_unknown_tools_stay_text_unless_passed():
    text = call("format_disk", {"disk": "/dev/sda"})
    kept = extract(text, TOOLS)
    assert not kept.calls and kept.content() == text and kept.issues
    passed = extract(text, TOOLS, policy=Policy(unknown_tools="pass"))
    assert [(c.name, c.arguments) for c in passed.calls] == [("format_disk", {"disk": "/dev/sda"})]


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
def test_remote_refs_are_never_fetched_and_patterns_cannot_hang():
    tools = {"get": {"type": "object", "properties": {"url": {"$ref": "http://127.0.0.1:9/secret.json"}}},
             "match": {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a+)+$"}}}}
    extraction = extract(call("get", {"url": "x"}), tools)
    assert extraction.calls and any("not fetched" in issue for issue in extraction.issues)
    assert extract(call("match", {"s": "a" * 40 + "!"}), tools).calls  # (a+)+$ on 40 a's: hours if backtracking


def test_validators_are_built_once_per_schema():
    schema._cached_validator.cache_clear()
    for _ in range(5):
        schema.validate({"command": "ls"}, dict(TOOLS["bash"]))
    assert schema._cached_validator.cache_info().misses == 1


def test_a_call_only_thought_about_is_not_made_when_the_answer_has_one():
    text = "<think>maybe " + call("bash", {"command": "rm -rf /"}) + "</think>" + call("bash", {"command": "ls"})
    extraction = extract(text, TOOLS)
    assert [c.arguments["command"] for c in extraction.calls] == ["ls"]
    assert extraction.reasoning is not None and "rm -rf" in extraction.reasoning
    assert extraction.content() is None


def test_a_call_found_only_in_reasoning_is_rescued():
    text = "<think>I should list files. " + call("bash", {"command": "ls"}) + "</think>\n"
    extraction = extract(text, TOOLS)
    assert [c.arguments for c in extraction.calls] == [{"command": "ls"}]
    assert extraction.reasoning == "I should list files."
    assert any("rescued" in issue for issue in extraction.issues)


def test_reasoning_opened_in_the_prompt_and_the_three_modes():
    text = "The user wants files.</think>\n\nSure." + call("bash", {"command": "ls"})
    moved = extract(text, TOOLS)
    assert moved.reasoning == "The user wants files." and moved.content() == "Sure."
    dropped = extract(text, TOOLS, policy=Policy(reasoning="drop"))
    assert dropped.reasoning is None and dropped.content() == "Sure."
    kept = extract(text, TOOLS, policy=Policy(reasoning="keep"))
    assert kept.content() == "The user wants files.</think>\n\nSure."


def test_reasoning_through_the_proxy(upstream, serve, settings):
    text = "<think>plan: read it</think>Reading." + call("bash", {"command": "cat a"})
    upstream.completion(text)
    tools = [make_tool("bash", TOOLS["bash"]["properties"], ["command"])]
    message = serve(settings).post(make_body("x", tools)).json()["choices"][0]["message"]
    assert message["reasoning_content"] == "plan: read it" and message["content"] == "Reading."
    dropped = serve(with_settings(settings, reasoning="drop")).post(make_body("x", tools)).json()
    assert "reasoning_content" not in dropped["choices"][0]["message"]


def test_parallel_tool_calls_false_returns_the_first(upstream, proxy):
    tools = [make_tool("bash", {"command": {"type": "string"}}, ["command"])]
    upstream.completion(call("bash", {"command": "a"}) + call("bash", {"command": "b"}))
    both = proxy.post(make_body("x", tools)).json()["choices"][0]["message"]["tool_calls"]
    one = proxy.post(make_body("x", tools, parallel_tool_calls=False)).json()["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"])["command"] for c in both] == ["a", "b"]
    assert [json.loads(c["function"]["arguments"])["command"] for c in one["tool_calls"]] == ["a"]


def test_a_refused_member_of_a_call_list_keeps_the_list_as_text():
    text = '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "zzz", "arguments": {}}]</tool_call>'
    extraction = extract(text, TOOLS)
    assert not extraction.calls and extraction.content() == text
    assert any("list stays text" in issue for issue in extraction.issues)


def test_malformed_or_truncated_markup_is_recorded_as_an_issue():
    for text in ('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"', "<bash>\n<command>ls\n</bash>",
                 "[TOOL_CALLS]oops"):
        extraction = extract(text, TOOLS)
        assert not extraction.calls and extraction.content() == text
        assert any("markup left as text" in issue for issue in extraction.issues), text
    assert extract("plain answer", TOOLS).issues == []


def test_seed_oss_thinking_is_reasoning():
    text = "<seed:think>The user wants a listing.</seed:think>Listing." + call("bash", {"command": "ls"})
    extraction = extract(text, TOOLS)
    assert extraction.reasoning == "The user wants a listing." and extraction.content() == "Listing."


SEARCH = {"search": {"type": "object", "required": ["query"], "properties": {
    "query": {"type": "string"}, "phase": {"type": "string", "enum": ["induction", "maintenance"]},
    "drug": {"type": "string"}}}}


def test_optional_values_written_as_none_are_dropped_only_to_mend_a_call():
    """Gemma 4 wrote `phase:<|"|>None<|"|>,drug:<|"|>None<|"|>` for filters it did not set (Begleiter's capture,
    set 10): the enum refuses the word, so every optional word for no value goes; a call that validates as written
    keeps its words, and a required one is never dropped."""
    mended = extract(call("search", {"query": "x", "phase": "None", "drug": "None"}), SEARCH)
    assert [(c.name, c.arguments) for c in mended.calls] == [("search", {"query": "x"})]
    assert any("word for no value" in issue for issue in mended.issues)
    valid = extract(call("search", {"query": "x", "drug": "None"}), SEARCH)
    assert [c.arguments for c in valid.calls] == [{"query": "x", "drug": "None"}]
    phase_required = {"search": {**SEARCH["search"], "required": ["query", "phase"]}}
    required = extract(call("search", {"query": "x", "phase": "None"}), phase_required,
                       policy=Policy(invalid_arguments="text"))
    assert required.calls == []


@pytest.mark.parametrize(("written", "declared", "meant"), [
    ("get-weather", ["get_weather"], "get_weather"),  # `-` for `_`
    ("read_file", ["read-file"], "read-file"),  # `_` for `-`
    ("default_api:get-weather", ["get_weather"], "get_weather"),  # a namespace, then `-` for `_`
    ("read-file", ["read_file", "read-file"], "read-file"),  # the name as written wins
])
def test_a_tool_name_spelled_with_the_other_separator_means_the_declared_tool(written, declared, meant):
    tools = {name: {"type": "object", "properties": {"path": {"type": "string"}}} for name in declared}
    found = extract(call(written, {"path": "a"}), tools)
    assert [(c.name, c.arguments) for c in found.calls] == [(meant, {"path": "a"})]
    assert (written == meant) != any(f"{written!r} read as the declared {meant!r}" in i for i in found.issues)


@pytest.mark.parametrize(("written", "declared"), [
    ("a-b-c", ["a_b-c", "a-b_c"]),  # two tools are written like it: neither is chosen
    ("file", ["read_file"]),  # a part of a name is not the name
    ("get-weather-now", ["get_weather"]),
    ("getweather", ["get_weather"]),
    ("Get-Weather", ["get_weather"]),
])
def test_a_name_no_one_declared_tool_is_written_like_stays_text(written, declared):
    tools = {name: {"type": "object", "properties": {"path": {"type": "string"}}} for name in declared}
    found = extract(call(written, {"path": "a"}), tools)
    assert found.calls == [] and found.content() == call(written, {"path": "a"})


RESULT = {"type": "object", "properties": {"response": {"enum": ["A", "B"]}}, "required": ["response"],
          "additionalProperties": False}


@pytest.mark.parametrize(("answer", "demanded", "made"), [
    ('{\n    "response": "B"\n}', "final_result", True),  # Qwen2.5 72B on Ollama under tool_choice required
    ('```json\n{"response": "A"}\n```', "final_result", True),
    ('{"response": "B"}', None, False),  # the answer may choose: a JSON answer is an answer
    ('{"response": "C"}', "final_result", False),  # arguments the schema refuses stay text
    ('The result is {"response": "B"}', "final_result", False),  # not the whole answer
    ('["B"]', "final_result", False),
])
def test_the_answer_is_the_arguments_of_the_call_tool_choice_demands(answer, demanded, made):
    tools = {"final_result": RESULT, "other": {"type": "object"}}
    found = extract(answer, tools, policy=Policy(demanded=demanded))
    assert [c.name for c in found.calls] == (["final_result"] if made else [])
    assert found.content() == (None if made else answer)


def test_tool_choice_naming_a_tool_turns_an_answer_of_its_arguments_into_the_call(upstream, proxy):
    tools = [make_tool("final_result", {"response": {"enum": ["A", "B"]}}, ["response"]), make_tool("bash", {})]
    upstream.completion('{"response": "B"}')
    named = {"type": "function", "function": {"name": "final_result"}}
    message = proxy.post(make_body("Which is better?", tools, tool_choice=named)).json()["choices"][0]["message"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("final_result", {"response": "B"})]
    upstream.completion('{"response": "B"}')
    auto = proxy.post(make_body("Which is better?", tools)).json()["choices"][0]["message"]
    assert auto.get("tool_calls") in (None, []) and auto["content"] == '{"response": "B"}'


def test_a_native_call_is_not_doubled_by_an_answer_of_its_arguments(upstream, proxy):
    tools = [make_tool("final_result", {"response": {"enum": ["A", "B"]}}, ["response"])]
    native = {"id": "call_1", "type": "function",
              "function": {"name": "final_result", "arguments": '{"response": "A"}'}}
    upstream.completion('{"response": "B"}', tool_calls=[native])
    message = proxy.post(make_body("Which?", tools, tool_choice="required")).json()["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"response": "A"}]
