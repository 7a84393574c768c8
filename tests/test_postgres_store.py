"""The PostgreSQL store's own behaviour, on a real server: its schema versioned and created by the proxy (idempotent,
and safe when instances start at once), a wrong URL or password refused with the setting named and the password
masked (check-config too), an unreachable database waited for, a full queue counted on /metrics, and a dashboard
that answers while the database does not. The behaviour both stores share is tests/test_translog.py's."""

from __future__ import annotations

import html
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import requests

from tests.conftest import ROOT, ProxyServer, free_port, make_body, with_settings
from tests.fake_upstream import FakeUpstream
from tests.postgres_server import PASSWORD, PostgresServer, wait_until
from tests.test_translog import make_record
from toolproxy.config.settings import ConfigError, Settings, load_settings
from toolproxy.observe import postgres_schema, translog
from toolproxy.observe.record import REDACTED
from toolproxy.observe.translog import TransformLog


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.fresh_database()


@pytest.fixture
def running(postgres: PostgresServer) -> Iterator[PostgresServer]:
    """The server, started again after the test whatever the test did to it."""
    yield postgres
    if not postgres.is_running():
        postgres.start()


def schema_version(postgres: PostgresServer) -> str:
    return postgres.sql("SELECT version FROM toolproxy_schema", database="toolproxy")


