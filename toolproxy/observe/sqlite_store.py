"""The transform log in SQLite, `<data_dir>/translog.sqlite3`: the default store, one per instance, shared by its
gunicorn workers (WAL: readers never wait on the writer). Writes come from the log's writer thread, on a connection
of that thread; reads (queries.py) open their own short one."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from toolproxy.observe import queries
from toolproxy.observe.row import Row
from toolproxy.observe.store import Filters, Retention, StoreError

logger = logging.getLogger("toolproxy.observe.translog")

FILE_NAME = "translog.sqlite3"
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
_PRUNE_AGE = "DELETE FROM records WHERE started < ?"


class SqliteStore:
    """Records in `<data_dir>/translog.sqlite3`. A batch that fails is dropped (a disk that refuses a write now
    rarely takes it a moment later); the file and table are made on first use, or again if they went away."""

    def __init__(self, data_dir: str, retention: Retention) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.retention = retention
        self._ready = False
        self._connection: sqlite3.Connection | None = None
        with contextlib.suppress(sqlite3.Error, OSError):  # logged by _ensure_schema; the writer tries again
            self._ensure_schema()

    def write(self, rows: Sequence[Row]) -> None:
        """Insert and prune in one transaction. A failure costs this batch only."""
        try:
            connection = self._connection = self._connection or self._open_writer()
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(_INSERT, rows)
            connection.execute(_PRUNE, (self.retention.max_records,))
            if self.retention.max_age is not None:
                connection.execute(_PRUNE_AGE, (time.time() - self.retention.max_age,))
            connection.execute("COMMIT")
        except (sqlite3.Error, OSError) as error:
            self.idle()  # closing rolls back; the next batch opens a fresh connection
            raise StoreError(f"writing {self.path} failed: {error}") from error

    def idle(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def recent(self, limit: int, filters: Filters) -> list[dict[str, Any]]:
        return queries.recent(self.path, limit, filters)

    def get(self, record_id: int) -> dict[str, Any] | None:
        return queries.get(self.path, record_id)

    def find(self, request_id: str) -> int | None:
        return queries.find(self.path, request_id)

    def activity(self, since: float) -> list[tuple[Any, ...]]:
        return queries.activity(self.path, since)

    def stats(self) -> dict[str, Any]:
        return queries.stats(self.path)

    def close(self) -> None:
        """Reads hold no connection, and the writer's is its thread's to close (`idle`)."""

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
