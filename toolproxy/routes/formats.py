"""Each model's tool-call format, read from its own chat template: the per-model `chat_template` setting (derived
at start-up) or the template its upstream serves (llama.cpp's `GET /props`, as the backend probe kept it or asked
at the model's first use; a server the probe found to be of another kind is not asked).
Derivation runs in the background, off the event loop (meaning/template_format.py: up to eight sandboxed
renderings, ~10-100 ms of Python); a request never waits for it and is read by every dialect until it is done.

The derived dialect is pinned for the model's replies when the tools are native and its configuration pins none:
a `dialect:`/`dialects:` entry overrides it, and prompt mode reads what it taught. Kept per worker, bounded."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.meaning import template_format
from toolproxy.meaning.template_format import TemplateFormat
from toolproxy.routes.offload import off_the_loop
from toolproxy.upstream import served_template
from toolproxy.upstream.client import public_url
from toolproxy.upstream.probe import Backends
from toolproxy.upstream.served_template import ServedTemplate, template_of

logger = logging.getLogger(__name__)

MAX_MODELS = 64  # formats kept per worker: model names come from clients, and a catch-all route takes any
RETRY_SECONDS = 60.0  # an upstream that did not answer /props is asked again at a model's use after this long
CONFIGURED = "configuration (chat_template)"
SERVED = "upstream (GET /props)"


@dataclass(frozen=True, slots=True)
class Known:
    """What is known of one model's template: its format once derived, or why there is none yet."""

    model: str
    source: str  # CONFIGURED or SERVED
    format: TemplateFormat | None = None
    state: str = "deriving"  # "derived", "deriving", or why there is no template (a phrase naming no host)
    upstream: str = ""  # scheme://host:port of a serving upstream
    since: float = 0.0  # time.monotonic() of the last attempt

    def as_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"source": self.source, "state": self.state}
        if self.format is not None:
            status |= self.format.as_status()
        return status


Fetch = Callable[[str, str | None, str | None], ServedTemplate]


def _background(work: Callable[[], None]) -> None:
    threading.Thread(target=work, daemon=True, name="toolproxy-template").start()  # a greenlet under gevent


class Formats:
    def __init__(self, backends: Backends | None = None, fetch: Fetch = served_template.fetch,
                 derive: Callable[..., TemplateFormat] = template_format.derive,
                 start: Callable[[Callable[[], None]], None] = _background) -> None:
        self._backends, self._fetch, self._derive, self._start = backends, fetch, derive, start
        self._known: dict[tuple[str, ...], Known] = {}
        self._by_template: dict[tuple[str, str, str], TemplateFormat] = {}  # one derivation per template
        self._lock = threading.Lock()

    def begin(self, settings: Settings) -> None:
        """Start deriving every configured template (at start-up: the configuration holds its text)."""
        for rule in settings.models:
            target = settings.for_model_rule(rule)
            if target.chat_template:
                self.known(rule.match, target, None)

    def pin(self, model: str, target: ModelSettings, api_key: str | None) -> ModelSettings:
        """`target` with the derived dialect pinned, where it applies; never waits for a derivation."""
        known = self.known(model, target, api_key)
        if target.dialects or target.tool_mode != "native" or known is None or known.format is None:
            return target
        return replace(target, dialects=(known.format.dialect,)) if known.format.dialect else target

    def status(self, model: str, target: ModelSettings, api_key: str | None) -> dict[str, Any]:
        """What reads `model`'s replies and where that comes from, for /v1/models and the dashboard."""
        known = self.known(model, target, api_key)
        pinned = self.pin(model, target, api_key).dialects
        origin = ("configuration" if target.dialects else "prompt mode" if target.tool_mode != "native"
                  else "chat_template" if pinned else "automatic")
        status: dict[str, Any] = {"dialects": list(pinned), "from": origin}
        if known is not None:
            status["chat_template"] = known.as_status()
        return status

    def overview(self) -> list[dict[str, Any]]:
        """Every model whose template this worker read or tried to read, for the dashboard."""
        with self._lock:
            known = list(self._known.values())
        return [{"model": item.model, "upstream": item.upstream, **item.as_status()} for item in known]

    def known(self, model: str, target: ModelSettings, api_key: str | None) -> Known | None:
        """What is known of `model`'s template now; a derivation starts where none ran (or a fetch failed a
        while ago)."""
        if target.chat_template:
            key: tuple[str, ...] = (CONFIGURED, target.chat_template)
        elif target.upstream:
            key = (SERVED, target.upstream, target.upstream_model or model)
        else:
            return None
        with self._lock:
            known = self._known.get(key)
            if known is not None and not _is_due(known):
                return known
            if known is None and len(self._known) >= MAX_MODELS:
                return None
            self._known[key] = Known(model, key[0], state="deriving", upstream=public_url(target.upstream)
                                     if key[0] == SERVED else "", since=time.monotonic())
        self._start(lambda: self._work(key, target, api_key))
        return self._known[key]

    def _work(self, key: tuple[str, ...], target: ModelSettings, api_key: str | None) -> None:
        try:
            served = (ServedTemplate(target.chat_template) if target.chat_template else
                      self._served(target, api_key, key[2]))
            if served.template is None:
                self._settle(key, state=served.reason or "no chat template")
                return
            template = (served.template, served.bos_token, served.eos_token)
            derived = self._by_template.get(template) or off_the_loop(lambda: self._derive(*template))
            if len(self._by_template) < MAX_MODELS:
                self._by_template.setdefault(template, derived)
            self._settle(key, state="derived", format=derived)
            logger.info("tool-call format of %s from its chat template: %s", self._known[key].model,
                        derived.dialect or "no dialect reads it (markers derived)")
        except Exception:  # a background task's outer edge: logged, and the model is read by every dialect
            logger.exception("deriving the tool-call format of a chat template failed")
            self._settle(key, state="failed: see the proxy's log")

    def _served(self, target: ModelSettings, api_key: str | None, model: str) -> ServedTemplate:
        """The upstream's template: none where its kind serves none, the `/props` the backend probe kept where it
        has it, else asked for (the kind is configured or not known yet, or the probe's /props was past its
        64 KiB)."""
        assert target.upstream
        backend = self._backends.of(target.upstream, target.backend, api_key) if self._backends else None
        if backend is not None and backend.source != "unknown" and backend.kind != "llamacpp":
            return ServedTemplate(None, reason=f"a {backend.kind} server serves no chat template")
        if backend is not None and backend.props and template_of(backend.props).template:
            return template_of(backend.props)
        return self._fetch(target.upstream, api_key, model)

    def forget(self, upstream: str) -> None:
        """The upstream was lost: when it is back it may serve another model, whose template is read anew."""
        with self._lock:
            for key in [key for key in self._known if key[0] == SERVED and key[1] == upstream]:
                del self._known[key]

    def _settle(self, key: tuple[str, ...], **changes: Any) -> None:
        with self._lock:
            self._known[key] = replace(self._known[key], **changes)


def _is_due(known: Known) -> bool:
    """A served template that could not be fetched is asked for again, now and then (the upstream may have been
    starting); one that was read, or that the upstream does not serve (a 404), is final."""
    retry = known.source == SERVED and known.state.startswith("GET /props failed")
    return retry and time.monotonic() - known.since >= RETRY_SECONDS
