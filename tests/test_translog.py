"""The transform log, the same behavioural suite over both stores (SQLite, and PostgreSQL on a real server): records
round-trip, filters, pruning by count and age, stats, redaction down to the stored bytes, truncation, several
processes and logs sharing one store, and an `add` that neither waits for the store nor raises. SQLite's own matters
(its file, a log written by an older version) at the end."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolproxy.observe import sqlite_store, translog
from toolproxy.observe.record import REDACTED, TransformRecord, redact, truncate
from toolproxy.observe.translog import TransformLog

SENTINEL = "sk-SENTINEL-7f3a9c"


def make_record(number: int = 0, **fields: Any) -> TransformRecord:
    values: dict[str, Any] = {"model": "qwen3", "client": "opencode/1.0", "route": "tools", "mode": "prompt",
                              "status": 200, "worker": os.getpid(), "overhead_ms": float(number),
                              **fields}
    return TransformRecord(f"req_{number:016d}", 1_700_000_000.0 + number, **values)


class Backend:
    """One store under test: logs made on it, everything it holds as text, and a way to make it stall."""

    def __init__(self, kind: str, tmp_path: Path, postgres: Any = None) -> None:
        self.kind, self.data_dir, self.postgres = kind, str(tmp_path), postgres
        self.url = postgres.fresh_database() if postgres is not None else None
        self.logs: list[TransformLog] = []

    def log(self, **settings: Any) -> TransformLog:
        log = TransformLog(self.data_dir, url=self.url, instance=settings.pop("instance", "box-1"), **settings)
        self.logs.append(log)
        return log

    def dump(self) -> str:
        """Every byte the store keeps, as text: SQLite's files, or PostgreSQL's table as psql prints it."""
        if self.postgres is None:
            return "".join(path.read_bytes().decode("latin-1") for path in Path(self.data_dir).iterdir())
        return str(self.postgres.sql("SELECT * FROM toolproxy_records", database="toolproxy"))

    @contextlib.contextmanager
    def stalled(self) -> Iterator[None]:
        """While in it, no write reaches the store: another client holds the table (or the file)."""
        if self.postgres is None:
            holder = sqlite3.connect(os.path.join(self.data_dir, sqlite_store.FILE_NAME), isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")
            try:
                yield
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            return
        import psycopg

        with psycopg.connect(self.url) as holder:
            holder.execute("LOCK TABLE toolproxy_records IN ACCESS EXCLUSIVE MODE")
            yield
            holder.rollback()

    def close(self) -> None:
        for log in self.logs:
            log.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    postgres = request.getfixturevalue("postgres") if request.param == "postgresql" else None
    chosen = Backend(request.param, tmp_path, postgres)
    yield chosen
    chosen.close()


@pytest.fixture
def store(backend: Backend) -> TransformLog:
    return backend.log(secrets=[SENTINEL])


def add_all(log: TransformLog, *records: TransformRecord) -> None:
    for record in records:
        log.add(record)
    log.flush()


def test_records_round_trip(store: TransformLog) -> None:
    call = {"name": "read", "arguments": {"path": "/a"}, "raw_arguments": '{"path": "/a"}', "dialect": "hermes",
            "valid": True}
    full = make_record(1, dialects=["hermes"], calls=[call], issues=["hermes: one thing"], repairs=1,
                       finish_reason="tool_calls", upstream_ms=12.5, tools=[{"type": "function"}],
                       raw_text="<tool_call>…</tool_call>", client_text="ok", error=None, request_bytes=10)
    add_all(store, make_record(0), full)
    newest, oldest = store.recent()
    assert (newest["request_id"], oldest["request_id"]) == (full.request_id, "req_0000000000000000")
    assert newest["calls"] == ["read"] and newest["dialects"] == ["hermes"] and newest["issue_count"] == 1
    assert newest["status"] == 200 and newest["repairs"] == 1 and newest["worker"] == os.getpid()
    assert newest["has_issues"] is True and newest["time"].count(":") == 2 and newest["instance"] == "box-1"
    shown = {key: value for key, value in full.to_dict().items() if key != "client_calls"}  # composed: stored.py
    assert store.get(newest["id"]) == {"id": newest["id"], **shown, "instance": "box-1"}
    assert store.get(newest["id"] + 100) is None
    assert store.find(full.request_id) == newest["id"] and store.find("req_none") is None


def test_filters_are_applied_in_the_store(backend: Backend) -> None:
    store, other = backend.log(), backend.log(instance="box-2")
    add_all(store, make_record(0), make_record(1, model="llama", status=502),
            make_record(2, client="curl/8", issues=["x"]), make_record(3, status="client_disconnected"),
            make_record(4, calls=[{"name": "a", "dialect": "hermes", "valid": False}]))
    add_all(other, make_record(5, protocol="messages"))

    def ids(**filters: Any) -> list[str]:
        return [row["request_id"][-1] for row in store.recent(**filters)]

    assert ids() == ["5", "4", "3", "2", "1", "0"]
    assert ids(model="llama") == ["1"]
    assert ids(client="curl/8") == ["2"]
    assert ids(status=502) == ids(status="502") == ["1"]
    assert ids(status="client_disconnected") == ["3"]
    assert ids(has_issues=True) == ["4", "2"]
    assert ids(has_issues=False) == ["5", "3", "1", "0"]
    assert ids(protocol="messages") == ids(instance="box-2") == ["5"] and len(ids(instance="box-1")) == 5
    assert ids(instance="box-2", protocol="chat") == []
    assert ids(limit=2) == ["5", "4"]
    third = store.recent()[2]["id"]
    assert ids(after_id=third) == ["5", "4"]
    assert ids(model="qwen3'; DROP TABLE records; --") == [] and len(ids()) == 6


def test_only_the_newest_max_records_are_kept(backend: Backend) -> None:
    log = backend.log(max_records=10)
    add_all(log, *(make_record(number) for number in range(25)))
    assert [row["request_id"][-2:] for row in log.recent(100)] == [f"{n:02d}" for n in range(24, 14, -1)]
    add_all(log, make_record(25))
    assert len(log.recent(100)) == 10 and log.stats()["total"] == 10


def test_records_older_than_the_max_age_are_dropped(backend: Backend) -> None:
    log = backend.log(max_age=3600)
    now = time.time()
    old, recent = make_record(1), make_record(2)
    old.started, recent.started = now - 7200, now - 60
    add_all(log, old, recent)
    assert [row["request_id"] for row in log.recent()] == [recent.request_id]


def test_stats_count_over_the_stored_records(backend: Backend) -> None:
    store, other = backend.log(), backend.log(instance="box-2")
    add_all(store, make_record(1, dialects=["hermes", "mistral"], repairs=2),
            make_record(2, dialects=["hermes"], issues=["a", "b"]),
            make_record(3, route="plain", status=502, model="llama"))
    add_all(other, make_record(4, route="stream", status="client_disconnected", client="curl/8"))
    stats = store.stats()
    assert stats["total"] == 4 and stats["errors"] == 1 and stats["repairs"] == 2
    assert stats["issues"] == 2 and stats["with_issues"] == 1
    assert stats["by_route"] == {"tools": 2, "plain": 1, "stream": 1}
    assert stats["by_status"] == {"200": 2, "502": 1, "client_disconnected": 1}
    assert stats["by_dialect"] == {"hermes": 2, "mistral": 1}
    assert stats["by_model"] == {"qwen3": 3, "llama": 1}
    assert stats["by_client"] == {"opencode/1.0": 3, "curl/8": 1}
    assert stats["by_instance"] == {"box-1": 3, "box-2": 1}
    assert (stats["overhead_p50_ms"], stats["overhead_p95_ms"]) == (2.0, 4.0)


def test_stats_count_failed_calls_per_model_over_the_hour_and_the_day(store: TransformLog) -> None:
    now = time.time()
    valid, invalid = [["hermes", "valid", False]], [["hermes", "invalid_json", False]]
    records = [make_record(1, attempts=valid), make_record(2, attempts=invalid), make_record(3, attempts=invalid),
               make_record(4, route="plain")]
    for record, age in zip(records, (60, 60, 7200, 60), strict=True):
        record.started = now - age
    add_all(store, *records)
    assert store.stats()["failures"] == {"qwen3": {"hour": (1, 2), "day": (2, 3)}}


def test_activity_lists_what_the_charts_count(backend: Backend) -> None:
    store, other = backend.log(), backend.log(instance="box-2")
    now = time.time()
    first, second, old = make_record(1, first_byte_ms=12.5, dialects=["hermes"]), make_record(2, status=502), \
        make_record(3)
    first.started, second.started, old.started = now - 30, now - 20, now - 4000
    add_all(store, first, old)
    add_all(other, second)
    rows = store.activity(now - 3600)
    assert [row[:8] for row in rows] == [(now - 20, "tools", 502, 0, 2.0, None, False, "qwen3"),
                                         (now - 30, "tools", 200, 0, 1.0, 12.5, False, "qwen3")]
    assert [(row[8], row[9]) for row in rows] == [("[]", "box-2"), ('["hermes"]', "box-1")]


def test_an_empty_store_has_empty_stats(store: TransformLog) -> None:
    stats = store.stats()
    assert stats["total"] == 0 and stats["overhead_p95_ms"] == 0.0 and stats["by_route"] == {}
    assert store.recent() == [] and store.activity(0) == [] and store.get(1) is None and store.find("x") is None


def test_a_secret_is_nowhere_in_the_store_not_even_in_its_bytes(backend: Backend) -> None:
    log = backend.log(secrets=[SENTINEL])
    leaky = f"key {SENTINEL} here"
    record = TransformRecord(
        f"req_{SENTINEL}", time.time(), client=leaky, address=leaky, model=leaky, upstream=leaky, route=leaky,
        mode=leaky, status=leaky, dialects=[leaky], issues=[leaky], actions=[leaky], finish_reason=leaky,
        error=leaky, raw_text=leaky * 3, client_text=leaky,
        calls=[{"name": leaky, "arguments": {"token": leaky, "nested": [leaky], leaky: 1}, "raw_arguments": leaky,
                "dialect": leaky, "valid": True}],
        tools=[{"type": "function", "function": {"name": "login", "description": leaky}}])
    add_all(log, record)
    everything = backend.dump()
    assert SENTINEL not in everything and REDACTED in everything
    stored = log.get(log.recent()[0]["id"])
    assert stored is not None and stored["client"] == f"key {REDACTED} here"


def test_a_string_under_a_credential_name_is_blanked_but_a_schema_is_not(store: TransformLog) -> None:
    schema = {"type": "object", "properties": {"api_key": {"type": "string"}}}
    add_all(store, make_record(1, calls=[{"name": "login", "arguments": {"OPENAI_API_KEY": "unknown-value-1"}}],
                               tools=[{"type": "function", "function": {"name": "login", "parameters": schema}}]))
    stored = store.get(store.recent()[0]["id"])
    assert stored is not None and stored["calls"][0]["arguments"] == {"OPENAI_API_KEY": REDACTED}
    assert stored["tools"][0]["function"]["parameters"] == schema


def test_credential_shaped_values_are_redacted_without_knowing_the_key() -> None:
    text = ('curl -H "Authorization: Bearer tok-123456789012" -d \'{"api_key": "s3cr3t-value", "n": 1}\' '
            "OPENAI_API_KEY=sk-live-xyz; x-api-key: k-1; authorization=Basic dXNlcjpwYXNz")
    cleaned = redact(text, [])
    for secret in ("tok-123456789012", "s3cr3t-value", "sk-live-xyz", "k-1", "dXNlcjpwYXNz"):
        assert secret not in cleaned
    assert '"n": 1' in cleaned and cleaned.count(REDACTED) == 5
    assert redact("the bearer of good news; api_key: {", []) == "the bearer of good news; api_key: {"
    assert redact("key abcd and abc", ["abcd", "abc", ""]) == f"key {REDACTED} and abc"


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
def test_redaction_is_linear_on_hostile_text() -> None:
    hostile = ("api_key:" + " " * 7) * 20_000 + "authorization" * 20_000
    redacted = redact(hostile, [SENTINEL])
    assert redacted.count("api_key:") + redacted.count(REDACTED) == 20_000  # each key kept, or its value redacted


def test_truncation_keeps_the_limit_and_says_how_much_was_cut(backend: Backend) -> None:
    assert truncate("abcdef", 6) == "abcdef"
    assert truncate("abcdefghij", 4) == "abcd\n[… 6 more characters cut]"
    log = backend.log(max_field_chars=100)
    tools = [{"type": "function", "function": {"name": f"tool{n}"}} for n in range(20)]
    add_all(log, make_record(1, raw_text="x" * 250, client_text="short", error="e" * 101, tools=tools,
                             issues=["i" * 150]))
    stored = log.get(log.recent()[0]["id"])
    assert stored is not None
    assert stored["raw_text"] == "x" * 100 + "\n[… 150 more characters cut]"
    assert stored["client_text"] == "short" and stored["error"].endswith("[… 1 more characters cut]")
    assert stored["issues"] == ["i" * 100 + "\n[… 50 more characters cut]"]
    assert isinstance(stored["tools"], str) and stored["tools"].startswith('[{"type":"function"')
    assert stored["tools"].endswith("more characters cut]")


@pytest.mark.parametrize("offset", [-len(SENTINEL), -5, -1, 0])
def test_a_secret_cut_by_the_field_limit_leaves_no_part_behind(backend: Backend, offset: int) -> None:
    """Only the kept part of a long field is redacted: a secret across the cut must still go whole."""
    log = backend.log(max_field_chars=1000, secrets=[SENTINEL])
    text = "x" * (1000 + offset) + SENTINEL + "y" * 5000
    add_all(log, make_record(1, raw_text=text, client_text="Authorization: Bearer " + "z" * 990 + "tok-abcdefghijklmn"))
    stored = log.get(log.recent()[0]["id"])
    assert stored is not None
    kept = stored["raw_text"].split("\n[…")[0]
    assert len(kept) <= 1000 and not any(SENTINEL[:n] in kept for n in range(4, len(SENTINEL) + 1))
    assert "zzz" not in stored["client_text"] and "tok-" not in stored["client_text"]


def _add_fifty(data_dir: str, url: str | None, tag: str) -> None:
    """In a spawned process: a worker of its own writing to the shared store."""
    log = TransformLog(data_dir, url=url, instance=tag)
    for number in range(50):
        log.add(make_record(number, client=tag, worker=os.getpid()))
    log.close()


def test_two_processes_write_to_one_store(backend: Backend) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_add_fifty, args=(backend.data_dir, backend.url, tag)) for tag in ("a", "b")]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
        process.close()
    rows = backend.log().recent(1000)
    assert len(rows) == 100
    assert {row["client"]: 0 for row in rows} == {"a": 0, "b": 0} and len({row["worker"] for row in rows}) == 2
    assert {row["instance"] for row in rows} == {"a", "b"}


def test_threads_adding_at_once_lose_nothing(store: TransformLog) -> None:
    def add_many(offset: int) -> None:
        for number in range(offset, offset + 50):
            store.add(make_record(number))

    threads = [threading.Thread(target=add_many, args=(offset,)) for offset in range(0, 200, 50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.flush()
    assert store.stats()["total"] == 200


def test_add_returns_at_once_whatever_the_store_does(store: TransformLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is stuck for as long as the adds take: were `add` to wait on it, this test would hang."""
    store_free = threading.Event()
    write = store.store.write

    def stuck(rows: Any) -> None:
        store_free.wait(120)
        write(rows)

    monkeypatch.setattr(store.store, "write", stuck)
    for number in range(1000):
        store.add(make_record(number, raw_text="text " * 40, issues=["an issue"]))
    assert not store_free.is_set()
    store_free.set()
    store.flush(timeout=60)
    assert store.stats()["total"] == 1000


