"""The fleet view for real: Debian's Prometheus, run with deploy/prometheus.yml (its targets, interval and key path
replaced), scrapes two toolproxy instances under gunicorn; then every query of deploy/grafana/toolproxy.json goes
through Prometheus's HTTP API and must return series, with numbers where traffic made them.

No skip when Prometheus is missing: `make test` installs it, and CI must fail rather than pass untested."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.conftest import ROOT, Gunicorn, free_port, make_body, make_tool
from tests.fake_upstream import FakeUpstream, completion
from tests.test_loopguard import conversation, turn

PROMETHEUS = "/usr/bin/prometheus"
KEY = "sk-fleet-key"
READ = make_tool("read", {"path": {"type": "string"}}, ["path"])
DASHBOARD = ROOT / "deploy" / "grafana" / "toolproxy.json"
# Grafana's own variables, as Grafana would fill them: all instances, and a window that holds several scrapes.
GRAFANA_VARIABLES = {"$instance": ".*", "$__rate_interval": "1m"}


class Prometheus:
    def __init__(self, config: dict[str, Any], directory: Path) -> None:
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = (directory / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}"], stdout=self._log, stderr=subprocess.STDOUT)

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert answer["status"] == "success", (expr, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"prometheus exited: {self.output()}"
            try:
                if ready():
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus: {what} not within {timeout} s: {self.output()}")

    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")[-3000:]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


def scrape_config(targets: list[str], key_file: Path) -> dict[str, Any]:
    """deploy/prometheus.yml as shipped, with the test's targets, a one-second interval and the key file."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    config["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (job,) = config["scrape_configs"]
    job["authorization"]["credentials_file"] = str(key_file)
    job["static_configs"] = [{"targets": targets}]
    return config


def grafana_queries() -> list[tuple[str, str]]:
    """(panel title, query) for every query of the Grafana dashboard, Grafana's variables filled in."""
    found = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"a Grafana variable the test does not fill: {expr}"
            found.append((panel["title"], expr))
    return found


@pytest.fixture
def fleet(upstream: FakeUpstream, tmp_path: Path) -> Iterator[tuple[list[Gunicorn], Prometheus]]:
    assert Path(PROMETHEUS).exists(), "Debian's prometheus is required: `make test` installs it"
    (tmp_path / "toolproxy.yaml").write_text("models:\n  - match: 'qwen*'\n")
    env = {"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_API_KEYS": KEY, "TOOLPROXY_WORKERS": "2",
           "TOOLPROXY_CONFIG": str(tmp_path / "toolproxy.yaml"), "TOOLPROXY_LOOP_REPEATS": "3"}
    instances = [Gunicorn(env), Gunicorn(env)]
    (tmp_path / "key").write_text(KEY)
    os.makedirs(tmp_path / "prometheus")
    prometheus = Prometheus(scrape_config([item.url.removeprefix("http://") for item in instances],
                                          tmp_path / "key"), tmp_path / "prometheus")
    try:
        for instance in instances:
            instance.wait_ready()
        yield instances, prometheus
    finally:
        prometheus.close()
        for instance in instances:
            instance.close()


REQUESTS = 6  # per round and instance, from `traffic`


def traffic(upstream: FakeUpstream, url: str) -> None:
    """One of each: a valid call, a stream, a call to an undeclared tool, an empty answer, a loop-guard stop, an
    upstream 503."""
    headers = {"Authorization": f"Bearer {KEY}", "User-Agent": "OpenAI/Python 3.51.0"}

    def post(body: dict[str, Any]) -> int:
        return requests.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30).status_code

    upstream.completion('<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    assert post(make_body("x", [READ], model="qwen3")) == 200
    assert post(make_body("x", [READ], model="qwen3", stream=True)) == 200
    upstream.completion('<tool_call>{"name": "delete", "arguments": {"path": "a"}}</tool_call>')
    assert post(make_body("x", [READ], model="qwen3")) == 200
    upstream.completion("")
    assert post(make_body("x", [READ], model="qwen3")) == 200
    looping = make_body("x", [READ], model="qwen3")
    looping["messages"] = conversation(turn("/a"), turn("/a"), turn("/a"))
    assert post(looping) == 200
    upstream.script = lambda request, wire: wire.send_json({"error": {"message": "loading"}}, 503)
    assert post(make_body("x", model="llama")) == 503
    upstream.script = lambda request, wire: wire.send_json(completion("fine"))


def total(prometheus: Prometheus, expr: str) -> float:
    return sum(float(series["value"][1]) for series in prometheus.query(expr))


def test_prometheus_runs_every_grafana_query(upstream, fleet):
    instances, prometheus = fleet
    prometheus.wait("both targets up", lambda: total(prometheus, 'up{job="toolproxy"}') == 2)
    for round_number in (1, 2):  # two rounds a few scrapes apart: every counter rises within the window
        for instance in instances:
            traffic(upstream, instance.url)
        expected = REQUESTS * len(instances) * round_number
        prometheus.wait(f"round {round_number} scraped",
                        lambda expected=expected: total(prometheus, "sum(toolproxy_requests_total)") == expected)
        time.sleep(2)
    queried = {}
    for title, expr in grafana_queries():
        result = prometheus.query(expr)
        assert result, f"{title}: no series for {expr}"
        values = [float(series["value"][1]) for series in result]
        assert any(math.isfinite(value) for value in values), f"{title}: only NaN for {expr}"
        queried[f"{title}: {expr}"] = {",".join(f"{key}={value}" for key, value in sorted(series["metric"].items())):
                                       round(float(series["value"][1]), 4) for series in result}
    per_instance = prometheus.query('sum by (instance) (rate(toolproxy_requests_total{status="200"}[1m]))')
    assert {series["metric"]["instance"] for series in per_instance} == {
        instance.url.removeprefix("http://") for instance in instances}
    print(json.dumps(queried, indent=1))  # with -s: what each query returned


def test_the_shipped_configuration_is_valid(tmp_path):
    """promtool, shipped with Prometheus, accepts deploy/prometheus.yml (its key file made up)."""
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus brings promtool"
    key = tmp_path / "toolproxy.key"
    key.write_text(KEY)
    text = (ROOT / "deploy" / "prometheus.yml").read_text().replace("/etc/prometheus/toolproxy.key", str(key))
    (tmp_path / "prometheus.yml").write_text(text)
    result = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
