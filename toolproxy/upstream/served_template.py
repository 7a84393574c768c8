"""The chat template an upstream serves: llama.cpp's `GET /props` (`chat_template`, or `chat_template_tool_use`
where the model has a template of its own for tools, with its `bos_token` and `eos_token`), as the backend probe
kept it (probe.props) or, where it has none, asked here: one bounded GET (a deadline for all of it, no redirect
followed, at most MAX_BODY bytes). Never on a request's path: routes/formats.py asks in the background.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests
from urllib3.exceptions import HTTPError as Urllib3Error

from toolproxy.upstream import session
from toolproxy.upstream.client import USER_AGENT

MAX_BODY = 1024 * 1024  # /props with a long template (gpt-oss: 17 KB) and the server's settings beside it
SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ServedTemplate:
    """The template, or why there is none (`reason`, one phrase naming no host)."""

    template: str | None
    bos_token: str = ""
    eos_token: str = ""
    reason: str = field(default="", compare=False)


def root_of(base_url: str) -> str:
    """The server's root: the base URL without its `/v1`, where llama-server answers `/props`."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


def fetch(base_url: str, api_key: str | None, model: str | None = None, seconds: float = SECONDS) -> ServedTemplate:
    """What the upstream at `base_url` serves as its chat template (a router serving several models is asked for
    `model`'s; a single-model server ignores the question)."""
    url = f"{root_of(base_url)}/props" + (f"?model={quote(model, safe='')}" if model else "")
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    deadline = time.monotonic() + seconds
    with session.new_session(1) as http:
        try:
            with http.get(url, headers=headers, timeout=(min(2.0, seconds), seconds), stream=True,
                          allow_redirects=False, proxies=session.Proxies()(url)) as response:
                if response.status_code != 200:
                    return ServedTemplate(None, reason=f"GET /props answered {response.status_code}")
                body = _read(response, deadline)
        except (requests.RequestException, OSError, Urllib3Error):
            return ServedTemplate(None, reason="GET /props failed (no answer, or not in time)")
    if body is None:
        return ServedTemplate(None, reason=f"GET /props sent more than {MAX_BODY} bytes, or not in time")
    return _template_of(body)


def _read(response: requests.Response, deadline: float) -> bytes | None:
    body = bytearray()
    while chunk := response.raw.read1(64 * 1024, decode_content=True):
        body += chunk
        if len(body) > MAX_BODY or time.monotonic() > deadline:
            return None
    return bytes(body)


def _template_of(body: bytes) -> ServedTemplate:
    try:
        props = json.loads(body)
    except (ValueError, RecursionError):
        return ServedTemplate(None, reason="GET /props is not JSON")
    if not isinstance(props, dict):
        return ServedTemplate(None, reason="GET /props is not a JSON object")
    return template_of(props)


def template_of(props: Mapping[str, Any]) -> ServedTemplate:
    """The template in llama.cpp's `/props`, the one fetched here or the one the backend probe kept."""
    template = props.get("chat_template_tool_use") or props.get("chat_template")
    if not isinstance(template, str) or not template.strip():
        return ServedTemplate(None, reason="GET /props holds no chat_template")
    tokens = [value if isinstance(value := props.get(key), str) else "" for key in ("bos_token", "eos_token")]
    return ServedTemplate(template, tokens[0], tokens[1])
