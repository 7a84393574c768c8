"""Every bad input and every upstream failure gets an OpenAI error object with the right status."""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.conftest import free_port, make_body, make_tool, with_settings
from tests.fake_upstream import completion
from tests.sse_client import parse_stream

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def assert_error(response: requests.Response, status: int, code: str | None = None,
                 param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    return error


def raw_post(proxy, data: bytes, headers: dict | None = None) -> requests.Response:
    headers = {"Content-Type": "application/json", **(headers or {})}
    return requests.post(f"{proxy.url}/v1/chat/completions", data=data, headers=headers, timeout=10)


@pytest.mark.parametrize("data", [b"", b"{", b"[1, 2]", b"null", b"\xff\xfe{", b'"text"', b"{}garbage"])
def test_unusable_bodies_are_400(proxy, upstream, data):
    assert_error(raw_post(proxy, data), 400, "invalid_json")
    assert not upstream.received


def test_wrong_content_type_still_gets_json_answers(proxy, upstream):
    upstream.completion("ok")
    body = json.dumps(make_body()).encode()
    assert_error(raw_post(proxy, body, {"Content-Type": "text/plain"}), 415, "unsupported_media_type")
    assert raw_post(proxy, b"\xef\xbb\xbf" + body, {"Content-Type": "application/json"}).status_code == 200


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": ["hi"]}, "messages.[0]"),
    ({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "x"}]},
     "messages.[1].role"),
    ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages.[0].content"),
    ({"model": "m", "messages": [{"role": "assistant", "tool_calls": "x"}]}, "messages.[0].tool_calls"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 1000}, "n"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, "max_tokens"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
     "tools.[0]"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": ""}}]}, "tools.[0].function.name"),
])
def test_invalid_fields_name_their_param(proxy, upstream, body, param):
    error = assert_error(proxy.post(body), 400, param=param)
    assert error["type"] == "invalid_request_error"
    assert not upstream.received


def test_json_bomb_is_400(proxy, upstream):
    assert_error(raw_post(proxy, b"[" * 100_000 + b"]" * 100_000), 400, "invalid_json")
    nested: list = []
    for _ in range(100):  # deeper than the limit of 64, far below Python's recursion limit
        nested = [nested]
    deep = {"model": "m", "messages": [{"role": "user", "content": "x", "extra": nested}]}
    assert_error(proxy.post(deep), 400, "invalid_json")


def test_lone_surrogates_do_not_break_anything(proxy, upstream):
    upstream.script = lambda request, wire: wire.send_raw(
        b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
        b'"message":{"role":"assistant","content":"half \\ud83d emoji"},"finish_reason":"stop"}]}',
        headers={"Content-Type": "application/json"})
    data = b'{"model":"m","messages":[{"role":"user","content":"lone \\ud83d here"}]}'
    response = raw_post(proxy, data, {"Content-Type": "application/json"})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "half \ud83d emoji"
    assert b"\\ud83d" in upstream.received[0].body


def test_body_over_the_limit_is_413(serve, settings, upstream):
    proxy = serve(with_settings(settings, max_body_bytes=1000))
    assert_error(proxy.post(make_body("x" * 2000)), 413, "request_too_large")
    assert not upstream.received


def test_unknown_path_and_method(proxy, upstream):
    assert_error(requests.get(f"{proxy.url}/nothing", timeout=5), 404, "unknown_url")
    # Other /v1 paths are the upstream's (tests/test_forward.py): its 404 comes back as an error object.
    upstream.script = lambda request, wire: wire.send_json({"detail": "Not Found"}, status=404)
    assert_error(requests.get(f"{proxy.url}/v1/nothing", timeout=5), 404)
    assert_error(requests.get(f"{proxy.url}/v1/chat/completions", timeout=5), 405, "method_not_allowed")


@pytest.mark.parametrize("header", [None, "Bearer wrong", "bearer", "Basic c2stZ29vZA==", "Bearer sk-goo",
                                    "Bearer sk-good-extra", "Bearer  sk-good", "Bearer " + "k" * 8000,
                                    "Bearer sk-g\u00f6od"])
def test_wrong_keys_are_401(serve, settings, upstream, header):
    proxy = serve(with_settings(settings, api_keys=("sk-good", "sk-other")))
    headers = {"Authorization": header.encode("utf-8").decode("latin-1")} if header else {}
    assert_error(proxy.post(make_body(), headers=headers), 401, "invalid_api_key")
    assert not upstream.received


