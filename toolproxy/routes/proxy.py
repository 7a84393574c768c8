"""The state one app instance holds: its settings, its upstream clients, the transform log and the metrics.
Nothing else is kept between requests, so instances scale out behind a load balancer."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.config.values import password_of
from toolproxy.demo import DemoUpstream
from toolproxy.observe.logs import log_request
from toolproxy.observe.metrics import Metrics
from toolproxy.observe.record import TransformRecord
from toolproxy.observe.translog import TransformLog
from toolproxy.routes.formats import Formats
from toolproxy.upstream.backends import Backend
from toolproxy.upstream.client import HttpUpstream, Upstream, public_url
from toolproxy.upstream.gate import Gate
from toolproxy.upstream.health import Health, HealthChecks
from toolproxy.upstream.probe import Backends

if TYPE_CHECKING:
    from toolproxy.observe.tracing import RequestTrace, Tracing

logger = logging.getLogger(__name__)
# Either turns tracing on under `otel: auto`; the exporter reads them itself.
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def start_tracing(settings: Settings, secrets: list[str]) -> Tracing | None:
    """OpenTelemetry's tracer when `otel` is on, or `auto` with an OTLP endpoint in the environment (read once,
    here, at start-up). The SDK is imported only then: a proxy without tracing never loads it."""
    if settings.otel == "off" or (settings.otel == "auto" and not any(os.environ.get(name) for name in OTLP_ENDPOINTS)):
        return None
    from toolproxy.observe.genai import Content
    from toolproxy.observe.tracing import Tracing

    return Tracing(Content(settings.otel_content, tuple(secrets), settings.log_field_chars), environ=os.environ)


@dataclass(slots=True)
class Proxy:
    settings: Settings
    http: HttpUpstream
    translog: TransformLog
    metrics: Metrics
    gate: Gate
    health: HealthChecks
    demo: DemoUpstream = field(default_factory=DemoUpstream)
    started: float = field(default_factory=time.time)
    secrets: tuple[str, ...] = ()
    backends: Backends = field(default_factory=Backends)
    formats: Formats = field(default_factory=Formats)  # each model's call format, from its chat template
    tracing: Tracing | None = None  # OpenTelemetry, when configured

    @classmethod
    def from_settings(cls, settings: Settings) -> Proxy:
        http = HttpUpstream(connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
                            max_bytes=settings.max_upstream_bytes, max_depth=settings.max_json_depth,
                            max_containers=settings.max_json_containers, models_timeout=settings.models_timeout,
                            pool_size=settings.max_in_flight)
        secrets = [*settings.api_keys, *filter(None, [settings.upstream_api_key, password_of(settings.log_url)]),
                   *(str(rule.overrides["upstream_api_key"]) for rule in settings.models
                     if rule.overrides.get("upstream_api_key"))]
        metrics = Metrics(models=tuple(rule.match for rule in settings.models))
        translog = TransformLog(settings.data_dir, url=settings.log_url, instance=settings.instance_name,
                                max_records=settings.log_records, max_age=settings.log_max_age,
                                max_field_chars=settings.log_field_chars, secrets=secrets,
                                on_drop=metrics.log_dropped)
        gate = Gate(settings.max_in_flight, settings.queue_size, settings.queue_timeout, on_queue=metrics.queued)
        backends = Backends()
        proxy = cls(settings, http, translog, metrics, gate, HealthChecks(http.check_models), secrets=tuple(secrets),
                    backends=backends, formats=Formats(backends), tracing=start_tracing(settings, secrets))
        proxy.formats.begin(settings)  # each configured chat template's call format, in the background
        for target in proxy.targets():  # each upstream's kind found at start-up, in the background
            proxy.backend_for(target)
        return proxy

    def record(self, record: TransformRecord, trace: RequestTrace | None = None) -> None:
        """A finished request into the shared log, the metrics, its one log line and its spans; none ever fails
        the request."""
        self.translog.add(record)
        self.observe(record, trace)

    def observe(self, record: TransformRecord, trace: RequestTrace | None = None) -> None:
        """The metrics, the log line and the spans of a finished request (its record goes to the log apart:
        `Stored`)."""
        self.metrics.observe(record)
        log_request(record, self.secrets)
        if trace is not None:
            try:
                trace.finish(record)
            except Exception:  # an outer edge: a span must never fail a request
                logger.exception("tracing: request %s not traced", record.request_id)

    def upstream_for(self, target: ModelSettings) -> Upstream:
        """The configured server, or the built-in demo model when no upstream is configured for this model."""
        return self.http if target.upstream else self.demo

    def upstream_health(self) -> list[Health]:
        """Each configured upstream and whether it answers `/models`, as last checked: never waits for a check."""
        urls = {self.settings.upstream, *(rule.overrides.get("upstream") for rule in self.settings.models)}
        return self.health.current(str(url) for url in urls if url)

    def backend_for(self, target: ModelSettings) -> Backend:
        """The upstream's kind as known now (never waits for a probe); the demo model is `generic`."""
        if not target.upstream:
            return Backend()
        return self.backends.of(target.upstream, target.backend, target.upstream_api_key)

    def targets(self) -> list[ModelSettings]:
        """The settings of each configured upstream: the globals', then each `models:` entry's."""
        found = [self.settings.for_model_rule(rule) for rule in (None, *self.settings.models)]
        return [target for target in found if target.upstream]

    def backends_known(self) -> list[dict[str, str]]:
        """Each configured upstream's kind and version as this worker knows them (no request is made)."""
        targets = {target.upstream: target for target in reversed(self.targets())}
        return [{"url": public_url(url), **_shown(self.backend_for(target))} for url, target in sorted(targets.items())
                if url]


def _shown(backend: Backend) -> dict[str, str]:
    return {"backend": backend.kind, "version": backend.version, "found": backend.source,
            "evidence": backend.evidence}
