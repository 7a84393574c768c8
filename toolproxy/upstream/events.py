"""An upstream's event stream: chat-completion chunks as they are read, each checked before any stage sees it,
with a shortcut for the events a route can forward without decoding them (wire/stencil.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from http.client import HTTPException, HTTPResponse
from typing import Any, Protocol

import gevent
import requests
from gevent import monkey
from urllib3.exceptions import HTTPError as Urllib3Error

from toolproxy.errors import UpstreamBadResponse, UpstreamDisconnected, UpstreamError
from toolproxy.upstream.failures import calling, naming, translate
from toolproxy.upstream.refusals import error_from_object, without_key
from toolproxy.wire import jsonwire, shape, sse, stencil

READ_SIZE = 64 * 1024
DRAIN_SECONDS = 1.0  # the longest a finished stream waits for the end of its body (see _read_to_end)


class Shortcut(Protocol):
    """What turns a stream's events into the bytes the client gets while they are read, in their order, some of
    them without being decoded at all."""

    def forward(self, read: bytes) -> bytes | None:
        """A read that is one whole event, as the client gets it, when it needs no decoding; else None."""
        ...

    def convert(self, chunk: dict[str, Any], data: bytes | None) -> bytes:
        """A decoded event as the client gets it; `data`: its bytes, when they were one lone UTF-8 line."""
        ...


Batch = list[bytes | dict[str, Any]]  # one network read's events: bytes ready for the client, or decoded chunks


class EventStream(Protocol):
    """Chat-completion chunks as they arrive; `close()` drops the connection (the server stops generating)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def batches(self, shortcut: Shortcut | None = None) -> Iterator[Batch]:
        """The chunks of each network read together; with a shortcut, some already as bytes for the client."""
        ...

    def close(self) -> None: ...


class HttpEventStream:
    """A streaming answer read event by event: see `EventStream`."""

    def __init__(self, response: requests.Response, max_bytes: int, api_key: str | None, url: str = "") -> None:
        self._response = response
        self._url = url  # named by its errors
        self._max_bytes = max_bytes
        self._decoder = sse.EventDecoder(max_bytes)
        self._api_key = api_key
        self._saw_finish = self._saw_done = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.batches():
            for chunk in batch:
                assert isinstance(chunk, dict)  # without a shortcut every event is decoded
                yield chunk

    def batches(self, shortcut: Shortcut | None = None) -> Iterator[Batch]:
        """The events of each network read together (those of the first read after its first one, which goes
        alone: the client's first byte does not wait for the rest); ends at [DONE], raises when the upstream
        broke off or sent something unusable, after the events before it."""
        first = True
        try:
            for batch in self._named(self._batches(shortcut)):
                if first and len(batch) > 1:
                    yield batch[:1]
                    batch = batch[1:]
                first = False
                yield batch
        finally:
            self.close()
        if not self._saw_finish and not self._saw_done:  # [DONE] alone is an end; a body that just stops is not
            raise naming(UpstreamDisconnected("the upstream closed the stream before it finished"), self._url)

    def _named(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        with calling(self._url):
            yield from batches

    def _batches(self, shortcut: Shortcut | None) -> Iterator[Batch]:
        for read in self._reads():
            batch: Batch = []
            try:
                if not self._take_read(read, shortcut, batch):
                    self._saw_done = True
                    if batch:
                        yield batch
                    self._read_to_end()
                    return
            except UpstreamError as error:
                if batch:
                    yield batch
                raise without_key(error, self._api_key) from None
            if batch:  # a read of comments or half an event says nothing yet
                yield batch

    def _take_read(self, read: bytes | None, shortcut: Shortcut | None, batch: Batch) -> bool:
        """The read's events into `batch` (None: the body has ended); False once [DONE] has come. A read that is
        one whole event while no other is half-way (nearly every read) skips the line decoder, and with a
        shortcut often decoding too."""
        if read is None:
            return all(self._take(event.data, None, shortcut, batch) for event in self._decoder.finish())
        read = self._decoder.skip_bom(read)
        if self._decoder.is_idle() and len(read) <= self._max_bytes:
            if shortcut is not None and (forwarded := shortcut.forward(read)) is not None:
                batch.append(forwarded)
                return True
            if (data := stencil.lone_data(read)) is not None:
                return self._take(*_text_of(data), shortcut, batch)
        try:
            events = self._decoder.feed(read)
        except sse.EventTooLarge as error:
            raise UpstreamBadResponse(str(error)) from None
        return all(self._take(event.data, None, shortcut, batch) for event in events)

    def _take(self, text: str, data: bytes | None, shortcut: Shortcut | None, batch: Batch) -> bool:
        """One event's data (`data`: as bytes, when they were one lone UTF-8 line) into `batch`."""
        if text == "[DONE]":
            return False
        chunk = decode_chunk(text)
        self._saw_finish = self._saw_finish or any(c.get("finish_reason") for c in chunk.get("choices") or [])
        batch.append(chunk if shortcut is None else shortcut.convert(chunk, data))
        return True

    def _reads(self) -> Iterator[bytes | None]:
        """Each read as it comes, then None at the end of the body."""
        read1 = self._reader()
        try:
            while read := read1(READ_SIZE):
                yield read
            yield None
        except (requests.RequestException, OSError, Urllib3Error, HTTPException) as error:
            raise translate(error) from None

    def _reader(self) -> Callable[[int], bytes]:
        """urllib3's read1 costs more than the read itself for an event-sized chunk (a context manager, a buffer
        and a decoder per call): a body that is not compressed is read from http.client's response beneath it,
        as urllib3 itself would read it. Its errors are http.client's and the socket's, translated the same."""
        raw = self._response.raw
        beneath = getattr(raw, "_fp", None)
        if isinstance(beneath, HTTPResponse) and not raw.headers.get("Content-Encoding"):
            return beneath.read1
        return partial(raw.read1, decode_content=True)

    def _read_to_end(self) -> None:
        """After [DONE] only the end of the chunked body remains: read it, so the connection goes back to the pool
        (a new one per stream, resolved in gevent's thread pool, cost a tenth of a fast stream's time). More than
        that, or silence (bounded under gunicorn's patched sockets), and the connection is closed as before."""
        with gevent.Timeout(DRAIN_SECONDS if monkey.is_module_patched("socket") else None, False):
            try:
                for _ in range(4):
                    if not self._response.raw.read1(READ_SIZE, decode_content=True):
                        return
            except (requests.RequestException, OSError, Urllib3Error):
                return

    def close(self) -> None:
        self._response.close()


def _text_of(data: bytes) -> tuple[str, bytes | None]:
    """The data as the line decoder would give it (what is not UTF-8 replaced), and its bytes when it is UTF-8."""
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), None


def decode_chunk(data: str) -> dict[str, Any]:
    try:
        chunk = jsonwire.loads_fast(data)
    except (ValueError, RecursionError):
        raise UpstreamBadResponse(f"the upstream sent an event that is not JSON: {data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise UpstreamBadResponse("the upstream sent an event that is not a JSON object")
    if isinstance(chunk.get("error"), (dict, str)):
        # In-band errors after a 200 (vLLM, sglang): pass them on, never end the stream as if all went well.
        raise error_from_object(chunk, 502)
    return shape.check_chunk(chunk)
