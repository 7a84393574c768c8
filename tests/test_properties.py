"""Properties over random input: SSE survives any split, scanners agree with one-shot parsing under any
chunking, and no character of a reply is ever lost."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import merge_text, source_of
from toolproxy.meaning.extraction import accept, scanner
from toolproxy.wire import sse

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