def _upgrade(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as connection:
        return postgres_schema.upgrade(connection)


def test_the_schema_is_created_at_its_version_and_upgrading_again_changes_nothing(postgres: PostgresServer,
                                                                                   url: str) -> None:
    assert _upgrade(url) == 0
    assert schema_version(postgres) == str(postgres_schema.VERSION)
    assert _upgrade(url) == postgres_schema.VERSION
    assert postgres.sql("SELECT count(*) FROM toolproxy_schema", database="toolproxy") == "1"


def test_instances_starting_at_once_upgrade_the_schema_once(postgres: PostgresServer, url: str) -> None:
    """Eight processes upgrade a fresh database at the same moment: the advisory lock lets one create the table,
    the others find it done (without it, CREATE TABLE races end in a duplicate-key error)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(8) as pool:
        found = pool.map(_upgrade, [url] * 8)
    assert sorted(found) == [0] + [postgres_schema.VERSION] * 7
    assert schema_version(postgres) == str(postgres_schema.VERSION)


def test_a_schema_a_newer_release_upgraded_is_used_as_it_is(postgres: PostgresServer, url: str) -> None:
    _upgrade(url)
    postgres.sql(f"UPDATE toolproxy_schema SET version = {postgres_schema.VERSION + 5}", database="toolproxy")
    postgres.sql("ALTER TABLE toolproxy_records ADD COLUMN added_later text", database="toolproxy")
    log = TransformLog("/nonexistent", url=url, instance="old-release")
    log.add(make_record(1))
    log.close()
    assert [row["instance"] for row in log.recent()] == ["old-release"]
    assert schema_version(postgres) == str(postgres_schema.VERSION + 5)


def test_a_wrong_password_or_database_is_a_problem_naming_the_setting_without_the_password(
        postgres: PostgresServer) -> None:
    for url, said in ((postgres.url(password="not-the-pw-3x"), "password authentication failed"),
                      (postgres.url(database="no_such_db"), "does not exist"),
                      ("postgresql://u:pw-9q@no-such-host.invalid:5432/x", "resolve host")):
        problem, unreachable = postgres_schema.check(url)
        assert problem is not None and unreachable is None
        assert problem.startswith("TOOLPROXY_LOG_URL=postgresql://") and said in problem and ":***@" in problem
        assert "not-the-pw-3x" not in problem and "pw-9q" not in problem


def test_an_unreachable_database_is_a_warning_records_wait_for(postgres: PostgresServer) -> None:
    problem, unreachable = postgres_schema.check(f"postgresql://toolproxy:{PASSWORD}@127.0.0.1:{free_port()}/x")
    assert problem is None and unreachable is not None and "does not answer now" in unreachable
    assert PASSWORD not in unreachable


def test_a_malformed_url_is_refused_when_settings_load_with_the_password_masked() -> None:
    for value in ("mysql://u:hunter2-secret@db/x", "postgresql://u:hunter2-secret@db:port/x"):
        with pytest.raises(ConfigError) as refused:
            load_settings({"TOOLPROXY_LOG_URL": value})
        assert "TOOLPROXY_LOG_URL" in str(refused.value) and "hunter2-secret" not in str(refused.value)


def _check_config(url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("TOOLPROXY_")}
    return subprocess.run([sys.executable, "-m", "toolproxy", "check-config"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**environ, "TOOLPROXY_LOG_URL": url,
                                                       "TOOLPROXY_DATA_DIR": str(data_dir)})


def test_check_config_says_whether_the_database_can_be_used(postgres: PostgresServer, url: str,
                                                             tmp_path: Path) -> None:
    good = _check_config(url, tmp_path)
    assert good.returncode == 0, good.stderr
    assert f"postgresql://toolproxy:***@127.0.0.1:{postgres.port}/toolproxy" in good.stdout
    assert PASSWORD not in good.stdout + good.stderr
    wrong = _check_config(postgres.url(password="wrong-pw-77"), tmp_path)
    assert wrong.returncode == 1
    assert "TOOLPROXY_LOG_URL=postgresql://toolproxy:***@" in wrong.stderr and "authentication failed" in wrong.stderr
    assert "wrong-pw-77" not in wrong.stdout + wrong.stderr


def test_records_added_while_the_database_is_down_are_written_once_it_is_back(running: PostgresServer,
                                                                              url: str) -> None:
    log = TransformLog("/nonexistent", url=url, instance="box-1")
    log.add(make_record(0))
    log.flush()
    running.stop()
    for number in range(1, 51):
        log.add(make_record(number))
    log.flush(timeout=1)  # gives up: nothing can be written
    running.start()
    log.flush(timeout=60)
    assert len(log.recent(100)) == 51
    log.close()


def test_a_full_queue_drops_records_with_a_warning_and_a_counter(running: PostgresServer, url: str,
                                                                 serve: Callable[[Settings], ProxyServer],
                                                                 settings: Settings, upstream: FakeUpstream,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(translog, "MAX_PENDING", 3)
    proxy = serve(with_settings(settings, log_url=url, instance="box-1"))
    running.stop()
    try:
        for _ in range(8):
            upstream.completion("hello")
            assert proxy.post(make_body()).status_code == 200  # the database down never fails a request
        # A record is added when its answer has ended, after the client has it: wait for the last ones. 8 records,
        # at most 3 waiting and one in the writer's hands.
        assert wait_until(lambda: _dropped(proxy.url) >= 4)
        assert "the store is not keeping up" in caplog.text
    finally:
        running.start()  # the next tests share the server
    records = wait_until(lambda: requests.get(f"{proxy.url}/dashboard/records.json", timeout=30).json()["records"])
    assert 1 <= len(records) <= 4


def _dropped(url: str) -> float:
    metrics = requests.get(f"{url}/metrics", timeout=30).text
    counter = 'toolproxy_log_dropped_records_total{reason="queue_full"} '
    return float(metrics.split(counter)[1].split()[0]) if counter in metrics else 0.0


def test_the_dashboard_answers_while_the_database_holds_its_reads(url: str, serve: Callable[[Settings], ProxyServer],
                                                                  settings: Settings, upstream: FakeUpstream) -> None:
    """Another client holds the table: the dashboard's reads end at their deadline (an empty page, not a hung one),
    and requests go on being answered, their records waiting for the writer."""
    proxy = serve(with_settings(settings, log_url=url, instance="box-1"))
    upstream.completion("first")
    first = proxy.post(make_body())
    wait_until(lambda: requests.get(f"{proxy.url}/dashboard/records.json", timeout=30).json()["records"])
    holder = psycopg.connect(url)
    holder.execute("LOCK TABLE toolproxy_records IN ACCESS EXCLUSIVE MODE")
    try:
        upstream.completion("second")
        second = proxy.post(make_body())
        assert second.status_code == 200
        held = requests.get(f"{proxy.url}/dashboard/records.json", timeout=30)
        assert held.status_code == 200 and held.json() == {"records": []}
        page = requests.get(f"{proxy.url}/dashboard/", timeout=30)
        assert page.status_code == 200 and "0 transforms stored" in page.text
        assert requests.get(f"{proxy.url}/dashboard/request/{first.headers['X-Request-Id']}",
                            timeout=30).status_code == 404
    finally:
        holder.rollback()
        holder.close()
    ids = {second.headers["X-Request-Id"], first.headers["X-Request-Id"]}
    wait_until(lambda: {row["request_id"] for row in requests.get(f"{proxy.url}/dashboard/records.json",
                                                                  timeout=30).json()["records"]} == ids)


def test_the_password_is_redacted_from_records(url: str, serve: Callable[[Settings], ProxyServer],
                                               settings: Settings, upstream: FakeUpstream) -> None:
    proxy = serve(with_settings(settings, log_url=url, instance="box-1"))
    upstream.completion(f"the log's password is {PASSWORD}")
    assert proxy.post(make_body()).status_code == 200
    (row,) = wait_until(lambda: requests.get(f"{proxy.url}/dashboard/records.json", timeout=30).json()["records"])
    page = requests.get(f"{proxy.url}/dashboard/record/{row['id']}", timeout=30).text
    assert f"the log&#39;s password is {html.escape(REDACTED)}" in page and PASSWORD not in page


def test_the_pool_is_closed_with_the_log(postgres: PostgresServer, url: str, tmp_path: Path) -> None:
    log = TransformLog(str(tmp_path), url=url, instance="box-1")
    log.add(make_record(1))
    log.flush()
    assert log.recent() and int(postgres.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                             "'toolproxy box-1 dashboard'")) == 1
    log.close()
    wait_until(lambda: postgres.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                    "'toolproxy box-1 dashboard'") == "0")
