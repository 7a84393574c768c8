"""Load benchmark: toolproxy beside the floor of its own stack, in front of the same fast scripted upstream.

Three targets, alternated within one run: the upstream alone, the floor forwarder (bare Flask + requests under
toolproxy's gunicorn.conf.py) and toolproxy, both with 2 gevent workers. Every figure is the median of the
repetitions with their min-max; ratios are toolproxy/floor from the same run. Loopback only.

    .venv/bin/python bench/load.py [--quick]      (make bench)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import client, targets, workload
from bench.processes import RssPeak, Server, start_gunicorn, start_upstream, tree_cpu, tree_rss

TARGETS = ["upstream alone", "floor", "toolproxy"]  # "toolproxy before" joins with --baseline
BEFORE = "toolproxy before"
SLOW_CLIENTS = 500
MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str  # how bench/targets.py names it
    name: str
    body: bytes
    clients: tuple[int, ...]
    stream: bool = False
    note: str = ""
    front: tuple[str, bytes] | None = None  # toolproxy's own path and body (another wire protocol), if not chat's


RE_WRAPPED = ("the upstream answers JSON, so the floor and the upstream alone forward the small reply as it is: their "
              "columns are the small reply's cost")


def scenarios() -> list[Scenario]:
    small = workload.request_body("bench-small", tools=True)
    return [
        Scenario("small", "small tool reply (one `read` call written as text), no stream", small, (1, 16, 64)),
        Scenario("big", "256 KB `write` tool reply, no stream", workload.request_body("bench-big", tools=True),
                 (1, 16, 64)),
        Scenario("stream", "stream without tools (200 events)", workload.request_body("bench-stream", tools=False,
                 stream=True), (1, 16, 64), stream=True),
        Scenario("tools_stream", "tools + stream (toolproxy re-wraps the small reply as SSE)",
                 workload.request_body("bench-small", tools=True, stream=True), (1, 16, 64), stream=True,
                 note=RE_WRAPPED),
        Scenario("transcript", "1 MB request body (an agent's long transcript), small tool reply",
                 workload.dumps({"model": "bench-small", "messages": workload.transcript(),
                                 "tools": workload.TOOLS}), (1, 16)),
        *(scenario for protocol in workload.PROTOCOLS for scenario in protocol_scenarios(protocol)),
    ]


def protocol_scenarios(protocol: str) -> list[Scenario]:
    """The chat scenarios with tools, asked in another protocol of toolproxy's; the floor and the upstream alone
    forward the same answers as chat completions (the floor speaks no other protocol), so the ratios are what
    toolproxy's front end costs on top of the chat path's work."""
    path, body = workload.PROTOCOLS[protocol]
    same = f"toolproxy answers {path}; the floor and the upstream alone forward the same answer as a chat completion"
    return [
        Scenario(f"{protocol} small", f"{protocol} ({path}): small tool reply, no stream",
                 workload.request_body("bench-small", tools=True), (1, 16, 64), note=same,
                 front=(path, body("bench-small", False))),
        Scenario(f"{protocol} big", f"{protocol} ({path}): 256 KB `write` tool reply, no stream",
                 workload.request_body("bench-big", tools=True), (16, 64), note=same,
                 front=(path, body("bench-big", False))),
        Scenario(f"{protocol} tools_stream", f"{protocol} ({path}): tools + stream (the small reply as events)",
                 workload.request_body("bench-small", tools=True, stream=True), (1, 16, 64), stream=True,
                 note=f"{same}; {RE_WRAPPED}", front=(path, body("bench-small", True))),
    ]


@dataclass(slots=True)
class Figures:
    """Per target and measure, one value per repetition."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, target: str, measure: str, value: float) -> None:
        self.values.setdefault((target, measure), []).append(value)

    def get(self, target: str, measure: str) -> list[float]:
        return self.values.get((target, measure), [])


