"""Pages for people: the start page says what the proxy is doing, loudly so when the demo model answers."""

from __future__ import annotations

import time

from flask import Blueprint, Response, current_app, make_response, render_template

from toolproxy.dialects.registry import DIALECT_NAMES
from toolproxy.version import __version__
from toolproxy.web.dashboard import SECURITY_HEADERS

bp = Blueprint("pages", __name__)



@bp.get("/")
def index() -> Response:
    proxy = current_app.extensions["toolproxy"]
    page = render_template("index.html", version=__version__, demo=proxy.settings.is_demo,
                           uptime=int(time.time() - proxy.started), dialects=DIALECT_NAMES,
                           models=[rule.match for rule in proxy.settings.models],
                           keys_required=bool(proxy.settings.api_keys))
    response = make_response(page)
    response.headers.update(SECURITY_HEADERS)
    return response
