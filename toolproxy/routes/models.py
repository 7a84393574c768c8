"""Which server answers a model, and the model list: the configured routes merged with what each upstream lists.

With any upstream configured, a model no route matches is an error that names what the proxy serves (a typo such
as `gwen2.5-coder` must not quietly reach a scripted demo); the demo model answers only when no upstream is
configured at all."""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from typing import Any

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.demo import DemoUpstream
from toolproxy.errors import ModelNotFound, ProxyError, UpstreamTimeout
from toolproxy.routes.formats import Formats
from toolproxy.upstream.client import Upstream, public_url

logger = logging.getLogger(__name__)
_GLOB = frozenset("*?[")


def route(settings: Settings, model: str) -> ModelSettings:
    """The settings that answer `model`, or 404 `model_not_found` naming the models this proxy serves."""
    target = settings.for_model(model)
    if target.upstream or settings.is_demo:
        return target
    served = ", ".join(served_patterns(settings))
    raise ModelNotFound(f"The model {model!r} is not served here. Models this proxy serves: {served}. "
                        "Add a `models:` entry for it, or a catch-all upstream (TOOLPROXY_UPSTREAM).", param="model")


def served_patterns(settings: Settings) -> list[str]:
    """The `match` of every route that has an upstream (`*` when a global upstream catches the rest)."""
    patterns = [rule.match for rule in settings.models if settings.for_model_rule(rule).upstream]
    return list(dict.fromkeys([*patterns, *(["*"] if settings.upstream else [])]))


def list_models(settings: Settings, http: Upstream, client_key: str | None,
                formats: Formats | None = None) -> dict[str, Any]:
    """`GET /v1/models`: the demo model alone when no upstream is configured; otherwise every model each upstream
    lists that a route sends to an upstream, and every model named exactly in the configuration, each with what
    reads its replies (`toolproxy`: the dialects, and where they come from)."""
    if settings.is_demo:
        return DemoUpstream().models(None, None)
    listed: dict[str, dict[str, Any]] = {}
    failures: list[ProxyError] = []
    for answer in ask_all(http, _upstreams(settings, client_key), settings.models_timeout):
        if isinstance(answer, ProxyError):
            logger.warning("listing the models of an upstream failed: %s", answer.for_operator())
            failures.append(answer)
            continue
        for entry in answer.get("data") or []:
            name = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(name, str) and settings.for_model(name).upstream:  # only what a route sends on
                listed.setdefault(name, entry)
    for pattern in served_patterns(settings):
        if not _GLOB & set(pattern):
            listed.setdefault(pattern, {"id": pattern, "object": "model", "created": 0, "owned_by": "toolproxy"})
    if not listed and failures:
        raise failures[0]
    if formats is not None:
        listed = {name: {**entry, "toolproxy": _format_status(settings, formats, name, client_key)}
                  for name, entry in listed.items()}
    return {"object": "list", "data": list(listed.values())}


def _format_status(settings: Settings, formats: Formats, model: str, client_key: str | None) -> dict[str, Any]:
    target = settings.for_model(model)
    return formats.status(model, target, upstream_key(settings, target, client_key))


def upstream_key(settings: Settings, target: ModelSettings, client_key: str | None) -> str | None:
    """The key an upstream is called with: its own, or an open proxy's client's (vLLM's --api-key)."""
    return target.upstream_api_key or (client_key if not settings.api_keys else None)


def ask_all(http: Upstream, upstreams: list[tuple[str, str | None]],
            timeout: float) -> list[dict[str, Any] | ProxyError]:
    """Each upstream's model list, or its error, asked all at once: a hung upstream costs the request one
    `models_timeout` in all, not one each (two hung upstreams took 10 s against a documented 5)."""
    answers: list[dict[str, Any] | ProxyError] = [
        UpstreamTimeout(f"the upstream {public_url(url)} did not list its models within {timeout:g} seconds")
        for url, _ in upstreams]

    def ask(index: int, url: str, key: str | None) -> None:
        try:
            answers[index] = http.models(url, key)
        except ProxyError as error:
            answers[index] = error

    askers = [threading.Thread(target=ask, args=(index, url, key), daemon=True)
              for index, (url, key) in enumerate(upstreams)]
    for asker in askers:  # threads: greenlets under gunicorn's gevent worker, real threads anywhere else
        asker.start()
    deadline = time.monotonic() + timeout + JOIN_MARGIN
    for asker in askers:
        asker.join(max(0.0, deadline - time.monotonic()))
    return answers


JOIN_MARGIN = 1.0  # each ask has the timeout itself; past it and this margin, an unfinished ask counts as timed out


def _upstreams(settings: Settings, client_key: str | None) -> list[tuple[str, str | None]]:
    """Each configured upstream once, with the key it is called with."""
    found: dict[str, str | None] = {}
    targets = [settings.for_model_rule(rule) for rule in settings.models]
    if settings.upstream:
        targets.insert(0, settings.for_model_rule(None))
    for target in targets:
        if target.upstream and target.upstream not in found:
            found[target.upstream] = upstream_key(settings, target, client_key)
    return list(found.items())


def alias(settings: Settings, model: str) -> str:
    """The configured model a client's name stands for (the first `model_aliases` glob it matches), or the name
    itself: Claude Code names `claude-*` models for its background calls whatever model the user chose."""
    return next((target for pattern, target in settings.model_aliases if fnmatch.fnmatchcase(model, pattern)), model)