class Bench:
    def __init__(self, *, repetitions: int, seconds: float, baseline: Path | None = None) -> None:
        self.repetitions, self.seconds = repetitions, seconds
        self._data = tempfile.TemporaryDirectory()
        self.upstream = start_upstream()
        self.servers: dict[str, Server] = {
            "floor": start_gunicorn("floor", "bench.floor:app", self.upstream.port, self._data.name + "/floor"),
            "toolproxy": start_gunicorn("toolproxy", "app:app", self.upstream.port, self._data.name + "/tp")}
        if baseline is not None:
            self.servers[BEFORE] = start_gunicorn(BEFORE, "app:app", self.upstream.port, self._data.name + "/before",
                                                  cwd=baseline)
        self.ports = {"upstream alone": self.upstream.port, **{n: s.port for n, s in self.servers.items()}}
        self.rss = {name: RssPeak(server.process.pid) for name, server in self.servers.items()}
        self.idle = {name: tree_rss(server.process.pid) for name, server in self.servers.items()}
        self.errors: list[str] = []

    def close(self) -> None:
        for peak in self.rss.values():
            peak.stop()
        for server in [*self.servers.values(), self.upstream]:
            server.stop()
        self._data.cleanup()

    async def measure(self, scenario: Scenario) -> Figures:
        figures = Figures()
        for target in TARGETS:  # warm every worker's pools and caches before anything counts
            await client.drive(self.ports[target], self._request(target, scenario), 16, min(self.seconds, 0.5))
        for clients in scenario.clients:
            for repetition in range(self.repetitions):
                for target in _rotated(TARGETS, repetition):
                    await self._one(figures, scenario, target, clients)
        return figures

    async def _one(self, figures: Figures, scenario: Scenario, target: str, clients: int) -> None:
        peak = self.rss.get(target)
        if peak is not None:
            peak.reset()
        pid = self.servers[target].process.pid if target in self.servers else self.upstream.process.pid
        cpu = tree_cpu(pid)
        load = await client.drive(self.ports[target], self._request(target, scenario), clients, self.seconds)
        cpu = tree_cpu(pid) - cpu
        if load.errors or not load.exchanges:
            self.errors.append(f"{scenario.name}, {target}, {clients} clients: {load.errors} errors")
        if not load.exchanges:
            return
        figures.add(target, f"rate {clients}", load.rate)
        figures.add(target, f"total {clients}", statistics.median(e.total for e in load.exchanges) * 1000)
        figures.add(target, f"first {clients}", statistics.median(e.first for e in load.exchanges) * 1000)
        if peak is not None:
            figures.add(target, f"rss {clients}", peak.peak / MiB)
        if load.answered:
            figures.add(target, f"cpu {clients}", cpu * 1000 / load.answered)

    def _request(self, target: str, scenario: Scenario) -> bytes:
        if scenario.front is not None and target in ("toolproxy", BEFORE):
            return client.request_bytes(self.ports[target], scenario.front[1], scenario.front[0])
        return client.request_bytes(self.ports[target], scenario.body)

    async def slow(self) -> Figures:
        """SLOW_CLIENTS streams at once, each event 50 ms after the last, one target at a time."""
        figures = Figures()
        body = workload.request_body("bench-slow", tools=False, stream=True)
        for target in TARGETS:
            peak = self.rss.get(target)
            if peak is not None:
                peak.reset()
            load = await client.once_each(self.ports[target], client.request_bytes(self.ports[target], body),
                                          SLOW_CLIENTS, timeout=120)
            _slow_figures(figures, target, load)
            if peak is not None:
                figures.add(target, "rss", peak.peak / MiB)
            if load.errors:
                self.errors.append(f"slow streams, {target}: {load.errors} errors")
        return figures


def _slow_figures(figures: Figures, target: str, load: client.Load) -> None:
    exchanges = load.exchanges
    figures.add(target, "completed", len(exchanges))
    if not exchanges:
        return
    figures.add(target, "first p99", _percentile([e.first for e in exchanges], 99))
    figures.add(target, "total p99", _percentile([e.total for e in exchanges], 99))
    gaps = [later - earlier for e in exchanges for earlier, later in zip(e.events[1:-2], e.events[2:-1],
                                                                        strict=True)]
    figures.add(target, "gap p50", statistics.median(gaps) * 1000 if gaps else 0.0)
    figures.add(target, "coalesced", 100 * sum(gap < 0.01 for gap in gaps) / max(len(gaps), 1))


