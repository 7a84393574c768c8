"""The transform log: one `TransformRecord` per request, queued by `add` and written in batches by a writer thread
of the process to its store (store.py: SQLite under the data directory, or PostgreSQL shared by a fleet), which
every gunicorn worker writes to and the dashboard reads from. Adding a record never waits on the store: a store that
is down, slow or full costs records past the queue's bound (counted), never a request's time."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

from gevent import monkey

from toolproxy.observe.record import TransformRecord, usable_secrets
from toolproxy.observe.row import Row, Rows
from toolproxy.observe.store import Filters, Retention, Store, StoreError, StoreUnavailable

logger = logging.getLogger(__name__)

BATCH_ROWS = 100
BATCH_SECONDS = 0.2
IDLE_SECONDS = 5.0  # a writer with nothing to do ends, and closes its connection; the next add starts another
MAX_PENDING = 10_000  # rows waiting for the store; beyond this a stuck store costs records, never memory
# ... and their bytes: a row of a 256 KB exchange holds ~400 KB, so a writer falling behind under load (it competes
# for the GIL with the workers' greenlets) grew a worker by hundreds of MiB long before 10,000 rows.
MAX_PENDING_BYTES = 64 * 1024 * 1024
# A store that cannot be reached is tried again after these many seconds, doubling up to the last; the batch in hand
# and the rows queued behind it wait (within the bounds above) and are written once it answers.
RETRY_SECONDS = (0.5, 5.0)
Dropped = Callable[[int, str], None]  # told how many records were dropped, and why: "queue_full" or "refused"


class TransformLog:
    """`add` only queues; a writer thread of this process stores the queue in batches. The reads are the store's,
    each with its own deadline."""

    def __init__(self, data_dir: str, *, url: str | None = None, instance: str = "", max_records: int = 2000,
                 max_age: float | None = None, max_field_chars: int = 65536, secrets: Sequence[str] = (),
                 on_drop: Dropped | None = None) -> None:
        self.max_field_chars = max_field_chars
        self.store: Store = open_store(data_dir, url, instance, Retention(max_records, max_age))
        self._rows = Rows(usable_secrets(secrets), max_field_chars, instance)
        self._on_drop = on_drop
        self._pid = 0
        self._dropped = 0
        self._prepare_process()
        atexit.register(self._exit)

    @property
    def path(self) -> str:
        """The SQLite store's file (what tests and tools open directly)."""
        return str(getattr(self.store, "path", ""))

    def add(self, record: TransformRecord) -> None:
        """Queue the record for the writer; never blocks on the store and never raises."""
        self._report_drops()
        try:
            self._enqueue(self._rows.row(record))
        except Exception:  # the log is a bystander: whatever goes wrong here must not fail the request
            logger.exception("transform log: record %s dropped", getattr(record, "request_id", "?"))

    def flush(self, timeout: float = 5) -> None:
        """Wait until everything added so far is written (or given up on), at most `timeout` seconds."""
        if self._pid != os.getpid() or not self._running:
            return  # no writer means nothing queued in this process
        barrier = _Barrier()
        self._enqueue(barrier)
        self._urgent.put(True)
        deadline = time.monotonic() + timeout
        while not barrier.done and time.monotonic() < deadline:
            time.sleep(0.005)  # under gevent's patching a cooperative sleep: other greenlets run meanwhile
        if not barrier.done:
            logger.warning("transform log: flush gave up after %.1f s", timeout)

    def close(self) -> None:
        """Flush, and let go of the store's connections (a log that is done with)."""
        self.flush()
        self.store.close()

    def _exit(self) -> None:
        """At the process's exit: what a stopping worker still holds reaches the store, within 2 s, and the store's
        connections close before the interpreter takes their threads away."""
        self.flush(2.0)
        with contextlib.suppress(Exception):
            self.store.close()

    def recent(self, limit: int = 100, *, model: str | None = None, client: str | None = None,
               status: int | str | None = None, has_issues: bool | None = None, protocol: str | None = None,
               instance: str | None = None, after_id: int | None = None) -> list[dict[str, Any]]:
        """Summaries, newest first, of the records matching every filter given."""
        return self.store.recent(limit, Filters(model, client, status, has_issues, protocol, instance, after_id))

    def get(self, record_id: int) -> dict[str, Any] | None:
        """The full record (redacted and truncated as stored), or None."""
        return self.store.get(record_id)

    def find(self, request_id: str) -> int | None:
        """The id of the record with this request id, or None."""
        return self.store.find(request_id)

    def activity(self, since: float) -> list[tuple[Any, ...]]:
        """What the dashboard's charts count of each record started since `since` (charts.Activity)."""
        return self.store.activity(since)

    def stats(self) -> dict[str, Any]:
        """Counts over the stored records, all from one snapshot."""
        return self.store.stats()

    def _prepare_process(self) -> None:
        """Fresh queue, lock and writer state: after a fork the parent's belong to a thread that is not here."""
        self._pid = os.getpid()
        self._queue: Any = monkey.get_original("queue", "SimpleQueue")()
        self._urgent: Any = monkey.get_original("queue", "SimpleQueue")()  # a flush waiting: write without delay
        self._lock: Any = monkey.get_original("_thread", "allocate_lock")()
        self._running = False
        self._pending_bytes = 0  # of the rows queued, under `_lock`
        self._unreported = 0  # rows the writer dropped, for the next `add` to count (the metrics are the loop's)

    def _enqueue(self, item: Row | _Barrier) -> None:
        if self._pid != os.getpid():
            self._prepare_process()
        if isinstance(item, tuple) and not self._reserve(_size(item)):
            self._dropped += 1
            if self._dropped % 1000 == 1:
                logger.warning("transform log: the store is not keeping up; %d record(s) dropped", self._dropped)
            if self._on_drop is not None:
                self._on_drop(1, "queue_full")
            return
        self._queue.put(item)
        with self._lock:
            if not self._running:
                _start_thread(self._run, (self._queue,))
                self._running = True

    def _reserve(self, size: int) -> bool:
        """Room for a row of `size` bytes among those waiting for the writer, taken if there is."""
        with self._lock:
            if self._queue.qsize() >= MAX_PENDING or self._pending_bytes + size > MAX_PENDING_BYTES:
                return False
            self._pending_bytes += size
            return True

    def _report_drops(self) -> None:
        if not self._unreported or self._pid != os.getpid():
            return
        with self._lock:
            count, self._unreported = self._unreported, 0
        if count and self._on_drop is not None:
            self._on_drop(count, "refused")

    def _run(self, pending: Any) -> None:
        try:
            while (batch := self._collect(pending)) is not None:
                self._write(batch)
        except Exception:  # the top of a thread: nothing above would report it
            logger.exception("transform log: the writer failed")
            self._retire(pending, failed=True)
        finally:
            _release_hub()

    def _collect(self, pending: Any) -> list[Row | _Barrier] | None:
        """The next batch: the first item, then what came within BATCH_SECONDS (sooner when a flush waits), at
        most BATCH_ROWS. None once the queue stayed empty for IDLE_SECONDS (the writer then ends).

        The writer waits out the batch instead of waking on every add: each wake-up of this OS thread takes the
        GIL from the worker's greenlets, which under load cost more than writing the rows."""
        try:
            items = [pending.get(timeout=IDLE_SECONDS)]
        except queue.Empty:
            return None if self._retire(pending) else []
        if not isinstance(items[0], _Barrier):
            with contextlib.suppress(queue.Empty):
                self._urgent.get(timeout=BATCH_SECONDS)
        while len(items) < BATCH_ROWS and not isinstance(items[-1], _Barrier):
            try:
                items.append(pending.get_nowait())
            except queue.Empty:
                break
        return items

    def _retire(self, pending: Any, failed: bool = False) -> bool:
        # Under the lock that `_enqueue` takes after its put: either the writer sees the new item, or the adder
        # sees no writer and starts one. No item is left waiting with nobody to write it. The store's connection
        # is closed before another writer can open its own.
        with self._lock:
            if pending.empty() or failed:
                with contextlib.suppress(Exception):
                    self.store.idle()
                self._running = False
                return True
            return False

    def _write(self, items: list[Row | _Barrier]) -> None:
        rows = [item for item in items if isinstance(item, tuple)]
        try:
            if rows:
                self._store_rows(rows)
        finally:
            with self._lock:
                self._pending_bytes -= sum(_size(row) for row in rows)
            for item in items:
                if isinstance(item, _Barrier):
                    item.done = True

    def _store_rows(self, rows: list[Row]) -> None:
        """Write the batch; while the store is unavailable, wait and try again (the rows behind it wait in the
        queue, within its bounds). A batch the store refuses is dropped: logged and counted, never raised."""
        delay, since = RETRY_SECONDS[0], 0.0
        while True:
            try:
                self.store.write(rows)
                if since:
                    logger.warning("transform log: the store is back after %.0f s; writing resumes", time.monotonic()
                                   - since)
                return
            except StoreUnavailable as error:
                if not since:
                    since = time.monotonic()
                    logger.warning("transform log: the store is unavailable (%s); %d record(s) wait, trying again "
                                   "every %g s at most", error, len(rows), RETRY_SECONDS[1])
                with contextlib.suppress(queue.Empty):
                    self._urgent.get(timeout=delay)  # a flush cuts the wait short (and gives up at its deadline)
                delay = min(delay * 2, RETRY_SECONDS[1])
            except StoreError as error:
                logger.warning("transform log: %d record(s) dropped, %s", len(rows), error)
                with self._lock:
                    self._unreported += len(rows)
                return

