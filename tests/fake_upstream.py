"""A scripted OpenAI-compatible upstream on 127.0.0.1, built on plain sockets so a test controls every byte:
chunk splits, drips, hangs, resets, and whether the proxy closed the connection.

A test sets `upstream.script`, a function that receives the parsed request and a `Wire` to answer on.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else {}


class Wire:
    """The socket of one upstream exchange, with helpers to answer as an HTTP/1.1 server would."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed_by_peer = threading.Event()

    def send_head(self, status: int = 200, headers: dict[str, str] | None = None, chunked: bool = True) -> None:
        lines = [f"HTTP/1.1 {status} X"]
        all_headers = {"Connection": "close", **(headers or {})}
        if chunked:
            all_headers["Transfer-Encoding"] = "chunked"
        lines += [f"{key}: {value}" for key, value in all_headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send_chunk(self, data: bytes) -> None:
        if data:
            self.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self) -> None:
        self.sock.sendall(b"0\r\n\r\n")

    def send_json(self, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_raw(body, status, {"Content-Type": "application/json", **(headers or {})})

    def send_raw(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_head(status, {"Content-Length": str(len(body)), **(headers or {})}, chunked=False)
        self.sock.sendall(body)

    def send_events(self, events: list[Any], delay: float = 0.0, done: bool = True) -> None:
        """An SSE response: each event a JSON object (or a raw string), one network write each."""
        self.send_head(200, {"Content-Type": "text/event-stream"})
        for event in events:
            data = event if isinstance(event, str) else json.dumps(event)
            self.send_chunk(f"data: {data}\n\n".encode())
            if delay:
                time.sleep(delay)
        if done:
            self.send_chunk(b"data: [DONE]\n\n")
        self.end_chunks()

    def wait_for_close(self, timeout: float) -> bool:
        """True when the proxy closed its end within `timeout` seconds."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(1024):
                pass
            return True
        except (TimeoutError, OSError):
            return False

    def reset(self) -> None:
        """Close with RST instead of FIN."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


Script = Callable[[Received, Wire], None]
PROBE_AGENT_SUFFIX = "(start-up check)"


@dataclass
class FakeUpstream:
    port: int = 0
    script: Script | None = None
    received: list[Received] = field(default_factory=list)
    probes: list[Received] = field(default_factory=list)  # toolproxy's start-up checks, kept out of `received`
    proxy_closed: list[bool] = field(default_factory=list)
    _server: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeUpstream:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(1024)  # a burst of hundreds of connections (the capacity tests) must not overflow it
        self.port = server.getsockname()[1]
        self._server = server
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    def reset_state(self) -> None:
        self.script = None
        self.received.clear()
        self.probes.clear()
        self.proxy_closed.clear()

    def completion(self, content: str | None, **message: Any) -> None:
        """Answer every request with one chat.completion holding this content (and any message fields), or
        with the same answer as a stream of chunks when the request asks to stream."""
        payload = completion(content, **message)

        def answer(request: Received, wire: Wire) -> None:
            if request.json().get("stream"):
                wire.send_events(as_chunks(payload))
            else:
                wire.send_json(payload)

        self.script = answer

    def _accept_loop(self) -> None:
        assert self._server is not None
        while True:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            request = _read_request(sock)
            if request is None:
                return
            if request.headers.get("user-agent", "").endswith(PROBE_AGENT_SUFFIX):
                # A server starting up asks whether the upstream answers (server/banner.py): not part of the
                # exchange a test scripts, whenever the session's gunicorn happens to start.
                self.probes.append(request)
                Wire(sock).send_json({"object": "list", "data": []})
                return
            self.received.append(request)
            wire = Wire(sock)
            script = self.script or (lambda req, w: w.send_json(completion("hello")))
            try:
                script(request, wire)
            except OSError:
                self.proxy_closed.append(True)


def completion(content: str | None, finish_reason: str = "stop", **message: Any) -> dict[str, Any]:
    """A vLLM-style chat.completion, backend-only fields included, as the proxy must clean them."""
    return {
        "id": "chatcmpl-upstream",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "upstream-model",
        "system_fingerprint": "fp-x",
        "prompt_logprobs": None,
        "kv_transfer_params": None,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "reasoning_content": None, "tool_calls": [],
                        **message},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "prompt_tokens_details": None},
    }


def as_chunks(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as a vLLM-style stream: content in two pieces, tool calls as deltas, then the finish."""
    choice = payload["choices"][0]
    message, head = choice["message"], {key: payload[key] for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    content = message.get("content") or ""
    chunks = [chunk({"role": "assistant", "content": content[: len(content) // 2]}),
              chunk({"content": content[len(content) // 2 :]})]
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    return [*chunks, chunk({}, choice["finish_reason"])]


def _read_request(sock: socket.socket) -> Received | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return Received(method, path, headers, body)
