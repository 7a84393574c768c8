"""The transform log: one `TransformRecord` per request, kept in SQLite under the data directory so that every
gunicorn worker writes to, and the dashboard reads from, the same store. Adding a record never waits on the disk."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from gevent import monkey

from toolproxy.observe import queries
from toolproxy.observe.record import TransformRecord, usable_secrets
from toolproxy.observe.row import Row, Rows

logger = logging.getLogger(__name__)

FILE_NAME = "translog.sqlite3"
BATCH_ROWS = 100
BATCH_SECONDS = 0.2
IDLE_SECONDS = 5.0  # a writer with nothing to do ends, and closes its connection; the next add starts another
MAX_PENDING = 10_000  # rows waiting for the disk; beyond this a stuck disk costs records, never memory
# ... and their bytes: a row of a 256 KB exchange holds ~400 KB, so a writer falling behind under load (it competes
# for the GIL with the workers' greenlets) grew a worker by hundreds of MiB long before 10,000 rows.
MAX_PENDING_BYTES = 64 * 1024 * 1024
SCHEMA_ATTEMPTS = 20
_SCHEMA = """CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, started REAL NOT NULL, model TEXT NOT NULL,
    client TEXT NOT NULL, route TEXT NOT NULL,
    status,  -- untyped on purpose: an HTTP status stays an integer, "client_disconnected" stays text
    has_issues INTEGER NOT NULL, worker INTEGER NOT NULL, overhead_ms REAL NOT NULL, repairs INTEGER NOT NULL,
    issue_count INTEGER NOT NULL,
    dialects TEXT NOT NULL,  -- JSON list, for stats() through json_each
    summary TEXT NOT NULL,   -- JSON: what recent() lists, so listing never parses the big records
    record TEXT NOT NULL,    -- JSON: the whole record, redacted and truncated
    protocol TEXT NOT NULL DEFAULT 'chat'  -- the client's wire protocol (added later: see _add_columns)
)"""
# Columns added after the first release, for a log written by an older version: (name, definition).
_ADDED_COLUMNS = (("protocol", "TEXT NOT NULL DEFAULT 'chat'"),)
_INSERT = ("INSERT INTO records (request_id, started, model, client, route, protocol, status, has_issues, worker, "
           "overhead_ms, repairs, issue_count, dialects, summary, record) VALUES "
           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT))")
# (the record may come as UTF-8 bytes, row.py: it is stored as the same text)
_PRUNE = "DELETE FROM records WHERE id <= (SELECT max(id) FROM records) - ?"


class TransformLog:
    """Records in `<data_dir>/translog.sqlite3`. `add` only queues; a writer thread of this process stores the
    queue in batches. Reads open their own short connection."""

    def __init__(self, data_dir: str, *, max_records: int = 2000, max_field_chars: int = 65536,
                 secrets: Sequence[str] = ()) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.max_records = max_records
        self.max_field_chars = max_field_chars
        self._rows = Rows(usable_secrets(secrets), max_field_chars)
        self._ready = False
        self._pid = 0
        self._dropped = 0
        self._prepare_process()
        with contextlib.suppress(sqlite3.Error, OSError):  # logged by _ensure_schema; the writer tries again
            self._ensure_schema()
        atexit.register(self.flush, 2.0)  # what a stopping worker still holds reaches the disk

    def add(self, record: TransformRecord) -> None:
        """Queue the record for the writer; never blocks on the disk and never raises."""
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

    def _prepare_process(self) -> None:
        """Fresh queue, lock and writer state: after a fork the parent's belong to a thread that is not here."""
        self._pid = os.getpid()
        self._queue: Any = monkey.get_original("queue", "SimpleQueue")()
        self._urgent: Any = monkey.get_original("queue", "SimpleQueue")()  # a flush waiting: write without delay
        self._lock: Any = monkey.get_original("_thread", "allocate_lock")()
        self._running = False
        self._pending_bytes = 0  # of the rows queued, under `_lock`

    def _enqueue(self, item: Row | _Barrier) -> None:
        if self._pid != os.getpid():
            self._prepare_process()
        if isinstance(item, tuple) and not self._reserve(_size(item)):
            self._dropped += 1
            if self._dropped % 1000 == 1:
                logger.warning("transform log: the disk is not keeping up; %d record(s) dropped", self._dropped)
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

    def _run(self, pending: Any) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while (batch := self._collect(pending)) is not None:
                connection = self._write(connection, batch)
        except Exception:  # the top of a thread: nothing above would report it
            logger.exception("transform log: the writer failed")
            with self._lock:
                self._running = False
        finally:
            if connection is not None:
                connection.close()

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

    def _retire(self, pending: Any) -> bool:
        # Under the lock that `_enqueue` takes after its put: either the writer sees the new item, or the adder
        # sees no writer and starts one. No item is left waiting with nobody to write it.
        with self._lock:
            if pending.empty():
                self._running = False
                return True
            return False

    def _write(self, connection: sqlite3.Connection | None, items: list[Row | _Barrier]) -> sqlite3.Connection | None:
        rows = [item for item in items if isinstance(item, tuple)]
        try:
            return self._insert(connection, rows) if rows else connection
        finally:
            with self._lock:
                self._pending_bytes -= sum(_size(row) for row in rows)
            for item in items:
                if isinstance(item, _Barrier):
                    item.done = True

    def _insert(self, connection: sqlite3.Connection | None, rows: list[Row]) -> sqlite3.Connection | None:
        """Insert and prune in one transaction. A failure costs this batch only: logged, never raised."""
        try:
            connection = connection or self._open_writer()
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(_INSERT, rows)
            connection.execute(_PRUNE, (self.max_records,))
            connection.execute("COMMIT")
            return connection
        except (sqlite3.Error, OSError) as error:
            logger.warning("transform log: %d record(s) dropped, writing %s failed: %s", len(rows), self.path, error)
            if connection is not None:
                connection.close()  # rolls back; the next batch opens a fresh connection
            return None

    def _open_writer(self) -> sqlite3.Connection:
        if not self._ready:
            self._ensure_schema()
        connection = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        connection.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across a crash of the process
        return connection

    def _ensure_schema(self) -> None:
        """Directory, WAL mode and table; idempotent. Workers starting together may find the file locked while
        another one switches it to WAL: that is retried."""
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            _retry_locked(self._create_schema)
            self._ready = True
        except (sqlite3.Error, OSError) as error:
            logger.warning("transform log: cannot use %s: %s", self.path, error)
            raise

    def _create_schema(self) -> None:
        with contextlib.closing(sqlite3.connect(self.path, timeout=5, isolation_level=None)) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            _add_columns(connection)

    def recent(self, limit: int = 100, *, model: str | None = None, client: str | None = None,
               status: int | str | None = None, has_issues: bool | None = None, protocol: str | None = None,
               after_id: int | None = None) -> list[dict[str, Any]]:
        """Summaries, newest first, of the records matching every filter given."""
        return queries.recent(self.path, limit, model=model, client=client, status=status, has_issues=has_issues,
                              protocol=protocol, after_id=after_id)

    def get(self, record_id: int) -> dict[str, Any] | None:
        """The full record (redacted and truncated as stored), or None."""
        return queries.get(self.path, record_id)

    def find(self, request_id: str) -> int | None:
        """The row id of the record with this request id, or None."""
        return queries.find(self.path, request_id)

    def activity(self, since: float) -> list[tuple[Any, ...]]:
        """What the dashboard's charts count of each record started since `since` (queries.activity)."""
        return queries.activity(self.path, since)

    def stats(self) -> dict[str, Any]:
        """Counts over the stored records, all from one snapshot."""
        return queries.stats(self.path)

