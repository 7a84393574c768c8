"""The PostgreSQL store's statements: the row as inserted, pruning, and the reads, which answer as queries.py's do
for SQLite (the same behavioural suite runs over both: tests/test_translog.py). Statements are fixed text: a value
is only ever a parameter."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from toolproxy.observe.postgres_schema import TABLE
from toolproxy.observe.row import Row
from toolproxy.observe.store import Filters

COLUMNS = ("instance", "request_id", "started", "model", "client", "route", "protocol", "status", "http_status",
           "has_issues", "worker", "overhead_ms", "repairs", "issue_count", "failed", "first_byte_ms", "dialects",
           "summary", "record")
INSERT = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
# The newest `max_records` of the whole fleet are kept: the first row past them, and every older one, go.
PRUNE = f"DELETE FROM {TABLE} WHERE id <= (SELECT id FROM {TABLE} ORDER BY id DESC OFFSET %s LIMIT 1)"
PRUNE_AGE = f"DELETE FROM {TABLE} WHERE started < %s"

_TOOLS = "(route LIKE 'tools%%' OR route LIKE 'vtc%%')"
STATS_TOTALS = (f"SELECT count(*), count(*) FILTER (WHERE http_status >= 400), coalesce(sum(repairs), 0), "
                f"coalesce(sum(issue_count), 0), count(*) FILTER (WHERE has_issues), "
                f"percentile_disc(0.5) WITHIN GROUP (ORDER BY overhead_ms), "
                f"percentile_disc(0.95) WITHIN GROUP (ORDER BY overhead_ms) FROM {TABLE}")
STATS_FAILURES = (f"SELECT model, count(*) FILTER (WHERE started >= %s), count(*) FILTER (WHERE started >= %s AND "
                  f"failed), count(*), count(*) FILTER (WHERE failed) FROM {TABLE} WHERE started >= %s AND {_TOOLS} "
                  "GROUP BY model ORDER BY 4 DESC LIMIT 50")
STATS_GROUPS = {
    "by_route": f"SELECT route, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
    "by_protocol": f"SELECT protocol, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
    "by_status": f"SELECT status, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
    "by_dialect": f"SELECT name, count(DISTINCT id) FROM {TABLE}, unnest(dialects) AS name GROUP BY 1 ORDER BY 2 DESC",
    "by_model": f"SELECT model, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
    "by_client": f"SELECT client, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
    "by_instance": f"SELECT instance, count(*) FROM {TABLE} GROUP BY 1 ORDER BY 2 DESC",
}
ACTIVITY = (f"SELECT started, route, http_status, status, repairs, overhead_ms, first_byte_ms, failed, model, "
            f"dialects, instance FROM {TABLE} WHERE started >= %s ORDER BY id DESC LIMIT %s")
ACTIVITY_ROWS = 20_000  # as queries.ACTIVITY_ROWS: a chart of more would cost the loop too long
GET = f"SELECT id, record, instance FROM {TABLE} WHERE id = %s"
FIND = f"SELECT id FROM {TABLE} WHERE request_id = %s ORDER BY id DESC LIMIT 1"
HOUR, DAY = 3600.0, 86400.0


def inserted(row: Row, instance: str) -> tuple[Any, ...]:
    """A row (row.py) as INSERT's parameters. PostgreSQL's text takes no NUL character (SQLite's does): one in a
    short column becomes U+FFFD; the JSON columns have none (JSON escapes it)."""
    (request_id, started, model, client, route, protocol, status, has_issues, worker, overhead_ms, repairs,
     issue_count, dialects, summary, record) = row
    facts = json.loads(summary)
    first_byte = facts.get("first_byte_ms")
    return (_text(instance), _text(request_id), started, _text(model), _text(client), _text(route), _text(protocol),
            _text(str(status)), status if isinstance(status, int) and abs(status) < 1 << 31 else None,
            bool(has_issues), worker if abs(worker) < 1 << 31 else 0, overhead_ms, repairs, issue_count,
            bool(facts.get("failed")),
            float(first_byte) if isinstance(first_byte, (int, float)) and math.isfinite(first_byte) else None,
            [_text(name) for name in json.loads(dialects)], summary,
            record.decode("utf-8") if isinstance(record, bytes) else record)


def recent_query(limit: int, filters: Filters) -> tuple[str, tuple[Any, ...]]:
    wanted: tuple[tuple[str, Any], ...] = (
        ("model = %s", filters.model), ("client = %s", filters.client), ("protocol = %s", filters.protocol),
        ("instance = %s", filters.instance), ("has_issues = %s", filters.has_issues), ("id > %s", filters.after_id))
    status = filters.status
    if isinstance(status, int):
        wanted += (("http_status = %s", status),)
    elif status is not None:
        wanted += (("status = %s AND http_status IS NULL", status),)
    used = [(fragment, value) for fragment, value in wanted if value is not None]
    where = " WHERE " + " AND ".join(fragment for fragment, _ in used) if used else ""
    return (f"SELECT id, summary FROM {TABLE}{where} ORDER BY id DESC LIMIT %s",
            (*(value for _, value in used), max(0, limit)))


def stats_queries(now: float | None = None) -> list[tuple[str, tuple[Any, ...]]]:
    now = time.time() if now is None else now
    return [(STATS_TOTALS, ()), (STATS_FAILURES, (now - HOUR, now - HOUR, now - DAY)),
            *((sql, ()) for sql in STATS_GROUPS.values())]


def stats_of(results: list[list[tuple[Any, ...]]]) -> dict[str, Any]:
    """The stats as queries.stats shapes them."""
    total, errors, repairs, issues, with_issues, p50, p95 = results[0][0] if results[0] else (0,) * 7
    stats: dict[str, Any] = {"total": total, "errors": errors, "repairs": int(repairs), "issues": int(issues),
                             "with_issues": with_issues, "overhead_p50_ms": float(p50 or 0.0),
                             "overhead_p95_ms": float(p95 or 0.0)}
    stats["failures"] = {str(model): {"hour": (failed_hour, hour), "day": (failed, day)}
                         for model, hour, failed_hour, day, failed in results[1]}
    for name, rows in zip(STATS_GROUPS, results[2:], strict=True):
        stats[name] = {str(key): count for key, count in rows}
    return stats


def activity_of(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """charts.Activity's rows: the status as SQLite keeps it (a number, or the word), dialects as JSON."""
    return [(started, route, http_status if http_status is not None else status, repairs, overhead, first_byte,
             failed, model, json.dumps(dialects), instance)
            for started, route, http_status, status, repairs, overhead, first_byte, failed, model, dialects, instance
            in rows]


def _text(value: Any) -> str:
    return str(value).replace("\x00", "\ufffd")
