"""Which server answers a model, and the model list: the configured routes merged with what each upstream lists.

With any upstream configured, a model no route matches is an error that names what the proxy serves (a typo such
as `gwen2.5-coder` must not quietly reach a scripted demo); the demo model answers only when no upstream is
configured at all."""

from __future__ import annotations

import logging
from typing import Any

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.demo import DemoUpstream
from toolproxy.errors import ModelNotFound, ProxyError
from toolproxy.upstream.client import Upstream

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


def list_models(settings: Settings, http: Upstream, client_key: str | None) -> dict[str, Any]:
    """`GET /v1/models`: the demo model alone when no upstream is configured; otherwise every model each upstream
    lists that a route sends to an upstream, and every model named exactly in the configuration."""
    if settings.is_demo:
        return DemoUpstream().models(None, None)
    listed: dict[str, dict[str, Any]] = {}
    failures: list[ProxyError] = []
    for url, key in _upstreams(settings, client_key):
        try:
            answer = http.models(url, key)
        except ProxyError as error:
            logger.warning("listing the models of an upstream failed: %s", error.message)
            failures.append(error)
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
    return {"object": "list", "data": list(listed.values())}


def _upstreams(settings: Settings, client_key: str | None) -> list[tuple[str, str | None]]:
    """Each configured upstream once, with the key it is called with."""
    found: dict[str, str | None] = {}
    targets = [settings.for_model_rule(rule) for rule in settings.models]
    if settings.upstream:
        targets.insert(0, settings.for_model_rule(None))
    for target in targets:
        if target.upstream and target.upstream not in found:
            found[target.upstream] = target.upstream_api_key or (client_key if not settings.api_keys else None)
    return list(found.items())