class _Barrier:
    """Queued by `flush`: the writer marks it done once everything queued before it is written."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


def _start_thread(function: Callable[..., None], args: tuple[Any, ...]) -> None:
    # A real OS thread whether or not gevent has patched the process: sqlite3 blocks whatever thread it runs in,
    # and a patched threading.Thread is a greenlet on the hub. See the report on why not the hub's threadpool.
    monkey.get_original("_thread", "start_new_thread")(function, args)


def _add_columns(connection: sqlite3.Connection) -> None:
    """The columns a log written by an older version lacks (two workers may race: the loser finds it there)."""
    present = {row[1] for row in connection.execute("PRAGMA table_info(records)")}
    for name, definition in _ADDED_COLUMNS:
        if name not in present:
            with contextlib.suppress(sqlite3.OperationalError):  # "duplicate column": another worker added it
                connection.execute(f"ALTER TABLE records ADD COLUMN {name} {definition}")  # fixed names only


def _retry_locked(action: Callable[[], None]) -> None:
    for attempt in range(SCHEMA_ATTEMPTS):
        try:
            action()
            return
        except sqlite3.OperationalError as error:
            if not ("locked" in str(error) or "busy" in str(error)) or attempt == SCHEMA_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def _size(row: Row) -> int:
    """A row's weight in the queue: its text and bytes (the record, its summary, the short columns)."""
    return sum(len(value) for value in row if isinstance(value, (str, bytes)))
