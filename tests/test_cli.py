"""The `toolproxy` command from this checkout: check-config (resolved settings, secrets masked, every mistake
with a suggestion), serve's precedence (flags over variables over YAML), and `toolproxy serve` itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import ROOT, free_port, make_tool
from toolproxy.cli import environ_for, parser
from toolproxy.config.settings import load_settings

READ = make_tool("read", {"path": {"type": "string"}}, ["path"])


def toolproxy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TOOLPROXY_")}
    return subprocess.run([sys.executable, "-m", "toolproxy", *args], cwd=ROOT, env={**clean, **(env or {})},
                          capture_output=True, text=True, timeout=60)


def test_check_config_prints_resolved_settings_with_secrets_masked(tmp_path: Path) -> None:
    config = tmp_path / "toolproxy.yaml"
    config.write_text("upstream: http://127.0.0.1:8000/v1\nworkers: 3\nmodels:\n  - match: 'q*'\n"
                      "    upstream: http://user:sk-SENTINEL-url@10.0.0.5:8000/v1\n"
                      "    upstream_api_key: sk-SENTINEL-rule\n")
    result = toolproxy("check-config", str(config), env={"TOOLPROXY_API_KEYS": "sk-SENTINEL-a,sk-SENTINEL-b",
                                                          "TOOLPROXY_UPSTREAM_API_KEY": "sk-SENTINEL-up",
                                                          "TOOLPROXY_WORKERS": "2"})
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(None, 1) for line in result.stdout.splitlines() if " " in line.strip())
    assert lines["upstream"].strip() == "http://127.0.0.1:8000/v1"
    assert lines["workers"].strip() == "2", "the environment wins over the file"
    assert "2 keys" in lines["api_keys"] and "'q*'" in lines["models"]
    assert "SENTINEL" not in result.stdout + result.stderr


def test_check_config_lists_every_mistake_with_the_closest_name(tmp_path: Path) -> None:
    config = tmp_path / "toolproxy.yaml"
    config.write_text("upstrem: http://127.0.0.1:8000/v1\nvtc_newlines: 7\nmodels:\n  - match: 'q*'\n"
                      "    tool_mod: prompt\n")
    result = toolproxy("check-config", str(config), env={"TOOLPROXY_WORKRES": "2"})
    assert result.returncode != 0 and result.stdout == ""
    assert "did you mean `upstream`?" in result.stderr
    assert "TOOLPROXY_WORKRES" in result.stderr and "did you mean `TOOLPROXY_WORKERS`?" in result.stderr
    assert "did you mean `tool_mode`?" in result.stderr
    assert "repair rounds" not in result.stderr and "line breaks" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_upstream_without_a_path_is_reported_with_the_url_that_will_be_called() -> None:
    result = toolproxy("check-config", env={"TOOLPROXY_UPSTREAM": "http://127.0.0.1:8000"})
    assert result.returncode == 0
    assert "http://127.0.0.1:8000/chat/completions" in result.stderr and "/v1" in result.stderr


def test_flags_win_over_variables_which_win_over_yaml(tmp_path: Path) -> None:
    config = tmp_path / "toolproxy.yaml"
    config.write_text("upstream: http://yaml.invalid/v1\nworkers: 4\nbind: 127.0.0.1:9001\n")
    environ = {"TOOLPROXY_CONFIG": str(config), "TOOLPROXY_UPSTREAM": "http://env.invalid/v1"}
    from_env = load_settings(environ_for(parser().parse_args(["serve"]), environ))
    assert (from_env.upstream, from_env.workers, from_env.bind) == ("http://env.invalid/v1", 4, "127.0.0.1:9001")
    args = parser().parse_args(["serve", "--upstream", "http://flag.invalid/v1", "--port", "9100", "--workers", "2"])
    from_flags = load_settings(environ_for(args, environ))
    assert (from_flags.upstream, from_flags.workers, from_flags.bind) == ("http://flag.invalid/v1", 2,
                                                                          "127.0.0.1:9100")


def test_serve_runs_gunicorn_with_the_flags(upstream, tmp_path: Path) -> None:
    upstream.completion('<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    port = free_port()
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TOOLPROXY_")}
    with (tmp_path / "serve.log").open("w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolproxy", "serve", "--upstream", upstream.url, "--port", str(port)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**clean, "TOOLPROXY_UPSTREAM": "http://127.0.0.1:9/v1", "TOOLPROXY_DATA_DIR": str(tmp_path)})
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, process)
            answer = requests.post(f"{url}/v1/chat/completions", timeout=30, json={
                "model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [READ]})
            assert answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
            posts = [request for request in upstream.received if request.method == "POST"]
            assert len(posts) == 1, "the flag's upstream, not the variable's (besides, the probes of its kind)"
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(30)
        log.seek(0)
        output = log.read()
    assert "Booting worker" in output and "gevent" in output.lower()
    assert "route=tools " in output and '"POST /v1/chat/completions' not in output, "one line per request"


def test_a_reload_with_a_broken_file_keeps_serving(upstream, tmp_path: Path) -> None:
    upstream.completion("still here")
    config, port = tmp_path / "toolproxy.yaml", free_port()
    config.write_text(f"upstream: {upstream.url}\n")
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TOOLPROXY_")}
    with (tmp_path / "serve.log").open("w+") as log:
        process = subprocess.Popen([sys.executable, "-m", "toolproxy", "serve", "--config", str(config), "--port",
                                    str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**clean, "TOOLPROXY_DATA_DIR": str(tmp_path)})
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, process)
            config.write_text("upstrem: nowhere\n")
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 60
            while "reload refused" not in (tmp_path / "serve.log").read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "did you mean `upstream`?" in (tmp_path / "serve.log").read_text()
            answer = requests.post(f"{url}/v1/chat/completions", timeout=30, json={
                "model": "m", "messages": [{"role": "user", "content": "x"}]})
            assert process.poll() is None and answer.json()["choices"][0]["message"]["content"] == "still here"
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(30)


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "toolproxy serve exited"
        try:
            requests.get(f"{url}/health", timeout=10)
            return
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or a worker still booting
            time.sleep(0.1)
    raise AssertionError("toolproxy serve did not start")
