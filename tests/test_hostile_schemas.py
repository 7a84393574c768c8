"""Tool schemas from a client are hostile input (reliability #20, #21; issue 12 failure 8): a `$ref` that loops
without end is a 400 naming the tool, never a 500; a client's regular expression (`pattern`, `patternProperties`,
`propertyNames`) never runs with backtracking over model output, so it cannot freeze a worker; formats are not
run at all. Each case goes through the real proxy with a scripted upstream that makes the call."""

from __future__ import annotations

import json

import pytest

from tests.conftest import make_body
from toolproxy.meaning import schema

# 2**40 backtracking steps for Python's `re` on the key below: hours, where a linear engine takes microseconds.
EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 40 + "!"


def tool(parameters: dict) -> dict:
    return {"type": "function", "function": {"name": "t", "parameters": parameters}}


def answer_with_call(upstream, arguments: dict) -> None:
    upstream.completion("<tool_call>" + json.dumps({"name": "t", "arguments": arguments}) + "</tool_call>")


@pytest.mark.parametrize("parameters", [
    {"type": "object", "$ref": "#"},
    {"type": "object", "allOf": [{"$ref": "#"}]},
    {"type": "object", "$defs": {"x": {"$ref": "#/$defs/x"}}, "properties": {"a": {"$ref": "#/$defs/x"}}},
    {"type": "object", "$defs": {"x": {"anyOf": [{"$ref": "#/$defs/y"}]}, "y": {"not": {"$ref": "#/$defs/x"}}},
     "properties": {"a": {"$ref": "#/$defs/x"}}},
    {"type": "object", "definitions": {"x": {"$ref": "#/definitions/x"}},
     "properties": {"a": {"$ref": "#/definitions/x"}}},
])
def test_a_schema_that_refers_to_itself_without_end_is_400(proxy, upstream, parameters):
    answer_with_call(upstream, {"a": 1})
    response = proxy.post(make_body("x", [tool(parameters)]))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "tools.[0].function.parameters" and error["code"] == "invalid_tool_schema"
    assert "refers to itself" in error["message"]
    assert not upstream.received


def test_a_recursive_schema_that_descends_into_the_arguments_still_validates(proxy, upstream):
    tree = {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}}}
    answer_with_call(upstream, {"name": "a", "child": {"name": "b", "child": {"name": "c"}}})
    response = proxy.post(make_body("x", [tool(tree)]))
    assert response.status_code == 200, response.text
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["child"]["child"] == {"name": "c"}


@pytest.mark.timeout(60)  # a generous deadline, not a speed claim: with backtracking this takes hours
@pytest.mark.parametrize(("parameters", "arguments"), [
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}, {EVIL_TEXT: 1}),
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False},
     {EVIL_TEXT: 1}),
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "unevaluatedProperties": False},
     {EVIL_TEXT: 1}),
    ({"type": "object", "propertyNames": {"pattern": EVIL}}, {EVIL_TEXT: 1}),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}}, {"s": EVIL_TEXT}),
    ({"type": "object", "properties": {"s": {"type": "string", "format": "email"}}}, {"s": EVIL_TEXT}),
    ({"type": "object", "properties": {"s": {"type": "string", "format": "regex"}}}, {"s": "(" * 40}),
])
def test_client_regexes_cannot_hang_the_worker(proxy, upstream, parameters, arguments):
    answer_with_call(upstream, arguments)
    response = proxy.post(make_body("x", [tool(parameters)]))
    assert response.status_code == 200, response.text
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == arguments


@pytest.mark.parametrize(("parameters", "arguments", "problem"), [
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": "word"}, "x-a"),
    ({"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"y": 1}, "'y'"),
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, {"A1": 1}, "does not match"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^[0-9]+$"}}}, {"s": "12a"},
     "does not match"),
])
def test_safe_patterns_are_still_checked(parameters, arguments, problem):
    problems = schema.validate(arguments, parameters)
    assert any(problem in found for found in problems), problems


@pytest.mark.parametrize(("parameters", "arguments"), [
    ({"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"x-a": 1}),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^[0-9]+$"}}}, {"s": "123"}),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "é+"}}}, {"s": "café"}),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}, {"s": "a\ud83d"}),
    # Syntax a linear engine cannot run (backreferences, lookaround) is not run: never held against the model.
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": r"^(a)\1$"}}}, {"s": "ab"}),
    ({"type": "object", "patternProperties": {"^(?!x)": {"type": "integer"}}, "additionalProperties": False},
     {"y": "z"}),
])
def test_matching_or_unrunnable_patterns_pass(parameters, arguments):
    assert schema.validate(arguments, parameters) == []


def test_an_invalid_pattern_is_400(proxy, upstream):
    bad = {"type": "object", "patternProperties": {"((": {}}}
    response = proxy.post(make_body("x", [tool({"type": "object"}), tool(bad)]))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "tools.[1].function.parameters"
    assert not upstream.received


def test_a_schema_is_checked_once(proxy, upstream):
    parameters = {"type": "object", "properties": {"unique_to_this_test": {"type": "string", "pattern": "^q"}}}
    schema._cached_validator.cache_clear()
    answer_with_call(upstream, {"unique_to_this_test": "q"})
    for _ in range(3):
        assert proxy.post(make_body("x", [tool(parameters)])).status_code == 200
    assert schema._cached_validator.cache_info().misses == 1


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), -float("inf"), 2**70])
def test_schemas_orjson_cannot_write_exactly_keep_validators_of_their_own(odd):
    """The validator cache is keyed by the schema as orjson writes it, which writes NaN and infinities as null and
    refuses integers past 64 bits (such schemas come from a body `json` decoded): each keeps its own validator."""
    with_null = {"type": "object", "properties": {"a": {"enum": [None]}}}
    with_odd = {"type": "object", "properties": {"a": {"enum": [odd]}}}
    assert schema.validate({"a": None}, with_null) == []
    assert schema.validate({"a": None}, with_odd) != []
    assert schema.validate({"a": None}, with_null) == []
    assert schema.validator_for(with_odd).schema["properties"]["a"]["enum"][0] is not None
