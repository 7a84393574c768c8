"""gunicorn settings for toolproxy: gevent workers, bind and worker count from toolproxy's settings.

`toolproxy.config.settings` imports only the standard library and PyYAML, so loading it here, in the master, keeps
`ssl` and `requests` out until each worker has monkey-patched. `gunicorn -b HOST:PORT` still overrides `bind`.
"""

import os
import shutil
import sys

from toolproxy.config.settings import ConfigError, exposure_problem, load_settings

try:
    _settings = load_settings()
except ConfigError as _error:
    sys.exit(f"toolproxy: the configuration has problems:\n{_error}")

bind = [_settings.bind]
workers = _settings.workers
worker_class = "gevent"
worker_connections = 200
# With gevent, `timeout` is a heartbeat: a worker dies only when something blocks its loop that long.
timeout = 30
graceful_timeout = 120
keepalive = 15
preload_app = False
accesslog = "-"
# gunicorn's default line holds the Basic-auth user (%(u)s), the query string (in %(r)s: `?api_key=...`) and the
# Referer (%(f)s, which may carry either): keys would land in the log. The path alone, without the query.
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"'
errorlog = "-"
loglevel = "info"
# gunicorn 27's control socket lives at one path per user: a second instance on the box would fight over it,
# and toolproxy needs no runtime control beyond signals.
control_socket_disable = True


# Metrics from every worker, summed: prometheus-client's multiprocess mode keeps one file per worker here. Set
# before any worker starts, wiped at each start so counts from an earlier run do not linger.
_metrics_dir = os.path.join(_settings.data_dir, "metrics")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir


def on_starting(server):
    """Refuse to expose an open proxy. Checked on the real addresses, after any `-b` from the command line."""
    hosts = [address[0] if isinstance(address, tuple) else "unix" for address in server.cfg.address]
    problem = exposure_problem([host for host in hosts if host != "unix"], _settings)
    if problem:
        sys.exit(f"toolproxy: {problem}")
    if _settings.allow_open and not _settings.api_keys:
        server.log.warning("toolproxy: TOOLPROXY_ALLOW_OPEN=1: serving without API keys")
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    os.makedirs(_metrics_dir, exist_ok=True)


def child_exit(server, worker):
    from toolproxy.observe.metrics import mark_process_dead  # imported late: keep the master free of the app's imports

    mark_process_dead(worker.pid)