def open_store(data_dir: str, url: str | None, instance: str, retention: Retention) -> Store:
    """The store a log's settings name: PostgreSQL for a `postgresql://` URL, else SQLite in `data_dir`. The
    PostgreSQL driver is imported only then: a proxy on SQLite never loads it."""
    if url:
        from toolproxy.observe.postgres_store import PostgresStore

        return PostgresStore(url, instance, retention)
    from toolproxy.observe.sqlite_store import SqliteStore

    return SqliteStore(data_dir, retention)


class _Barrier:
    """Queued by `flush`: the writer marks it done once everything queued before it is written."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


def _start_thread(function: Callable[..., None], args: tuple[Any, ...]) -> None:
    # A real OS thread whether or not gevent has patched the process: sqlite3 blocks whatever thread it runs in,
    # and a patched threading.Thread is a greenlet on the hub. See the report on why not the hub's threadpool.
    monkey.get_original("_thread", "start_new_thread")(function, args)


def _release_hub() -> None:
    """A writer thread that used gevent's cooperative I/O (psycopg does, once gevent has patched `select`) has its
    own hub, whose loop holds file descriptors: destroyed with the thread, or each idle-and-restart leaks two."""
    from gevent._hub_local import get_hub_if_exists

    hub = get_hub_if_exists()
    if hub is not None:
        hub.destroy(destroy_loop=True)


def _size(row: Row) -> int:
    """A row's weight in the queue: its text and bytes (the record, its summary, the short columns)."""
    return sum(len(value) for value in row if isinstance(value, (str, bytes)))
