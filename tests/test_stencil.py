"""The stencil of a passthrough stream: whatever read it takes, it gives what the full path (decode, check, clean,
rename, encode) gives; what it cannot vouch for it leaves to the full path."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_cleaning import CHUNKS
from toolproxy.errors import UpstreamBadResponse
from toolproxy.upstream.events import decode_chunk
from toolproxy.wire import stencil

CONVERTS = {f"{reasoning}, {'renamed' if rename else 'same name'}": stencil.clean(reasoning, rename)
            for reasoning in ("move", "keep", "drop") for rename in (None, "alias")}


def with_text(chunk: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    changed = copy.deepcopy(chunk)
    changed["choices"][0]["delta"][key] = text
    return changed


def read_of(chunk: dict[str, Any], ascii_only: bool = False) -> bytes:
    return b"data: " + json.dumps(chunk, ensure_ascii=ascii_only, separators=(",", ":")).encode() + b"\n\n"


def full_path(read: bytes, convert: Any) -> Any:
    """What the client gets without the stencil: the decoded, checked, converted event; None when refused."""
    try:
        return convert(decode_chunk(read[6:-2].decode("utf-8", errors="replace")))
    except UpstreamBadResponse:
        return None


TEACHABLE = [(chunk, key) for chunk in CHUNKS for key in ("content", "reasoning", "reasoning_content")
             if isinstance(chunk.get("choices"), list) and chunk["choices"] and isinstance(chunk["choices"][0], dict)
             and isinstance(chunk["choices"][0].get("delta"), dict)]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TEACHABLE), st.sampled_from(sorted(CONVERTS)), st.text(), st.booleans())
def test_any_text_in_a_learnt_stencil_comes_out_as_the_full_path_makes_it(teach, convert_name, text, ascii_only):
    chunk, key = teach
    convert = CONVERTS[convert_name]
    taught = with_text(chunk, key, "teach")
    data = read_of(taught)[6:-2]
    learnt = stencil.learn(data, json.loads(data), convert)
    if learnt is None:
        return
    read = read_of(with_text(chunk, key, text), ascii_only)
    filled = learnt.fill(read)
    if filled is None:
        return
    out, piece = filled
    assert json.loads(out[6:-2]) == full_path(read, convert)
    assert (json.loads(piece) if piece is not None else None) == (text if key == "content" else None)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12), st.sampled_from(sorted(CONVERTS)))
def test_a_read_of_any_bytes_is_either_left_alone_or_the_same_as_the_full_path(middle, convert_name):
    convert = CONVERTS[convert_name]
    taught = CHUNKS[0]
    data = read_of(taught)[6:-2]
    learnt = stencil.learn(data, json.loads(data), convert)
    assert learnt is not None
    read = read_of(taught).replace(b'"token "', b'"' + middle + b'"')
    filled = learnt.fill(read)
    if filled is not None:
        assert json.loads(filled[0][6:-2]) == full_path(read, convert)


@pytest.mark.parametrize("chunk", [
    {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]},
    {"choices": [{"index": 0, "delta": {"content": "a", "tool_calls": [{"index": 0}]}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {"content": "b"}}]},
    {"choices": [{"index": 0, "delta": {"content": ""}}]},
    {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
], ids=["finish", "calls", "two choices", "empty text", "no text"])
def test_events_that_carry_more_than_text_teach_nothing(chunk):
    data = json.dumps(chunk).encode()
    assert stencil.learn(data, json.loads(data), CONVERTS["move, same name"]) is None


def test_a_stencil_forwards_the_read_itself_when_nothing_changes():
    data = read_of(CHUNKS[0])[6:-2]
    learnt = stencil.learn(data, json.loads(data), CONVERTS["move, same name"])
    assert learnt is not None
    read = read_of(with_text(CHUNKS[0], "content", "é \u2028"), ascii_only=True)
    filled = learnt.fill(read)
    assert filled is not None and filled[0] is read and json.loads(filled[1]) == "é \u2028"


def test_only_a_lone_data_line_is_taken_without_the_line_decoder():
    assert stencil.lone_data(b"data: {}\n\n") == b"{}"
    for read in [b"data: {}\n", b"data:{}\n\n", b"data: {}\r\n\r\n", b"data: {}\n\ndata: {}\n\n", b"event: x\n\n",
                 b"data: a\ndata: b\n\n"]:
        assert stencil.lone_data(read) is None, read
