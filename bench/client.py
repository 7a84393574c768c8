"""The load generator: an asyncio HTTP/1.1 client on keep-alive connections, timing every exchange.

Hand-written so that it costs little per request (the box has two cores shared with the targets) and sees
each body read as it arrives: time to first byte, total, and when each SSE event came in.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

READ_SIZE = 256 * 1024


@dataclass(slots=True)
class Exchange:
    status: int
    first: float  # seconds from sending to the first body byte
    total: float  # seconds from sending to the last body byte
    events: list[float] = field(default_factory=list)  # arrival of each `data:` event, seconds from sending


class BadResponse(Exception):
    pass


def request_bytes(port: int, body: bytes, path: str = "/v1/chat/completions") -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), port, len(body))) + body


class Dechunker:
    """Chunked transfer decoding fed network reads; `done` once the last chunk and its CRLF are in."""

    def __init__(self) -> None:
        self.pending = b""
        self.remaining = 0  # bytes of the current chunk still to come, its closing CRLF included
        self.last = False  # the current chunk is the empty one that ends the body
        self.done = False

    def feed(self, data: bytes) -> bytes:
        data, self.pending = self.pending + data, b""
        payload, position = [], 0
        while position < len(data) and not self.done:
            if self.remaining:
                take = data[position : position + self.remaining]
                position += len(take)
                self.remaining -= len(take)
                payload.append(take)
                self.done = self.last and not self.remaining
                continue
            end = data.find(b"\r\n", position)
            if end < 0:
                self.pending = data[position:]
                break
            size = int(data[position:end].split(b";")[0], 16)
            position = end + 2
            self.remaining, self.last = size + 2, size == 0
        self.pending += data[position:] if self.done else b""
        return b"".join(payload)


class Connection:
    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, limit=READ_SIZE)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def exchange(self, request: bytes) -> Exchange:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        started = time.perf_counter()
        self.writer.write(request)
        head = (await self.reader.readuntil(b"\r\n\r\n")).lower()
        status = int(head[9:12])
        result = Exchange(status, 0.0, 0.0)
        if b"transfer-encoding: chunked" in head:
            await self._read_chunked(result, started)
        else:
            await self._read_whole(result, started, _content_length(head))
        result.total = time.perf_counter() - started
        if b"connection: close" in head:
            self.close()
        return result

    async def _read_whole(self, result: Exchange, started: float, length: int) -> None:
        assert self.reader is not None
        left = length
        while left > 0:
            data = await self.reader.read(min(left, READ_SIZE))
            if not data:
                raise BadResponse("connection closed mid-body")
            if left == length:
                result.first = time.perf_counter() - started
            left -= len(data)

    async def _read_chunked(self, result: Exchange, started: float) -> None:
        assert self.reader is not None
        body = Dechunker()
        while not body.done:
            data = await self.reader.read(READ_SIZE)
            if not data:
                raise BadResponse("connection closed mid-stream")
            now = time.perf_counter() - started
            payload = body.feed(data)
            if payload and not result.first:
                result.first = now
            result.events.extend([now] * payload.count(b"data:"))
        if body.pending or body.remaining:
            raise BadResponse("bytes after the last chunk")


def _content_length(head: bytes) -> int:
    start = head.find(b"content-length:")
    if start < 0:
        return 0
    return int(head[start + 15 : head.find(b"\r\n", start)])


@dataclass(slots=True)
class Load:
    """Results of `clients` connections sending the same request back to back for `seconds`."""

    exchanges: list[Exchange]
    seconds: float
    errors: int
    answered: int = 0  # every exchange that completed, the ones after the deadline included (for CPU per request)

    @property
    def rate(self) -> float:
        return len(self.exchanges) / self.seconds


async def drive(port: int, request: bytes, clients: int, seconds: float) -> Load:
    connections = [Connection(port) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in connections))
    done: list[Exchange] = []
    errors = answered = 0
    started = time.perf_counter()
    stop_at = started + seconds

    async def loop(connection: Connection) -> None:
        nonlocal errors, answered
        while time.perf_counter() < stop_at:
            try:
                result = await connection.exchange(request)
            except (OSError, BadResponse, asyncio.IncompleteReadError):
                errors += 1
                connection.close()
                continue
            answered += result.status == 200
            if time.perf_counter() <= stop_at:
                (done if result.status == 200 else []).append(result)
                errors += result.status != 200

    await asyncio.gather(*(loop(c) for c in connections))
    for connection in connections:
        connection.close()
    return Load(done, seconds, errors, answered)


async def once_each(port: int, request: bytes, clients: int, timeout: float) -> Load:
    """`clients` connections sending one request each, all at once (the slow-stream scenario)."""
    connections = [Connection(port) for _ in range(clients)]
    errors = 0

    async def one(connection: Connection) -> Exchange | None:
        nonlocal errors
        try:
            result = await asyncio.wait_for(connection.exchange(request), timeout)
        except (OSError, BadResponse, asyncio.IncompleteReadError, TimeoutError):
            errors += 1
            return None
        finally:
            connection.close()
        errors += result.status != 200
        return result if result.status == 200 else None

    started = time.perf_counter()
    results = await asyncio.gather(*(one(c) for c in connections))
    return Load([r for r in results if r is not None], time.perf_counter() - started, errors)
