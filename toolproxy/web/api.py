"""The API surface: each protocol's path served by its front end (fronts/), `/v1/models`, `/health`; API-key
checks."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from flask import Blueprint, Response, current_app, g, request

from toolproxy.errors import AuthenticationFailed, InvalidRequest, ModelNotFound, ProxyError, UpstreamUnavailable
from toolproxy.fronts.anthropic_messages import AnthropicMessages
from toolproxy.fronts.base import SSE_HEADERS, Front, json_response
from toolproxy.fronts.openai_chat import OpenAIChat
from toolproxy.fronts.openai_responses import OpenAIResponses
from toolproxy.observe.record import TransformRecord, new_record
from toolproxy.routes import models, tokens, vtc_chat
from toolproxy.routes.chat import answer
from toolproxy.routes.exchange import Exchange
from toolproxy.routes.forward import forward as proxy_forward
from toolproxy.routes.proxy import Proxy
from toolproxy.upstream.gate import Gate
from toolproxy.version import __version__
from toolproxy.web import browsers
from toolproxy.web.body import read_body

bp = Blueprint("api", __name__)
browsers.install(bp)
# The front end of each API path (fronts/): its protocol's key, requests, answers and errors.
FRONTS: dict[str, Callable[[], Front]] = {"api.chat_completions": OpenAIChat, "api.responses": OpenAIResponses,
                                          "api.messages": AnthropicMessages, "api.count_tokens": AnthropicMessages}
SERVED = ("api.chat_completions", "api.responses", "api.messages")  # what `serve` answers: a record each
# Paths whose clients read every error in their own protocol, a wrong method or an unknown subpath included.
PATH_FRONTS: dict[str, Callable[[], Front]] = {"/v1/messages": AnthropicMessages}


def current_proxy() -> Proxy:
    proxy: Proxy = current_app.extensions["toolproxy"]
    return proxy


@bp.before_request
def choose_front() -> None:
    """The request's front end, before anything can fail: every error it meets is answered in its protocol."""
    make = FRONTS.get(request.endpoint or "")
    if make is not None:
        g.front = make()


def path_front(path: str) -> Front | None:
    """The front end of a path no route matched (a wrong method, an unknown subpath), for its error."""
    make = next((front for prefix, front in PATH_FRONTS.items() if path.startswith(prefix)), None)
    return make() if make is not None else None


@bp.before_request
def require_api_key() -> None:
    keys = current_proxy().settings.api_keys
    if request.endpoint == "api.health":  # liveness probes carry no key; the answer reveals nothing
        return
    if request.method == "OPTIONS":  # a CORS preflight never carries credentials; it answers with headers only
        return
    front: Front = g.get("front") or OpenAIChat()
    if keys and not key_matches(front.presented_key(request.headers), keys):
        raise AuthenticationFailed(f"Incorrect or missing API key: send `{front.key_hint}`")


def is_authorized(header: str, keys: tuple[str, ...]) -> bool:
    """Whether an `Authorization: Bearer` header carries one of the keys."""
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and key_matches(token, keys)


def key_matches(presented: str | None, keys: tuple[str, ...]) -> bool:
    """Constant-time comparison on bytes (on `str`, hmac refuses non-ASCII, which would become a 500)."""
    if not presented:
        return False
    token = presented.encode("latin-1", errors="replace")
    matches = [hmac.compare_digest(token, key.encode("utf-8")) for key in keys]
    return any(matches)


def client_token() -> str | None:
    front: Front = g.get("front") or OpenAIChat()
    return front.presented_key(request.headers)


@bp.post("/v1/chat/completions")
def chat_completions() -> Response:
    return serve(g.front)


@bp.post("/v1/responses")
def responses() -> Response:
    return serve(g.front)


@bp.post("/v1/messages")
def messages() -> Response:
    return serve(g.front)


@bp.post("/v1/messages/count_tokens")
def count_tokens() -> Response:
    """The prompt's tokens, by the upstream's tokenizer where it has one (routes/tokens.py); no record. A model no
    route serves is estimated, not refused: a client asks this of its background models too."""
    proxy = current_proxy()
    settings = proxy.settings
    data = read_body(request.environ, limit=settings.max_body_bytes, timeout=settings.body_timeout)
    g.body_read = True
    chat = g.front.decode(data, settings)
    try:
        target = models.route(settings, chat.model)
    except ModelNotFound:
        return json_response({"input_tokens": tokens.estimate(chat)})
    api_key = target.upstream_api_key or (client_token() if not settings.api_keys else None)
    return json_response({"input_tokens": tokens.count(chat, target, proxy.http, api_key)})


