"""The targets of issue 23 (memory and the big answers), met or not in this run: the last table `make bench` prints.

Memory targets are the issue's, in MiB of the whole gunicorn tree, with the floor's figure beside them; rate targets
are toolproxy's req/s as a share of the floor's in the same run. Each protocol toolproxy speaks besides chat
(bench/workload.py PROTOCOLS) gets the chat rows' targets.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench import workload


@dataclass(frozen=True, slots=True)
class Target:
    label: str
    scenario: str  # the Scenario's key in bench/load.py ("slow" for the slow streams, "idle" for the idle trees)
    measure: str
    at_most_mib: float | None = None  # a memory target
    at_least: float | None = None  # a rate target, as a share of the floor's


CHAT = [
    Target("peak RSS of the tree, 256 KB `write` tool reply, 64 clients", "big", "rss 64", at_most_mib=200),
    Target("peak RSS, small tool reply, 64 clients", "small", "rss 64", at_most_mib=140),
    Target("peak RSS, 500 slow streams", "slow", "rss", at_most_mib=160),
    Target("idle RSS of the tree", "idle", "", at_most_mib=120),
    Target("256 KB tool reply, req/s at 16 clients", "big", "rate 16", at_least=0.5),
    Target("small tool reply, req/s at 16 clients", "small", "rate 16", at_least=0.9),
    Target("tools + stream, req/s at 16 clients, against the floor's small reply", "tools_stream", "rate 16",
           at_least=0.75),
]


def all_targets() -> Iterator[Target]:
    yield from CHAT
    for protocol in workload.PROTOCOLS:
        for target in CHAT:
            if target.scenario in ("small", "big", "tools_stream"):
                yield Target(f"{protocol}: {target.label}", f"{protocol} {target.scenario}", target.measure,
                             target.at_most_mib, target.at_least)


def summary(results: dict[str, Any], idle: dict[str, float]) -> str:
    lines = ["### Issue 23's targets, this run", "", "| | floor | toolproxy | target | |",
             "| --- | ---: | ---: | --- | --- |"]
    for target in all_targets():
        if target.scenario == "idle":
            floor, tool = idle.get("floor"), idle.get("toolproxy")
        elif target.scenario in results:
            floor, tool = (_median(results[target.scenario].get(name, target.measure)) for name in ("floor",
                                                                                                     "toolproxy"))
        else:
            continue  # not run (--only)
        lines.append(_row(target, floor, tool))
    return "\n".join(lines) + "\n"


def _row(target: Target, floor: float | None, tool: float | None) -> str:
    if floor is None or tool is None:
        return f"| {target.label} | - | - | | not measured |"
    if target.at_most_mib is not None:
        verdict = "met" if tool <= target.at_most_mib else f"not met, by {tool - target.at_most_mib:.0f} MiB"
        return f"| {target.label} | {floor:.0f} MiB | {tool:.0f} MiB | <= {target.at_most_mib:.0f} MiB | {verdict} |"
    assert target.at_least is not None
    share = tool / floor if floor else 0.0
    verdict = "met" if share >= target.at_least else f"not met, by {target.at_least - share:.2f}x"
    return f"| {target.label} | {floor:,.0f} | {tool:,.0f} ({share:.2f}x) | >= {target.at_least:.2f}x | {verdict} |"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
