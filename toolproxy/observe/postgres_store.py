"""The transform log in PostgreSQL (`TOOLPROXY_LOG_URL`): every instance of a fleet writes its rows, with its
instance name, to the same table, and any instance's dashboard reads the whole fleet.

The writer thread has a connection of its own (psycopg's, in that thread); the dashboard's reads take one from a
small pool (psycopg_pool), each read with a deadline. A database that is down, slow or full never reaches a
request: `write` says it is unavailable, and the batch waits in the log's bounded queue (translog.py) until it is
back."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from gevent import Timeout, monkey
from psycopg import errors
from psycopg_pool import ConnectionPool, PoolTimeout

from toolproxy.observe import stored
from toolproxy.observe.postgres_queries import (
    ACTIVITY,
    ACTIVITY_ROWS,
    FIND,
    GET,
    INSERT,
    PRUNE,
    PRUNE_AGE,
    activity_of,
    inserted,
    recent_query,
    stats_of,
    stats_queries,
)
from toolproxy.observe.postgres_schema import CONNECT_SECONDS, hide_password, upgrade
from toolproxy.observe.row import Row
from toolproxy.observe.store import READ_SECONDS, Filters, Retention, StoreError, StoreUnavailable

logger = logging.getLogger("toolproxy.observe.translog")

WRITE_SECONDS = 30  # a statement of the writer's that takes longer is cancelled, and its batch tried again
READERS = 4  # connections a worker's dashboard reads may hold at once
# A dead peer (a host gone without a word) is noticed within seconds, not the kernel's two hours.
_KEEPALIVES: dict[str, Any] = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}
# Not worth a retry: the batch itself is wrong (a value the table refuses). Everything else from the database
# (connection lost, shut down, disk full, a statement cancelled, a deadlock, the table gone) is worth one.
_REFUSED = (errors.DataError, errors.IntegrityError)


class PostgresStore:
    def __init__(self, url: str, instance: str, retention: Retention) -> None:
        self.url, self.instance, self.retention = url, instance, retention
        self._writer: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._pool: ConnectionPool[Any] | None = None
        self._pool_lock = threading.Lock()

    # -- the writer thread's side

    def write(self, rows: Sequence[Row]) -> None:
        try:
            connection = self._writer = self._writer or self._connect_writer()
            with connection.transaction():
                with connection.cursor() as cursor:
                    cursor.executemany(INSERT, [inserted(row, self.instance) for row in rows])
                connection.execute(PRUNE, (self.retention.max_records,))
                if self.retention.max_age is not None:
                    connection.execute(PRUNE_AGE, (time.time() - self.retention.max_age,))
        # A value psycopg cannot adapt (ValueError, TypeError) would fail the same way on every retry: the batch is
        # refused and dropped, as the database's own refusals are, rather than blocking the queue behind it.
        except (*_REFUSED, ValueError, TypeError) as error:
            raise StoreError(self._said(error)) from error
        except psycopg.Error as error:
            if isinstance(error, errors.UndefinedTable):
                self._schema_ready = False  # dropped under us: made again before the next try
            self.idle()
            raise StoreUnavailable(self._said(error)) from error

    def idle(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(psycopg.Error):
                self._writer.close()
            self._writer = None

    def _connect_writer(self) -> psycopg.Connection[Any]:
        connection = psycopg.connect(self.url, connect_timeout=CONNECT_SECONDS, autocommit=True,
                                     application_name=f"toolproxy {self.instance}"[:63],
                                     options=f"-c statement_timeout={WRITE_SECONDS * 1000}", **_KEEPALIVES)
        if not self._schema_ready:
            upgrade(connection)
            self._schema_ready = True
        return connection

    # -- the dashboard's side

    def recent(self, limit: int, filters: Filters) -> list[dict[str, Any]]:
        (rows,) = self._read([recent_query(limit, filters)]) or [[]]
        return [{"id": row_id, **json.loads(summary)} for row_id, summary in rows]

    def get(self, record_id: int) -> dict[str, Any] | None:
        (rows,) = self._read([(GET, (record_id,))]) or [[]]
        if not rows:
            return None
        row_id, record, instance = rows[0]
        return {"id": row_id, **stored.expand(json.loads(record)), "instance": instance}

    def find(self, request_id: str) -> int | None:
        (rows,) = self._read([(FIND, (request_id.replace("\x00", ""),))]) or [[]]
        return int(rows[0][0]) if rows else None

    def activity(self, since: float) -> list[tuple[Any, ...]]:
        (rows,) = self._read([(ACTIVITY, (since, ACTIVITY_ROWS))]) or [[]]
        return activity_of(rows)

    def stats(self) -> dict[str, Any]:
        queries = stats_queries()
        return stats_of(self._read(queries) or [[] for _ in queries])

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=READ_SECONDS)

    def _read(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[list[tuple[Any, ...]]] | None:
        """Each statement's rows from one snapshot (a read-only repeatable-read transaction), within the read
        deadline; None when the database could not answer in time (logged)."""
        try:
            with _deadline(), self._readers().connection(timeout=READ_SECONDS) as connection, \
                    connection.transaction():
                return [connection.execute(sql, params or None).fetchall()
                        for sql, params in statements]
        except errors.UndefinedTable:
            return None  # nothing written yet: the writer makes the table
        except (psycopg.Error, PoolTimeout, Timeout) as error:
            logger.warning("transform log: cannot read PostgreSQL: %s", self._said(error))
            return None

    def _readers(self) -> ConnectionPool[Any]:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url, min_size=0, max_size=READERS, open=False, timeout=READ_SECONDS, max_idle=60,
                    reconnect_timeout=READ_SECONDS * 2, name="toolproxy-log", configure=_read_only,
                    kwargs={"connect_timeout": max(2, int(READ_SECONDS)), "application_name":
                            f"toolproxy {self.instance} dashboard"[:63],
                            "options": f"-c statement_timeout={int(READ_SECONDS * 1000)}", **_KEEPALIVES})
                self._pool.open(wait=False)
            return self._pool

    def _said(self, error: BaseException) -> str:
        return hide_password(" ".join(str(error).split()) or type(error).__name__, self.url)


def _read_only(connection: psycopg.Connection[Any]) -> None:
    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    connection.read_only = True


@contextlib.contextmanager
def _deadline() -> Iterator[None]:
    """Under gevent, a hard stop at the read deadline (and a margin) whatever the network does: the server's own
    statement timeout cannot end a wait on a peer that went silent. Without gevent the keepalives bound it."""
    if not monkey.is_module_patched("select"):
        yield
        return
    with Timeout(READ_SECONDS * 2):
        yield
