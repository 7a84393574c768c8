"""The SQLite store's read side (sqlite_store.py): summaries, one record, stats and the charts' activity, each from
one read transaction on its own short connection, so the dashboard never waits on the writer."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sqlite3
import time
from typing import Any

from toolproxy.observe import stored
from toolproxy.observe.store import Filters

logger = logging.getLogger("toolproxy.observe.translog")

# The instance that wrote a record (row.py puts it in the summary; a record from before that has none).
_INSTANCE = "json_extract(summary, '$.instance')"
_STATS_TOTALS = ("SELECT count(*), coalesce(sum(typeof(status) = 'integer' AND status >= 400), 0), "
                 "coalesce(sum(repairs), 0), coalesce(sum(issue_count), 0), coalesce(sum(has_issues), 0) FROM records")
_STATS_GROUPS = {
    "by_route": "SELECT route, count(*) FROM records GROUP BY route ORDER BY 2 DESC",
    "by_protocol": "SELECT protocol, count(*) FROM records GROUP BY protocol ORDER BY 2 DESC",
    "by_status": "SELECT status, count(*) FROM records GROUP BY status ORDER BY 2 DESC",
    "by_dialect": "SELECT value, count(DISTINCT records.id) FROM records, json_each(records.dialects) "
                  "GROUP BY value ORDER BY 2 DESC",
    "by_model": "SELECT model, count(*) FROM records GROUP BY model ORDER BY 2 DESC",
    "by_client": "SELECT client, count(*) FROM records GROUP BY client ORDER BY 2 DESC",
    "by_instance": f"SELECT {_INSTANCE}, count(*) FROM records GROUP BY 1 ORDER BY 2 DESC",
}
_STATS_OVERHEAD = "SELECT overhead_ms FROM records ORDER BY overhead_ms"
# Per model, over the requests that offered tools: how many had a failed call (row.is_failed) in the last hour
# and the last day, of the records kept. The figure users compare providers by.
_FAILED = "coalesce(json_extract(summary, '$.failed'), 0)"
_STATS_FAILURES = (f"SELECT model, sum(started >= ?), sum(started >= ? AND {_FAILED}), count(*), sum({_FAILED}) "
                   "FROM records WHERE started >= ? AND (route LIKE 'tools%' OR route LIKE 'vtc%') "
                   "GROUP BY model ORDER BY 4 DESC LIMIT 50")
HOUR, DAY = 3600.0, 86400.0


def recent(path: str, limit: int, filters: Filters) -> list[dict[str, Any]]:
    """Summaries, newest first, of the records matching every filter given."""
    where, params = _filters(filters)
    sql = f"SELECT id, summary FROM records{where} ORDER BY id DESC LIMIT ?"  # `where`: fixed fragments only
    (rows,) = _read(path, [(sql, (*params, max(0, limit)))])
    return [{"id": row_id, **json.loads(summary)} for row_id, summary in rows]


def get(path: str, record_id: int) -> dict[str, Any] | None:
    """The full record (redacted and truncated as stored, each reference followed: stored.py) and the instance
    that wrote it, or None."""
    (rows,) = _read(path, [(f"SELECT id, record, {_INSTANCE} FROM records WHERE id = ?", (record_id,))])
    return {"id": rows[0][0], **stored.expand(json.loads(rows[0][1])), "instance": rows[0][2]} if rows else None


def find(path: str, request_id: str) -> int | None:
    """The row id of the record with this request id (the `X-Request-Id` a response carried), or None."""
    (rows,) = _read(path, [("SELECT id FROM records WHERE request_id = ? ORDER BY id DESC LIMIT 1", (request_id,))])
    return int(rows[0][0]) if rows else None


def stats(path: str, now: float | None = None) -> dict[str, Any]:
    """Counts over the stored records, all from one snapshot."""
    now = time.time() if now is None else now
    results = _read(path, [(_STATS_TOTALS, ()), (_STATS_OVERHEAD, ()),
                          (_STATS_FAILURES, (now - HOUR, now - HOUR, now - DAY)),
                          *((sql, ()) for sql in _STATS_GROUPS.values())])
    totals = results[0][0] if results[0] else (0, 0, 0, 0, 0)
    overhead = [value for (value,) in results[1]]
    stats: dict[str, Any] = dict(zip(("total", "errors", "repairs", "issues", "with_issues"), totals, strict=True))
    stats |= {"overhead_p50_ms": _percentile(overhead, 50), "overhead_p95_ms": _percentile(overhead, 95)}
    stats["failures"] = {str(model): {"hour": (int(failed_hour or 0), int(hour or 0)), "day": (int(failed), int(day))}
                         for model, hour, failed_hour, day, failed in results[2]}
    for name, rows in zip(_STATS_GROUPS, results[3:], strict=True):
        stats[name] = {"" if key is None else str(key): count for key, count in rows}
    return stats


# The dashboard's charts (observe/charts.py): what each record in the window says of its outcome and times, oldest
# first. `instance` is the summary's (None for a record written before row.py put it there).
_ACTIVITY = ("SELECT started, route, status, repairs, overhead_ms, json_extract(summary, '$.first_byte_ms'), "
             f"{_FAILED}, model, dialects, {_INSTANCE} FROM records WHERE started >= ? "
             "ORDER BY id DESC LIMIT ?")
ACTIVITY_ROWS = 20_000  # the newest records of the window at most: a chart of more would cost the loop too long


def activity(path: str, since: float) -> list[tuple[Any, ...]]:
    """(started, route, status, repairs, overhead_ms, first_byte_ms, failed, model, dialects JSON, instance) of
    each record started since `since`, newest first."""
    (rows,) = _read(path, [(_ACTIVITY, (since, ACTIVITY_ROWS))])
    return [tuple(row) for row in rows]


def _read(path: str, queries: list[tuple[str, tuple[Any, ...]]]) -> list[list[Any]]:
    """Each query's rows, in one read transaction. An unreadable store reads as empty (and is logged)."""
    if not os.path.isfile(path):
        return [[] for _ in queries]
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=2, isolation_level=None)) as connection:
            connection.execute("BEGIN")
            results = [connection.execute(sql, params).fetchall() for sql, params in queries]
            connection.execute("COMMIT")
            return results
    except sqlite3.Error as error:
        logger.warning("transform log: cannot read %s: %s", path, error)
        return [[] for _ in queries]


def _filters(filters: Filters) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause of fixed fragments, and its parameters: no value is ever written into the SQL."""
    has_issues = filters.has_issues
    wanted = (("model = ?", filters.model), ("client = ?", filters.client), ("status = ?", filters.status),
              ("has_issues = ?", None if has_issues is None else int(has_issues)), ("protocol = ?", filters.protocol),
              (f"{_INSTANCE} = ?", filters.instance), ("id > ?", filters.after_id))
    used = [(fragment, value) for fragment, value in wanted if value is not None]
    if not used:
        return "", ()
    return " WHERE " + " AND ".join(fragment for fragment, _ in used), tuple(value for _, value in used)


def _percentile(sorted_values: list[float], percent: float) -> float:
    """Nearest-rank percentile of values already in ascending order; 0.0 for none."""
    if not sorted_values:
        return 0.0
    return float(sorted_values[max(0, math.ceil(percent / 100 * len(sorted_values)) - 1)])
