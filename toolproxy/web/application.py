"""Building the Flask app: settings, blueprints, and error handlers that always answer with an OpenAI error
object (Werkzeug's defaults are HTML pages, which break every client's error handling)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from toolproxy.config.settings import Settings, load_settings
from toolproxy.errors import InvalidRequest, NotFound, ProxyError
from toolproxy.fronts.base import json_response
from toolproxy.observe.logs import log_other
from toolproxy.observe.record import new_request_id, valid_text
from toolproxy.routes.proxy import Proxy
from toolproxy.web import api, connection, dashboard, debug, doctor_page, hosts, login, pages
from toolproxy.web.refusals import REFUSALS, Refusals

logger = logging.getLogger("toolproxy")
TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
MAX_CLIENT_ID = 200  # characters of a client's X-Request-Id kept in the record
DEMO_BANNER = ("DEMO MODEL IN USE: no upstream is configured, so toolproxy answers with its built-in scripted "
               "model. Set TOOLPROXY_UPSTREAM=http://HOST:PORT/v1 to proxy a real server.")


def build_app(settings: Settings | None = None) -> Flask:
    settings = settings or load_settings()
    app = Flask("toolproxy", template_folder=str(TEMPLATES), static_folder=str(STATIC))
    # Every value a page shows passes here: a lone surrogate from an old record or a filter must not turn the
    # page into a 500 when Flask encodes it (issue 12 failure 9). New records are stored valid already.
    app.jinja_options = {**app.jinja_options, "finalize": _printable}
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["toolproxy"] = Proxy.from_settings(settings)
    hosts.install(app, settings)
    app.register_blueprint(api.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(dashboard.bp)
    login.install(app, settings.api_keys)
    app.register_blueprint(doctor_page.bp)
    app.register_blueprint(dashboard.metrics_bp)
    if settings.debug_routes:
        debug.install(app)
    app.extensions[REFUSALS] = Refusals(app.extensions["toolproxy"])
    _register_error_handlers(app, settings)
    app.before_request(_assign_request_id)
    app.after_request(_nosniff)
    app.after_request(_request_id_header)
    app.wsgi_app = connection.closing(app.wsgi_app)  # type: ignore[method-assign,assignment]
    if settings.is_demo:
        logger.warning(DEMO_BANNER)
    return app


def _register_error_handlers(app: Flask, settings: Settings) -> None:
    @app.errorhandler(ProxyError)
    def proxy_error(error: ProxyError) -> Response:
        app.extensions[REFUSALS].note(error)
        return error_response(error)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        converted = _from_http(error, settings)
        app.extensions[REFUSALS].note(converted)
        return error_response(converted)

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        logger.exception("unexpected failure on %s %s", request.method, request.path)
        return error_response(ProxyError("the proxy failed unexpectedly; its log has the details"))


def _printable(value: Any) -> Any:
    return valid_text(value) if isinstance(value, str) else value


def _assign_request_id() -> None:
    """Every request gets our own id (a client's may repeat or collide); the client's is kept beside it."""
    g.request_id = new_request_id()
    sent = request.headers.get("X-Request-Id", "")[:MAX_CLIENT_ID]
    g.client_request_id = sent if sent.isprintable() and sent.isascii() else ""


def _request_id_header(response: Response) -> Response:
    response.headers["X-Request-Id"] = g.get("request_id") or new_request_id()
    # A request `serve` answered logs its line with its record; one refused before routing has none (refusals.py).
    if request.endpoint not in api.SERVED or g.get("refused"):
        log_other(response.headers["X-Request-Id"], request.method, request.path, response.status_code)
    return response


def _nosniff(response: Response) -> Response:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


def error_response(error: ProxyError) -> Response:
    """In the protocol of the request's front end (an API path's), else as an OpenAI error object. A request
    refused before its body was read closes its connection (web/connection.py)."""
    front = g.get("front") or api.path_front(request.path)
    if front is not None and not g.get("body_read") and connection.has_unread_body(request.environ):
        connection.close_after(request.environ)
    if front is not None:
        response: Response = front.error(error)
        return response
    return json_response(error.body(), status=error.status, headers=error.headers)


def _from_http(error: HTTPException, settings: Settings) -> ProxyError:
    status = error.code or 500
    if status == 404:
        return NotFound(f"Unknown request URL: {request.method} {request.path}. Please check the URL.")
    if status == 405:
        return InvalidRequest(f"{request.method} is not allowed on {request.path}", status=405,
                              code="method_not_allowed")
    if status == 413:
        return InvalidRequest(f"the request body is larger than the limit of {settings.max_body_bytes} bytes",
                              status=413, code="request_too_large")
    if status < 500:
        return InvalidRequest(error.description or error.name, status=status, code=error.name.lower()
                              .replace(" ", "_"))
    return ProxyError(error.description or error.name, status=status)
