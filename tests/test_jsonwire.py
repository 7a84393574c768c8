"""The wire JSON limits, exactly at and around them: nesting depth (one level more is refused, whatever is
nested) and the count of containers, with the same messages as ever. Through the HTTP server in
test_limits.py and test_errors.py; here the pure function, over random JSON too."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.wire import jsonwire

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=40)


def reference_depth(value: Any) -> int:
    """The nesting depth as the old walk counted it: the outermost container is level 1, a scalar 0."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(child) for child in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(child) for child in value), default=0)
    return 0


@settings(max_examples=500, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=8))
def test_depth_check_agrees_with_a_plain_walk(value, max_depth):
    assert jsonwire.depth_exceeds(value, max_depth) == (reference_depth(value) > max_depth)
    data = json.dumps(value).encode()
    if reference_depth(value) > max_depth:
        with pytest.raises(jsonwire.JsonWireError, match=rf"^JSON nested deeper than {max_depth} levels$"):
            jsonwire.loads(data, max_depth)
    else:
        assert jsonwire.loads(data, max_depth) == value


def nest(depth: int, innermost: Any, kinds: str) -> Any:
    value = innermost
    for level in range(depth):
        value = [value] if kinds[level % len(kinds)] == "l" else {"k": value, "s": "[[{{"}
    return value


@pytest.mark.parametrize("kinds", ["l", "d", "ld"])
@pytest.mark.parametrize("innermost", [1, "x", None, [], {}])
def test_the_depth_limit_is_exact(kinds, innermost):
    extra = 1 if isinstance(innermost, (list, dict)) else 0
    at_limit = nest(64 - extra, innermost, kinds)
    assert jsonwire.loads(json.dumps(at_limit).encode(), 64) == at_limit
    over = json.dumps(nest(65 - extra, innermost, kinds)).encode()
    with pytest.raises(jsonwire.JsonWireError, match=r"^JSON nested deeper than 64 levels$"):
        jsonwire.loads(over, 64)


def test_depth_is_checked_on_the_slow_path_too():
    """NaN goes through `json` (orjson refuses it): the same limit applies."""
    at_limit = b"[" * 10 + b"NaN" + b"]" * 10
    assert jsonwire.loads(at_limit, 10) is not None
    with pytest.raises(jsonwire.JsonWireError, match=r"^JSON nested deeper than 10 levels$"):
        jsonwire.loads(b"[" * 11 + b"NaN" + b"]" * 11, 10)


def test_wide_and_deep_values():
    wide = {"messages": [{"content": "x" * 10, "calls": [{"f": {"a": [1, 2, {"b": None}]}}]} for _ in range(2000)]}
    assert not jsonwire.depth_exceeds(wide, 8)
    assert jsonwire.depth_exceeds(wide, 7)
    assert not jsonwire.depth_exceeds("scalar", 0)
    assert jsonwire.depth_exceeds([], 0)


def test_the_container_limit_is_exact_and_ignores_strings():
    at_limit = b"[" + b",".join([b"[]"] * 99) + b',"[[{{"]'
    assert len(jsonwire.loads(at_limit, 64, max_containers=100)) == 100
    over = b"[" + b",".join([b"{}"] * 100) + b"]"
    with pytest.raises(jsonwire.JsonWireError, match=r"^JSON with more than 100 arrays and objects$"):
        jsonwire.loads(over, 64, max_containers=100)


# A JSON string without backtracking (possessive runs): how the count was made before it was made a slice at a
# time (jsonwire._outside_strings), kept as the reference it is held to.
STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


@pytest.mark.parametrize("limit", [1, 5, 50])
def test_the_container_count_is_exact_for_any_bytes(limit):
    """The quick bounds (the length, all brackets) never decide otherwise than counting those outside strings."""
    for data in [b"[]" * limit, b"[]" * (limit + 1), b"{" * limit, b"{" * (limit + 1), b'"[[[[' + b"[" * limit,
                 b'["\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["' + b",[]" * limit + b"]", b"x" * limit]:
        skeleton = STRING.sub(b"", data)
        expected = skeleton.count(b"[") + skeleton.count(b"{") > limit
        assert jsonwire.has_too_many_containers(data, limit) == expected, data


def outside_by_reference(data: bytes, marks: bytes) -> int:
    skeleton = STRING.sub(b"", data)
    return sum(skeleton.count(bytes([mark])) for mark in marks)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='ab,:[{"\\ \n'),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                                         max_size=4), max_leaves=30)


@given(JSON_VALUES, st.integers(min_value=1, max_value=40))
def test_marks_outside_strings_are_counted_as_the_reference_counts_them_in_any_slices(value, slice_bytes):
    """The count a slice at a time, whatever the slices (a cut may fall inside an escape), equals the count of a
    regular expression over the whole, for any JSON; and a pause comes between slices."""
    data = json.dumps(value).encode()
    pauses: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonwire, "SLICE_BYTES", slice_bytes)
        for marks in (b",:[{", b"[{"):
            counted = jsonwire._outside_strings(data, marks, lambda: pauses.append(1))
            assert counted == outside_by_reference(data, marks), data
    assert pauses or len(data) <= slice_bytes + 1


def test_the_value_limit_refuses_many_small_values_but_not_prose_full_of_commas():
    many = json.dumps(["a"] * 1001).encode()
    with pytest.raises(jsonwire.JsonWireError, match=r"^JSON with more than 250000 values$"):
        jsonwire.loads(json.dumps(["a"] * 250_001).encode(), 64)
    assert jsonwire.has_too_many_values(many, 1000) and not jsonwire.has_too_many_values(many, 1002)
    prose = json.dumps({"messages": [{"role": "user", "content": "a, b: c, " * 40_000}]}).encode()
    assert not jsonwire.has_too_many_values(prose, 100) and jsonwire.loads(prose, 64)["messages"]


@pytest.mark.parametrize("number", [2**64, 2**64 - 1, -(2**63) - 1, -(2**63), 10**40, -(10**25)])
def test_integers_past_64_bits_stay_exact(number):
    """orjson would read these as floats (2**64 as 1.8446744073709552e19): a body and an event keep them whole."""
    data = b'{"seed": %d, "messages": [{"n": [%d]}]}' % (number, number)
    for value in (jsonwire.loads(data, 64), jsonwire.loads_fast(data), jsonwire.loads_fast(data.decode())):
        assert value == {"seed": number, "messages": [{"n": [number]}]} and type(value["seed"]) is int
    assert jsonwire.dumps(jsonwire.loads(data, 64)) == data.replace(b" ", b"")


def test_an_argument_past_64_bits_reaches_the_client_whole(proxy, upstream):
    upstream.completion('<tool_call>{"name": "pick", "arguments": {"id": 123456789012345678901234567890}}</tool_call>')
    tool = {"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"id": {"type": "integer"}}}}}
    response = requests.post(f"{proxy.url}/v1/chat/completions", timeout=10, json={
        "model": "m", "messages": [{"role": "user", "content": "pick"}], "tools": [tool]})
    arguments = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"id":123456789012345678901234567890}'
