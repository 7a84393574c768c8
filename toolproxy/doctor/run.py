"""`toolproxy doctor`: asks the upstream directly whether tool calling works with a model, and how to configure
it. Each probe is one request (or a few tries), timed; a server that is down, hangs, refuses the key or does not
serve the model ends the run with one line (`DoctorError`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolproxy.doctor import checks
from toolproxy.errors import UpstreamError, UpstreamStatusError, UpstreamTimeout, UpstreamUnavailable
from toolproxy.transform.request_transform import to_prompt_mode
from toolproxy.upstream.backends import STRICT_KINDS, Backend, prepare
from toolproxy.upstream.client import HttpUpstream, UpstreamRequest
from toolproxy.upstream.probe import detect, props

PROMPT_DIALECTS = ("hermes", "roo_xml", "json")


class DoctorError(Exception):
    """Why the probes could not run, in one line."""


@dataclass(slots=True)
class Probe:
    name: str
    mark: str  # "ok", "fail", "warn" or "info"
    evidence: str
    ttft_ms: float | None = None
    total_ms: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Findings:
    upstream: str
    model: str
    backend: Backend = field(default_factory=Backend)
    probes: list[Probe] = field(default_factory=list)

    def probe(self, name: str) -> Probe | None:
        return next((probe for probe in self.probes if probe.name == name), None)


class Doctor:
    def __init__(self, upstream: str, model: str, api_key: str | None = None, *, timeout: float = 120.0,
                 tries: int = 3, progress: Callable[[str], None] = lambda line: None) -> None:
        self.url, self.model, self.key, self.tries = upstream.rstrip("/"), model, api_key, tries
        self.http = HttpUpstream(connect_timeout=min(5.0, timeout), read_timeout=timeout, max_bytes=8 * 1024 * 1024,
                                 max_depth=64, models_timeout=min(10.0, timeout), pool_size=4)
        self.progress = progress
        self.findings = Findings(self.url, model)

    def run(self) -> Findings:
        steps: list[tuple[str, Callable[[], Iterator[Probe]]]] = [
            ("backend", self._backend), ("native", self._native), ("native stream", self._native_stream),
            ("prompt mode", self._prompt_modes), ("tool_choice", self._tool_choice)]
        self._reach()
        for index, (label, step) in enumerate(steps, 1):
            self.progress(f"[{index}/{len(steps)}] {label}")
            self.findings.probes.extend(step())
        return self.findings

    def _reach(self) -> None:
        """The first contact: down, hanging, a wrong key or a wrong model end the run here."""
        self.progress("[0/5] reaching the upstream")
        try:
            listed = self.http.models(self.url, self.key)
        except UpstreamUnavailable:
            raise DoctorError(f"cannot reach {self.url}: the connection was refused or the host is down") from None
        except UpstreamTimeout:
            raise DoctorError(f"{self.url} did not answer GET /models in time: the server hangs or is busy") from None
        except UpstreamStatusError as error:
            if error.status in (401, 403):
                raise DoctorError(f"{self.url} refused the key (HTTP {error.status}): pass the server's key with "
                                  "--api-key") from None
            raise DoctorError(f"{self.url}/models answered HTTP {error.status}: {error.message[:200]}") from None
        except UpstreamError as error:
            raise DoctorError(f"{self.url}/models: {error.message[:200]}") from None
        served = [str(item.get("id")) for item in listed.get("data") or [] if isinstance(item, dict)]
        if served and self.model not in served:
            raise DoctorError(f"the upstream does not serve the model {self.model!r}; it serves: "
                              f"{', '.join(served[:10])}")

    def _backend(self) -> Iterator[Probe]:
        backend = self.findings.backend = detect(self.url, self.key)
        yield Probe("backend", "info", f"{backend.label} ({backend.evidence})")
        served = props(self.url) or {}
        template = served.get("chat_template")
        if isinstance(template, str):
            has_tools = "tools" in template
            yield Probe("chat template", "ok" if has_tools else "warn",
                        "mentions tools" if has_tools else "has no tools section: native calls cannot work")

    def _as_sent(self, body: dict[str, Any]) -> UpstreamRequest:
        """The request as toolproxy would send it to this kind of server (llama-cpp-python needs `tool_choice`
        said, for one), so that what the probes see is what the proxy will get."""
        return UpstreamRequest(self.url, prepare(body, self.findings.backend, constrain="off"), self.key)

    def _complete(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str, float]:
        """The answer's message (None on an error, with the error's line) and the time it took."""
        started = time.monotonic()
        try:
            answer = self.http.complete(self._as_sent(body))
        except UpstreamError as error:
            return None, f"HTTP {error.status}: {error.message[:160]}", (time.monotonic() - started) * 1000
        choices = answer.get("choices") or [{}]
        return choices[0].get("message") or {}, "", (time.monotonic() - started) * 1000

    def _native(self) -> Iterator[Probe]:
        message, error, total = self._complete(checks.body(self.model, checks.ASK_CALL))
        if message is None:
            yield Probe("native", "fail", f"the request with tools failed: {error}", total, total)
            return
        verdict = checks.judge(message)
        mark = "ok" if verdict.valid and not verdict.problems else "fail"
        yield Probe("native", mark, verdict.summary, total, total, {"verdict": verdict})
        if verdict.content_dialect is not None:
            flag = checks.parser_flag(self.findings.backend.kind, verdict.content_dialect)
            yield Probe("call in content", "warn", f"{verdict.content_dialect}: {verdict.snippet!r} — the server did "
                        f"not parse it (needs {flag}); toolproxy reads it", data={"dialect": verdict.content_dialect})

    def _native_stream(self) -> Iterator[Probe]:
        started, first, chunks = time.monotonic(), None, []
        try:
            stream = self.http.stream(self._as_sent(checks.body(self.model, checks.ASK_CALL, True)))
            try:
                for chunk in stream:
                    chunks.append(chunk)
                    if first is None and checks.carries_output(chunk):
                        first = (time.monotonic() - started) * 1000
            finally:
                stream.close()
        except UpstreamError as error:
            yield Probe("native stream", "fail", f"HTTP {error.status}: {error.message[:160]}{self._buffered_note()}")
            return
        total = (time.monotonic() - started) * 1000
        verdict = checks.judge(checks.assemble(chunks))
        whole = self.findings.probe("native")
        same = whole is not None and "verdict" in whole.data and whole.data["verdict"].calls == verdict.calls
        mark = "ok" if verdict.valid and not verdict.problems and same else "fail" if verdict.calls else "warn"
        note = "" if same else "; differs from the whole answer"
        if verdict.content_dialect is not None:
            note += f"; a call left in content ({verdict.content_dialect})"
        yield Probe("native stream", mark, verdict.summary + note + self._buffered_note(), first, total,
                    {"verdict": verdict, "same": same})

    def _buffered_note(self) -> str:
        backend = self.findings.backend
        return "" if backend.streams_tools else f" ({backend.kind}: toolproxy asks for streams with tools whole)"

    def _prompt_modes(self) -> Iterator[Probe]:
        own = self.findings.probe("call in content")
        dialects = [*PROMPT_DIALECTS, *([own.data["dialect"]] if own and own.data["dialect"] not in
                                        PROMPT_DIALECTS else [])]
        for dialect in dialects:
            valid, times, snippet = 0, [], ""
            for _ in range(self.tries):
                body = to_prompt_mode(checks.body(self.model, checks.ASK_CALL), dialect)
                message, _error, total = self._complete(body)
                times.append(total)
                verdict = checks.prompt_verdict(str((message or {}).get("content") or ""), dialect)
                valid += bool(verdict.valid)
                snippet = snippet or verdict.snippet
            mark = "ok" if valid == self.tries else "warn" if valid else "fail"
            evidence = f"{valid}/{self.tries} valid calls" + (f", e.g. {snippet[:80]!r}" if snippet else "")
            yield Probe(f"prompt {dialect}", mark, evidence, None, sum(times) / len(times),
                        {"dialect": dialect, "valid": valid})

    def _tool_choice(self) -> Iterator[Probe]:
        named = {"type": "function", "function": {"name": "read_file"}}
        for label, choice in (("required", "required"), ("named", named)):
            message, error, total = self._complete(checks.body(self.model, checks.ASK_NOTHING, tool_choice=choice))
            verdict = checks.judge(message or {})
            honoured = any(name == "read_file" for name, _ in verdict.calls)
            evidence = error or ("a call came" if honoured else "answered without a call: ignored")
            yield Probe(f"tool_choice {label}", "ok" if honoured else "warn", evidence, total, total,
                        {"honoured": honoured})
        strict = {"type": "function", "function": {**checks.FUNCTION, "strict": True}}
        message, error, total = self._complete({**checks.body(self.model, checks.ASK_CALL), "tools": [strict]})
        used = self.findings.backend.kind in STRICT_KINDS
        evidence = ("accepted" + ("" if used else f" (ignored by {self.findings.backend.kind}: constrain stays off)")
                    if message is not None else f"refused: {error}")
        yield Probe("strict", "ok" if message is not None else "warn", evidence, total, total,
                    {"accepted": message is not None and used})
