"""The pooled `requests` session every upstream call goes through, and the environment read once for it.

With `trust_env` on, requests reads the proxy variables, ~/.netrc and the CA bundle variables on every request:
a tenth of a small request's time. Here the CA bundle is read when the session is made and each upstream's
proxies at its first request (`no_proxy` respected), so proxy variables still work.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter


def new_session(pool_size: int = 256) -> requests.Session:
    session = requests.Session()
    # Retries are the client's business (the OpenAI SDKs retry twice already); the pool keeps a connection for
    # every request the in-flight cap lets run at once (a smaller pool discards and reconnects under load).
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.trust_env = False
    session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    return session


class Proxies:
    """Each upstream's proxies, from the environment at its first request (per instance: tests change it)."""

    def __init__(self) -> None:
        self._by_origin: dict[str, dict[str, str]] = {}

    def __call__(self, url: str) -> dict[str, str]:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._by_origin:
            self._by_origin[origin] = requests.utils.get_environ_proxies(origin)
        return self._by_origin[origin]
