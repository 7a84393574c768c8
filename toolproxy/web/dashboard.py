"""The dashboard: recent transforms from the shared log, one transform in detail, a test case to download,
and `/metrics` for Prometheus. Everything from a request or a model is escaped by the templates (no `|safe`);
the script is served by the app (no CDN: the box may be offline) and the page works without it."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, abort, current_app, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response as BaseResponse

from toolproxy.errors import InvalidRequest
from toolproxy.observe.charts import CHARTS, WINDOWS, chart_data, window_of
from toolproxy.routes.proxy import Proxy
from toolproxy.version import __version__
from toolproxy.web.api import is_authorized
from toolproxy.web.columns import COLUMNS, FILTER_KEYS, FILTERS, TEXT_FILTERS, script_columns
from toolproxy.wire import jsonwire

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
metrics_bp = Blueprint("metrics", __name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; "
                               "base-uri 'none'; frame-ancestors 'none'; img-src 'self'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MAX_ID = 2**63 - 1  # SQLite's and PostgreSQL's largest integer: a record id, or a number a query compares with one
FLAGS = {"": False, "0": False, "no": False, "false": False, "off": False,
         "1": True, "yes": True, "true": True, "on": True}


def _proxy() -> Proxy:
    proxy: Proxy = current_app.extensions["toolproxy"]
    return proxy


proxy_of = _proxy


@bp.before_request
def require_login() -> BaseResponse | None:
    if not _proxy().settings.api_keys:
        return None
    if session.get("dashboard") is True:  # signed (itsdangerous), expiring: login.py
        return None
    if request.path.endswith(".json"):
        abort(401)
    return redirect(url_for("login.form"))


@bp.after_request
def secure(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


@bp.get("/")
def index() -> str:
    proxy = _proxy()
    filters = _filters()
    return render_template("dashboard.html", version=__version__, demo=proxy.settings.is_demo,
                           targets=[target.upstream for target in proxy.targets()],
                           can_probe=bool(proxy.settings.api_keys),
                           uptime=int(time.time() - proxy.started), stats=proxy.translog.stats(),
                           upstreams=proxy.upstream_health(), records=proxy.translog.recent(100, **filters),
                           formats=proxy.formats.overview(),
                           backends={item["url"]: item for item in proxy.backends_known()},
                           filters={key: request.args.get(key, "") for key in FILTER_KEYS}, filters_declared=FILTERS,
                           columns=COLUMNS, script_columns=script_columns(), charts=CHARTS, chart_windows=WINDOWS,
                           chart_window=window_of(request.args.get("window")))


@bp.get("/charts.json")
def charts() -> Response:
    """The charts' series over the window the query string names (`window`: seconds, one of charts.WINDOWS)."""
    window, now = window_of(request.args.get("window")), time.time()
    proxy = _proxy()
    data = chart_data(proxy.translog.activity(now - window), now, window, proxy.settings.instance_name)
    return Response(jsonwire.dumps(data), mimetype="application/json")


@bp.get("/records.json")
def records() -> Response:
    rows = _proxy().translog.recent(100, after_id=_after_id(), **_filters())
    return Response(jsonwire.dumps({"records": rows}), mimetype="application/json")


@bp.get("/request/<request_id>")
def by_request_id(request_id: str) -> BaseResponse:
    """A response's `X-Request-Id` (or a log line's request_id) leads to its record."""
    found = _proxy().translog.find(request_id)
    if found is None:
        abort(404)
    return redirect(url_for("dashboard.record", record_id=found))


@bp.get(f"/record/<int(max={MAX_ID}):record_id>")  # a larger id names no record: 404
def record(record_id: int) -> str:
    found = _proxy().translog.get(record_id)
    if found is None:
        abort(404)
    return render_template("record.html", record=found, raw_pieces=highlight(found.get("raw_text") or "",
                                                                             found.get("calls") or []),
                           demo=_proxy().settings.is_demo)


@bp.get(f"/record/<int(max={MAX_ID}):record_id>/testcase.json")
def testcase(record_id: int) -> Response:
    """The transform as a golden test case (request tools, model text, expected result) for a bug report."""
    found = _proxy().translog.get(record_id)
    if found is None:
        abort(404)
    case = {"source": f"toolproxy {__version__} transform {found['request_id']}", "model": found.get("model"),
            "tools": found.get("tools") or [], "model_text": found.get("raw_text") or "",
            "expected": {"content": found.get("client_content"), "tool_calls": [
                {"name": call.get("name"), "arguments": call.get("arguments")} for call in found.get("calls") or []]}}
    return Response(jsonwire.dumps(case), mimetype="application/json",
                    headers={"Content-Disposition": f'attachment; filename="toolproxy-case-{record_id}.json"'})


@metrics_bp.get("/metrics")
def metrics() -> Response:
    keys = _proxy().settings.api_keys
    if keys and not is_authorized(request.headers.get("Authorization", ""), keys):
        abort(401)
    body, content_type = _proxy().metrics.render()
    return Response(body, content_type=content_type)


def highlight(text: str, calls: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The raw model text as (piece, is_call) pieces, each call's source span marked; the template escapes."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for call in calls:
        source = call.get("source") or ""
        start = text.find(source, position) if source else -1
        if start < 0:
            continue
        pieces += [(text[position:start], False), (source, True)]
        position = start + len(source)
    pieces.append((text[position:], False))
    return [piece for piece in pieces if piece[0]]


def _filters() -> dict[str, Any]:
    """The record filters of the query string; a malformed one is a 400 (never a 500 from the store)."""
    flag = request.args.get("has_issues", "").lower()
    if flag not in FLAGS:
        raise InvalidRequest("has_issues is 1 or 0 (yes/no, true/false, on/off)", param="has_issues")
    filters: dict[str, Any] = {key: request.args.get(key) or None for key in TEXT_FILTERS}
    filters["status"] = _status(request.args.get("status", ""))
    if FLAGS[flag]:
        filters["has_issues"] = True
    return filters


def _status(text: str) -> int | str | None:
    """An HTTP status as the integer stored; other text as text (a status stored as a word: client_disconnected);
    None for no filter. A number no status can be is a 400."""
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        return text
    if len(text) > 3:
        raise InvalidRequest("status is an HTTP status (such as 502) or client_disconnected", param="status")
    return int(text)


def _after_id() -> int | None:
    text = request.args.get("after_id", "")
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_ID):
        raise InvalidRequest(f"after_id is a record id: a whole number from 0 to {MAX_ID}", param="after_id")
    return int(text)


