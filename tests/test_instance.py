"""An instance and its data directory, as an operator meets them in the first week: one instance per directory
(a second start is refused before its port and touches nothing of the running one), a per-user default, an
unusable directory said in one sentence (by check-config too), the start-up banner, serve's flags, and a start
page that says where to go next."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, Gunicorn, ProxyServer, free_port, make_tool
from tests.fake_upstream import FakeUpstream, Received, Wire, completion
from toolproxy.cli import environ_for, parser
from toolproxy.config.settings import load_settings
from toolproxy.version import version

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
CHAT = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _clean_environ(**extra: str) -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith(("TOOLPROXY_", "PROMETHEUS_"))}
    return {**kept, **extra}


def _requests_counted(url: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "toolproxy_requests_total")


def _refused(env: dict[str, str]) -> str:
    """Start gunicorn as `make run` does; it must end by itself (refused), and its output is returned."""
    result = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT,
                            env=_clean_environ(**env), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_a_second_instance_on_the_same_data_directory_is_refused_and_erases_nothing(
        upstream: FakeUpstream, start_gunicorn: Callable[..., Gunicorn], tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_DATA_DIR": str(data)}).wait_ready()
    assert requests.post(f"{first.url}/v1/chat/completions", json=CHAT, timeout=30).status_code == 200
    assert _requests_counted(first.url) == 1
    same_port = _refused({"TOOLPROXY_BIND": f"127.0.0.1:{first.port}", "TOOLPROXY_DATA_DIR": str(data)})
    assert _requests_counted(first.url) == 1, "a start that failed (port taken) erased nothing"
    other_port = _refused({"TOOLPROXY_BIND": f"127.0.0.1:{free_port()}", "TOOLPROXY_DATA_DIR": str(data)})
    for output in (same_port, other_port):
        assert f"the data directory {data} is in use by another toolproxy (pid {first.process.pid}," in output
        assert "Traceback" not in output
    assert _requests_counted(first.url) == 1, "nor did a start on another port"
    assert requests.post(f"{first.url}/v1/chat/completions", json=CHAT, timeout=30).status_code == 200
    assert _requests_counted(first.url) == 2


def test_earlier_runs_counts_do_not_linger_and_the_metrics_directory_is_the_instance_s_own(
        start_gunicorn: Callable[..., Gunicorn], tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "metrics" / "999999").mkdir(parents=True)  # what a killed instance left behind
    (data / "metrics" / "counter_1.db").write_bytes(b"stale")
    server = start_gunicorn({"TOOLPROXY_DATA_DIR": str(data)}).wait_ready()
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200
    assert os.listdir(data / "metrics") == [str(server.process.pid)]
    assert any(name.startswith("counter_") for name in os.listdir(data / "metrics" / str(server.process.pid)))


def test_the_lock_goes_with_the_instance(start_gunicorn: Callable[..., Gunicorn], tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    first = start_gunicorn({"TOOLPROXY_DATA_DIR": data}).wait_ready()
    first.stop()
    second = start_gunicorn({"TOOLPROXY_DATA_DIR": data}).wait_ready()
    assert requests.get(f"{second.url}/health", timeout=10).status_code == 200
    assert not (tmp_path / "data" / "metrics" / str(first.process.pid)).exists(), "removed when it stopped"


def test_the_data_directory_defaults_to_the_per_user_state_directory(tmp_path: Path) -> None:
    assert load_settings({"HOME": "/home/ada"}).data_dir == "/home/ada/.local/state/toolproxy"
    assert load_settings({"HOME": "/home/ada", "XDG_STATE_HOME": "/srv/state"}).data_dir == "/srv/state/toolproxy"
    assert load_settings({"HOME": "/home/ada", "XDG_STATE_HOME": "relative"}).data_dir.startswith("/home/ada/")
    chosen = load_settings({"HOME": "/home/ada", "TOOLPROXY_DATA_DIR": str(tmp_path / "d")}).data_dir
    assert chosen == str(tmp_path / "d")


def _blocked(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "data"  # can never be created: its parent is a file


def test_check_config_says_in_one_sentence_why_the_data_directory_is_unusable(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "toolproxy", "check-config"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env=_clean_environ(TOOLPROXY_DATA_DIR=str(_blocked(tmp_path))))
    assert result.returncode == 1 and result.stdout == ""
    problem = result.stderr.splitlines()[-1]
    assert problem.startswith(f"- TOOLPROXY_DATA_DIR={_blocked(tmp_path)} cannot hold toolproxy's data (")
    assert "is not a directory" in problem and problem.count(". ") == 0


def test_serve_says_in_one_sentence_why_the_data_directory_is_unusable(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "toolproxy", "serve", "--port", str(free_port())], cwd=ROOT,
                            capture_output=True, text=True, timeout=60,
                            env=_clean_environ(TOOLPROXY_DATA_DIR=str(_blocked(tmp_path))))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert f"toolproxy: TOOLPROXY_DATA_DIR={_blocked(tmp_path)} cannot hold toolproxy's data (" in output


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_data_directory_is_named(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = subprocess.run([sys.executable, "-m", "toolproxy", "check-config"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env=_clean_environ(TOOLPROXY_DATA_DIR=str(locked / "data")))
    assert result.returncode == 1 and f"({locked}: Permission denied)" in result.stderr


def test_serve_flags_win_over_variables() -> None:
    args = parser().parse_args(["serve", "--api-key", "k-flag-1", "--api-key", "k-flag-2", "--data-dir", "/srv/tp",
                                "--log-format", "json"])
    settings = load_settings(environ_for(args, {"TOOLPROXY_API_KEYS": "k-env", "TOOLPROXY_DATA_DIR": "/srv/env",
                                                "TOOLPROXY_LOG_FORMAT": "text"}))
    assert (settings.api_keys, settings.data_dir, settings.log_format) == (("k-flag-1", "k-flag-2"), "/srv/tp",
                                                                          "json")


def _models_and_chat(request: Received, wire: Wire) -> None:
    wire.send_json(completion("served") if request.method == "POST" else {"object": "list", "data": []})


def test_the_banner_says_what_runs_where_and_the_flags_take_effect(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = _models_and_chat
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    config = tmp_path / "toolproxy.yaml"
    config.write_text(f"models:\n  - match: 'dead*'\n    upstream: {dead}\n")
    port, data = free_port(), tmp_path / "flag-data"
    env = _clean_environ(TOOLPROXY_API_KEYS="k-SENTINEL-env", TOOLPROXY_DATA_DIR=str(tmp_path / "env-data"),
                         TOOLPROXY_LOG_FORMAT="text")
    command = [sys.executable, "-m", "toolproxy", "serve", "--upstream", upstream.url, "--config", str(config),
               "--port", str(port), "--api-key", "k-SENTINEL-1", "--api-key", "k-SENTINEL-2",
               "--data-dir", str(data), "--log-format", "json"]
    with (tmp_path / "serve.log").open("w+") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = _wait_ready(f"http://127.0.0.1:{port}", process)
            refused = requests.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30,
                                    headers={"Authorization": "Bearer k-SENTINEL-env"})
            served = requests.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30,
                                   headers={"Authorization": "Bearer k-SENTINEL-2"})
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(30)
        log.seek(0)
        lines = [json.loads(line) for line in log.read().splitlines() if line.strip()]
    assert refused.status_code == 401 and served.json()["choices"][0]["message"]["content"] == "served"
    assert (data / "toolproxy.lock").exists() and not (tmp_path / "env-data").exists(), "the flag's data directory"
    banners = [entry["message"] for entry in lines if entry["message"].startswith("toolproxy ")]
    assert len(banners) == 1, "one block, one JSON line"
    text = banners[0]
    assert text.splitlines()[0] == f"toolproxy {version()} serving {url}/v1 (1 worker)"
    assert f"dashboard  {url}/dashboard/" in text and f"metrics    {url}/metrics" in text
    assert f"upstream   {upstream.url} (every other model): answers (GET /models: 200)" in text
    assert f"upstream   {dead} (models 'dead*'): does not answer (Connection refused)" in text
    assert "API keys   required (2 keys)" in text and f"data       {data} (transform log, metrics)" in text
    assert len(upstream.probes) == 1 and upstream.probes[0].path == "/v1/models"
    assert "SENTINEL" not in json.dumps(lines)


def test_the_start_page_shows_its_address_and_links_the_dashboard_and_metrics(proxy: ProxyServer) -> None:
    page = requests.get(f"{proxy.url}/", timeout=10).text
    assert f"<code>{proxy.url}/v1</code>" in page and f"curl -s {proxy.url}/v1/chat/completions" in page
    assert '<a href="/dashboard/">' in page and '<a href="/metrics">' in page


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "toolproxy serve exited"
        try:
            requests.get(f"{url}/health", timeout=10)
            return url
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or a worker still booting
            time.sleep(0.1)
    raise AssertionError("toolproxy serve did not start")
