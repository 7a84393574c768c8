"""The upstream's other endpoints (`/v1/embeddings`, `/v1/completions`, `/v1/models/{id}`, `/v1/tokenize`...)
through the same base URL, so a client that uses them needs no second one: the same keys, the same body limits and
deadline, the upstream chosen by the model as for chat, backend-only fields removed from a JSON answer, a stream
passed on as it comes."""

from __future__ import annotations

import re
import time
from typing import Any

from toolproxy.config.settings import Settings
from toolproxy.errors import InvalidRequest, NotFound
from toolproxy.routes import models
from toolproxy.upstream.client import HttpUpstream
from toolproxy.upstream.forwarded import ForwardCall, Forwarded
from toolproxy.wire import cleaning, jsonwire

# A path segment as servers name their endpoints and models (`qwen2.5-coder:7b`, `Qwen/Qwen2.5-7B`): nothing that
# could climb out of the upstream's /v1 (`..`), start another URL, or carry a query of its own.
_SEGMENT = re.compile(r"[A-Za-z0-9_~:+-][A-Za-z0-9._~:+-]*")
_BACKEND_FIELDS = frozenset(cleaning.TOP_LEVEL)


def forward(settings: Settings, http: HttpUpstream, method: str, path: str, body: bytes, content_type: str,
            client_key: str | None) -> Forwarded:
    """`path` (what follows /v1/) passed on to the upstream that serves the request's model."""
    _check_path(path)
    if settings.is_demo:
        raise NotFound(f"/v1/{path} is not served by the built-in demo model: set TOOLPROXY_UPSTREAM to a server "
                       "that serves it")
    decoded = _json_object(body, content_type, settings)
    target = _target(settings, path, decoded)
    if not target.upstream:
        raise NotFound(f"no upstream serves /v1/{path}: name a model a route sends upstream")
    if decoded is not None and target.upstream_model and "model" in decoded:
        body = jsonwire.dumps({**decoded, "model": target.upstream_model})
    key = target.upstream_api_key or (client_key if not settings.api_keys else None)
    answer = http.forward(ForwardCall(method, f"{target.upstream}/{path}", body, content_type, key,
                                      time.monotonic() + settings.request_timeout))
    return _cleaned(answer, settings)


def _check_path(path: str) -> None:
    if not all(_SEGMENT.fullmatch(segment) for segment in path.split("/")):
        raise InvalidRequest(f"/v1/{path[:200]} is not a path this proxy passes on", code="invalid_path")


def _json_object(body: bytes, content_type: str, settings: Settings) -> dict[str, Any] | None:
    """The body, when it is a JSON object (checked with the limits every request body gets); else None."""
    if not body or "json" not in content_type:
        return None
    try:
        value = jsonwire.loads(body, settings.max_json_depth, settings.max_json_containers)
    except jsonwire.JsonWireError as error:
        raise InvalidRequest(f"could not parse the request: {error}", code="invalid_json") from None
    return value if isinstance(value, dict) else None


def _target(settings: Settings, path: str, body: dict[str, Any] | None) -> Any:
    """The settings of the request's model: named in the body, or in the path (`models/{id}`); else the catch-all
    upstream's."""
    model = body.get("model") if body is not None else None
    if model is None and path.startswith("models/"):
        model = path.removeprefix("models/")
    return models.route(settings, model) if isinstance(model, str) and model else settings.for_model_rule(None)


def _cleaned(answer: Forwarded, settings: Settings) -> Forwarded:
    """A JSON answer without the backend-only fields strict clients refuse; anything else as it came."""
    if answer.chunks is not None or "json" not in answer.content_type:
        return answer
    try:
        value = jsonwire.loads(answer.body, settings.max_json_depth, settings.max_json_containers)
    except jsonwire.JsonWireError:
        return answer
    if not isinstance(value, dict) or _BACKEND_FIELDS.isdisjoint(value):
        return answer
    kept = {key: item for key, item in value.items() if key not in _BACKEND_FIELDS}
    return Forwarded(answer.content_type, jsonwire.dumps(kept))
