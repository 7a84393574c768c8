"""Repair of broken tool-call arguments: real-world damage mended, everything ambiguous refused, valid JSON left
alone, and linear time on hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.meaning.json_repair import MAX_DEPTH, RepairResult, repair_arguments

REPAIRED = [
    # vLLM dropping the final brace (vllm-project/vllm#32152, #22885).
    ('{"command": "ls -la", "path": "/tmp"', {"command": "ls -la", "path": "/tmp"}, ("missing closing brace",)),
    ('{"a": {"b": [1, 2]', {"a": {"b": [1, 2]}}, ("missing closing brace",)),
    ('{"a": [', {"a": []}, ("missing closing brace",)),
    ("{", {}, ("missing closing brace",)),
    ('{"a": "x"}  \n', {"a": "x"}, ()),
    ('{"a": 1,}', {"a": 1}, ("trailing comma",)),
    ('{"a": [1, 2,\n ],\n}', {"a": [1, 2]}, ("trailing comma",)),
    ('{"a": {"b": 1,},}', {"a": {"b": 1}}, ("trailing comma",)),
    ("{'path': 'a.py'}", {"path": "a.py"}, ("single quotes",)),
    ("{'a': \"it's\", 'b': 'x'}", {"a": "it's", "b": "x"}, ("single quotes",)),
    ('{"note": "don\'t", "n": [1,]}', {"note": "don't", "n": [1]}, ("trailing comma",)),
    ("{'msg': 'say \\'hi\\''}", {"msg": "say 'hi'"}, ("single quotes",)),
    ("{'msg': 'a \"quoted\" word'}", {"msg": 'a "quoted" word'}, ("single quotes",)),
    ("{'msg': 'a \\\"b\\\" c'}", {"msg": 'a "b" c'}, ("single quotes",)),
    ("{'path': 'C:\\\\dir\\\\'}", {"path": "C:\\dir\\"}, ("single quotes",)),
    ("{'line': 'a\\nb'}", {"line": "a\nb"}, ("single quotes",)),
    ('{"a": True, "b": None, "c": [False]}', {"a": True, "b": None, "c": [False]}, ("python literals",)),
    ('{"a": "True or None"}', {"a": "True or None"}, ()),
    ('"{\\"a\\": 1}"', {"a": 1}, ("double encoded",)),
    ('{path: "a.py", max_lines: 5, _x1: null}', {"path": "a.py", "max_lines": 5, "_x1": None}, ("unquoted keys",)),
    (
        "{'a': True, 'b': [1, 2,]",
        {"a": True, "b": [1, 2]},
        ("single quotes", "python literals", "trailing comma", "missing closing brace"),
    ),
    ('{"a": "{\'b\': True,}"}', {"a": "{'b': True,}"}, ()),
    # A Windows path as Qwen3-Coder writes it (SHIELD2.0's capture): `\U` escapes nothing, so every backslash is
    # the path's own, `\t` included; a string that escapes one (`\\`) is left to json.loads.
    (r'{"path":"C:\Users\imend\Desktop\test.txt"}', {"path": r"C:\Users\imend\Desktop\test.txt"},
     ("raw backslashes",)),
    (r'{"pattern": "\d+\.\d+", "q": "say \"hi\""}', {"pattern": r"\d+\.\d+", "q": 'say "hi"'},
     ("raw backslashes",)),
]

REFUSED = [
    r'{"path": "C:\\dir\Users"}',  # one backslash escaped, one not: which did the writer mean?
    '{"a": "unterminated',  # cut inside a string: where it ended is a guess
    '{"a": "x\\"',  # the last quote is escaped, so the string is still open
    '{"a": }',
    '{"a": 1}}',
    '{"a" 1}',
    "not json",
    "[1, 2]",
    "[1, 2",
    '{"a": 1} {"b": 2}',
    '{"a": 1}{"b": 2}',
    "",
    "   ",
    "42",
    '"just text"',
    '"[1, 2]"',
    '"{\\"a\\": 1"',  # double encoded and truncated inside: no repair behind the second layer
    '{"a": 1,',  # dangling comma at the end
    '{"a":',  # dangling colon
    '{"a"',  # dangling key
    '{"a": 1]',
    '{"a": [1}',
    "{,}",
    '{"a": [,]}',
    '{"a": [1,,2]}',
    '{"a": tru',
    '{"a": 1 // note\n}',
    '{"a": 1} /* note */',
    '{"a": 1} # note',
    "{'a': 'it's'}",
    '{"a": NaN}',
    '{"a": -Infinity}',
    '{"a": 1e999}',
    "{'a': '\\x41'}",
    "{True: 1}",
    "{null: 1}",
    "{1: 'a'}",
    "{a-b: 1}",
    "{naïve: 1}",
    'Here are the arguments: {"a": 1}',
    '```json\n{"a": 1}\n```',
    '{"a": 1}\u00a0',
    "{'a': 1}'",
]


@pytest.mark.parametrize(("text", "value", "fixes"), REPAIRED)
def test_repairs(text, value, fixes):
    assert repair_arguments(text) == RepairResult(value, fixes)


@pytest.mark.parametrize("text", REFUSED)
def test_refusals(text):
    assert repair_arguments(text) == RepairResult(None, ())


def nested(depth):
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_depth_limit_applies_to_valid_and_repaired_text():
    assert repair_arguments(nested(MAX_DEPTH)).value is not None
    assert repair_arguments(nested(MAX_DEPTH + 1)).value is None
    truncated = '{"a":' * (MAX_DEPTH - 1) + "{"
    assert repair_arguments(truncated).fixes == ("missing closing brace",)
    assert repair_arguments('{"a":' + truncated).value is None
    assert repair_arguments("[" * 100_000).value is None


@pytest.mark.parametrize(
    "text",
    [
        '{"a":[' * 175_000,
        "'" * 1_000_000,
        '{"a": "' + "x" * 1_000_000,
        '{"a": "' + "x" * 1_000_000 + '",}',
        '{"a": "' + "\\n" * 500_000 + '",}',
        "{'a': '" + "\\'" * 500_000 + "'}",
        "{'a': '" + "\\" * 1_000_000,
        '{"a": "' + '\\"' * 500_000,
    ],
)
def test_megabyte_of_hostile_input_is_handled(text):
    """Its time is measured in bench/hostile.py (a test must not assert wall-clock time); pytest-timeout still
    catches a runaway."""
    assert isinstance(repair_arguments(text), RepairResult)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=5)


@settings(max_examples=200, deadline=None)
@given(json_objects, st.booleans(), st.sampled_from([None, 0, 2]))
def test_valid_objects_come_back_unchanged(obj, ensure_ascii, indent):
    assert repair_arguments(json.dumps(obj, ensure_ascii=ensure_ascii, indent=indent)) == RepairResult(obj, ())


@settings(max_examples=200, deadline=None)
@given(json_objects, st.data())
def test_any_number_of_final_closers_can_be_missing(obj, data):
    text = json.dumps(obj)
    removable = len(text) - len(text.rstrip("}]"))
    removed = data.draw(st.integers(min_value=0, max_value=removable))
    expected_fixes = ("missing closing brace",) if removed else ()
    assert repair_arguments(text[: len(text) - removed]) == RepairResult(obj, expected_fixes)


@settings(max_examples=200, deadline=None)
@given(json_objects.filter(bool))
def test_trailing_comma_before_the_last_brace(obj):
    text = json.dumps(obj)
    assert repair_arguments(text[:-1] + ",}") == RepairResult(obj, ("trailing comma",))


@settings(max_examples=200, deadline=None)
@given(json_objects.filter(bool))
def test_double_encoded_objects_are_unwrapped(obj):
    assert repair_arguments(json.dumps(json.dumps(obj))) == RepairResult(obj, ("double encoded",))


# Python's repr of a dict: single quotes, \' and \\ escapes, True/False/None. Printable ASCII keeps repr from
# writing \x escapes, which JSON has no reading for.
printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))
python_values = st.recursive(
    st.none() | st.booleans() | st.integers() | printable,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(printable, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(printable, python_values, max_size=5))
def test_python_repr_reads_back_exactly(obj):
    result = repair_arguments(repr(obj))
    assert result.value == obj
    assert set(result.fixes) <= {"single quotes", "python literals"}


JSONISH = st.text(st.sampled_from(list("{}[]:,\"' \\\nabTrueNone1-.e/")), max_size=60)


@settings(max_examples=500, deadline=None)
@given(st.text() | JSONISH)
def test_never_raises_and_any_value_is_plain_json(text):
    result = repair_arguments(text)
    assert isinstance(result, RepairResult)
    if result.value is None:
        assert result.fixes == ()
    else:
        assert json.loads(json.dumps(result.value, allow_nan=False)) == result.value
