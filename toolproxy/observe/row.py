"""The row a `TransformRecord` becomes in the transform log: every string made valid, redacted and cut to the field
limit, the tools clipped, and the whole serialized once.

Most records need none of that changing: orjson serializes them in one call and a few byte searches of that JSON
prove that the walk in Python would store the same text. Only the others (a secret, a credential word, a field over
the limit, anything orjson refuses) take the walk, which is the definition of what is stored."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from toolproxy.observe import stored
from toolproxy.observe.record import (
    CREDENTIAL_WORDS,
    FOLDING,
    REDACTED,
    SECRET_KEY,
    TransformRecord,
    redact_and_cut_noting,
    truncate,
)
from toolproxy.transform.response import EMPTY_ANSWER
from toolproxy.wire import jsonwire

Row = tuple[Any, ...]
FIELDS = tuple(item.name for item in dataclasses.fields(TransformRecord))
TOOLS_KEPT = 16  # distinct tool lists whose stored form is kept: agents send the same tools with every request
# Anything orjson would write differently from the walk goes to `default`, which refuses it. A record holds what
# JSON decoding and the routes put there; an Enum member, which orjson writes by value, is never among it.
_PLAIN = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
# record.py's credential words and folding letters, as bytes of the record's JSON.
_WORDS = tuple(word.encode() for word in CREDENTIAL_WORDS)
_FOLDING = tuple(char.encode() for char in FOLDING)


@dataclass(frozen=True, slots=True)
class _Tools:
    value: Any  # the tools as stored: scrubbed, or their JSON cut to the field limit (a string)
    json: bytes  # `value` serialized


_NO_TOOLS = _Tools(None, b"null")


class Rows:
    """Rows for one transform log: its secrets and field limit, and the stored form of the tool lists seen last."""

    def __init__(self, secrets: tuple[str, ...], limit: int, instance: str = "") -> None:
        self.secrets, self.limit, self.instance = secrets, limit, instance
        self._tools: OrderedDict[bytes, _Tools] = OrderedDict()
        try:  # each secret as it appears inside a JSON string
            self._forms: tuple[bytes, ...] | None = tuple(orjson.dumps(secret)[1:-1] for secret in secrets)
        except TypeError:  # a secret with a lone surrogate: every record takes the walk
            self._forms = None
        # JSON-escaping a text could write a secret that holds a quote or a backslash (stored.encode).
        self._composable = not any('"' in secret or "\\" in secret for secret in secrets)

    def row(self, record: TransformRecord) -> Row:
        fields = {name: getattr(record, name) for name in FIELDS}
        tools = self._stored_tools(fields["tools"])
        data, text = self._as_is(fields, tools) or self._walked(fields, tools)
        summary = _summary(data, record.has_issues(), self.instance)
        status = data["status"] if isinstance(data["status"], int) else _text(data["status"])
        # Converted here, so a malformed record costs itself in `add`, never its whole batch in the writer.
        return (_text(data["request_id"]), float(record.started), _text(data["model"]), _text(data["client"]),
                _text(data["route"]), _text(data["protocol"]), status, int(summary["has_issues"]),
                int(record.worker or 0),
                float(record.overhead_ms or 0), int(record.repairs or 0), summary["issue_count"],
                _json(data["dialects"]), _json(summary), _column(text))

    def _as_is(self, fields: dict[str, Any], tools: _Tools | None) -> tuple[dict[str, Any], bytes] | None:
        """The record stored with every value as it is, where its JSON proves that the walk would change none."""
        if tools is None or self._forms is None:
            return None
        # Past the limit in its own text alone, the JSON would be too (and serializing a 256 KB answer whole to find
        # that out costs more than the walk).
        if sum(len(value) for value in fields.values() if isinstance(value, str)) > self.limit:
            return None
        data = stored.encode(fields, None, self.limit, composable=self._composable)
        try:  # the tools last: what comes before them is the record's own
            text = orjson.dumps({**data, "tools": orjson.Fragment(tools.json)}, default=_refuse, option=_PLAIN)
        except TypeError:  # orjson.JSONEncodeError: a lone surrogate, an integer past 64 bits, a key not a string
            return None
        own = text[: len(text) - len(tools.json) - 1]
        # A string over the limit is longer in JSON still (the tools are clipped apart).
        if len(own) > self.limit or self._may_redact(own):
            return None
        return data, text

    def _walked(self, fields: dict[str, Any], tools: _Tools | None) -> tuple[dict[str, Any], bytes]:
        data = stored.encode(fields, _Scrub(self.secrets, self.limit), self.limit, composable=self._composable)
        data["tools"] = tools.value if tools is not None else self._clip_tools(self._scrub(fields["tools"], {}))
        return data, self._serialized(data, fields["tools"])

    def _may_redact(self, probe: bytes) -> bool:
        """Whether redaction could change a string of this JSON: a secret, plain or (with a `\\u` or `\\/` in the
        text) JSON-escaped; a credential word; a letter that hides one from ASCII lower-casing."""
        forms = self._forms or ()
        if any(form in probe for form in forms) or (forms and (b"\\\\u" in probe or b"\\\\/" in probe)):
            return True
        lowered = probe.lower()
        if any(word in lowered for word in _WORDS):
            return True
        return not probe.isascii() and any(char in probe for char in _FOLDING)

    def _stored_tools(self, tools: Any) -> _Tools | None:
        """The tools as stored, kept by content; None for tools orjson refuses (the walk does them)."""
        if tools is None:
            return _NO_TOOLS
        try:
            key = orjson.dumps(tools, default=_refuse, option=_PLAIN)
        except TypeError:
            return None
        found = self._tools.get(key)
        if found is None:
            value = self._clip_tools(self._scrub(tools, {}))
            found = self._tools[key] = _Tools(value, jsonwire.dumps(value))
            if len(self._tools) > TOOLS_KEPT:
                with contextlib.suppress(KeyError):  # another thread emptied it first
                    self._tools.popitem(last=False)
        return found

    def _serialized(self, data: dict[str, Any], tools: Any) -> bytes:
        """The walked record's JSON. Where orjson refuses it (an integer past 64 bits), `json` writes all of it, and
        the tools are walked afresh: orjson writes NaN and None alike, so the tools kept under one key may differ
        in what `json` writes."""
        try:
            return orjson.dumps(data)
        except TypeError:
            data["tools"] = self._clip_tools(self._scrub(tools, {}))
            return jsonwire.dumps(data)

    def _scrub(self, value: Any, seen: dict[int, tuple[str, bool]] | None = None) -> Any:
        return _Scrub(self.secrets, self.limit, seen)(value)

    def _clip_tools(self, tools: Any) -> Any:
        """The tools as sent, or, when their JSON is over the field limit, that JSON cut (a string)."""
        text = _json(tools)
        return tools if len(text) <= self.limit else truncate(text, self.limit)


class _Scrub:
    """The walk: every string valid, redacted, then cut to the field limit; a string under a credential's name
    blanked (only a string: a tool's schema may well describe a parameter called `api_key`). A long string met
    twice (a call's source is its raw arguments) is done once: `seen` by identity, for one record. `changed`: set
    when redaction changed something, or a value had to be made text."""

    def __init__(self, secrets: tuple[str, ...], limit: int, seen: dict[int, tuple[str, bool]] | None = None) -> None:
        self.secrets, self.limit = secrets, limit
        self.seen: dict[int, tuple[str, bool]] = {} if seen is None else seen
        self.changed = False

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            if len(value) <= self.limit:
                done, changed = redact_and_cut_noting(value, self.secrets, self.limit)
            elif (found := self.seen.get(id(value))) is None:
                done, changed = self.seen[id(value)] = redact_and_cut_noting(value, self.secrets, self.limit)
            else:
                done, changed = found
            self.changed = self.changed or changed
            return done
        if isinstance(value, dict):
            return {self._key(key): self._blanked(key, item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(item) for item in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        self.changed = True
        return self(str(value))

    def _key(self, key: Any) -> str:
        if not isinstance(key, str):
            self.changed = True
        return str(self(str(key)))

    def _blanked(self, key: Any, item: Any) -> Any:
        if isinstance(item, str) and SECRET_KEY.search(str(key)):
            self.changed = True
            return REDACTED
        return self(item)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def _summary(data: dict[str, Any], has_issues: bool, instance: str) -> dict[str, Any]:
    keys = ("request_id", "client_request_id", "started", "model", "client", "route", "mode", "status", "dialects",
            "repairs", "finish_reason", "upstream_ms", "overhead_ms", "worker", "strategy", "first_byte_ms",
            "protocol", "backend")
    return {**{key: data[key] for key in keys},
            "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data["started"])),
            "calls": [call.get("name") for call in data["calls"] if isinstance(call, dict)],
            "issue_count": len(data["issues"]), "has_issues": has_issues, "failed": is_failed(data),
            "instance": _text(instance)}


def is_failed(data: dict[str, Any]) -> bool:
    """A call the answer attempted failed (whatever became of it), or the answer was empty: what the dashboard's
    per-model failure share counts."""
    attempts = data.get("attempts") or []
    return any(isinstance(attempt, list) and attempt[1:2] != ["valid"] for attempt in attempts) or \
        EMPTY_ANSWER in (data.get("issues") or [])


def _text(value: Any) -> str:
    """A text column: SQLite stores UTF-8, and a lone surrogate (legal in a JSON escape) is not UTF-8."""
    return ("" if value is None else str(value)).encode("utf-8", "replace").decode("utf-8")


def _column(text: bytes) -> str | bytes:
    """The record's JSON for its column: as text when ASCII (decoding is a copy, binding is free), else the UTF-8
    bytes, which the INSERT casts to the same TEXT. Decoding 400 KB with a `…` in it to a str, for the sqlite3
    module to encode it back to UTF-8, cost 0.4 ms a record. Either is of its own size: orjson's buffer (1 MiB for
    a 150 KB row) would wait in the queue with it."""
    return text.decode("ascii") if text.isascii() else jsonwire.fitted(text)


def _json(value: Any) -> str:
    # jsonwire falls back to ASCII escapes for lone surrogates, which SQLite (UTF-8) would refuse.
    return jsonwire.dumps(value).decode("utf-8")
