"""Where a toolproxy worker's memory goes under load: the load benchmark's upstream and client drive one scenario
against toolproxy started with bench/memory_probe.py, which samples each worker (RSS, glibc's heap in use and
free, what Python's tracemalloc holds, the transform log's queue) and counts the large strings and bytes alive at
the worker's highest RSS, with where each was made.

    .venv/bin/python bench/memory.py small|big|stream|tools_stream|transcript|slow [clients [seconds]] [--trace N]
    .venv/bin/python bench/memory.py big --one

--trace N: tracemalloc with N frames (slower, and its own bookkeeping adds to RSS: read its figures for where,
not how much). MALLOC_* variables set when this starts reach every process (the client and upstream too);
BENCH_MMAP_THRESHOLD, BENCH_TRIM_THRESHOLD and BENCH_ARENA_MAX set glibc's mallopt in toolproxy's workers only.
slow: `clients` slow streams at once, one request each (the load benchmark's 500).
--one: a single request through the app in this process, and every allocation of 32 KiB or more alive at the moment
its response body is made (how many times one request holds its answer).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import client, workload
from bench.processes import RssPeak, start_gunicorn, start_upstream, tree_cpu, tree_rss
from bench.profile import BODIES

MiB = 1024 * 1024


def mib(value: float) -> str:
    return f"{value / MiB:,.1f}"


def report(probe: dict[str, Any]) -> list[str]:
    samples, peak = probe["samples"], probe["peak"]
    if not samples or not peak:
        return ["  (no samples)"]
    idle = samples[0]
    lines = [f"  RSS idle {mib(idle['rss'])} MiB, peak {mib(max(s['rss'] for s in samples))} MiB; idle heap in use "
             f"{mib(idle['heap_in_use'])}, free {mib(idle['heap_free'])}, Python traced {mib(idle['traced'])}",
             f"  at the peak: heap in use {mib(peak['heap_in_use'])}, heap free (kept by glibc) "
             f"{mib(peak['heap_free'])}, of which mmapped {mib(peak['mmapped'])}; arenas {mib(peak['arena'])}; "
             f"Python traced {mib(peak['traced'])}; log queue {peak['queued_rows']} rows, "
             f"{mib(peak['queued_bytes'])} MiB; anonymous {mib(peak['smaps'].get('Anonymous', 0))} MiB",
             f"  highest over the run: heap free {mib(max(s['heap_free'] for s in samples))}, log queue "
             f"{mib(max(s['queued_bytes'] for s in samples))} MiB ({max(s['queued_rows'] for s in samples)} rows)"]
    if peak["census"]:
        lines.append(f"  big strings/bytes reachable at the peak: {peak['census']['objects']} objects, "
                     f"{mib(peak['census']['bytes'])} MiB; {peak['census']['greenlets']} greenlets holding "
                     f"{mib(peak['census']['stacks'])} MiB of saved C stack")
        lines += [f"    {count:4d} x {mib(size / count)} = {mib(size)} MiB  {place}"
                  for place, count, size in peak["census"]["by_place"][:15]]
        lines.append("  gc-tracked objects at the peak, by type (their own size, not what they hold):")
        lines += [f"    {mib(size)} MiB in {count} {name}" for name, count, size in peak["census"]["kinds"][:12]]
    if "traced_big" in peak["census"]:
        lines.append("  tracemalloc, live allocations of 32 KiB or more at the peak, by where they were made:")
        lines += [f"    {count:4d} x {mib(size / count)} = {mib(size)} MiB  {place}"
                  for place, count, size in peak["census"]["traced_big"][:20]]
        lines.append("  tracemalloc, all live allocations by line:")
        lines += [f"    {mib(size)} MiB in {count}  {place}" for place, count, size in
                  peak["census"]["traced_by_line"][:12]]
    return lines


def main(scenario: str, clients: int, seconds: float, trace: int) -> None:
    data = tempfile.TemporaryDirectory()
    out = Path(data.name) / "probe"
    out.mkdir()
    env = {"BENCH_MEMORY_DIR": str(out), **({"BENCH_TRACEMALLOC": str(trace)} if trace else {})}
    upstream = start_upstream()
    proxy = start_gunicorn("toolproxy", "app:app", upstream.port, data.name + "/tp",
                           config="bench/memory_probe.py", settings=env)
    try:
        idle = tree_rss(proxy.process.pid)
        body = workload.request_body("bench-slow", tools=False, stream=True) if scenario == "slow" else BODIES[scenario]
        request = client.request_bytes(proxy.port, body)
        cpu, peak = tree_cpu(proxy.process.pid), RssPeak(proxy.process.pid)
        load = asyncio.run(client.once_each(proxy.port, request, clients, timeout=120) if scenario == "slow"
                           else client.drive(proxy.port, request, clients, seconds))
        cpu = tree_cpu(proxy.process.pid) - cpu
        peak.stop()
        time.sleep(1)  # the last answers sent, the workers idle
        print(f"{scenario}, {clients} clients, {seconds:g} s: {len(load.exchanges)} answered, {load.errors} errors, "
              f"{cpu * 1000 / max(load.answered, len(load.exchanges), 1):.2f} CPU ms per request; "
              f"tree RSS idle {mib(idle)} MiB, peak {mib(peak.peak)}, "
              f"a second after {mib(tree_rss(proxy.process.pid))} MiB; "
              f"allocator settings: {({k: v for k, v in os.environ.items() if k.startswith(('MALLOC_', 'BENCH_'))})}")
    finally:
        proxy.stop()
        upstream.stop()
    for path in sorted(out.glob("*.json")):
        print(f"worker {path.stem}:")
        print("\n".join(report(json.loads(path.read_text()))))
    data.cleanup()


def one(scenario: str) -> None:
    """One request in-process (Flask's test client, the benchmark's upstream), traced."""
    import gc
    import tracemalloc

    from toolproxy import create_app
    from toolproxy.config.settings import Settings
    from toolproxy.fronts import base, openai_chat

    upstream = start_upstream()
    data = tempfile.TemporaryDirectory()
    app = create_app(Settings(upstream=f"http://127.0.0.1:{upstream.port}/v1", data_dir=data.name))
    made = base.json_response

    def traced(*args: Any, **kwargs: Any) -> Any:
        response = made(*args, **kwargs)
        snapshot = tracemalloc.take_snapshot()
        big = sorted((t for t in snapshot.traces if t.size >= 32 * 1024), key=lambda t: -t.size)
        print(f"when the response body is made: {len(big)} allocations of 32 KiB or more, "
              f"{mib(sum(t.size for t in big))} MiB")
        for trace in big:
            frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in reversed(trace.traceback)]
            print(f"  {trace.size / 1024:8.0f} KiB  {' <- '.join(frames[:6])}")
        return response

    try:
        client_ = app.test_client()
        client_.post("/v1/chat/completions", data=BODIES[scenario], content_type="application/json").close()
        openai_chat.json_response = traced
        gc.collect()
        tracemalloc.start(12)
        start = tracemalloc.get_traced_memory()[0]
        response = client_.post("/v1/chat/completions", data=BODIES[scenario], content_type="application/json")
        print(f"answer {len(response.data):,} bytes; the request's peak above its start: "
              f"{mib(tracemalloc.get_traced_memory()[1] - start)} MiB")
        response.close()
    finally:
        openai_chat.json_response = made
        app.extensions["toolproxy"].translog.flush()
        upstream.stop()
        data.cleanup()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--one" in arguments:
        one(arguments[0])
        sys.exit()
    frames = 0
    if "--trace" in arguments:
        at = arguments.index("--trace")
        frames = int(arguments[at + 1])
        del arguments[at : at + 2]
    main(arguments[0], int(arguments[1]) if len(arguments) > 1 else 64,
         float(arguments[2]) if len(arguments) > 2 else 6, frames)
