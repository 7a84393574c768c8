"""The upstream's own error answers (an HTTP error status, an in-band error event) as the errors the client sees:
status, message, type, param and code kept, `Retry-After` passed on, and never the key the proxy sent upstream."""

from __future__ import annotations

import json
from typing import Any

from toolproxy.errors import UpstreamError, UpstreamStatusError


def without_key(error: UpstreamError, api_key: str | None) -> UpstreamError:
    """The error with the key this request sent upstream blanked: a server that echoes the key it refused
    ("Incorrect API key provided: sk-...") must not hand it to the client, whose key it may not be."""
    if not api_key or len(api_key) < 4:
        return error
    error.message = error.message.replace(api_key, "[redacted]")
    error.args = (error.message,)
    error.param = error.param.replace(api_key, "[redacted]") if error.param else error.param
    error.code = error.code.replace(api_key, "[redacted]") if error.code else error.code
    error.error_type = error.error_type.replace(api_key, "[redacted]")
    return error


def status_error(status: int, body: bytes | bytearray, headers: Any) -> UpstreamStatusError:
    passed = {"Retry-After": headers["Retry-After"]} if headers.get("Retry-After") else {}
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        error = error_from_object(parsed, status)
        error.headers = passed
        return error
    snippet = body[:300].decode("utf-8", errors="replace").strip()
    return UpstreamStatusError(f"the upstream answered HTTP {status}: {snippet}", status=status, headers=passed,
                               code=f"upstream_http_{status}")


def error_from_object(parsed: dict[str, Any], status: int) -> UpstreamStatusError:
    """The OpenAI error object inside an upstream body, whichever way the server wrote it."""
    inner = parsed.get("error", parsed)
    if isinstance(inner, str):
        inner = {"message": inner}
    message = inner.get("message") or parsed.get("detail") or json.dumps(parsed)[:300]
    code = inner.get("code")
    return UpstreamStatusError(
        str(message),
        status=status,
        error_type=str(inner.get("type") or "upstream_error"),
        param=inner.get("param") if isinstance(inner.get("param"), str) else None,
        # vLLM sends a numeric code, OpenAI a string: always a string here.
        code=str(code) if code is not None else f"upstream_http_{status}",
    )
