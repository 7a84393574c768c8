"""The dashboard's table of records, declared once: its columns (a field of the record's summary, observe/row.py,
its title and how it is shown) and its filters. The template draws the header, every row and the filter form from
these; the script that adds new rows reads the same columns from the table's `data-columns` attribute."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

# link: the record's page; list: the values joined; ms: milliseconds with one decimal (empty when unknown).
Kind = Literal["text", "link", "list", "ms"]


@dataclass(frozen=True, slots=True)
class Column:
    key: str  # the field of the record's summary
    title: str
    kind: Kind = "text"


@dataclass(frozen=True, slots=True)
class Filter:
    key: str  # the query string's name, and the record field it selects on
    label: str
    flag: bool = False  # a checkbox: on or off
    size: int = 0  # the input's width in characters (0: the browser's)


COLUMNS = (
    Column("id", "#", "link"), Column("time", "time"), Column("model", "model"), Column("client", "client"),
    Column("protocol", "protocol"), Column("route", "route"), Column("strategy", "strategy"),
    Column("status", "status"), Column("calls", "calls", "list"), Column("dialects", "dialects", "list"),
    Column("issue_count", "issues"), Column("overhead_ms", "overhead ms", "ms"),
    Column("upstream_ms", "upstream ms", "ms"), Column("first_byte_ms", "first byte ms", "ms"),
    Column("instance", "instance"),
)
FILTERS = (
    Filter("model", "model"), Filter("client", "client"), Filter("status", "status", size=6),
    Filter("protocol", "protocol", size=9), Filter("instance", "instance", size=12),
    Filter("has_issues", "has issues", flag=True),
)
FILTER_KEYS = tuple(item.key for item in FILTERS)
# The filters that select on a text field as written (status and the flags are parsed first: web/dashboard.py).
TEXT_FILTERS = tuple(item.key for item in FILTERS if not item.flag and item.key != "status")


def script_columns() -> str:
    """The columns as the script reads them (the template escapes this into an attribute)."""
    return json.dumps([{"key": column.key, "kind": column.kind} for column in COLUMNS])
