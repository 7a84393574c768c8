"""What a web page can make a browser send to the API, and what it may read back.

A page on any origin may POST `text/plain`, a form, or a body with no type at all without asking first (a
"simple" request: no CORS preflight), and the proxy would pass it upstream. The API therefore takes only
`application/json` (415 otherwise, as an OpenAI error): a page that sends JSON must ask first, and is told no.
CORS headers go only to the origins listed in `cors_origins`; with none listed, none is ever sent.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, request

from toolproxy.errors import InvalidRequest

ALLOWED_METHODS = "GET, POST, OPTIONS"


def install(blueprint: Blueprint) -> None:
    blueprint.before_request(require_json)
    blueprint.after_request(share_with_listed_origins)


def require_json() -> None:
    if request.method == "POST" and request.mimetype != "application/json":
        raise InvalidRequest("send the request body as JSON with `Content-Type: application/json`; got "
                             f"{request.mimetype or 'no content type'!r}"[:200], status=415,
                             code="unsupported_media_type")


def share_with_listed_origins(response: Response) -> Response:
    origin = request.headers.get("Origin")
    if not origin or origin not in current_app.extensions["toolproxy"].settings.cors_origins:
        return response
    response.headers["Access-Control-Allow-Origin"] = origin
    response.vary.add("Origin")
    if request.method == "OPTIONS":  # the preflight: the origin is listed, so what it asks for is granted
        response.headers["Access-Control-Allow-Methods"] = ALLOWED_METHODS
        asked = request.headers.get("Access-Control-Request-Headers", "")
        response.headers["Access-Control-Allow-Headers"] = asked[:1000] or "Authorization, Content-Type"
        response.headers["Access-Control-Max-Age"] = "600"
    return response
