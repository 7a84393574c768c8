"""Fixtures: a scripted upstream on 127.0.0.1, the proxy as a real HTTP server on loopback (in-process, per
test settings), and the proxy under real gunicorn with gevent workers for the live-wire tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import settings as hypothesis_settings
from werkzeug.serving import make_server

from tests.fake_upstream import FakeUpstream
from toolproxy import create_app
from toolproxy.config.settings import Settings

# Property tests draw the same examples on every run, so that `make test` turns red for a change, never for a new
# draw; `HYPOTHESIS_PROFILE=explore` draws afresh (worth a run after changing a parser).
# No deadline in either: a deadline is a wall-clock assertion, and `make test` must pass on a loaded machine.
hypothesis_settings.register_profile("repeatable", derandomize=True, deadline=None)
hypothesis_settings.register_profile("explore", derandomize=False, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def _upstream_server() -> Iterator[FakeUpstream]:
    server = FakeUpstream().start()
    yield server
    server.stop()


@pytest.fixture
def upstream(_upstream_server: FakeUpstream) -> FakeUpstream:
    _upstream_server.reset_state()
    return _upstream_server


@pytest.fixture
def settings(upstream: FakeUpstream, tmp_path: Path) -> Settings:
    # backend "generic": the scripted upstream is shared, and a start-up probe of its kind would land among the
    # requests a test counts (tests/test_backends.py probes it on purpose).
    return Settings(upstream=upstream.url, read_timeout=10, request_timeout=20, data_dir=str(tmp_path / "data"),
                    backend="generic")


class ProxyServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def post(self, body: Any, **kwargs: Any) -> requests.Response:
        return requests.post(f"{self.url}/v1/chat/completions", json=body, timeout=30, **kwargs)


@pytest.fixture
def serve() -> Iterator[Callable[[Settings], ProxyServer]]:
    """Start the app on a real loopback HTTP server with the given settings."""
    servers = []

    def start(settings: Settings) -> ProxyServer:
        server = make_server("127.0.0.1", 0, create_app(settings), threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return ProxyServer(f"http://127.0.0.1:{server.server_port}")

    yield start
    for server in servers:
        server.shutdown()
    _wait_for_health_checks()


def _wait_for_health_checks() -> None:
    """A dashboard page starts its upstream checks in the background (upstream/health.py): they end before the
    next test, whose upstream would otherwise receive them."""
    deadline = time.monotonic() + 30
    while any(thread.name == "toolproxy-health" for thread in threading.enumerate()):
        if time.monotonic() > deadline:
            raise RuntimeError("an upstream health check is still running after 30 s")
        time.sleep(0.05)


@pytest.fixture
def proxy(serve: Callable[[Settings], ProxyServer], settings: Settings) -> ProxyServer:
    return serve(settings)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gunicorn:
    def __init__(self, env: dict[str, str], args: list[str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._data = tempfile.TemporaryDirectory()
        full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("TOOLPROXY_")},
                    "TOOLPROXY_BIND": f"127.0.0.1:{self.port}", "TOOLPROXY_DATA_DIR": self._data.name,
                    "TOOLPROXY_BACKEND": "generic", **env}  # no probe among the requests tests count
        # A file, not a pipe: a busy server's access log would fill a pipe nobody reads and block it.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close(), outlives this method)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", *(args or []), "app:app"],
            cwd=ROOT, env=full_env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> Gunicorn:
        # Generous: a loaded machine may take many seconds to boot workers. A read timeout is not failure either:
        # the socket is bound before a worker is ready to answer.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.output()}")
            try:
                requests.get(f"{self.url}/health", timeout=10)
                return self
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # gunicorn's quick shutdown; TERM waits for keep-alives
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def output(self) -> str:
        self.stop()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def close(self) -> None:
        self.stop()
        self._log.close()
        self._data.cleanup()


@pytest.fixture(scope="session")
def gunicorn_proxy(_upstream_server: FakeUpstream) -> Iterator[Gunicorn]:
    """The real thing: gunicorn, gevent worker, pointed at the scripted upstream, short timers for tests."""
    server = Gunicorn({"TOOLPROXY_UPSTREAM": _upstream_server.url, "TOOLPROXY_COMMIT_AFTER": "0.5",
                       "TOOLPROXY_HEARTBEAT_INTERVAL": "0.5", "TOOLPROXY_REQUEST_TIMEOUT": "8",
                       "TOOLPROXY_READ_TIMEOUT": "6"}).wait_ready()
    yield server
    server.close()


@pytest.fixture
def start_gunicorn() -> Iterator[Callable[..., Gunicorn]]:
    started: list[Gunicorn] = []

    def start(env: dict[str, str], args: list[str] | None = None) -> Gunicorn:
        server = Gunicorn(env, args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL server for the session (tests/postgres_server.py); each test takes a fresh database."""
    from tests.postgres_server import PostgresServer

    server = PostgresServer()
    yield server
    server.close()


def make_tool(name: str, properties: dict[str, Any] | None = None,
              required: list[str] | None = None) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties or {}, "required": required or []}
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool",
                                             "parameters": parameters}}


def make_body(content: str = "hi", tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "test-model", "messages": [{"role": "user", "content": content}], **extra}
    if tools is not None:
        body["tools"] = tools
    return body


def with_settings(settings: Settings, **changes: Any) -> Settings:
    return replace(settings, **changes)
