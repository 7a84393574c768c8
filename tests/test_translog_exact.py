"""What the transform log stores is exactly what it stored before the row was serialized once (observe/row.py) and
before each byte of an answer was stored once (observe/stored.py): the walk of f4e553b, kept here as the reference
(with the client's text as it was written then), against tricky records, one by one and as hypothesis finds them.
Every column of the row counts, and the stored record as the pages read it back (`stored.expand`), key by key."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.observe import kept, stored
from toolproxy.observe.record import REDACT_MARGIN, REDACTED, SECRET_KEY, TransformRecord, truncate, usable_secrets
from toolproxy.observe.row import TOOLS_KEPT
from toolproxy.observe.translog import TransformLog
from toolproxy.transform.response import EMPTY_ANSWER
from toolproxy.wire import jsonwire

SECRETS = ("sk-SENTINEL-7f3a9c", "tok/slash-42", "ünï-sëcret")
LIMIT = 2000  # over a small record's JSON, so that the fast path is taken where it may be

# The reference: toolproxy/observe/translog.py and record.py at f4e553b, unchanged but for names.
_PATTERNS = (
    ("authorization", re.compile(
        r"""(?i)(authorization["']?\s{0,8}[:=]\s{0,8}["']?\s{0,8}(?:bearer\s{1,8}|basic\s{1,8})?)[^\s"',;]+""")),
    ("bearer", re.compile(r"\b(Bearer\s{1,8})[A-Za-z0-9._~+/=-]{12,}")),
    ("key", re.compile(r"""(?i)(api[_-]?key["']?\s{0,8}[:=]\s{0,8}["']?)[^\s"',;&{}\[\]]+""")),
)


@functools.lru_cache(maxsize=64)
def _escaped(secret: str) -> re.Pattern[str]:
    def forms(char: str) -> str:
        code = f"{ord(char):04x}"
        hex_digits = "".join(f"[{digit}{digit.upper()}]" if digit.isalpha() else digit for digit in code)
        extra = "|\\\\/" if char == "/" else ""
        return f"(?:{re.escape(char)}|\\\\u{hex_digits}{extra})"

    return re.compile("".join(forms(char) for char in secret))


def _redact_with(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "\\" in text:
        for secret in secrets:
            text = _escaped(secret).sub(REDACTED, text)
    if len(text) < 8:
        return text
    lowered = text.lower()
    for word, pattern in _PATTERNS:
        if word in lowered:
            text = pattern.sub(lambda match: match.group(1) + REDACTED, text)
    return text


def _redact_and_cut(text: str, secrets: tuple[str, ...], limit: int) -> str:
    if len(text) <= limit:
        return _redact_with(text, secrets)
    kept = _redact_with(text[: limit + 4096], secrets)[:limit]
    return f"{kept}\n[… {len(text) - limit} more characters cut]"


def _valid_text(text: str) -> str:
    return text if text.isascii() else re.sub("[\ud800-\udfff]", "\ufffd", text)


def _scrub(value: Any, secrets: tuple[str, ...], limit: int) -> Any:
    if isinstance(value, str):
        return _redact_and_cut(_valid_text(value), secrets, limit)
    if isinstance(value, dict):
        return {_scrub(str(key), secrets, limit): REDACTED if isinstance(item, str) and SECRET_KEY.search(str(key))
                else _scrub(item, secrets, limit) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item, secrets, limit) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _scrub(str(value), secrets, limit)


def _text(value: Any) -> str:
    return ("" if value is None else str(value)).encode("utf-8", "replace").decode("utf-8")


def _json(value: Any) -> str:
    return jsonwire.dumps(value).decode("utf-8")


def old_client_text(content: Any, calls: list[tuple[str, str]]) -> str:
    """What `fill_answer` wrote into the record before the text was composed on demand."""
    listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return (content or "") + ("\n\n" + json.dumps(listed, ensure_ascii=False, indent=2) if listed else "")


def old_fields(record: TransformRecord) -> dict[str, Any]:
    """The record's fields as they were: the client's text written out, no references."""
    fields = {item.name: getattr(record, item.name) for item in dataclasses.fields(record)}
    calls = fields.pop("client_calls")
    if fields["client_text"] is None:
        fields["client_text"] = old_client_text(fields["client_content"], calls)
        fields["response_bytes"] = len(fields["client_text"].encode("utf-8", errors="replace"))
    fields["calls"] = [{key: value for key, value in call.items() if key != "wire"} if isinstance(call, dict)
                       else call for call in fields["calls"]]
    return fields


def reference_row(record: TransformRecord, secrets: tuple[str, ...], limit: int,
                  instance: str = "") -> tuple[Any, ...]:
    data = _scrub(old_fields(record), secrets, limit)
    text = _json(data["tools"])
    data["tools"] = data["tools"] if len(text) <= limit else truncate(text, limit)
    keys = ("request_id", "client_request_id", "started", "model", "client", "route", "mode", "status", "dialects",
            "repairs", "finish_reason", "upstream_ms", "overhead_ms", "worker", "strategy", "first_byte_ms",
            "protocol", "backend")
    failed = any(attempt[1:2] != ["valid"] for attempt in data["attempts"]) or EMPTY_ANSWER in data["issues"]
    summary = {**{key: data[key] for key in keys},
               "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data["started"])),
               "calls": [call.get("name") for call in data["calls"] if isinstance(call, dict)],
               "issue_count": len(data["issues"]), "has_issues": record.has_issues(), "failed": failed,
               "instance": instance}  # (added since: the instance that wrote the record, for a fleet's dashboard)
    status = data["status"] if isinstance(data["status"], int) else _text(data["status"])
    return (_text(data["request_id"]), float(record.started), _text(data["model"]), _text(data["client"]),
            _text(data["route"]), _text(data["protocol"]), status, int(summary["has_issues"]), int(record.worker or 0),
            float(record.overhead_ms or 0), int(record.repairs or 0), summary["issue_count"],
            _json(data["dialects"]), _json(summary), _json(data))


# The records.
TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "api_key": {"type": "string"}}}}}]


def make_record(**fields: Any) -> TransformRecord:
    values: dict[str, Any] = {"model": "qwen3", "client": "opencode/1.0", "address": "127.0.0.1", "route": "tools",
                              "mode": "prompt", "status": 200, "worker": 4242, "overhead_ms": 1.5, "tools": TOOLS,
                              "upstream": "http://127.0.0.1:8000", "dialects": ["hermes"], "finish_reason": "stop",
                              "calls": [{"name": "read", "arguments": {"path": "/a"}, "raw_arguments": '{"path": "/a"}',
                                         "dialect": "hermes", "valid": True}],
                              "raw_text": 'I will.\n<tool_call>{"name": "read"}</tool_call>', "client_text": "ok",
                              **fields}
    return TransformRecord("req_0000000000000001", 1_700_000_000.25, **values)


def answered(content: str, arguments: Any, before: str = "", after: str = "", calls: int = 1,
             name: str = "read") -> dict[str, Any]:
    """A record's fields as the routes fill them for `calls` calls written as text after `content`: each call's
    source in the model's text, its details carrying the very arguments string the client got, the client's text
    left to be composed."""
    sources = [f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>' for _ in range(calls)]
    wires = [jsonwire.dumps_text(arguments) for _ in range(calls)]  # one string per call, as the routes make them
    return {"raw_text": before + content + "\n" + "\n".join(sources) + after, "client_text": None,
            "client_content": content, "client_calls": [(name, wire) for wire in wires],
            "calls": [{"name": name, "arguments": arguments, "raw_arguments": source, "source": source,
                       "dialect": "hermes", "wire": wire, "valid": True}
                      for source, wire in zip(sources, wires, strict=True)]}


LONG = "x" * (LIMIT - 5) + SECRETS[0] + "y" * 400  # a secret across the cut
BIG = "line of code\n" * 300
# The raw text that brings a plain record's JSON (the tools apart) to exactly the limit.
AT_LIMIT = "z" * (LIMIT - len(orjson.dumps({**dataclasses.asdict(make_record(raw_text="")), "tools": None})))
TRICKY = {
    "plain": {},
    "no tools, no calls": {"tools": None, "calls": [], "dialects": []},
    "secret nested in arguments": {"calls": [{"name": "login", "arguments": {"a": [{"b": f"x {SECRETS[0]} y"}]}}]},
    "secret as a dict key": {"calls": [{"name": "x", "arguments": {SECRETS[1]: 1}}]},
    "secret in the tools": {"tools": [{"type": "function", "function": {"name": "t", "description": SECRETS[2]}}]},
    "JSON-escaped secret": {"raw_text": '{"key": "sk\\u002dSENTINEL-7f3a9c"} and tok\\/slash-42'},
    "escapes without a secret": {"raw_text": 'say \\u0041 and \\/ and \\n \\"'},
    "backslashes only": {"raw_text": '{"a": "b\\n\\"c\\""}', "client_text": "C:\\path\\file"},
    "credential words": {"raw_text": 'curl -H "Authorization: Bearer tok-123456789012" -d api_key=s3cr3t'},
    "word without a credential": {"raw_text": "the bearer of good news; api_key: {", "client_text": "Authorization"},
    "credential key name": {"calls": [{"name": "x", "arguments": {"OPENAI_API_KEY": "v-1", "x-api-key": 5}}]},
    "kelvin sign": {"raw_text": "api_\u212aey=hidden-value-1", "client_text": "API_\u212aEY: \u0130"},
    "dotless i and long s": {"raw_text": "author\u0131zation: Bearer abcdefghijklmnop \u017f"},
    "unicode": {"raw_text": "héllo wörld ✓ 😀 \u2028", "model": "qwen-ü", "issues": ["ünïcode issue"]},
    "lone surrogates": {"raw_text": "lone \ud800 surrogate", "model": "m\udfff",
                        "calls": [{"name": "x\ud83d", "arguments": {"k\udc00": "v"}}]},
    "surrogate in the tools": {"tools": [{"type": "function", "function": {"name": "t\ud800"}}]},
    "over-long fields": {"raw_text": LONG, "client_text": BIG, "error": "e" * (LIMIT + 1),
                         "issues": ["i" * (LIMIT + 100)]},
    "one long string twice": {"calls": [{"name": "w", "raw_arguments": BIG, "source": BIG, "arguments": {"c": BIG}}]},
    "long dict key": {"calls": [{"name": "w", "arguments": {"k" * (LIMIT + 10): 1}}]},
    "tools over the limit": {"tools": [{"type": "function", "function": {"name": f"tool{n}"}} for n in range(100)]},
    "record at the limit": {"raw_text": AT_LIMIT},
    "record past the limit": {"raw_text": AT_LIMIT + "z"},
    "non-string values": {"calls": [{"name": "n", "arguments": {"i": 2**63 - 1, "f": 1e16, "neg": -0.0, "b": False,
                                                                 "n": None, "t": (1, "two"), "nan": math.nan}}]},
    "integer past 64 bits": {"calls": [{"name": "n", "arguments": {"i": 2**70, "f": 1e16, "nan": math.nan}}]},
    "objects": {"calls": [{"name": "o", "arguments": {"when": datetime.date(2024, 1, 2), "raw": b"bytes",
                                                      "path": Path("/tmp/x")}}]},
    "string subclass": {"client": type("Agent", (str,), {})("sub-agent"), "dialects": ("hermes", "native")},
    "status as text": {"status": "client_disconnected", "finish_reason": None, "first_byte_ms": 3.5},
    "non-string key": {"calls": [{"name": "k", "arguments": {1: "one", None: "none", 2.5: "f"}}]},
    "invalid call": {"calls": [{"name": "read", "arguments": {}, "valid": False}], "issues": ["read: 'path' missing"]},
    "composed": answered("I will read it.", {"path": "/a"}),
    "composed, typed arguments": {**answered("I will.", {"limit": 5}), "raw_text": 'I will.\n<tool_call>{"name": '
                                  '"read", "arguments": {"limit": "5"}}</tool_call>'},
    "composed, no content": answered("", {"path": "/a"}),
    "composed, two calls": answered("Both.", {"path": "/a"}, calls=2),
    "composed, source not in the text": {**answered("I will.", {"path": "/a"}), "raw_text": "elsewhere"},
    "composed, secret in the arguments": answered("I will.", {"token": f"x {SECRETS[0]} y"}),
    "composed, secret in the content": answered(f"key {SECRETS[1]}", {"path": "/a"}),
    "composed, credential key": answered("I will.", {"api_key": "v-1", "path": "/a"}),
    "composed, credential words": answered("Authorization: Bearer tok-123456789012", {"q": "api_key=s3cr3t"}),
    "composed, floats": answered("I will.", {"t": 0.5, "big": 1e16, "nan": math.nan}),
    "composed, quotes and escapes": answered('say "hi" \\ \n', {"text": 'a "b" \\ \n \t \u0001 é ✓'}),
    "composed, lone surrogate": answered("lone \ud800", {"k": "v\udc00"}),
    "composed, content over the limit": answered("c" * (LIMIT + 10), {"path": "/a"}),
    "composed, client text over the limit": answered("c" * (LIMIT - 50), {"path": "/a" * 40}),
    "composed, only the client's text past the limit": answered("I will.", {"a": '"' * (LIMIT // 3)}),
    "composed, no calls": {"raw_text": "Just text.", "client_text": None, "client_content": "Just text."},
    "composed, a call the record does not hold": {**answered("I will.", {"path": "/a"}), "calls": []},
    "composed, nothing delivered": {"client_text": None, "client_content": None},
}


@pytest.mark.parametrize("fields", TRICKY.values(), ids=TRICKY.keys())
@pytest.mark.parametrize("secrets", [(), SECRETS], ids=["no secrets", "secrets"])
def test_the_stored_row_is_what_the_walk_stored(tmp_path: Path, fields: dict[str, Any],
                                                secrets: tuple[str, ...]) -> None:
    log = TransformLog(str(tmp_path), max_field_chars=LIMIT, secrets=secrets)
    record = make_record(**fields)
    expected = reference_row(record, usable_secrets(secrets), LIMIT)
    assert read_back(log._rows.row(record)) == read_back(expected)
    assert read_back(log._rows.row(record)) == read_back(expected)  # again: the tools now come from the cache
    log.add(record)
    log.flush()
    with contextlib.closing(sqlite3.connect(log.path)) as connection:
        kept = connection.execute("SELECT typeof(record), record, summary, dialects FROM records").fetchall()
    assert [(kind, shown(text), summary, dialects) for kind, text, summary, dialects in kept] == \
        [("text", shown(expected[-1]), expected[-2], expected[-3])]


def shown(text: str | bytes) -> Any:
    """The stored record as the pages read it (`TransformLog.get`)."""
    return stored.expand(json.loads(text))


def read_back(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The row with the record's JSON as the pages read it: every other column exactly as it goes into SQLite."""
    return (*row[:-1], shown(row[-1]))


@pytest.mark.parametrize("secrets", [(), SECRETS], ids=["no secrets", "secrets"])
def test_a_source_past_the_cut_text_is_shown_up_to_the_cut(tmp_path: Path, secrets: tuple[str, ...]) -> None:
    """The one place the record shown differs from the one stored before: the model's text is kept up to the field
    limit, and a call's source that runs past it is no longer stored a second time, so it is shown up to that cut,
    with how much more there was. Everything else is as it was."""
    log = TransformLog(str(tmp_path), max_field_chars=LIMIT, secrets=secrets)
    fields = answered("Writing it.", {"path": "a.py", "content": "line of code\n" * LIMIT})
    record = make_record(**fields)
    row, expected = read_back(log._rows.row(record)), read_back(reference_row(record, usable_secrets(secrets), LIMIT))
    shown_call, expected_call = row[-1]["calls"][0], expected[-1]["calls"][0]
    source = fields["calls"][0]["source"]
    start = fields["raw_text"].index(source)
    assert shown_call["source"] == shown_call["raw_arguments"] == \
        f"{fields['raw_text'][start:LIMIT]}\n[… {len(source) - (LIMIT - start)} more characters cut]"
    assert {**shown_call, "source": None, "raw_arguments": None} == \
        {**expected_call, "source": None, "raw_arguments": None}
    assert {**row[-1], "calls": None} == {**expected[-1], "calls": None} and row[:-1] == expected[:-1]
    assert len(log._rows.row(record)[-1]) < len(reference_row(record, usable_secrets(secrets), LIMIT)[-1]) / 2


def test_a_long_tool_list_stream_keeps_the_cache_bounded(tmp_path: Path) -> None:
    log = TransformLog(str(tmp_path), max_field_chars=LIMIT, secrets=SECRETS)
    for number in range(3 * TOOLS_KEPT):
        tools = [{"type": "function", "function": {"name": f"tool{number}"}}]
        record = make_record(tools=tools)
        assert read_back(log._rows.row(record)) == read_back(reference_row(record, usable_secrets(SECRETS), LIMIT))
    assert len(log._rows._tools) <= TOOLS_KEPT


def test_tools_kept_by_their_json_are_walked_afresh_where_json_writes_the_record(tmp_path: Path) -> None:
    """orjson writes NaN and None alike, so both lists share a key; `json`, which writes the record when orjson
    refuses it (an integer past 64 bits), tells them apart."""
    log = TransformLog(str(tmp_path), max_field_chars=LIMIT)
    big = [{"name": "n", "arguments": {"i": 2**70}}]
    for value in (None, math.nan, math.inf, None):
        tools = [{"type": "function", "function": {"name": "t", "parameters": {"maximum": value}}}]
        for calls in ([], big):
            record = make_record(tools=tools, calls=calls)
            assert read_back(log._rows.row(record)) == read_back(reference_row(record, (), LIMIT))


# What hypothesis draws from: the pieces redaction reacts to, so that it meets them often.
PIECES = st.sampled_from(["a", "api_key", "API-KEY: ", "Authorization: ", "Bearer ", "bearer", "key=", "\\", "\\u00",
                          "73", "6B", "\\/", "/", '"', "\n", " ", "é", "\u212a", "\u0131", "\ud800", "sk-", "SENTINEL",
                          "-7f3a9c", "tok", "/slash-42", "ünï-sëcret", "x" * 50, "0123456789abcdef"])
TEXT = st.lists(PIECES, max_size=12).map("".join)
KEYS = st.one_of(TEXT, st.sampled_from(["api_key", "OPENAI_API_KEY", "authorization", "path"]))
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(raw_text=TEXT, client_text=TEXT, issues=st.lists(TEXT, max_size=2), arguments=VALUES, tools=VALUES,
       secrets=st.sampled_from([(), SECRETS]), limit=st.sampled_from([LIMIT, 200]))
def test_any_record_is_stored_as_the_walk_stored_it(tmp_path_factory: pytest.TempPathFactory, raw_text: str,
                                                     client_text: str, issues: list[str], arguments: Any, tools: Any,
                                                     secrets: tuple[str, ...], limit: int) -> None:
    log = _log(str(tmp_path_factory.getbasetemp()), secrets, limit)
    record = make_record(raw_text=raw_text, client_text=client_text, issues=issues, tools=tools,
                         calls=[{"name": "x", "arguments": arguments, "raw_arguments": json.dumps(raw_text)}])
    assert read_back(log._rows.row(record)) == read_back(reference_row(record, usable_secrets(secrets), limit))


@functools.cache
def _log(directory: str, secrets: tuple[str, ...], limit: int) -> TransformLog:
    return TransformLog(directory, max_field_chars=limit, secrets=secrets)


ARGUMENTS = st.dictionaries(KEYS, VALUES, max_size=4)


@settings(max_examples=400, deadline=None)
@given(content=TEXT, before=TEXT, arguments=ARGUMENTS, calls=st.integers(1, 2),
       secrets=st.sampled_from([(), SECRETS]), limit=st.sampled_from([LIMIT, 200]))
def test_any_answer_is_shown_as_it_was_stored(tmp_path_factory: pytest.TempPathFactory, content: str, before: str,
                                              arguments: dict[str, Any], calls: int, secrets: tuple[str, ...],
                                              limit: int) -> None:
    """A record as the routes fill it (sources in the model's text, the client's text to be composed) reads back as
    the walk stored it, but for a source past the cut text (test_a_source_past_the_cut_text_is_shown_up_to_the_cut)."""
    log = _log(str(tmp_path_factory.getbasetemp()), secrets, limit)
    fields = answered(content, arguments, before=before, calls=calls)
    record = make_record(**fields)
    row = read_back(log._rows.row(record))
    expected = read_back(reference_row(record, usable_secrets(secrets), limit))
    for shown_call, expected_call, call in zip(row[-1]["calls"], expected[-1]["calls"], fields["calls"], strict=True):
        if shown_call["source"] != expected_call["source"]:
            assert len(call["source"]) > limit and shown_call["source"].endswith(" more characters cut]")
            assert shown_call["source"] == shown_call["raw_arguments"]
            shown_call["source"] = shown_call["raw_arguments"] = expected_call["source"]
    assert row == expected


@settings(max_examples=300, deadline=None)
@given(content=TEXT, before=TEXT, after=TEXT, arguments=ARGUMENTS, calls=st.integers(1, 2), long=st.integers(0, 3),
       secrets=st.sampled_from([(), SECRETS]))
def test_what_a_finished_record_keeps_is_stored_as_the_whole(tmp_path_factory: pytest.TempPathFactory, content: str,
                                                              before: str, after: str, arguments: dict[str, Any],
                                                              calls: int, long: int, secrets: tuple[str, ...]) -> None:
    """kept.keep cuts a long record down to what its row reads, as soon as the request is over: the row is the same,
    byte for byte, as the whole record's (long: which of the model's text, the arguments, both, or neither run past
    what the row keeps)."""
    limit = 200
    padding = "p" * (limit + REDACT_MARGIN + 10)
    arguments = {**arguments, "big": padding} if long & 1 else arguments
    fields = answered(content, arguments, before=before + (padding if long & 2 else ""), after=after, calls=calls)
    log = _log(str(tmp_path_factory.getbasetemp()), secrets, limit)
    whole, cut = make_record(**fields), make_record(**fields)
    kept.keep(cut, limit)
    assert log._rows.row(cut) == log._rows.row(whole)
