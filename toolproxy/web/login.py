"""The dashboard's sign-in: a form that sets a signed session cookie (the key itself never travels in a URL nor
sits in the cookie), guarded against guessing (attempts.py: refused with 429 while an address waits, every
outcome logged and counted) and against cross-site posts (a token from the form's own session)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import secrets
from datetime import timedelta

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.sessions import SecureCookieSessionInterface
from werkzeug.wrappers import Response as BaseResponse

from toolproxy.routes.proxy import Proxy
from toolproxy.web.api import is_authorized
from toolproxy.web.attempts import LoginAttempts
from toolproxy.web.dashboard import SECURITY_HEADERS

logger = logging.getLogger("toolproxy.dashboard")
bp = Blueprint("login", __name__, url_prefix="/dashboard")

COOKIE = "toolproxy_session"
SESSION_SECONDS = 12 * 3600
TOKEN = "csrf"  # the form field and the session key
ATTEMPTS = "toolproxy.login_attempts"  # app.extensions key


def install(app: Flask, api_keys: tuple[str, ...]) -> None:
    """The dashboard's login lives in Flask's signed session cookie. The signing key is derived from the
    configured API keys, so every worker (and every instance with the same keys) accepts it, and changing the keys
    signs everyone out."""
    app.secret_key = hashlib.sha256(("toolproxy-dashboard\0" + "\0".join(api_keys)).encode()).digest()
    app.config.update(SESSION_COOKIE_NAME=COOKIE, SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict",
                      PERMANENT_SESSION_LIFETIME=timedelta(seconds=SESSION_SECONDS))
    app.session_interface = _SessionInterface()
    app.extensions[ATTEMPTS] = LoginAttempts()
    app.register_blueprint(bp)


@bp.after_request
def secure(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


@bp.get("/login")
def form() -> Response:
    return _form()


@bp.post("/login")
def sign_in() -> BaseResponse:
    proxy: Proxy = current_app.extensions["toolproxy"]
    attempts: LoginAttempts = current_app.extensions[ATTEMPTS]
    address = request.remote_addr or ""
    if not _has_its_token():
        proxy.metrics.login("bad_token")
        logger.warning("dashboard login from %s refused: the form's token is missing or not its session's", address)
        return _form("The form has expired or came from another page: sign in again.", 400)
    wait = attempts.wait(address)
    if wait > 0:
        proxy.metrics.login("refused")
        seconds = math.ceil(wait)
        return _form(f"Too many wrong keys: try again in {seconds} s.", 429, {"Retry-After": str(seconds)})
    keys = proxy.settings.api_keys
    if keys and is_authorized(f"Bearer {request.form.get('key', '')}", keys):
        attempts.succeeded(address)
        proxy.metrics.login("success")
        session.clear()
        session.permanent = True
        session["dashboard"] = True
        return redirect(url_for("dashboard.index"))
    wait = attempts.failed(address)
    proxy.metrics.login("wrong_key")
    logger.warning("dashboard login from %s: wrong key%s", address,
                   f"; its next attempt is refused for {wait:g} s" if wait else "")
    return _form("That key is not one of the proxy's keys.", 403)


def _form(message: str = "", status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """The form, with this session's token (made on its first view, kept until sign-in clears the session)."""
    token = session.get(TOKEN)
    if not isinstance(token, str):
        token = session[TOKEN] = secrets.token_urlsafe(32)
    response = make_response(render_template("login.html", message=message, token=token, demo=False), status)
    response.headers.update(headers or {})
    return response


def _has_its_token() -> bool:
    """The posted token is the one this browser's session holds. A cross-site post carries neither: the session
    cookie is SameSite=Strict, and another session's token does not match this one's."""
    sent, held = request.form.get(TOKEN, ""), session.get(TOKEN)
    return isinstance(held, str) and bool(sent) and hmac.compare_digest(sent.encode(), held.encode())


class _SessionInterface(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        """Secure exactly when the page was served over TLS: a LAN box without TLS still gets its cookie."""
        return request.is_secure
