"""The first-contact smoke step of `make test`: `make run` in a virtual environment built from requirements.txt
alone, on a free loopback port, must serve the demo model's tool call. A runtime dependency that only the test
requirements bring in (gunicorn's gevent worker needs `packaging`) fails here, as it would for a new user.

Standard library only: it runs before, and apart from, the test environment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ".venv-smoke"
BUILD_SECONDS = 600  # a fresh venv from PyPI on a slow link
READY_SECONDS = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ask(url: str) -> dict:
    body = {"model": "any", "messages": [{"role": "user", "content": "read the file README.md"}],
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {
                "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]}
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_ready(url: str, server: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("smoke: `make run` exited before serving")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=10):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise SystemExit("smoke: `make run` did not answer /health in time")


def main() -> int:
    shutil.rmtree(ROOT / VENV, ignore_errors=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TOOLPROXY_", "PROMETHEUS_"))}
    with tempfile.TemporaryDirectory() as data, tempfile.TemporaryFile() as log:
        env |= {"TOOLPROXY_BIND": f"127.0.0.1:{port}", "TOOLPROXY_DATA_DIR": data}
        server = subprocess.Popen(["make", "--no-print-directory", "run", f"VENV={VENV}"], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_ready(url, server, time.monotonic() + BUILD_SECONDS + READY_SECONDS)
            call = ask(url)["choices"][0]["message"]["tool_calls"][0]["function"]
            if call["name"] != "read_file" or json.loads(call["arguments"]) != {"path": "README.md"}:
                raise SystemExit(f"smoke: unexpected call {call}")
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace")[-4000:])
            raise
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGINT)
                server.wait(30)
    print(f"smoke: `make run` from requirements.txt alone served the demo's tool call ({call['name']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
