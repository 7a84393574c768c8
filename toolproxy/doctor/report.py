"""The doctor's findings said plainly: a verdict, a table (a mark and one line of evidence per probe, with its
timings), and the YAML for that model; or the same as JSON."""

from __future__ import annotations

import json
from typing import Any

from toolproxy.doctor.run import Findings, Probe

MARKS = {"ok": "✓", "fail": "✗", "warn": "!", "info": "·"}


def recommend(findings: Findings) -> dict[str, Any]:
    """The `models:` entry that fits what the probes saw."""
    native, stream = findings.probe("native"), findings.probe("native stream")
    in_content = findings.probe("call in content")
    prompts = [probe for probe in findings.probes if probe.name.startswith("prompt ")]
    best = max(prompts, key=lambda probe: probe.data["valid"], default=None)
    entry: dict[str, Any] = {"match": findings.model, "upstream": findings.upstream,
                             "backend": findings.backend.kind if findings.backend.source == "detected" else "auto"}
    native_works = native is not None and native.mark == "ok"
    if native_works:
        entry["tool_mode"] = "native"
    elif in_content is not None:
        entry |= {"tool_mode": "native", "dialect": in_content.data["dialect"]}
    else:
        entry |= {"tool_mode": "prompt", "dialect": best.data["dialect"] if best else "hermes"}
    strict = findings.probe("strict")
    entry["constrain"] = "auto" if strict is not None and strict.data.get("accepted") else "off"
    streams = stream is not None and stream.mark == "ok" and findings.backend.streams_tools
    entry["repair_rounds"] = 0 if native_works and streams else 1
    entry["stream_strategy"] = "incremental" if entry["tool_mode"] == "native" and (streams or in_content) \
        else "buffered"
    return entry


def verdict(findings: Findings) -> str:
    entry = recommend(findings)
    native = findings.probe("native")
    if native is not None and native.mark == "ok":
        return "Tool calling works natively with this model."
    if "dialect" in entry and entry["tool_mode"] == "native":
        return (f"The model calls tools, but the server leaves them in the text ({entry['dialect']}): toolproxy "
                "turns them into tool_calls.")
    best = max((probe.data["valid"] for probe in findings.probes if probe.name.startswith("prompt ")), default=0)
    if best:
        return f"Native tool calling does not work; through toolproxy's prompt mode ({entry['dialect']}) it does."
    return "Tool calling is unlikely to work with this model: no probe produced a valid call."


def render_text(findings: Findings) -> str:
    width = max((len(probe.name) for probe in findings.probes), default=10)
    lines = [f"toolproxy doctor: {findings.model} at {findings.upstream}", ""]
    lines += [_row(probe, width) for probe in findings.probes]
    lines += ["", verdict(findings), "", "Configuration (TOOLPROXY_CONFIG):", "", "models:"]
    entry = recommend(findings)
    lines += [f"  - match: {json.dumps(entry.pop('match'))}"] + [f"    {key}: {value}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def _row(probe: Probe, width: int) -> str:
    timing = "" if probe.total_ms is None else (
        f"  [{probe.ttft_ms:.0f} ms first, {probe.total_ms:.0f} ms total]" if probe.ttft_ms is not None
        and probe.ttft_ms != probe.total_ms else f"  [{probe.total_ms:.0f} ms]")
    return f"{MARKS[probe.mark]} {probe.name:<{width}}  {probe.evidence}{timing}"


def render_json(findings: Findings) -> str:
    probes = [{"name": probe.name, "mark": probe.mark, "evidence": probe.evidence, "ttft_ms": probe.ttft_ms,
               "total_ms": probe.total_ms} for probe in findings.probes]
    backend = {"kind": findings.backend.kind, "version": findings.backend.version, "found": findings.backend.source}
    return json.dumps({"upstream": findings.upstream, "model": findings.model, "backend": backend, "probes": probes,
                       "verdict": verdict(findings), "recommendation": recommend(findings)}, indent=2) + "\n"