def serve(front: Front) -> Response:
    """One request through the core, in the front end's protocol."""
    proxy = current_proxy()
    settings = proxy.settings
    data = read_body(request.environ, limit=settings.max_body_bytes, timeout=settings.body_timeout)
    g.body_read = True
    record = new_record(request.headers.get("User-Agent", ""), request.remote_addr or "", len(data),
                        request_id=g.request_id, client_request_id=g.client_request_id, protocol=front.protocol)
    trace = proxy.tracing.begin(request.headers, request.method, request.path, record.started) if proxy.tracing \
        else None
    try:
        chat = front.decode(data, settings)
        target = models.route(settings, chat.model)
    except ProxyError as error:
        record.route, record.status, record.error, record.error_code = "rejected", error.status, error.message, \
            error.code
        proxy.record(record, trace)
        raise
    api_key = models.upstream_key(settings, target, client_token())
    target = proxy.formats.pin(chat.model, target, api_key)  # the dialect its chat template states, once known
    route = front.route(request.headers, chat, settings)
    record.route_reason = route.reason

    stored = Stored(proxy)

    def finished(done: TransformRecord) -> None:
        proxy.observe(done, trace)
        stored.add(done)
        proxy.metrics.request_finished()  # when the exchange ends: for a stream, after its last byte

    exchange = Exchange(chat, target, settings, proxy.upstream_for(target), api_key, record, vtc=route.vtc,
                        sink=finished, client=request.environ.get("gunicorn.socket"), forward=front.forward,
                        backend=proxy.backend_for(target), refused=proxy.backends.refused,
                        trace=trace)
    exchange.notes.extend(front.notes())
    proxy.metrics.request_started()
    respond = vtc_chat.answer if route.vtc else answer
    try:
        response = within_gate(proxy.gate, lambda: front.respond(exchange, respond(exchange)))
    except ProxyError as error:
        if isinstance(error, UpstreamUnavailable) and target.upstream:
            proxy.backends.lost(target.upstream)  # when it is back, it may be another server
            proxy.formats.forget(target.upstream)  # with another model's template
        exchange.log(error.status, error.for_operator(), error.code)
        stored.close()
        raise
    except Exception:
        exchange.log(500, "unexpected failure: see the proxy's log")
        stored.close()
        raise
    response.call_on_close(stored.close)
    return response


class Stored:
    """A request's record goes into the transform log once its response is closed (a whole answer sent, a stream
    over): making its row (redacting, serializing: 0.5 ms for a 256 KB answer) then costs the client nothing."""

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy
        self._waiting: list[TransformRecord] = []
        self._closed = False

    def add(self, record: TransformRecord) -> None:
        if self._closed:
            self._proxy.translog.add(record)
        else:
            self._waiting.append(record)

    def close(self) -> None:
        self._closed = True
        waiting, self._waiting = self._waiting, []
        for record in waiting:
            self._proxy.translog.add(record)


def within_gate(gate: Gate, respond: Callable[[], Response]) -> Response:
    """The answer, holding one upstream slot until the response is closed (for a stream, after its last byte,
    or when the client went away): every WSGI server closes the response, whatever happened."""
    ticket = gate.enter()
    try:
        response = respond()
    except BaseException:
        ticket.leave()
        raise
    response.call_on_close(ticket.leave)
    return response


@bp.route("/v1/<path:path>", methods=["GET", "POST"])
def forward(path: str) -> Response:
    """Any other /v1 endpoint, passed on to the upstream (routes/forward.py); the proxy's own paths are not."""
    if any(rule.rule == f"/v1/{path}" for rule in current_app.url_map.iter_rules()):
        raise InvalidRequest(f"{request.method} is not allowed on {request.path}", status=405,
                             code="method_not_allowed")
    proxy = current_proxy()
    settings = proxy.settings
    body = read_body(request.environ, limit=settings.max_body_bytes, timeout=settings.body_timeout)
    g.body_read = True
    answer = proxy_forward(settings, proxy.http, request.method, path, body,
                           request.headers.get("Content-Type", "application/json"), client_token())
    if answer.chunks is None:
        return Response(answer.body, mimetype=None, content_type=answer.content_type)
    response = Response(answer.chunks, content_type=answer.content_type, headers=SSE_HEADERS)
    response.call_on_close(answer.close)
    return response


@bp.get("/v1/models")
def list_models() -> Response:
    proxy = current_proxy()
    return json_response(models.list_models(proxy.settings, proxy.http, client_token(), proxy.formats))


@bp.get("/health")
def health() -> Response:
    """Liveness: never touches the upstream. `?detail=1` adds each upstream's kind and version, as this worker
    knows them, for a caller with a key (on an open proxy, one on loopback)."""
    proxy = current_proxy()
    keys = proxy.settings.api_keys
    shown: dict[str, object] = {"status": "ok", "version": __version__}
    if "detail" not in request.args:
        return json_response(shown)
    if is_authorized(request.headers.get("Authorization", ""), keys) if keys else _is_loopback(request.remote_addr):
        shown["upstreams"] = proxy.backends_known()
    return json_response(shown)


def _is_loopback(address: str | None) -> bool:
    return address in ("127.0.0.1", "::1") or (address or "").startswith("127.")
