"""A fleet on one PostgreSQL transform log, under real gunicorn: two instances write to the same tables and either
dashboard shows both (filterable by instance, a response's X-Request-Id found on any of them); the database stopped
mid-load and started again fails no request, and what was answered meanwhile is written once it is back; a wrong
password ends the start with the setting named and the password masked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from openai import OpenAI

from tests.conftest import Gunicorn, make_body
from tests.fake_upstream import FakeUpstream
from tests.postgres_server import PASSWORD, PostgresServer, wait_until


@pytest.fixture
def running(postgres: PostgresServer) -> Iterator[PostgresServer]:
    """The server, started again after the test whatever the test did to it."""
    yield postgres
    if not postgres.is_running():
        postgres.start()


def fleet_env(upstream: FakeUpstream, url: str, instance: str, **more: str) -> dict[str, str]:
    return {"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_LOG_URL": url, "TOOLPROXY_INSTANCE": instance, **more}


def records(server: Gunicorn, **filters: str) -> list[dict[str, Any]]:
    response = requests.get(f"{server.url}/dashboard/records.json", params=filters, timeout=30)
    assert response.status_code == 200
    rows: list[dict[str, Any]] = response.json()["records"]
    return rows


def test_two_instances_on_one_database_show_one_dashboard(postgres: PostgresServer, upstream: FakeUpstream,
                                                          start_gunicorn: Callable[..., Gunicorn]) -> None:
    url = postgres.fresh_database()
    first = start_gunicorn(fleet_env(upstream, url, "east", TOOLPROXY_WORKERS="2")).wait_ready()
    second = start_gunicorn(fleet_env(upstream, url, "west")).wait_ready()
    upstream.completion("hello from the fleet")
    served: dict[str, str] = {}  # request id -> instance
    for server, name in ((first, "east"), (second, "west")):
        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        for _ in range(3):
            answer = client.chat.completions.with_raw_response.create(model="m", messages=[{"role": "user",
                                                                                           "content": "hi"}])
            served[answer.headers["X-Request-Id"]] = name
    rows = wait_until(lambda: len(found := records(first)) == 6 and found)
    assert {row["request_id"]: row["instance"] for row in rows} == served
    assert {row["request_id"] for row in records(second)} == set(served)
    assert {row["instance"] for row in records(first, instance="west")} == {"west"}
    assert len(records(second, instance="east")) == 3
    west_id = next(request_id for request_id, name in served.items() if name == "west")
    found = requests.get(f"{first.url}/dashboard/request/{west_id}", timeout=30)  # not the instance that served it
    assert found.status_code == 200 and found.url.startswith(f"{first.url}/dashboard/record/")
    assert west_id in found.text and "instance west" in found.text
    page = requests.get(f"{first.url}/dashboard/", timeout=30).text
    assert "6 transforms stored" in page and "east: 3" in page and "west: 3" in page
    charts = requests.get(f"{second.url}/dashboard/charts.json", params={"window": 300}, timeout=30).json()
    assert sorted(series["label"] for series in charts["charts"]["instances"]) == ["east", "west"]


def _load(server: Gunicorn, stop: threading.Event, sent: list[tuple[float, str, int]]) -> None:
    """One client sending requests one after another until told to stop: (when, request id, status) of each."""
    with requests.Session() as session:
        while not stop.is_set():
            response = session.post(f"{server.url}/v1/chat/completions", json=make_body(), timeout=60)
            sent.append((time.monotonic(), response.headers.get("X-Request-Id", ""), response.status_code))


def test_the_database_stopped_mid_load_fails_no_request_and_writing_resumes(running: PostgresServer,
                                                                            upstream: FakeUpstream,
                                                                            start_gunicorn: Callable[..., Gunicorn],
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    url = running.fresh_database()
    server = start_gunicorn(fleet_env(upstream, url, "solo", TOOLPROXY_WORKERS="2")).wait_ready()
    upstream.completion("steady")
    stop, sent = threading.Event(), []
    clients = [threading.Thread(target=_load, args=(server, stop, sent)) for _ in range(4)]
    for client in clients:
        client.start()
    try:
        wait_until(lambda: len(sent) >= 40)
        stopped = time.monotonic()
        running.stop()
        wait_until(lambda: sum(1 for when, _, _ in sent if when > stopped) >= 300)  # answered while it is down
        during = sum(1 for when, _, _ in sent if when > stopped)
        running.start()
        started = time.monotonic()
        wait_until(lambda: sum(1 for when, _, _ in sent if when > started) >= 40)
    finally:
        stop.set()
        for client in clients:
            client.join(60)
    assert [status for _, _, status in sent if status != 200] == []
    after = {request_id for when, request_id, _ in sent if when > started}
    everything = {request_id for _, request_id, _ in sent}
    wait_until(lambda: after <= _stored_ids(running), timeout=90)
    stored = _stored_ids(running)
    with capsys.disabled():
        print(f"\n  fault test: {len(sent)} requests, {during} answered in the {started - stopped:.1f} s the database "
              "was down (stop and start included), all 200; "
              f"{len(everything & stored)} of {len(everything)} records stored, all {len(after)} sent after the "
              f"restart among them")
    assert after <= stored
    metrics = requests.get(f"{server.url}/metrics", timeout=30).text
    assert "toolproxy_log_dropped_records_total{" not in metrics  # the queue held what waited: nothing dropped


def _stored_ids(postgres: PostgresServer) -> set[str]:
    return set(postgres.sql("SELECT request_id FROM toolproxy_records", database="toolproxy").split())


def test_a_wrong_password_ends_the_start_naming_the_setting(postgres: PostgresServer, upstream: FakeUpstream,
                                                            start_gunicorn: Callable[..., Gunicorn]) -> None:
    postgres.fresh_database()
    server = start_gunicorn(fleet_env(upstream, postgres.url(password="not-it-42"), "east"))
    assert server.process.wait(60) != 0
    output = server.output()
    assert "TOOLPROXY_LOG_URL=postgresql://toolproxy:***@127.0.0.1" in output
    assert "password authentication failed" in output and "not-it-42" not in output and PASSWORD not in output


def test_an_instance_started_while_the_database_is_down_writes_once_it_is_up(running: PostgresServer,
                                                                             upstream: FakeUpstream,
                                                                             start_gunicorn: Callable[..., Gunicorn]
                                                                             ) -> None:
    url = running.fresh_database()
    running.stop()
    server = start_gunicorn(fleet_env(upstream, url, "early")).wait_ready()
    upstream.completion("before the database")
    sent = [requests.post(f"{server.url}/v1/chat/completions", json=make_body(), timeout=30) for _ in range(3)]
    assert [response.status_code for response in sent] == [200] * 3
    running.start()
    wait_until(lambda: len(records(server)) == 3, timeout=90)
    assert "does not answer now" in server.output()