def test_a_writer_that_went_idle_is_started_again(store: TransformLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(translog, "IDLE_SECONDS", 0.05)
    add_all(store, make_record(1))
    deadline = time.monotonic() + 5
    while store._running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not store._running
    add_all(store, make_record(2))
    assert store.stats()["total"] == 2


def test_a_record_that_cannot_be_stored_is_dropped_alone(store: TransformLog) -> None:
    broken = make_record(1)
    broken.started = "yesterday"  # type: ignore[assignment]
    store.add(broken)
    add_all(store, make_record(2, raw_text="lone \ud800 surrogate and a \x00", model="m\udfff\x00"))
    (row,) = store.recent()
    stored = store.get(row["id"])
    # Stored as valid text: a lone surrogate becomes U+FFFD, so no page that shows it can fail to encode it; a NUL
    # (which PostgreSQL's text refuses) stays in the JSON of the record and of the summary.
    assert stored is not None and stored["raw_text"] == "lone \ufffd surrogate and a \x00"
    assert row["model"] == "m\ufffd\x00" and stored["model"] == "m\ufffd\x00"


def test_several_logs_share_the_store(backend: Backend) -> None:
    first, second = backend.log(), backend.log(instance="box-2")
    add_all(first, make_record(1))
    add_all(second, make_record(2))
    assert len(first.recent()) == len(second.recent()) == 2


def test_rows_waiting_for_a_stuck_store_are_bounded_in_bytes(backend: Backend,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """A writer that cannot keep up (here: another client holds the table, or the file) must cost records, not
    memory: 200 records of 1 MB each are refused beyond the byte bound instead of piling up in the worker."""
    import tracemalloc

    log = backend.log(max_field_chars=2_000_000)
    add_all(log, make_record(0))  # the table exists, for the holder to lock
    dropped: list[tuple[int, str]] = []
    log._on_drop = lambda count, reason: dropped.append((count, reason))
    with backend.stalled():
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            with caplog.at_level(logging.WARNING):
                for number in range(1, 200):
                    log.add(make_record(number, raw_text="x" * (1 << 20) + str(number)))
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert peak < translog.MAX_PENDING_BYTES + 40 * (1 << 20), f"{peak >> 20} MiB held for the writer"
    assert "the store is not keeping up" in caplog.text
    assert dropped and {reason for _, reason in dropped} == {"queue_full"} and sum(n for n, _ in dropped) > 100
    log.flush(60)
    assert 1 < log.stats()["total"] < 100  # what waited was written once the store was free


# SQLite's own: its file, and a log written by an older version.

@pytest.mark.parametrize("where", ["file", "under_a_file"])
def test_a_store_that_cannot_be_written_never_fails_add(tmp_path: Path, where: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    data_dir = blocker if where == "file" else blocker / "data"
    dropped: list[tuple[int, str]] = []
    with caplog.at_level(logging.WARNING, logger="toolproxy.observe.translog"):
        log = TransformLog(str(data_dir), on_drop=lambda count, reason: dropped.append((count, reason)))
        log.add(make_record(1))
        log.flush()
    assert "record(s) dropped" in caplog.text
    assert log.recent() == [] and log.get(1) is None and log.stats()["total"] == 0
    log.add(make_record(2))  # the next add reports what the writer dropped
    assert dropped[0] == (1, "refused")
    log.flush()


def test_a_log_written_before_protocols_gains_the_column_and_keeps_its_records(tmp_path: Path) -> None:
    old_schema = ("CREATE TABLE records (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, started REAL NOT NULL, "
                  "model TEXT NOT NULL, client TEXT NOT NULL, route TEXT NOT NULL, status, has_issues INTEGER NOT "
                  "NULL, worker INTEGER NOT NULL, overhead_ms REAL NOT NULL, repairs INTEGER NOT NULL, issue_count "
                  "INTEGER NOT NULL, dialects TEXT NOT NULL, summary TEXT NOT NULL, record TEXT NOT NULL)")
    with contextlib.closing(sqlite3.connect(tmp_path / sqlite_store.FILE_NAME)) as connection:
        connection.executescript(old_schema)
        connection.execute("INSERT INTO records (request_id, started, model, client, route, status, has_issues, "
                           "worker, overhead_ms, repairs, issue_count, dialects, summary, record) VALUES "
                           "('req_old', 1, 'm', 'c', 'plain', 200, 0, 1, 0, 0, 0, '[]', '{}', '{}')")
        connection.commit()
    log = TransformLog(str(tmp_path), instance="box-1")
    add_all(log, make_record(1, protocol="messages"))
    assert [row["request_id"] for row in log.recent(protocol="messages")] == ["req_0000000000000001"]
    assert [row["id"] for row in log.recent(protocol="chat")] == [1]  # the old record reads as chat
    assert log.stats()["by_protocol"] == {"chat": 1, "messages": 1}
    assert log.stats()["by_instance"] == {"box-1": 1, "": 1}  # the old record names no instance
    assert log.get(1) == {"id": 1, "instance": None}