def _percentile(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * percent // 100)]


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def _rotated(items: list[str], by: int) -> list[str]:
    by %= len(items)
    return items[by:] + items[:by]


# Tables -------------------------------------------------------------------------------------------------------

def _cell(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:,.{digits}f}"
    return f"{middle:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    measure: str
    digits: int
    compare: Callable[[float, float], str]  # (toolproxy, floor) medians -> the last column


def ratio(tool: float, floor: float) -> str:
    return f"{tool / floor:.2f}x" if floor else "-"


def difference(tool: float, floor: float) -> str:
    return f"{tool - floor:+.2f} ms"


def points(tool: float, floor: float) -> str:
    return f"{tool - floor:+.1f} points"


def rows_for(scenario: Scenario) -> list[Row]:
    rows: list[Row] = []
    for clients in scenario.clients:
        if clients == 1:
            rows.append(Row("latency p50 at 1 client, ms", "total 1", 2, ratio))
            if scenario.stream:
                rows.append(Row("time to first byte p50 at 1 client, ms", "first 1", 2, ratio))
        rows.append(Row(f"req/s at {clients} client{'s' if clients > 1 else ''}", f"rate {clients}", 0, ratio))
        if clients == 16:
            rows.append(Row("CPU ms per request at 16 clients (the server's whole tree)", "cpu 16", 2, ratio))
    if scenario.stream:
        top = scenario.clients[-1]
        rows.append(Row(f"time to first byte p50 at {top} clients, ms", f"first {top}", 1, ratio))
    rows.append(Row(f"peak RSS of the tree at {scenario.clients[-1]} clients, MiB", f"rss {scenario.clients[-1]}",
                    0, ratio))
    return rows


def table(title: str, rows: list[Row], figures: Figures, note: str = "", added: str = "") -> str:
    against = ["floor", *([BEFORE] if BEFORE in TARGETS else [])]
    ratios = " | ".join(f"toolproxy/{a}" for a in against)
    lines = [f"### {title}", "", f"| measure | {' | '.join(TARGETS)} | {ratios} |",
             "| --- |" + " ---: |" * (len(TARGETS) + len(against))]
    for row in rows:
        cells = [_cell(figures.get(target, row.measure), row.digits) for target in TARGETS]
        tool = figures.get("toolproxy", row.measure)
        last = [row.compare(statistics.median(tool), statistics.median(figures.get(a, row.measure)))
                if tool and figures.get(a, row.measure) else "-" for a in against]
        lines.append(f"| {row.label} | {' | '.join(cells)} | {' | '.join(last)} |")
        if row.measure in ("total 1", "first 1") and added:
            lines.append(_added_row(row, figures))
    return "\n".join([*lines, *(["", note] if note else [])]) + "\n"


def _added_row(row: Row, figures: Figures) -> str:
    """Median over repetitions of (target - upstream alone), in the same repetition."""
    base = figures.get("upstream alone", row.measure)
    added = {t: [v - b for v, b in zip(figures.get(t, row.measure), base, strict=False)] for t in TARGETS[1:]}
    cells = ["-", *(f"+{_cell(added[t], 2)}" for t in TARGETS[1:])]
    tool = added["toolproxy"]
    last = [difference(statistics.median(tool), statistics.median(added[a])) if tool and added[a] else "-"
            for a in ["floor", *([BEFORE] if BEFORE in TARGETS else [])]]
    label = row.label.replace("latency", "added latency").replace("time to first", "added time to first")
    return f"| {label} | {' | '.join(cells)} | {' | '.join(last)} |"


SLOW_ROWS = [Row(f"completed of {SLOW_CLIENTS}", "completed", 0, ratio),
             Row("time to first byte p99, s", "first p99", 2, ratio),
             Row("total p99, s", "total p99", 2, ratio),
             Row("gap between events p50, ms (upstream: 50)", "gap p50", 1, ratio),
             Row("gaps under 10 ms (coalesced events), %", "coalesced", 1, points),
             Row("peak RSS of the tree, MiB", "rss", 0, ratio)]


async def run(bench: Bench, only: str = "") -> None:
    idle = ", ".join(f"{name} {rss / MiB:.0f} MiB" for name, rss in bench.idle.items())
    print(f"load average before: {_load()}; {bench.repetitions} repetitions of {bench.seconds:g} s per target and "
          f"measure, targets alternated; median (min-max); idle RSS of the trees: {idle}\n", flush=True)
    results: dict[str, Figures] = {}
    for scenario in (s for s in scenarios() if only in s.name):
        started = time.monotonic()
        figures = results[scenario.key] = await bench.measure(scenario)
        print(table(scenario.name, rows_for(scenario), figures, scenario.note, added="yes"), flush=True)
        print(f"({time.monotonic() - started:.0f} s)\n", flush=True)
    if not only or only in "slow streams":
        results["slow"] = await bench.slow()
        print(table(f"{SLOW_CLIENTS} concurrent slow streams (200 events, 50 ms apart: 10 s upstream alone)",
                    SLOW_ROWS, results["slow"]), flush=True)
    print(targets.summary(results, {name: rss / MiB for name, rss in bench.idle.items()}), flush=True)
    print(f"load average after: {_load()} (this box has {os.cpu_count()} cores; other work on it widens the ranges)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short repetition per measure")
    parser.add_argument("--only", default="", help="only the scenarios whose title contains this ('slow' for the "
                                                   "slow streams)")
    parser.add_argument("--baseline", type=Path, help="another checkout of toolproxy (e.g. a `git worktree` of an "
                                                       "earlier commit), run beside this one as 'toolproxy before'")
    arguments = parser.parse_args()
    if arguments.baseline:
        TARGETS.insert(2, BEFORE)
    bench = Bench(repetitions=1 if arguments.quick else 3, seconds=0.6 if arguments.quick else 1.5,
                  baseline=arguments.baseline)
    try:
        asyncio.run(run(bench, arguments.only))
    finally:
        bench.close()
    for error in bench.errors:
        print(f"warning: {error}")


if __name__ == "__main__":
    main()
