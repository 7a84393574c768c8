"""The gunicorn server toolproxy runs in, defined once: `gunicorn.conf.py` (`make run`) re-exports these settings,
and `toolproxy serve` hands the same ones to gunicorn's application API.

The standard library, gunicorn, `toolproxy.config` and this folder only: gunicorn's master loads this before the
workers monkey-patch, and must not import `ssl` or `requests` early; the same reason keeps the app out of the
master (no preload).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import replace
from typing import Any

from gunicorn.app.base import BaseApplication

from toolproxy.config.exposure import exposure_problem
from toolproxy.config.report import warnings_for
from toolproxy.config.settings import ConfigError, Settings, load_settings
from toolproxy.server import heap
from toolproxy.server.banner import banner, listener_urls
from toolproxy.server.instance import Claim, InstanceProblem, claim, fresh_metrics_dir
from toolproxy.server.logcheck import check_log_url

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# How long a stopping worker lets running requests (long generations) finish; deploy/toolproxy.service waits
# a little longer before it kills.
GRACEFUL_TIMEOUT = 120


def settings_or_exit(environ: dict[str, str] | None = None) -> Settings:
    """The settings, or the process ends with every problem listed (no traceback: it is the user's file)."""
    try:
        return load_settings(environ)
    except ConfigError as error:
        sys.exit(f"toolproxy: the configuration has problems:\n{error}")


def gunicorn_settings(settings: Settings) -> dict[str, Any]:
    """gunicorn's settings for these toolproxy settings."""
    return {
        "bind": [settings.bind],
        "workers": settings.workers,
        # gevent's worker, with gunicorn's own 400/414/431 answers written as OpenAI error JSON (web/worker.py).
        "worker_class": "toolproxy.web.worker.GeventWorker",
        # Idle and slow connections cost a greenlet and a few KiB each, so this is high: 200 slow clients must not
        # lock out the rest. What reaches the upstream is capped in the app (TOOLPROXY_MAX_IN_FLIGHT).
        "worker_connections": settings.worker_connections,
        # With gevent, `timeout` is a heartbeat: a worker dies only when something blocks its loop that long.
        "timeout": 30,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        # Also the deadline for a request's headers: gunicorn reads each request's head under this timeout, so a
        # client dripping headers is dropped after 15 s. Bodies have their own deadline (TOOLPROXY_BODY_TIMEOUT).
        "keepalive": 15,
        "preload_app": False,
        # toolproxy writes one line per request itself, with what an access line lacks (record id, calls...).
        "accesslog": None,
        "errorlog": "-",
        "loglevel": settings.log_level.lower(),
        # gunicorn 27's control socket lives at one path per user: a second instance on the box would fight over
        # it, and toolproxy needs no runtime control beyond signals.
        "control_socket_disable": True,
        **_hooks(settings),
        "child_exit": _child_exit,
        # glibc's heap, given back after big requests (heap.py says what was measured).
        "pre_request": heap.request_started,
        "post_request": heap.request_finished,
        **({"logconfig_dict": _JSON_LOGS} if settings.log_format == "json" else {}),
    }


# TOOLPROXY_LOG_FORMAT=json: gunicorn's own lines (start, workers, crashes) as JSON too, so a log shipper reads
# every line; its access logger stays silent (toolproxy writes the request's line).
_JSON_LOGS: dict[str, Any] = {
    "root": {"level": "INFO", "handlers": ["error_console"]},
    "loggers": {"gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
                "gunicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False}},
    "formatters": {"generic": {"()": "toolproxy.observe.logs.JsonFormatter"}},
}


def _hooks(settings: Settings) -> dict[str, Any]:
    """gunicorn's hooks in the master: the data directory claimed before binding, the metrics directory made and
    the banner logged after binding, the metrics directory removed on the way out."""
    held: list[Claim] = []

    def on_starting(server: Any) -> None:
        """Before binding: refuse to expose an open proxy, checked on the real addresses (after any `-b` on the
        command line); say what in the configuration looks wrong; claim the data directory (a second instance on
        it is refused here, before its port, so a failed start touches nothing of the running one); refuse a
        transform log URL that cannot work, and create or upgrade its schema."""
        hosts = [address[0] if isinstance(address, tuple) else "unix" for address in server.cfg.address]
        problem = exposure_problem([host for host in hosts if host != "unix"], settings)
        if problem:
            sys.exit(f"toolproxy: {problem}")
        if settings.allow_open and not settings.api_keys:
            server.log.warning("toolproxy: TOOLPROXY_ALLOW_OPEN=1: serving without API keys")
        for warning in warnings_for(settings):
            server.log.warning("toolproxy: %s", warning)
        try:
            held.append(claim(settings.data_dir, ", ".join(listener_urls(server.cfg.address)), server.master_pid))
        except InstanceProblem as refused:
            sys.exit(f"toolproxy: {refused}")
        if settings.log_url:
            wrong, unreachable = check_log_url(settings.log_url)
            if wrong:
                sys.exit(f"toolproxy: {wrong}")
            if unreachable:
                server.log.warning("toolproxy: %s", unreachable)

    def when_ready(server: Any) -> None:
        """Bound, no worker yet: give the workers a fresh metrics directory of this instance's own for
        prometheus-client's multiprocess mode (every worker's metrics, summed), which must be in their environment
        before they import it; then the banner."""
        os.environ[MULTIPROC_ENV] = fresh_metrics_dir(held[0], keep=(server.master_pid,))
        addresses = [listener.sock.getsockname() if isinstance(listener.cfg_addr, tuple) else listener.cfg_addr
                     for listener in server.LISTENERS]
        server.log.info("%s", banner(settings, listener_urls(addresses)))

    def on_exit(server: Any) -> None:
        if os.environ.get(MULTIPROC_ENV):
            shutil.rmtree(os.environ[MULTIPROC_ENV], ignore_errors=True)

    return {"on_starting": on_starting, "when_ready": when_ready, "on_exit": on_exit}


def _child_exit(server: Any, worker: Any) -> None:
    from toolproxy.observe.metrics import mark_process_dead  # late: keep the master free of the app's imports

    mark_process_dead(worker.pid)


class Server(BaseApplication):  # type: ignore[misc]  # gunicorn ships no type information
    """`toolproxy serve`: gunicorn's application API with the settings above; the app is built in each worker,
    after gevent has patched it. Settings come from the environment, which `toolproxy serve` wrote its flags into,
    and are read again on a reload (HUP)."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        super().__init__(prog="toolproxy serve")

    def load_config(self) -> None:
        try:
            self.settings = _reloaded(self.settings, load_settings())
        except ConfigError as error:
            if self.settings is None:
                sys.exit(f"toolproxy: the configuration has problems:\n{error}")
            # A reload (HUP, `systemctl reload`) with a broken file keeps serving with the settings it has:
            # exiting here would take the running proxy down with it.
            print(f"toolproxy: reload refused, the configuration has problems:\n{error}", file=sys.stderr)
        for key, value in gunicorn_settings(self.settings).items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from toolproxy import create_app
        from toolproxy.observe.logs import configure

        assert self.settings is not None  # load_config ran first, or the process ended
        configure(self.settings)
        return create_app(self.settings)


def _reloaded(running: Settings | None, loaded: Settings) -> Settings:
    """The settings a reload (HUP) gives the new workers: all of the file's, except the data directory, which the
    master holds (its lock, the metrics directory) and which only a restart can move."""
    if running is None or loaded.data_dir == running.data_dir:
        return loaded
    print(f"toolproxy: reload keeps the data directory {running.data_dir}; {loaded.data_dir} takes a restart",
          file=sys.stderr)
    return replace(loaded, data_dir=running.data_dir)
