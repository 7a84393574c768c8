"""The shortcuts a whole reply takes must change nothing. It is scanned only by the dialects whose markers it holds
(chain.scan_whole): the segments must be exactly those of the full chain, for every dialect alone and for the
automatic order, on every golden case and real-world reply, and on random text made of markers and their pieces.
A JSON value that is all there is decoded where it starts (JsonSpan): it must end where bracket tracking ends it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import Dialect, Segment, ToolIndex, merge_text
from toolproxy.dialects.chain import ChainScanner, scan_whole
from toolproxy.dialects.json_span import JsonSpan, is_decoded
from toolproxy.dialects.markers import markers_in
from toolproxy.dialects.registry import AUTO_ORDER, DIALECTS
from toolproxy.dialects.token_block import TokenBlockScanner

GOLDEN = Path(__file__).parent.parent / "golden"
# The dialects' golden cases and the real-world corpus; never a held-out set (tests/golden/heldout*), which must
# stay unseen by everything that is tuned.
CASES = sorted(path for path in GOLDEN.glob("*/*.json")
               if path.parent.name in DIALECTS or path.parent.name == "realworld")
TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}}},
         "bash": {"type": "object", "properties": {"command": {"type": "string"}}}}


def load(path: Path) -> tuple[str, dict[str, Any]]:
    expected = json.loads(path.read_text(encoding="utf-8"))
    tools = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in expected["tools"]}
    return path.with_suffix(".txt").read_text(encoding="utf-8"), tools


def full_chain(dialects: list[Dialect], text: str, tools: ToolIndex) -> list[Segment]:
    chain = ChainScanner(dialects, tools)
    return merge_text(chain.feed(text) + chain.finish())


def chains() -> list[list[Dialect]]:
    return [[DIALECTS[name] for name in AUTO_ORDER], *([dialect] for dialect in DIALECTS.values())]


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_pruned_chain_finds_what_the_full_chain_finds(path):
    text, tools = load(path)
    for dialects in chains():
        assert scan_whole(dialects, text, tools) == full_chain(dialects, text, tools), [d.name for d in dialects]


MARKERS = sorted({marker for dialect in DIALECTS.values() for marker in dialect.markers(TOOLS) or ()})
# Markers, their beginnings and ends (a marker cut in two must not count), and what surrounds calls.
PIECES = [*MARKERS, *(marker[: len(marker) // 2] for marker in MARKERS), *(marker[1:] for marker in MARKERS),
          '{"name": "read", "arguments": {"path": "a"}}', "read(path='a')", "\n", " ", "<", ">", "[", "]", "}",
          "x", "é", "to=functions.read json", "call:bash{command:ls}", "</tool_call>", "<|call|>"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_pruned_chain_on_marker_soup(text):
    for dialects in chains():
        assert scan_whole(dialects, text, TOOLS) == full_chain(dialects, text, TOOLS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*PIECES, "<", "<", "<", "f", "t", "<|", "[", ">"]), max_size=80).map("".join))
def test_markers_in_is_the_plain_search(text):
    """Also past the bounded walk over a group's first character (many `<` before the marker)."""
    assert markers_in(text, MARKERS) == {marker for marker in MARKERS if marker in text}


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(min_value=0, max_value=2000))
def test_markers_in_long_text_after_a_flood_of_first_characters(text, flood):
    """Past the length where each marker is searched in turn, and past the walk over `<`, `t`, `f`, `[`."""
    text = "<tf[" * flood + text + "x" * 600
    assert markers_in(text, MARKERS) == {marker for marker in MARKERS if marker in text}


TOKEN_FAMILY = sorted(name for name in DIALECTS if isinstance(DIALECTS[name].scanner(TOOLS), TokenBlockScanner))


@pytest.mark.parametrize("name", TOKEN_FAMILY)
def test_token_block_markers_are_the_openers(name):
    """For the special-token family the scanner's openers are where calls begin: the markers are exactly they,
    save harmony's stripped headers, which all hold `to=functions.`, Inkling's `<|message_model|>`, whose
    calls all hold their content marker (a call needs one), and pythonic's bare calls, which begin with a tool's
    name (its scanner looks for them itself, at the answer's start)."""
    scanner = DIALECTS[name].scanner(TOOLS)
    assert isinstance(scanner, TokenBlockScanner)
    openers = set(scanner._openers) - {"<|message_model|>"}
    markers = set(DIALECTS[name].markers(TOOLS) or ())
    assert all(any(marker in opener for marker in markers) for opener in openers)
    assert markers <= openers | {"to=functions."} | (set(TOOLS) if name == "pythonic" else set())


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                      max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values, max_size=4) | st.dictionaries(st.text(max_size=4), json_values, max_size=4),
       st.sampled_from(["", " ", "</tool_call>", "}", "]", '"', "{"]))
def test_json_span_decoding_ends_where_the_tracker_ends(value, after):
    """A value decoded in one piece (the one-shot path) ends where bracket tracking ends it (the streamed path),
    and the decoded value is json's own."""
    text = json.dumps(value) + after
    whole = JsonSpan()
    assert whole.feed(text) == len(json.dumps(value)) and whole.value == value
    tracked = JsonSpan()
    assert tracked.feed(text[:1]) is None and not is_decoded(tracked.value)
    end = tracked.feed(text[1:])
    assert end is not None and end + 1 == len(json.dumps(value))
