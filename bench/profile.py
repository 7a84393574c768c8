"""Where a toolproxy worker spends its time under load: py-spy (requirements-test.txt) samples the single worker
while the benchmark's client drives one scenario, then the functions with the most samples are printed, by own
time and by total.

    .venv/bin/python bench/profile.py small|big|stream|tools_stream|transcript [seconds [clients [--idle]]]

Without --idle only the thread holding the GIL is sampled (Python on the CPU); with it, every sample, waits
included (where a request's wall time goes).
"""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import client, workload
from bench.processes import start_gunicorn, start_upstream

BODIES = {"small": workload.request_body("bench-small", tools=True),
          "big": workload.request_body("bench-big", tools=True),
          "stream": workload.request_body("bench-stream", tools=False, stream=True),
          "tools_stream": workload.request_body("bench-small", tools=True, stream=True),
          "transcript": workload.request_body("bench-small", tools=True, messages=workload.transcript())}


def worker_pid(master: int) -> int:
    with open(f"/proc/{master}/task/{master}/children") as children:
        return int(children.read().split()[0])


def summarize(raw: str, top: int = 25) -> str:
    """py-spy's raw format: `frame;frame;... count` per line, outermost first."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue  # py-spy's own notes (e.g. a sample it could not read) share the file
        count = int(count_text)
        frames = [frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].rstrip(")") for frame in stack.split(";")]
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    lines = [f"{samples} samples", "", "own time:"]
    lines += [f"{100 * n / samples:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "total time (the function and what it calls):"]
    lines += [f"{100 * n / samples:5.1f}%  {name}" for name, n in total.most_common(top * 2)]
    return "\n".join(lines)


def main(scenario: str, seconds: float, clients: int, idle: bool) -> None:
    data = tempfile.TemporaryDirectory()
    upstream = start_upstream()
    proxy = start_gunicorn("toolproxy", "app:app", upstream.port, data.name, workers=1)
    output = Path(data.name) / "profile.txt"
    try:
        pid = worker_pid(proxy.process.pid)
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--rate",
                                "500", "--duration", str(int(seconds)), "--format", "raw", "--output", str(output),
                                "--nonblocking", *(["--idle"] if idle else ["--gil"])],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        request = client.request_bytes(proxy.port, BODIES[scenario])
        load = threading.Thread(target=lambda: asyncio.run(client.drive(proxy.port, request, clients, seconds + 1)))
        load.start()
        spy.wait()
        load.join()
        print(summarize(output.read_text()))
    finally:
        proxy.stop()
        upstream.stop()
        data.cleanup()


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--idle"]
    main(arguments[0], float(arguments[1]) if len(arguments) > 1 else 8,
         int(arguments[2]) if len(arguments) > 2 else 16, "--idle" in sys.argv)
