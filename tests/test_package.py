"""`pip install` of the checkout into a fresh virtual environment gives a working `toolproxy` command: help,
the version of the commit it was built from (the installed package has no git to ask), the runtime dependencies
of requirements.txt, and `toolproxy serve` answering with tool calls from the demo model, templates and static
files included. Slow (it installs): one test."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, free_port, make_tool
from toolproxy.version import version

# What a fresh clone has (its .git included: the build reads the version there); caches, environments and build
# output of this checkout stay behind.
LEFT_OUT = shutil.ignore_patterns(".venv*", "data", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
                                  ".hypothesis", "node_modules")


def requirements() -> list[str]:
    lines = (line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    return [line for line in lines if line]


def run(*command: str | Path, cwd: Path, timeout: float = 60) -> str:
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env=_environ())
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _environ() -> dict[str, str]:
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("TOOLPROXY_", "PYTHON", "VIRTUAL_ENV", "PROMETHEUS_"))}


def test_the_package_s_dependencies_are_requirements_txt() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependencies" in project["project"]["dynamic"] and "dependencies" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    assert all("==" in line for line in requirements()), "every runtime dependency is pinned"


@pytest.mark.timeout(900)
def test_pip_install_gives_a_working_command(tmp_path: Path) -> None:
    source, env = tmp_path / "checkout", tmp_path / "venv"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT)
    run(sys.executable, "-m", "venv", env, cwd=tmp_path)
    run(env / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", source, cwd=tmp_path,
        timeout=800)
    command = env / "bin" / "toolproxy"
    assert "check-config" in run(command, "--help", cwd=tmp_path)
    assert run(command, "--version", cwd=tmp_path).split() == ["toolproxy", version()], "the checkout's version"
    assert run(env / "bin" / "python", "-m", "toolproxy", "--version", cwd=tmp_path).split()[-1] == version()
    installed = run(env / "bin" / "python", "-c", "import importlib.metadata as m, json; "
                    "print(json.dumps(m.requires('toolproxy')))", cwd=tmp_path)
    assert json.loads(installed) == requirements(), "pyproject's dependencies are requirements.txt's"
    _serve_and_call(command, tmp_path)


def _serve_and_call(command: Path, workdir: Path) -> None:
    port = free_port()
    log = (workdir / "serve.log").open("w+")
    # Run outside the checkout, so the installed package is what answers.
    process = subprocess.Popen([command, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                               cwd=workdir, env={**_environ(), "TOOLPROXY_DATA_DIR": str(workdir / "data")},
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        answer = requests.post(f"{url}/v1/chat/completions", timeout=30, json={
            "model": "anything", "messages": [{"role": "user", "content": "read the file src/app.py"}],
            "tools": [make_tool("read", {"path": {"type": "string"}}, ["path"])]}).json()
        call = answer["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (call["name"], json.loads(call["arguments"])) == ("read", {"path": "src/app.py"})
        assert requests.get(f"{url}/dashboard/", timeout=10).status_code == 200, "templates ship in the package"
        assert requests.get(f"{url}/static/dashboard.js", timeout=10).status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: object) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"toolproxy serve exited: {Path(getattr(log, 'name', '')).read_text()}")
        try:
            requests.get(f"{url}/health", timeout=10)
            return
        except (requests.ConnectionError, requests.Timeout):  # not listening yet, or a worker still booting
            time.sleep(0.2)
    raise AssertionError("toolproxy serve did not start")
