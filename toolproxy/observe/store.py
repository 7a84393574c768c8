"""Where the transform log's rows are kept, behind one interface: SQLite under the data directory (the default: one
instance, nothing to set up) or PostgreSQL (`TOOLPROXY_LOG_URL`: every instance of a fleet writes to the same
tables, and any instance's dashboard reads them all). The queue and the writer thread in front of a store are
translog.py's (which opens the store its settings name); the routes and pages see only `TransformLog`, whose reads
are this interface's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolproxy.observe.row import Row

READ_SECONDS = 2.0  # a dashboard read's deadline: a slow or absent database shows an empty page, never a hung one


class StoreError(Exception):
    """A batch the store refused: dropped (and counted), never retried."""


class StoreUnavailable(StoreError):
    """The store cannot be reached or cannot take rows now (down, slow, full): the batch waits and is tried again."""


class StoreConfigError(Exception):
    """The store's setting is wrong (a bad URL, a refused password, no such database): said at start-up, in one
    sentence that names the setting, any password masked."""


@dataclass(frozen=True, slots=True)
class Retention:
    """How much the log keeps: the newest `max_records` (of the whole fleet, in a shared store), none older than
    `max_age` seconds where that is set."""

    max_records: int = 2000
    max_age: float | None = None


@dataclass(frozen=True, slots=True)
class Filters:
    """What the dashboard's record list selects on (web/columns.py declares them): each one given must match."""

    model: str | None = None
    client: str | None = None
    status: int | str | None = None
    has_issues: bool | None = None
    protocol: str | None = None
    instance: str | None = None
    after_id: int | None = None

    def __post_init__(self) -> None:
        status = self.status
        if isinstance(status, str) and status.isascii() and status.isdigit() and len(status) <= 3:
            # From a query string: "502" means the integer status stored ("²" is no number).
            object.__setattr__(self, "status", int(status))


class Store(Protocol):
    """A transform log's storage. `write` runs in the log's writer thread only; the reads in any request, each
    within its own deadline, an unreadable store reading as empty (and logged)."""

    def write(self, rows: Sequence[Row]) -> None:
        """Store the rows and prune to the retention, in one transaction. StoreUnavailable: try again later;
        another StoreError: the rows are dropped."""

    def idle(self) -> None:
        """The writer thread is ending: close what it opened (a connection is used by one thread only)."""

    def recent(self, limit: int, filters: Filters) -> list[dict[str, Any]]:
        """Summaries of the records matching `filters`, newest first, each with its `id`."""

    def get(self, record_id: int) -> dict[str, Any] | None:
        """The full record (redacted and truncated as stored, references followed: stored.py), or None."""

    def find(self, request_id: str) -> int | None:
        """The id of the newest record with this request id (a response's `X-Request-Id`), or None."""

    def activity(self, since: float) -> list[tuple[Any, ...]]:
        """What the charts count of each record started since `since` (charts.Activity's row), newest first."""

    def stats(self) -> dict[str, Any]:
        """Counts over the stored records, from one snapshot (queries.stats says which)."""

    def close(self) -> None:
        """Let go of every connection (the log is done with)."""

