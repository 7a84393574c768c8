"""Finding each upstream's kind: a few bounded GETs (64 KiB of body at most, no redirect followed, a deadline
for all of them) at start-up and again after the upstream was lost, always in the background: a request never
waits for a probe, and is answered as `generic` until one has told the kind.

llama.cpp's `/props` is kept as it came (`props(url)`), for readers of its `chat_template`."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
from urllib3.exceptions import HTTPError as Urllib3Error

from toolproxy.upstream import session
from toolproxy.upstream.backends import (
    Answer,
    Backend,
    configured,
    from_model_list,
    from_props,
    from_server_header,
    from_version,
)
from toolproxy.upstream.client import public_url

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
PROBE_SECONDS = 5.0  # for all the probes of one upstream
RETRY_SECONDS = 15.0  # a failed or lost upstream is probed again at most this often
_PROPS: dict[str, dict[str, object]] = {}  # llama.cpp's /props by upstream URL, as last probed in this worker


def props(upstream_url: str) -> dict[str, object] | None:
    """llama.cpp's `/props` for this upstream (its `chat_template` among them), or None where the upstream is
    not a llama-server or has not been probed yet."""
    return _PROPS.get(upstream_url.rstrip("/"))


def root_of(base_url: str) -> str:
    """The server's root: the base URL without its `/v1` (where /props, /version and /api/version live)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


class Prober:
    """The GETs of one probe, all within one deadline."""

    def __init__(self, base_url: str, api_key: str | None, seconds: float = PROBE_SECONDS) -> None:
        self.base_url, self.root = base_url.rstrip("/"), root_of(base_url)
        self._api_key = api_key
        self._deadline = time.monotonic() + seconds
        self._session = session.new_session(2)
        self.reached = False  # whether anything answered at all

    def get(self, url: str) -> Answer | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            return None
        headers = {"Accept": "application/json", "User-Agent": "toolproxy/0.1"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            with self._session.get(url, headers=headers, timeout=(min(2.0, left), min(3.0, left)), stream=True,
                                   allow_redirects=False) as response:
                self.reached = True
                body = response.raw.read(MAX_BODY + 1, decode_content=True)
                return Answer(response.status_code, response.headers.get("Server", ""), _json(body))
        except (requests.RequestException, OSError, Urllib3Error, ValueError):
            return None

    def close(self) -> None:
        self._session.close()


def _json(body: bytes) -> object:
    if len(body) > MAX_BODY:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def detect(base_url: str, api_key: str | None = None, seconds: float = PROBE_SECONDS) -> Backend:
    """The upstream's kind from what it serves; `generic` (detected) when it answers but says nothing telling,
    `unknown` when it does not answer at all."""
    prober = Prober(base_url, api_key, seconds)
    try:
        backend = _identify(prober)
    finally:
        prober.close()
    if backend is None:
        return Backend("generic", source="detected" if prober.reached else "unknown",
                       evidence="nothing telling served" if prober.reached else "no answer")
    if backend.props is not None:
        _PROPS[base_url.rstrip("/")] = backend.props
    return backend


def _identify(prober: Prober) -> Backend | None:
    models = prober.get(f"{prober.base_url}/models")
    # llama-server says so in its header already, but its version and template are in /props.
    if models is not None and (found := from_model_list(models)):
        return found
    answer = prober.get(f"{prober.root}/props")
    if answer is not None and (found := from_props(answer) or from_server_header(answer)):
        return found
    for path, kind in (("/api/version", "ollama"), ("/server_info", "sglang"), ("/get_server_info", "sglang"),
                       ("/version", "vllm")):
        answer = prober.get(prober.root + path)
        if answer is not None and (found := from_version(answer, kind, path)):
            return found
    return None


@dataclass(slots=True)
class _State:
    backend: Backend
    checked: float  # time.monotonic() of the last probe started
    probing: bool = False
    lost: bool = False


class Backends:
    """Each upstream's kind, as this worker knows it; probes run in the background."""

    def __init__(self, detector: Callable[[str, str | None], Backend] = detect) -> None:
        self._detect = detector
        self._states: dict[str, _State] = {}
        self.refused: set[str] = set()  # tools (name and schema) whose strict schema a server refused
        self._lock = threading.Lock()

    def of(self, url: str, setting: str, api_key: str | None = None) -> Backend:
        """What is known now; a probe starts when none ran, or the last failed or the upstream was lost."""
        if setting != "auto":
            return configured(setting)
        with self._lock:
            state = self._states.setdefault(url, _State(Backend(), 0.0))
            due = (state.backend.source == "unknown" or state.lost) and not state.probing
            if due and time.monotonic() - state.checked >= (RETRY_SECONDS if state.checked else 0.0):
                state.probing, state.checked = True, time.monotonic()
                threading.Thread(target=self._probe, args=(url, api_key), daemon=True,
                                 name="toolproxy-probe").start()
        return state.backend

    def lost(self, url: str) -> None:
        """The upstream refused a connection: when it is back it may be another server (probed again)."""
        with self._lock:
            if url in self._states:
                self._states[url].lost = True

    def _probe(self, url: str, api_key: str | None) -> None:
        try:
            backend = self._detect(url, api_key)
        except Exception:  # an outer edge: a background thread has no caller to tell
            logger.exception("probing the upstream's kind failed")
            backend = Backend()
        with self._lock:
            state = self._states[url]
            state.backend, state.probing = backend, False
            state.lost = state.lost and backend.source == "unknown"
        logger.info("upstream %s: %s (%s)", public_url(url), backend.label, backend.evidence)
