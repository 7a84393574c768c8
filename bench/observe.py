"""What observing one finished request costs a worker, in CPU microseconds: the transform-log row, `add` (the row
and queueing it) and the writer thread's share (SQLite: the same process, so the same cores), the log line, the
metrics, and `fill_answer`.
Records like the load benchmark's (bench/workload.py): the small `read` reply, the same with an agent's 30 tools,
and the 256 KB `write` reply; each without and with configured secrets.

    .venv/bin/python bench/observe.py [checkout]

With a checkout (e.g. a `git worktree` of an earlier commit), that one's toolproxy is measured instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent).resolve()))

from bench import workload
from toolproxy.observe.logs import log_request
from toolproxy.observe.metrics import Metrics
from toolproxy.observe.record import TransformRecord, fill_answer, new_record
from toolproxy.observe.translog import TransformLog
from toolproxy.wire.jsonwire import dumps_text

SECRETS = ("sk-bench-0123456789abcdef", "upstream-key-98765")
AGENT_TOOLS = [{"type": "function", "function": {"name": f"tool_{n}", "description": "Does one thing well. " * 8,
                                                 "parameters": {"type": "object", "properties": {
                                                     f"arg_{k}": {"type": "string", "description": "An argument."}
                                                     for k in range(6)}, "required": ["arg_0"]}}} for n in range(30)]


def record(text: str, name: str, arguments: dict[str, Any], tools: list[Any]) -> TransformRecord:
    """A record as the routes fill it for a tool call written as text in `text`: its source a slice of the text,
    the arguments the client got (`wire`) the very string the answer holds."""
    done = new_record("opencode/1.0", "127.0.0.1", 600)
    source, wire = text[text.index("<tool_call>"):], dumps_text(arguments)
    done.model, done.route, done.mode, done.status, done.upstream = "bench", "tools", "prompt", 200, "http://127.0.0.1:1"
    done.route_reason, done.dialects, done.tools, done.raw_text = "tools in the request", ["hermes"], tools, text
    done.calls = [{"name": name, "arguments": arguments, "raw_arguments": source, "source": source,
                   "dialect": "hermes", "wire": wire, "valid": True}]
    fill_answer(done, answer_of(done))
    if "client_calls" not in {item.name for item in dataclasses.fields(TransformRecord)}:  # an older checkout
        done.calls = [{key: value for key, value in call.items() if key != "wire"} for call in done.calls]
    done.upstream_ms, done.overhead_ms = 2.0, 1.0
    return done


def answer_of(done: TransformRecord) -> dict[str, Any]:
    calls = [{"function": {"name": call["name"], "arguments": call.get("wire") or dumps_text(call["arguments"])}}
             for call in done.calls]
    return {"choices": [{"finish_reason": "tool_calls", "message": {"content": done.raw_text.split("\n")[0],
                                                                    "tool_calls": calls}}]}


def records() -> dict[str, TransformRecord]:
    big = json.loads(workload.big_text().split("<tool_call>\n")[1].split("\n</tool_call>")[0])
    return {"small": record(workload.SMALL_TEXT, "read", {"path": "/src/app.py", "limit": 50}, workload.TOOLS),
            "small, 30 tools": record(workload.SMALL_TEXT, "read", {"path": "/src/app.py"}, AGENT_TOOLS),
            "256 KB": record(workload.big_text(), "write", big["arguments"], workload.TOOLS)}


def cpu_us(action: Callable[[], Any], count: int) -> float:
    action()
    started = time.thread_time()
    for _ in range(count):
        action()
    return (time.thread_time() - started) * 1e6 / count


def add_us(log: TransformLog, done: TransformRecord, count: int) -> tuple[float, float]:
    """CPU of `add` in the adding thread, and of the writer thread (SQLite included) for the same records."""
    log.add(done)
    log.flush()
    process, thread = time.process_time(), time.thread_time()
    for _ in range(count):
        log.add(done)
    added = time.thread_time() - thread
    log.flush()  # its waiting is in this thread: the rest of the process's time is the writer's
    writer = time.process_time() - process - (time.thread_time() - thread)
    return added * 1e6 / count, writer * 1e6 / count


def measure(done: TransformRecord, secrets: tuple[str, ...], metrics: Metrics, count: int) -> list[float]:
    log = TransformLog(tempfile.mkdtemp(), secrets=secrets)
    row = getattr(log, "_row", None) or log._rows.row  # before and after observe/row.py
    answer = answer_of(done)
    return [cpu_us(lambda: row(done), count), *add_us(log, done, count),
            cpu_us(lambda: log_request(done, secrets), count), cpu_us(lambda: metrics.observe(done), count),
            cpu_us(lambda: fill_answer(done, answer), count)]


def main() -> None:
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the process)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().handlers[:], logging.getLogger().level = [handler], logging.INFO
    metrics = Metrics()
    print("| record | secrets | row | add | writer thread | log line | metrics | fill_answer |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, done in records().items():
        for secrets in ((), SECRETS):
            figures = measure(done, secrets, metrics, 200 if "256" in name else 2000)
            print(f"| {name} | {len(secrets)} | " + " | ".join(f"{figure:,.1f}" for figure in figures) + " |")


if __name__ == "__main__":
    main()
