"""The benchmark's servers as child processes on loopback, and the resident memory of each process tree."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A child process listening on `port` with exactly the environment `env`; its output goes to a file nobody
    has to drain."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], port: int, cwd: Path = ROOT) -> None:
        self.name, self.port = name, port
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, path: str) -> Server:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.output()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2).read()
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start:\n{self.output()}")

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def start_upstream() -> Server:
    port = free_port()
    server = Server("upstream", [sys.executable, "bench/fast_upstream.py", str(port)], dict(os.environ), port)
    return server.wait_ready("/v1/models")


def start_gunicorn(name: str, app: str, upstream_port: int, data_dir: str, workers: int = 2,
                   cwd: Path = ROOT, settings: dict[str, str] | None = None,
                   config: str = "gunicorn.conf.py") -> Server:
    """toolproxy's gunicorn.conf.py for both targets: same worker class, count and connection settings. `cwd`:
    another checkout of toolproxy (an earlier version, to compare in the same run); `settings`: more of its
    environment; `config`: another configuration (bench/memory_probe.py)."""
    port = free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/v1"
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLPROXY_")}
    env.update({"TOOLPROXY_BIND": f"127.0.0.1:{port}", "TOOLPROXY_WORKERS": str(workers),
                "TOOLPROXY_UPSTREAM": upstream, "TOOLPROXY_DATA_DIR": data_dir, "BENCH_FLOOR_UPSTREAM": upstream,
                **(settings or {})})
    command = [sys.executable, "-m", "gunicorn", "-c", config, app]
    return Server(name, command, env, port, cwd).wait_ready("/health")


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (0 once it is gone)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                total += next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
            with open(f"/proc/{current}/task/{current}/children") as children:
                stack.extend(int(child) for child in children.read().split())
        except (OSError, StopIteration):
            continue
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants. Robust where wall-clock
    figures are not: other work on the box slows a target down but does not add to its CPU time."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)
            with open(f"/proc/{current}/task/{current}/children") as children:
                stack.extend(int(child) for child in children.read().split())
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


class RssPeak:
    """Samples a process tree's RSS five times a second in a thread; `peak` is the highest since `reset()`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        self.peak = tree_rss(self.pid)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, tree_rss(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
