"""The dashboard's record page and the JSON test-case export are unchanged now that the transform log stores each
byte of an answer once (observe/stored.py): every golden case (tests/golden/*, realworld included, the held-out sets
left out) goes through the proxy for real, whole and streamed, and its page and export are compared, byte for byte,
with those of the record as it was stored before, which the reference walk of tests/test_translog_exact.py writes
beside it into a second log and the same dashboard shows."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from tests.conftest import make_body
from tests.corpus import requestable
from tests.fake_upstream import FakeUpstream
from tests.test_translog_exact import reference_row
from toolproxy import create_app
from toolproxy.config.settings import Settings
from toolproxy.observe import sqlite_store
from toolproxy.observe.record import TransformRecord, usable_secrets

GOLDEN = Path(__file__).parent / "golden"
# The held-out sets (tests/golden/heldout*) are never sent through the proxy before the round that measures them.
CASES = sorted(path for path in GOLDEN.glob("*/*.json")
               if not path.parent.name.startswith("heldout") and requestable(path))
# Each record also exercises redaction: this key sits in no case, so every page must come out the same.
SECRET = "sk-golden-0000"


@contextlib.contextmanager
def served(settings: Settings) -> Iterator[tuple[str, Any]]:
    app = create_app(settings)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app.extensions["toolproxy"]
    finally:
        server.shutdown()


def test_every_golden_case_shows_and_exports_as_before(upstream: FakeUpstream, settings: Settings,
                                                       tmp_path: Path) -> None:
    now = replace(settings, data_dir=str(tmp_path / "now"), upstream_api_key=SECRET)
    before = replace(settings, data_dir=str(tmp_path / "before"), upstream_api_key=SECRET)
    with served(now) as (url, proxy), served(before) as (before_url, before_proxy):
        references = _writing_references(proxy, before_proxy.translog.path)
        cases: dict[str, str] = {}  # request id -> the case and how it was asked
        for path in CASES:
            expected = json.loads(path.read_text(encoding="utf-8"))
            upstream.completion(path.with_suffix(".txt").read_text(encoding="utf-8"))
            body = make_body("do it", expected["tools"])
            for kind, asked in (("whole", body), ("streamed", {**body, "stream": True})):
                response = requests.post(f"{url}/v1/chat/completions", json=asked, timeout=30)
                assert response.status_code == 200 and response.content
                cases[response.headers["X-Request-Id"]] = f"{path.parent.name}/{path.stem} ({kind})"
        proxy.translog.flush()
        assert _wait_for(lambda: len(proxy.translog.recent(5000)) == len(cases) == len(references))
        different = [case for request_id, case in cases.items()
                     if _shown(url, proxy, request_id) != _shown(before_url, before_proxy, request_id)]
    assert different == []


def _writing_references(proxy: Any, path: str) -> list[TransformRecord]:
    """Each record the proxy logs is also written, as the reference walk stores it, into the log at `path`."""
    log, add, written = proxy.translog, proxy.translog.add, []

    def add_with_reference(record: TransformRecord) -> None:
        add(record)
        row = reference_row(record, usable_secrets([SECRET]), log.max_field_chars, proxy.settings.instance_name)
        with contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as connection:
            connection.execute(sqlite_store._INSERT, row)
        written.append(record)

    log.add = add_with_reference
    return written


def _shown(url: str, proxy: Any, request_id: str) -> tuple[str, str]:
    """The record's page (its row id, which differs between the two logs, left out) and its export."""
    record_id = proxy.translog.find(request_id)
    page = requests.get(f"{url}/dashboard/record/{record_id}", timeout=30)
    export = requests.get(f"{url}/dashboard/record/{record_id}/testcase.json", timeout=30)
    assert page.status_code == export.status_code == 200
    return page.text.replace(f"/record/{record_id}/", "/record/ID/"), export.text


def _wait_for(condition: Any, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("kind", ["whole", "streamed"])
def test_a_big_answer_is_stored_in_a_third_of_the_bytes(upstream: FakeUpstream, settings: Settings, tmp_path: Path,
                                                          kind: str) -> None:
    """The 256 KB `write` call of the load benchmark: its record used to hold the answer five times over, cut to the
    field limit each (~400 KB of JSON)."""
    from bench import workload

    upstream.completion(workload.big_text())
    with served(replace(settings, data_dir=str(tmp_path))) as (url, proxy):
        records = _writing_references(proxy, str(tmp_path / "unused.sqlite3"))
        with contextlib.closing(sqlite3.connect(tmp_path / "unused.sqlite3")) as connection:
            connection.executescript(sqlite_store._SCHEMA)
        body = make_body("write it", workload.TOOLS, stream=kind == "streamed")
        assert requests.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code == 200
        assert _wait_for(lambda: bool(records))
        proxy.translog.flush()
        with contextlib.closing(sqlite3.connect(proxy.translog.path)) as connection:
            (size,) = connection.execute("SELECT length(CAST(record AS BLOB)) FROM records").fetchone()
        before = reference_row(records[0], (), proxy.translog.max_field_chars)[-1]
    assert size < len(before.encode()) / 2.5
