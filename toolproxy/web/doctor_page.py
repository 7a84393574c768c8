"""The dashboard runs `toolproxy doctor` for a configured upstream on demand: one probe at a time per worker,
only behind the dashboard's key (a probe spends the upstream's time, and without keys any web page could post the
form). The findings are rendered on the page, escaped like everything a page shows."""

from __future__ import annotations

import hmac
import secrets
import threading

from flask import Blueprint, abort, render_template, request, session

from toolproxy.doctor.report import recommend, render_text, verdict
from toolproxy.doctor.run import Doctor, DoctorError
from toolproxy.routes.proxy import Proxy
from toolproxy.web.dashboard import proxy_of, require_login, secure

bp = Blueprint("doctor", __name__, url_prefix="/dashboard")
bp.before_request(require_login)  # the dashboard's login, and its security headers
bp.after_request(secure)
_RUNNING = threading.Lock()  # one probe at a time in this worker
PROBE_TIMEOUT = 120.0
TOKEN = "doctor_csrf"  # the form field and the session key (signing in clears the login form's own token)


@bp.app_context_processor
def _token() -> dict[str, object]:
    return {"doctor_token": form_token}


def form_token() -> str:
    """This session's token for the doctor's form (a cross-site post has no session, SameSite=Strict)."""
    token = session.get(TOKEN)
    if not isinstance(token, str):
        token = session[TOKEN] = secrets.token_urlsafe(32)
    return token


@bp.post("/doctor")
def run_doctor() -> tuple[str, int] | str:
    proxy = proxy_of()
    if not proxy.settings.api_keys:
        return _page("The doctor runs from the dashboard only when the proxy has keys (TOOLPROXY_API_KEYS): "
                     "run `toolproxy doctor` on the command line instead."), 403
    sent, held = request.form.get(TOKEN, ""), session.get(TOKEN)
    if not (isinstance(held, str) and sent and hmac.compare_digest(sent.encode(), held.encode())):
        return _page("The form has expired or came from another page: open the dashboard again."), 400
    index = request.form.get("upstream", type=int)
    model = (request.form.get("model") or "").strip()[:200]
    targets = proxy.targets()
    if index is None or not 0 <= index < len(targets) or not model:
        abort(400)
    if not _RUNNING.acquire(blocking=False):
        return _page("A probe is already running in this worker: try again when it is done."), 409
    try:
        return _findings(proxy, index, model)
    finally:
        _RUNNING.release()


def _findings(proxy: Proxy, index: int, model: str) -> str:
    target = proxy.targets()[index]
    assert target.upstream is not None
    doctor = Doctor(target.upstream, model, target.upstream_api_key, timeout=PROBE_TIMEOUT, tries=1)
    try:
        findings = doctor.run()
    except DoctorError as error:
        return _page(str(error))
    return render_template("doctor.html", failure=None, report=render_text(findings), verdict=verdict(findings),
                           entry=recommend(findings), demo=False)


def _page(failure: str) -> str:
    return render_template("doctor.html", failure=failure, report=None, verdict=None, entry=None, demo=False)
