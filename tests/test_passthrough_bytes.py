"""The byte path of a stream without tools (wire/stencil.py), through a real server and a scripted upstream: events
that differ only in their text go out undecoded, and still come out exactly as the full path makes them: cleaned,
renamed, recorded, and refused when malformed."""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

import pytest
import requests

from tests.conftest import make_body, with_settings
from tests.sse_client import accumulate, read_stream
from toolproxy.config.settings import ModelRule

TEXTS = ["Hello", ", wörld", ' "quoted" \\ back', " tab\there", " emoji 😀 ", " é", " \u2028 line", " </tool_call>",
         " token", " 末尾"]


def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m", "choices": [choice],
            **top}


def compact(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def text_of(events: list[Any]) -> str:
    return "".join(event["choices"][0]["delta"].get("content") or "" for event in events)


def script(upstream, events: list[str]) -> None:
    """Each event in its own network read, as vLLM sends them."""
    upstream.script = lambda request, wire: wire.send_events(events)


def wait_for_record(url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = requests.get(f"{url}/dashboard/records.json", timeout=5).json()["records"]
        if rows:
            return dict(rows[0])
        time.sleep(0.1)
    raise AssertionError("no record")


def model_text(url: str, record: dict[str, Any]) -> str:
    case = requests.get(f"{url}/dashboard/record/{record['id']}/testcase.json", timeout=5).json()
    return str(case["model_text"])


@pytest.mark.parametrize("as_json", [compact, json.dumps], ids=["compact", "spaced"])
def test_text_events_arrive_whole_and_are_recorded(upstream, proxy, as_json):
    events = [chunk({"role": "assistant", "content": ""}), *(chunk({"content": text}) for text in TEXTS),
              chunk({}, "stop")]
    script(upstream, [as_json(event) for event in events])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert got[:-1] == events and got[-1] == "[DONE]"
    record = wait_for_record(proxy.url)
    assert record["finish_reason"] == "stop" and record["first_byte_ms"] is not None
    assert model_text(proxy.url, record) == "".join(TEXTS)


def test_events_that_need_nothing_go_out_as_they_came(upstream, proxy):
    """The first text event is decoded (and re-encoded: no escapes); it teaches the stencil, so the next ones
    leave byte for byte as the upstream wrote them, escapes and all."""
    events = [json.dumps(chunk({"content": text}), separators=(",", ":")) for text in TEXTS]
    script(upstream, [*events, compact(chunk({}, "stop"))])
    response = proxy.post(make_body("hi", stream=True))
    lines = [line for line in response.content.split(b"\n\n") if line]
    assert json.loads(lines[0][6:]) == json.loads(events[0])
    assert lines[1:-2] == [f"data: {event}".encode() for event in events[1:]]
    assert lines[-1] == b"data: [DONE]"


def test_backend_only_fields_are_removed_from_every_event(upstream, proxy):
    backend = {"system_fingerprint": "fp", "service_tier": "x"}
    events = [chunk({"content": text, "reasoning_content": None}, **backend) for text in TEXTS]
    for event in events:
        event["choices"][0].update(stop_reason=None, token_ids=[1, 2])
    script(upstream, [compact(event) for event in events] + [compact(chunk({}, "stop", **backend))])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    for event in got[:-1]:
        assert not set(backend) & set(event), event
        assert set(event["choices"][0]) == {"index", "delta", "logprobs", "finish_reason"}
        assert "reasoning_content" not in event["choices"][0]["delta"]
    assert accumulate(got)["content"] == "".join(TEXTS)


@pytest.mark.parametrize("reasoning", ["move", "drop"])
def test_reasoning_is_renamed_or_dropped_on_every_event(upstream, serve, settings, reasoning):
    proxy = serve(with_settings(settings, reasoning=reasoning))
    thoughts = [chunk({"reasoning": text}) for text in TEXTS]
    script(upstream, [compact(event) for event in [*thoughts, chunk({"content": "done"}), chunk({}, "stop")]])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    deltas = [event["choices"][0]["delta"] for event in got[: len(TEXTS)]]
    if reasoning == "move":
        assert deltas == [{"reasoning_content": text} for text in TEXTS]
    else:
        assert deltas == [{}] * len(TEXTS)
    assert model_text(proxy.url, wait_for_record(proxy.url)) == "done"


def test_a_renamed_model_is_renamed_on_every_event(upstream, serve, settings):
    rules = (ModelRule("alias", {"upstream": upstream.url, "upstream_model": "Real/Name"}),)
    proxy = serve(with_settings(settings, upstream=None, models=rules))
    events = [chunk({"content": text}, model="Real/Name") for text in TEXTS]
    script(upstream, [compact(event) for event in [*events, chunk({}, "stop", model="Real/Name")]])
    got = read_stream(proxy.post({**make_body("hi", stream=True), "model": "alias"}))
    assert [event["model"] for event in got[:-1]] == ["alias"] * (len(TEXTS) + 1)
    assert accumulate(got)["content"] == "".join(TEXTS)


BAD_TEXTS = {
    "raw control character": '"a\x01b"',
    "unknown escape": '"a\\qb"',
    "short unicode escape": '"a\\u12"',
    "not a string": "5",
    "unterminated": '"abc',
    "two strings": '"a" "b"',
}


@pytest.mark.parametrize("literal", BAD_TEXTS.values(), ids=BAD_TEXTS.keys())
def test_a_malformed_event_after_good_ones_is_still_refused(upstream, proxy, literal):
    good = [compact(chunk({"content": text})) for text in TEXTS[:4]]
    bad = compact(chunk({"content": "X"})).replace('"X"', literal)
    script(upstream, [*good, bad, compact(chunk({}, "stop"))])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert text_of(got[:4]) == "".join(TEXTS[:4])
    assert got[-2]["error"]["code"] == "bad_upstream_response" and got[-1] == "[DONE]"
    assert len(got) == 6


def test_an_in_band_error_after_good_events_is_passed_on(upstream, proxy):
    good = [compact(chunk({"content": text})) for text in TEXTS[:3]]
    error = compact({"error": {"message": "out of memory", "type": "server_error", "code": 500}})
    script(upstream, [*good, error])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert text_of(got[:3]) == "".join(TEXTS[:3])
    assert "out of memory" in got[-2]["error"]["message"] and got[-1] == "[DONE]"


def test_text_that_is_not_utf8_is_replaced_as_before(upstream, proxy):
    good = compact(chunk({"content": "ok"})).encode()
    broken = good.replace(b'"ok"', b'"\xff\xfe"')

    def answer(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        for data in [good, broken, compact(chunk({}, "stop")).encode(), b"[DONE]"]:
            wire.send_chunk(b"data: " + data + b"\n\n")
        wire.end_chunks()

    upstream.script = answer
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert accumulate(got)["content"] == "ok\ufffd\ufffd"


def test_a_stream_cut_after_text_events_ends_with_an_error(upstream, proxy):
    upstream.script = lambda request, wire: wire.send_events([compact(chunk({"content": t})) for t in TEXTS],
                                                             done=False)
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert text_of(got[:-2]) == "".join(TEXTS)
    assert got[-2]["error"]["code"] == "upstream_disconnected" and got[-1] == "[DONE]"


def test_a_compressed_stream_is_decompressed_as_before(upstream, proxy):
    events = [compact(chunk({"content": text})) for text in TEXTS] + [compact(chunk({}, "stop"))]

    def answer(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"})
        packer = zlib.compressobj(wbits=31)  # gzip framing
        for data in [*events, "[DONE]"]:
            wire.send_chunk(packer.compress(f"data: {data}\n\n".encode()) + packer.flush(zlib.Z_SYNC_FLUSH))
        wire.send_chunk(packer.flush())
        wire.end_chunks()

    upstream.script = answer
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert got[:-1] == [json.loads(event) for event in events] and got[-1] == "[DONE]"


def test_a_chunk_cut_short_ends_with_an_error(upstream, proxy):
    def answer(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        for text in TEXTS[:3]:
            wire.send_chunk(f"data: {compact(chunk({'content': text}))}\n\n".encode())
        wire.sock.sendall(b"400\r\ndata: {")  # promises 1 KiB, then the connection ends
        wire.sock.close()

    upstream.script = answer
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert text_of(got[:3]) == "".join(TEXTS[:3])
    assert got[-2]["error"]["code"] == "upstream_disconnected" and got[-1] == "[DONE]"


def test_the_record_keeps_the_text_up_to_its_field_limit_as_before(upstream, serve, settings):
    proxy = serve(with_settings(settings, log_field_chars=50))
    pieces = [f"piece{n:02d}" for n in range(30)]  # 7 characters each: the 8th passes the limit
    script(upstream, [compact(chunk({"content": piece})) for piece in pieces] + [compact(chunk({}, "stop"))])
    got = read_stream(proxy.post(make_body("hi", stream=True)))
    assert text_of(got[:-1]) == "".join(pieces)
    text = model_text(proxy.url, wait_for_record(proxy.url))
    assert text == "".join(pieces[:8])[:50] + "\n[… 6 more characters cut]"
