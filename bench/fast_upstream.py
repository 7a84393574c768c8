"""A fast scripted upstream for the load benchmark: asyncio, HTTP/1.1 keep-alive, canned answers.

It never decodes a body (the answer is chosen by the model name, found by a byte search) and sends streams as
one chunk per event, so what it costs is small and the same for every target.

    python bench/fast_upstream.py PORT
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import workload

SMALL = workload.completion(workload.SMALL_TEXT)
BIG = workload.completion(workload.big_text())
EVENTS = workload.stream_events()
MODELS = workload.dumps({"object": "list", "data": [{"id": "bench", "object": "model"}]})


def head(status: str, content_type: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{framing}\r\n\r\n".encode()


def whole(body: bytes) -> bytes:
    return head("200 OK", "application/json", len(body)) + body


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


FAST_STREAM = head("200 OK", "text/event-stream", None) + b"".join(chunked(e) for e in EVENTS) + b"0\r\n\r\n"
ANSWERS = {b"bench-small": whole(SMALL), b"bench-big": whole(BIG), b"bench-stream": FAST_STREAM,
           b"bench-8mb": whole(workload.completion(workload.huge_prose_with_call())),
           b"bench-adversarial": whole(workload.completion(workload.adversarial_calls()))}


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.wanted = -1  # bytes of head + body once the head is in
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.serve()

    def serve(self) -> None:
        while not self.busy:
            if self.wanted < 0:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                self.wanted = end + 4 + content_length(bytes(self.buffer[:end]))
            if len(self.buffer) < self.wanted:
                return
            request = bytes(self.buffer[: self.wanted])
            del self.buffer[: self.wanted]
            self.wanted = -1
            self.answer(request)

    def answer(self, request: bytes) -> None:
        assert self.transport is not None
        if request.startswith(b"GET"):
            self.transport.write(whole(MODELS))
            return
        start = request.find(b'"bench-')
        model = request[start + 1 : request.find(b'"', start + 1)]
        if model == b"bench-slow":
            self.busy = True
            asyncio.get_running_loop().create_task(self.drip())
        else:
            self.transport.write(ANSWERS.get(model, ANSWERS[b"bench-small"]))

    async def drip(self) -> None:
        """The 200-event stream with a pause before each event, as a model generating tokens."""
        assert self.transport is not None
        self.transport.write(head("200 OK", "text/event-stream", None))
        for event in EVENTS:
            await asyncio.sleep(workload.SLOW_GAP)
            if self.transport.is_closing():
                return
            self.transport.write(chunked(event))
        self.transport.write(b"0\r\n\r\n")
        self.busy = False
        self.serve()


def content_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line[15:])
    return 0


async def main(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(Connection, "127.0.0.1", port, backlog=2048)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
