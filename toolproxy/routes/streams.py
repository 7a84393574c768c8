"""How a route's stream is assembled, in no client's protocol: a streaming upstream relayed event by event as it
arrives, and the guard around every stream. A front end encodes what comes out, one batch (one write) at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from typing import Any

from toolproxy.errors import ProxyError
from toolproxy.routes.exchange import Exchange
from toolproxy.transform.turn import DONE, KEEP_ALIVE, Failed, Item, carries_content
from toolproxy.upstream.events import Batch, EventStream, Shortcut
from toolproxy.upstream.relay import FINISHED, HEARTBEAT, Finished, Heartbeat, Relay

logger = logging.getLogger("toolproxy.routes.chat")

Convert = Callable[[dict[str, Any]], list[Item]]  # one upstream chunk, as the items it means
Stream = Generator[list[Item], None, None]  # closing it closes the upstream and writes the record


def relay(exchange: Exchange, stream: EventStream, convert: Convert, finish: Callable[[], list[Item]] = list,
          shortcut: Shortcut | None = None) -> Stream:
    """A streaming upstream relayed event by event as it arrives, each chunk converted on the way, with
    keep-alives while the upstream is silent (or talks while nothing can go out yet: a long call held whole);
    `finish` says what goes after the upstream's last event; `shortcut` lets events that need nothing go out as
    the front end encoded them (see `EventStream.batches`); closing the stream closes the upstream."""
    # Merging is for the byte path, where it was measured to pay; the tool routes' converters ran slower fed
    # merged batches (bench/incremental.py: 96 -> 52 req/s), so they get one read per hand-over as before.
    pump: Relay[Batch] = Relay(lambda: stream.batches(shortcut), deadline_seconds=exchange.settings.request_timeout,
                               merge=_merge if shortcut is not None else None)
    exchange.relay = pump

    def produce() -> Stream:
        said = time.monotonic()  # when the client last heard something
        while True:
            item = pump.next(exchange.settings.heartbeat_interval)
            if item is HEARTBEAT:
                yield [KEEP_ALIVE]
                said = time.monotonic()
                continue
            items, end = _ready_items(exchange, pump, item, convert, finish, said)
            if items:
                yield items
                said = time.monotonic()
            elif time.monotonic() - said >= exchange.settings.heartbeat_interval:
                yield [KEEP_ALIVE]
                said = time.monotonic()
            if isinstance(end, BaseException):
                raise end
            if end is FINISHED:
                return

    def close() -> None:
        pump.close()
        stream.close()

    return guarded(exchange, produce, close)


MERGED_EVENTS = 16  # at most this many events in one queued batch: with QUEUE_ITEMS, what a slow client holds


def _merge(queued: Batch, batch: Batch) -> bool:
    """Events read while those before them still wait for the client join them: they leave in the same write,
    as events that arrived together do, and cost one hand-over instead of one each."""
    if len(queued) + len(batch) > MERGED_EVENTS:
        return False
    queued.extend(batch)
    return True


def _ready_items(exchange: Exchange, pump: Relay[Batch], item: Batch | Heartbeat | Finished, convert: Convert,
                 finish: Callable[[], list[Item]], said: float) -> tuple[list[Item], Finished | Exception | None]:
    """`item` and every batch the relay already holds, converted, as one write, with how the run ended: FINISHED
    (the end is in the write), an error to raise once the write is out, or None.

    Nothing waits for more: events that arrived together leave together (one send instead of one per event,
    the largest cost of a fast stream), and an event that arrives alone leaves alone, at once."""
    items: list[Item] = []
    try:
        while True:
            if isinstance(item, Finished):
                _note_first_byte(exchange, finish(), items)
                items.append(DONE)
                return items, FINISHED
            if isinstance(item, list):
                for event in item:
                    if isinstance(event, bytes):
                        items.append(event)  # ready: the front end's shortcut made it and kept the record
                    else:
                        _note_first_byte(exchange, convert(event), items)
            # A run that has said nothing for a heartbeat interval returns, so a keep-alive can go out.
            quiet = not items and time.monotonic() - said >= exchange.settings.heartbeat_interval
            if not pump.has_ready() or quiet:
                return items, None
            item = pump.next(0)
    except Exception as error:  # handed on after the events before it are out, as when each went alone
        return items, error


def _note_first_byte(exchange: Exchange, converted: list[Item], into: list[Item]) -> None:
    if exchange.record.first_byte_ms is None and any(carries_content(item) for item in converted):
        exchange.first_byte()
    into.extend(converted)


def guarded(exchange: Exchange, produce: Callable[[], Stream], close: Callable[[], None]) -> Stream:
    """The outer edge of every committed stream: an error ends it with a `Failed` item, never silently; a client
    that goes away (GeneratorExit) closes the upstream; the record is written when it is over."""
    status: int | str = 200
    error_text: str | None = None
    error_code: str | None = None
    try:
        yield from produce()
    except ProxyError as error:
        status, error_text, error_code = error.status, error.for_operator(), error.code
        logger.warning("stream ended with an error: %s", error_text)
        yield [Failed(error)]
    except GeneratorExit:
        status = "client_disconnected"
        raise
    except Exception:
        status = 500
        logger.exception("unexpected failure while streaming")
        yield [Failed(ProxyError("the proxy failed while streaming; see its log"))]
    finally:
        close()
        exchange.log(status, error_text, error_code)
