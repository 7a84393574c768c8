"""Where the proxy connects comes from its configuration only (reliability #21, #33): request fields that name a
URL, model names that look like one, forwarding headers and `$ref`s in a tool schema never make it connect
anywhere else, nor read a file. A sentinel listener on another loopback port counts every connection."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.conftest import make_body


class Sentinel:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.hits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def sentinel():
    listener = Sentinel()
    yield listener
    listener.close()


def variants(url: str) -> list[tuple[dict, dict]]:
    """(body fields, headers) that try to steer the proxy."""
    return [({"base_url": f"{url}/v1"}, {}), ({"api_base": f"{url}/v1"}, {}),
            ({"extra_body": {"base_url": f"{url}/v1", "upstream_url": url}}, {}),
            ({"model": f"{url}/v1/model"}, {}), ({"model": url.removeprefix("http://") + "/library/qwen"}, {}),
            ({}, {"X-Forwarded-Host": url.removeprefix("http://"), "Forwarded": f"host={url}"}),
            ({"tools": [{"type": "function", "function": {"name": "t", "parameters": {
                "type": "object", "properties": {"a": {"$ref": f"{url}/schema.json"},
                                                 "b": {"$ref": "file:///etc/passwd"}}}}}]}, {})]


@pytest.mark.parametrize("stream", [False, True])
def test_nothing_in_a_request_changes_where_the_proxy_connects(proxy, upstream, sentinel, stream):
    upstream.completion('<tool_call>{"name": "t", "arguments": {"a": 1, "b": 2}}</tool_call>')
    for fields, headers in variants(sentinel.url):
        response = proxy.post({**make_body("x", stream=stream), **fields}, headers=headers)
        assert response.status_code == 200, (fields, response.text)
        assert "root:" not in response.text  # /etc/passwd never read into an answer or an error
    assert sentinel.hits == 0
    assert len(upstream.received) == len(variants(sentinel.url))
    for received in upstream.received:
        assert received.path == "/v1/chat/completions"
    schema_issues = json.dumps([request.json().get("tools") for request in upstream.received])
    assert sentinel.url in schema_issues  # the schema went upstream as sent: opaque, not dereferenced
