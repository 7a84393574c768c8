"""Properties over random input: SSE survives any split, scanners agree with one-shot parsing under any
chunking, and no character of a reply is ever lost."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import merge_text, source_of
from toolproxy.meaning.extraction import accept, scanner
from toolproxy.wire import jsonwire, sse

TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}},
         "bash": {"type": "object", "properties": {"command": {"type": "string"}}}}
PIECES = ["<tools>", "</tools>", "<read>", "</read>", "<path>", "</path>", "<bash>", "<command>", "</command>",
          "</bash>", '{"name": "read", "arguments": {"path": "a"}}', '{"name": "bash"', "}", "{", "[", "]",
          '"', "\\", "\n", " ", "<", ">", "x", "é", "😀", '{"tool_calls": [', "<to", "</re"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def split(data, points):
    cuts = sorted({point % (len(data) + 1) for point in points})
    return [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(texts, st.lists(st.integers(min_value=0), max_size=12))
def test_any_chunking_matches_one_shot_and_loses_nothing(text, points):
    one_shot = scanner(TOOLS)
    whole = merge_text(one_shot.feed(text) + one_shot.finish())
    chunked_scanner = scanner(TOOLS)
    chunked = [segment for piece in split(text, points) for segment in chunked_scanner.feed(piece)]
    chunked += chunked_scanner.finish()
    assert merge_text(chunked) == whole
    assert source_of(whole) == text
    accepted = accept(whole, TOOLS)
    assert source_of(accepted.segments) == text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["content", "role", "x"]),
                                st.text(alphabet=st.characters(codec="utf-8")), max_size=3), min_size=1,
                max_size=5),
       st.lists(st.integers(min_value=0), max_size=10), st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_sse_survives_any_split(payloads, points, newline):
    raw = b"".join(sse.encode_event(payload) for payload in payloads) + sse.encode_comment("hb") + sse.DONE
    raw = raw.replace(b"\n", newline)
    decoder = sse.EventDecoder(1 << 20)
    events = [event for piece in split(raw, points) for event in decoder.feed(piece)] + decoder.finish()
    assert [event.data for event in events] == [*map(lambda p: json.dumps(p, ensure_ascii=False,
                                                                          separators=(",", ":")), payloads),
                                                "[DONE]"]


def test_sse_event_limit():
    decoder = sse.EventDecoder(100)
    try:
        decoder.feed(b"data: " + b"x" * 200)
    except sse.EventTooLarge:
        return
    raise AssertionError("an endless event must be refused")


_ANY_TEXT = st.text(st.characters(exclude_categories=()))  # lone surrogates included
_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.integers(min_value=-2**70, max_value=2**70) \
    | st.floats(allow_nan=True, allow_infinity=True) | _ANY_TEXT | st.sampled_from([1e-05, 1e16, 1e22, -0.0, 2**64])
_JSON_VALUES = st.recursive(_JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(_ANY_TEXT | st.integers(), inner, max_size=4), max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(_JSON_VALUES)
def test_arguments_text_is_the_stdlib_json(value):
    """Call arguments are written by orjson where it writes what `json` writes: any value, floats, integers past
    64 bits, lone surrogates and non-string keys included, gives json's own text."""
    assert jsonwire.dumps_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
