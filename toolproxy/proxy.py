"""The state one app instance holds: its settings and its upstream clients. Nothing else is kept between
requests, so instances scale out behind a load balancer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from toolproxy.config import ModelSettings, Settings
from toolproxy.demo import DemoUpstream
from toolproxy.upstream import HttpUpstream, Upstream


@dataclass(slots=True)
class Proxy:
    settings: Settings
    http: HttpUpstream
    demo: DemoUpstream = field(default_factory=DemoUpstream)
    started: float = field(default_factory=time.time)

    @classmethod
    def from_settings(cls, settings: Settings) -> Proxy:
        http = HttpUpstream(connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
                            max_bytes=settings.max_upstream_bytes, max_depth=settings.max_json_depth)
        return cls(settings, http)

    def upstream_for(self, target: ModelSettings) -> Upstream:
        """The configured server, or the built-in demo model when no upstream is configured for this model."""
        return self.http if target.upstream else self.demo
