"""The upstream client: the environment read once (proxy variables still honoured), connections kept for the next
request once a stream has finished."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
import requests

from tests.conftest import make_body, with_settings
from tests.fake_upstream import completion


def test_proxy_variables_still_route_the_upstream_request(upstream, serve, settings,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The scripted upstream plays the HTTP proxy: a request through a proxy names the whole URL in its path.
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", upstream.url.rsplit("/v1", 1)[0])
    upstream.script = lambda request, wire: wire.send_json(completion("hello"))
    proxy = serve(settings)
    client = requests.Session()
    client.trust_env = False  # the test's own request goes straight to the proxy
    for _ in range(2):  # the second request reuses what the first worked out
        response = client.post(f"{proxy.url}/v1/chat/completions", json=make_body("hi"), timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "hello"
    # Through a proxy the request line carries the absolute URL; sent directly it would be the path alone.
    assert [r.path for r in upstream.received] == [f"{settings.upstream}/chat/completions"] * 2


class KeepAliveUpstream:
    """Serves any number of requests per connection, each a chunked SSE stream ending in [DONE], and counts the
    connections it accepted."""

    EVENT = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,' \
            b'"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'

    def __init__(self) -> None:
        self.connections = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                sock, _ = self._server.accept()
                self.connections += 1
                threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):
            reader = sock.makefile("rb")
            while reader.readline():  # the request line
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                reader.read(length)
                body = self.EVENT + b"data: [DONE]\n\n"
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + b"%x\r\n%s\r\n" % (len(body), body))
                sock.sendall(b"0\r\n\r\n")  # the end of the body, after [DONE], as servers write it

    def close(self) -> None:
        self._server.close()


def test_a_finished_stream_leaves_its_upstream_connection_for_the_next(serve, settings) -> None:
    upstream = KeepAliveUpstream()
    try:
        proxy = serve(with_settings(settings, upstream=upstream.url))
        for _ in range(3):
            response = proxy.post(make_body("hi", stream=True))
            assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
        assert upstream.connections == 1
    finally:
        upstream.close()
