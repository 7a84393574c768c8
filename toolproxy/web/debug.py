"""`GET /debug/runtime`, for the soak benchmark and the hostile-input tests: the worker's pid, its live greenlets
(every thread of gevent's pool has a hub and a main greenlet of its own), those spawned for work, and the longest
the event loop ran without switching since the last ask (observe/blocking.py). Registered only with
`TOOLPROXY_DEBUG_ROUTES=1`, and answers only a client on loopback (everything else gets a 404)."""

from __future__ import annotations

import gc
import ipaddress
import os

import gevent
from flask import Blueprint, Flask, Response, current_app, request
from greenlet import greenlet

from toolproxy.errors import NotFound
from toolproxy.fronts.base import json_response
from toolproxy.observe.blocking import LoopWatch

bp = Blueprint("debug", __name__)


def install(app: Flask) -> None:
    app.extensions["loop_watch"] = LoopWatch()
    app.register_blueprint(bp)


@bp.get("/debug/runtime")
def runtime() -> Response:
    if not _is_loopback(request.remote_addr or ""):
        raise NotFound(f"Unknown request URL: GET {request.path}. Please check the URL.")
    live = [item for item in gc.get_objects() if isinstance(item, greenlet) and not item.dead]
    spawned = sum(1 for item in live if isinstance(item, gevent.Greenlet))
    watch: LoopWatch = current_app.extensions["loop_watch"]
    return json_response({"pid": os.getpid(), "greenlets": len(live), "spawned": spawned,
                          "worst_blocked_ms": watch.take()})


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