def test_right_keys_pass(serve, settings, upstream):
    proxy = serve(with_settings(settings, api_keys=("sk-good", "sk-other")))
    upstream.completion("ok")
    for key in ("sk-good", "sk-other"):
        assert proxy.post(make_body(), headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert requests.get(f"{proxy.url}/health", timeout=5).status_code == 200


def test_upstream_refused_is_502(serve, settings):
    proxy = serve(with_settings(settings, upstream=f"http://127.0.0.1:{free_port()}/v1"))
    for body in (make_body(), make_body("x", [READ]), make_body(stream=True), make_body("x", [READ], stream=True)):
        error = assert_error(proxy.post(body), 502, "upstream_unavailable")
        assert "127.0.0.1" not in error["message"]


def test_upstream_hang_is_504(serve, settings, upstream):
    proxy = serve(with_settings(settings, read_timeout=0.5))
    upstream.script = lambda request, wire: time.sleep(2)
    assert_error(proxy.post(make_body()), 504, "upstream_timeout")
    assert_error(proxy.post(make_body("x", [READ])), 504, "upstream_timeout")


def test_upstream_error_object_passes_through(proxy, upstream):
    vllm_error = {"object": "error", "message": "This model's maximum context length is 4096 tokens.",
                  "type": "BadRequestError", "param": None, "code": 400}
    upstream.script = lambda request, wire: wire.send_json(vllm_error, status=400)
    for body in (make_body(), make_body(stream=True), make_body("x", [READ], stream=True)):
        error = assert_error(proxy.post(body), 400, "400")
        assert error["message"] == vllm_error["message"] and error["type"] == "BadRequestError"
    assert len(upstream.received) == 3


def test_upstream_html_error_keeps_status_and_retry_after(proxy, upstream):
    upstream.script = lambda request, wire: wire.send_raw(b"<html><body>Service Unavailable</body></html>", 503,
                                                          {"Content-Type": "text/html", "Retry-After": "7"})
    response = proxy.post(make_body("x", [READ], stream=True))
    error = assert_error(response, 503, "upstream_http_503")
    assert "Service Unavailable" in error["message"]
    assert response.headers["Retry-After"] == "7"
    assert len(upstream.received) == 1


@pytest.mark.parametrize("body", [b'{"choices": []}', b"[]", b'{"id": "x"}', b'{"choices": [{"message": null}]}',
                                  b'{"choices": [{"message": {"content": 5}}]}', b'{"choices": [', b"not json"])
def test_malformed_upstream_answer_is_502(proxy, upstream, body):
    upstream.script = lambda request, wire: wire.send_raw(body, headers={"Content-Type": "application/json"})
    assert_error(proxy.post(make_body("x", [READ])), 502, "bad_upstream_response")
    assert_error(proxy.post(make_body("x", [READ], stream=True)), 502, "bad_upstream_response")


def test_event_stream_for_a_non_stream_request_is_502(proxy, upstream):
    upstream.script = lambda request, wire: wire.send_events([completion("x")])
    assert_error(proxy.post(make_body("x", [READ])), 502, "bad_upstream_response")


def test_oversized_upstream_answer_is_502(serve, settings, upstream):
    proxy = serve(with_settings(settings, max_upstream_bytes=10_000))
    upstream.completion("x" * 20_000)
    assert_error(proxy.post(make_body()), 502, "bad_upstream_response")


def test_stream_cut_mid_way_ends_with_an_error_event(proxy, upstream):
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}

    def cut(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        wire.send_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        wire.reset()

    upstream.script = cut
    response = proxy.post(make_body(stream=True))
    events, _ = parse_stream(response.content)
    assert events[0]["choices"][0]["delta"] == {"content": "par"}
    assert events[-2]["error"]["code"] in ("upstream_disconnected", "upstream_timeout")
    assert events[-1] == "[DONE]"


def test_clean_end_without_finish_is_an_error(proxy, upstream):
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}
    upstream.script = lambda request, wire: wire.send_events([chunk], done=False)
    events, _ = parse_stream(proxy.post(make_body(stream=True)).content)
    assert events[-2]["error"]["code"] == "upstream_disconnected"


def test_in_band_upstream_error_is_passed_on(proxy, upstream):
    error = {"error": {"message": "sglang: invalid grammar", "type": "BadRequestError", "code": 400}}
    upstream.script = lambda request, wire: wire.send_events([error])
    events, _ = parse_stream(proxy.post(make_body(stream=True)).content)
    assert events[0]["error"]["message"] == "sglang: invalid grammar"
    assert events[-1] == "[DONE]"


def test_utf8_split_across_network_writes_arrives_whole(proxy, upstream):
    payload = json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                          "choices": [{"index": 0, "delta": {"content": "a😀b\u2028c\u0085d"},
                                       "finish_reason": "stop"}]}, ensure_ascii=False).encode()
    event = b"data: " + payload + b"\r\n\r\ndata: [DONE]\r\n\r\n"
    emoji_at = event.index("😀".encode()) + 2

    def split(request, wire):
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        wire.send_chunk(event[:emoji_at])
        time.sleep(0.05)
        wire.send_chunk(event[emoji_at:-3])
        time.sleep(0.05)
        wire.send_chunk(event[-3:])
        wire.end_chunks()

    upstream.script = split
    events, _ = parse_stream(proxy.post(make_body(stream=True)).content)
    assert events[0]["choices"][0]["delta"]["content"] == "a😀b\u2028c\u0085d"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_an_upstream_redirect_is_502_and_not_followed(proxy, upstream, status, stream):
    """A redirect is refused, not followed: where it points may be a host the proxy must not reach, and a POST
    turned into a GET would lose the request. The message does not repeat the target."""
    upstream.script = lambda request, wire: wire.send_raw(b"", status=status, headers={
        "Location": "http://10.0.0.9:8000/v1/chat/completions"})
    response = requests.post(f"{proxy.url}/v1/chat/completions", json=make_body(stream=stream), timeout=10)
    error = assert_error(response, 502, "bad_upstream_response")
    assert "redirect" in error["message"] and "10.0.0.9" not in error["message"]
    assert len(upstream.received) == 1


def test_the_upstream_cookies_of_one_request_never_reach_the_next(proxy, upstream):
    """Upstream calls share a connection pool, not a cookie jar: a session cookie one client's request was given
    must not ride along on another client's request."""
    upstream.script = lambda request, wire: wire.send_json(completion("ok"), headers={
        "Set-Cookie": "session=alice-secret; Path=/"})
    for _ in range(2):
        assert requests.post(f"{proxy.url}/v1/chat/completions", json=make_body(), timeout=10).status_code == 200
    assert [request.headers.get("cookie") for request in upstream.received] == [None, None]
