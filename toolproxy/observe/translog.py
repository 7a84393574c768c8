"""The transform log: one `TransformRecord` per request, kept in SQLite under the data directory so that every
gunicorn worker writes to, and the dashboard reads from, the same store. Adding a record never waits on the disk."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import math
import os
import queue
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gevent import monkey

from toolproxy.wire import jsonwire

logger = logging.getLogger(__name__)

REDACTED = "[redacted]"
FILE_NAME = "translog.sqlite3"
BATCH_ROWS = 100
BATCH_SECONDS = 0.2
IDLE_SECONDS = 5.0  # a writer with nothing to do ends, and closes its connection; the next add starts another
MAX_PENDING = 10_000  # rows waiting for the disk; beyond this a stuck disk costs records, never memory
SCHEMA_ATTEMPTS = 20
# (word that must be there, pattern): bounded quantifiers and a final greedy class, so linear; the pattern runs
# only when its word is in the text, because a regex scan costs far more than `in`.
_SECRET_PATTERNS = (
    ("authorization", re.compile(
        r"""(?i)(authorization["']?\s{0,8}[:=]\s{0,8}["']?\s{0,8}(?:bearer\s{1,8}|basic\s{1,8})?)[^\s"',;]+""")),
    ("bearer", re.compile(r"\b(Bearer\s{1,8})[A-Za-z0-9._~+/=-]{12,}")),
    ("key", re.compile(r"""(?i)(api[_-]?key["']?\s{0,8}[:=]\s{0,8}["']?)[^\s"',;&{}\[\]]+""")),
)
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?key|authorization)$")  # api_key, x-api-key, OPENAI_API_KEY
_SCHEMA = """CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, started REAL NOT NULL, model TEXT NOT NULL,
    client TEXT NOT NULL, route TEXT NOT NULL,
    status,  -- untyped on purpose: an HTTP status stays an integer, "client_disconnected" stays text
    has_issues INTEGER NOT NULL, worker INTEGER NOT NULL, overhead_ms REAL NOT NULL, repairs INTEGER NOT NULL,
    issue_count INTEGER NOT NULL,
    dialects TEXT NOT NULL,  -- JSON list, for stats() through json_each
    summary TEXT NOT NULL,   -- JSON: what recent() lists, so listing never parses the big records
    record TEXT NOT NULL     -- JSON: the whole record, redacted and truncated
)"""
_INSERT = ("INSERT INTO records (request_id, started, model, client, route, status, has_issues, worker, overhead_ms, "
           "repairs, issue_count, dialects, summary, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_PRUNE = "DELETE FROM records WHERE id <= (SELECT max(id) FROM records) - ?"
_STATS_TOTALS = ("SELECT count(*), coalesce(sum(typeof(status) = 'integer' AND status >= 400), 0), "
                 "coalesce(sum(repairs), 0), coalesce(sum(issue_count), 0), coalesce(sum(has_issues), 0) FROM records")
_STATS_GROUPS = {
    "by_route": "SELECT route, count(*) FROM records GROUP BY route ORDER BY 2 DESC",
    "by_status": "SELECT status, count(*) FROM records GROUP BY status ORDER BY 2 DESC",
    "by_dialect": "SELECT value, count(DISTINCT records.id) FROM records, json_each(records.dialects) "
                  "GROUP BY value ORDER BY 2 DESC",
    "by_model": "SELECT model, count(*) FROM records GROUP BY model ORDER BY 2 DESC",
    "by_client": "SELECT client, count(*) FROM records GROUP BY client ORDER BY 2 DESC",
}
_STATS_OVERHEAD = "SELECT overhead_ms FROM records ORDER BY overhead_ms"

Row = tuple[Any, ...]


@dataclass(slots=True)
class TransformRecord:
    """One per request, filled stage by stage."""

    request_id: str  # "req_" + 16 random letters/digits, set at creation
    started: float  # time.time()
    client: str = ""  # User-Agent
    address: str = ""  # client IP
    model: str = ""
    upstream: str = ""  # scheme://host:port only, never a path with credentials, never a key
    route: str = ""  # tools_stream, tools, stream, plain, vtc, vtc_stream, vtc_bridge, loop_guard, error
    mode: str = ""  # native or prompt (+ " vtc")
    status: int | str = 0  # HTTP status, or "client_disconnected"
    dialects: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)  # name, arguments, raw_arguments, dialect, valid
    issues: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # loop guard / access policy actions
    repairs: int = 0
    finish_reason: str | None = None
    upstream_ms: float = 0.0
    overhead_ms: float = 0.0
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
    tools: Any = None  # the request's tools (as sent)
    raw_text: str = ""  # the model's text as the upstream returned it
    client_text: str = ""  # what the client received (content, and the calls as JSON)
    worker: int = 0  # os.getpid() of the worker that served it
    error_code: str | None = None  # ProxyError.code when the request failed; labels the upstream-error metric
    client_content: str | None = None  # the content alone, for the downloadable test case

    def has_issues(self) -> bool:
        return bool(self.issues) or any(call.get("valid") is False for call in self.calls)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (of 4 characters or more) and anything shaped like a credential replaced."""
    return _redact(text, _usable(secrets))


def truncate(text: str, limit: int) -> str:
    """The first `limit` characters, and how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters cut]"


def _usable(secrets: Sequence[str]) -> tuple[str, ...]:
    # Longest first, so a key that contains a shorter key is still replaced whole. Shorter ones would redact
    # ordinary words.
    return tuple(sorted({secret for secret in secrets if len(secret) >= 4}, key=len, reverse=True))


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if len(text) < 8:  # shorter than any credential the patterns look for
        return text
    lowered = text.lower()
    for word, pattern in _SECRET_PATTERNS:
        if word in lowered:
            text = pattern.sub(lambda match: match.group(1) + REDACTED, text)
    return text


class TransformLog:
    """Records in `<data_dir>/translog.sqlite3`. `add` only queues; a writer thread of this process stores the
    queue in batches. Reads open their own short connection."""

    def __init__(self, data_dir: str, *, max_records: int = 2000, max_field_chars: int = 65536,
                 secrets: Sequence[str] = ()) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.max_records = max_records
        self.max_field_chars = max_field_chars
        self._secrets = _usable(secrets)
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
            self._enqueue(self._row(record))
        except Exception:  # the log is a bystander: whatever goes wrong here must not fail the request
            logger.exception("transform log: record %s dropped", getattr(record, "request_id", "?"))

    def flush(self, timeout: float = 5) -> None:
        """Wait until everything added so far is written (or given up on), at most `timeout` seconds."""
        if self._pid != os.getpid() or not self._running:
            return  # no writer means nothing queued in this process
        barrier = _Barrier()
        self._enqueue(barrier)
        deadline = time.monotonic() + timeout
        while not barrier.done and time.monotonic() < deadline:
            time.sleep(0.005)  # under gevent's patching a cooperative sleep: other greenlets run meanwhile
        if not barrier.done:
            logger.warning("transform log: flush gave up after %.1f s", timeout)

    def _prepare_process(self) -> None:
        """Fresh queue, lock and writer state: after a fork the parent's belong to a thread that is not here."""
        self._pid = os.getpid()
        self._queue: Any = monkey.get_original("queue", "SimpleQueue")()
        self._lock: Any = monkey.get_original("_thread", "allocate_lock")()
        self._running = False

    def _enqueue(self, item: Row | _Barrier) -> None:
        if self._pid != os.getpid():
            self._prepare_process()
        if isinstance(item, tuple) and self._queue.qsize() >= MAX_PENDING:
            self._dropped += 1
            if self._dropped % 1000 == 1:
                logger.warning("transform log: the disk is not keeping up; %d record(s) dropped", self._dropped)
            return
        self._queue.put(item)
        with self._lock:
            if not self._running:
                _start_thread(self._run, (self._queue,))
                self._running = True

    def _row(self, record: TransformRecord) -> Row:
        # Shallow: `_scrub` builds new containers, and deep-copying large tools first would double the cost.
        data = self._scrub({item.name: getattr(record, item.name) for item in dataclasses.fields(record)})
        data["tools"] = self._clip_tools(data["tools"])
        summary = _summary(data, record.has_issues())
        status = data["status"] if isinstance(data["status"], int) else _text(data["status"])
        # Converted here, so a malformed record costs itself in `add`, never its whole batch in the writer.
        return (_text(data["request_id"]), float(record.started), _text(data["model"]), _text(data["client"]),
                _text(data["route"]), status, int(summary["has_issues"]), int(record.worker or 0),
                float(record.overhead_ms or 0), int(record.repairs or 0), summary["issue_count"],
                _json(data["dialects"]), _json(summary), _json(data))

    def _scrub(self, value: Any) -> Any:
        """Every string redacted, then cut to the field limit; a string under a credential's name blanked (only a
        string: a tool's schema may well describe a parameter called `api_key`)."""
        if isinstance(value, str):
            return truncate(_redact(value, self._secrets), self.max_field_chars)
        if isinstance(value, dict):
            return {self._scrub(str(key)): REDACTED if isinstance(item, str) and _SECRET_KEY.search(str(key))
                    else self._scrub(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._scrub(item) for item in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self._scrub(str(value))

    def _clip_tools(self, tools: Any) -> Any:
        """The tools as sent, or, when their JSON is over the field limit, that JSON cut (a string)."""
        text = _json(tools)
        return tools if len(text) <= self.max_field_chars else truncate(text, self.max_field_chars)

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
        """The next batch: the first item, then what comes within BATCH_SECONDS, at most BATCH_ROWS; a barrier
        ends it early. None once the queue stayed empty for IDLE_SECONDS (the writer then ends)."""
        try:
            items = [pending.get(timeout=IDLE_SECONDS)]
        except queue.Empty:
            return None if self._retire(pending) else []
        deadline = time.monotonic() + BATCH_SECONDS
        while len(items) < BATCH_ROWS and not isinstance(items[-1], _Barrier):
            try:
                items.append(pending.get(timeout=max(0.0, deadline - time.monotonic())))
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

    def recent(self, limit: int = 100, *, model: str | None = None, client: str | None = None,
               status: int | str | None = None, has_issues: bool | None = None,
               after_id: int | None = None) -> list[dict[str, Any]]:
        """Summaries, newest first, of the records matching every filter given."""
        where, params = _filters(model=model, client=client, status=status, has_issues=has_issues,
                                 after_id=after_id)
        sql = f"SELECT id, summary FROM records{where} ORDER BY id DESC LIMIT ?"  # `where`: fixed fragments only
        (rows,) = self._read([(sql, (*params, max(0, limit)))])
        return [{"id": row_id, **json.loads(summary)} for row_id, summary in rows]

    def get(self, record_id: int) -> dict[str, Any] | None:
        """The full record (redacted and truncated as stored), or None."""
        (rows,) = self._read([("SELECT id, record FROM records WHERE id = ?", (record_id,))])
        return {"id": rows[0][0], **json.loads(rows[0][1])} if rows else None

    def stats(self) -> dict[str, Any]:
        """Counts over the stored records, all from one snapshot."""
        results = self._read([(_STATS_TOTALS, ()), (_STATS_OVERHEAD, ()),
                              *((sql, ()) for sql in _STATS_GROUPS.values())])
        totals = results[0][0] if results[0] else (0, 0, 0, 0, 0)
        overhead = [value for (value,) in results[1]]
        stats: dict[str, Any] = dict(zip(("total", "errors", "repairs", "issues", "with_issues"), totals, strict=True))
        stats |= {"overhead_p50_ms": _percentile(overhead, 50), "overhead_p95_ms": _percentile(overhead, 95)}
        for name, rows in zip(_STATS_GROUPS, results[2:], strict=True):
            stats[name] = {str(key): count for key, count in rows}
        return stats

    def _read(self, queries: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
        """Each query's rows, in one read transaction. An unreadable store reads as empty (and is logged)."""
        if not os.path.isfile(self.path):
            return [[] for _ in queries]
        try:
            with contextlib.closing(sqlite3.connect(self.path, timeout=2, isolation_level=None)) as connection:
                connection.execute("BEGIN")
                results = [connection.execute(sql, params).fetchall() for sql, params in queries]
                connection.execute("COMMIT")
                return results
        except sqlite3.Error as error:
            logger.warning("transform log: cannot read %s: %s", self.path, error)
            return [[] for _ in queries]


class _Barrier:
    """Queued by `flush`: the writer marks it done once everything queued before it is written."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


def _start_thread(function: Callable[..., None], args: tuple[Any, ...]) -> None:
    # A real OS thread whether or not gevent has patched the process: sqlite3 blocks whatever thread it runs in,
    # and a patched threading.Thread is a greenlet on the hub. See the report on why not the hub's threadpool.
    monkey.get_original("_thread", "start_new_thread")(function, args)


def _retry_locked(action: Callable[[], None]) -> None:
    for attempt in range(SCHEMA_ATTEMPTS):
        try:
            action()
            return
        except sqlite3.OperationalError as error:
            if not ("locked" in str(error) or "busy" in str(error)) or attempt == SCHEMA_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def _summary(data: dict[str, Any], has_issues: bool) -> dict[str, Any]:
    keys = ("request_id", "started", "model", "client", "route", "mode", "status", "dialects", "repairs",
            "finish_reason", "upstream_ms", "overhead_ms", "worker")
    return {**{key: data[key] for key in keys},
            "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data["started"])),
            "calls": [call.get("name") for call in data["calls"] if isinstance(call, dict)],
            "issue_count": len(data["issues"]), "has_issues": has_issues}


def _filters(*, model: str | None, client: str | None, status: int | str | None, has_issues: bool | None,
             after_id: int | None) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause of fixed fragments, and its parameters: no value is ever written into the SQL."""
    if isinstance(status, str) and status.isdigit():
        status = int(status)  # from a query string: "502" means the integer status stored
    wanted = (("model = ?", model), ("client = ?", client), ("status = ?", status),
              ("has_issues = ?", None if has_issues is None else int(has_issues)), ("id > ?", after_id))
    used = [(fragment, value) for fragment, value in wanted if value is not None]
    if not used:
        return "", ()
    return " WHERE " + " AND ".join(fragment for fragment, _ in used), tuple(value for _, value in used)


def _percentile(sorted_values: list[float], percent: float) -> float:
    """Nearest-rank percentile of values already in ascending order; 0.0 for none."""
    if not sorted_values:
        return 0.0
    return float(sorted_values[max(0, math.ceil(percent / 100 * len(sorted_values)) - 1)])


def _text(value: Any) -> str:
    """A text column: SQLite stores UTF-8, and a lone surrogate (legal in a JSON escape) is not UTF-8."""
    return ("" if value is None else str(value)).encode("utf-8", "replace").decode("utf-8")


def _json(value: Any) -> str:
    # jsonwire falls back to ASCII escapes for lone surrogates, which SQLite (UTF-8) would refuse.
    return jsonwire.dumps(value).decode("utf-8")
