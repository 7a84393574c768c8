"""The proxy's own errors, each rendered as an OpenAI error object with the right HTTP status."""

from __future__ import annotations

from typing import Any


class ProxyError(Exception):
    """An error the client should see as `{"error": {"message", "type", "param", "code"}}`."""

    status = 500
    error_type = "server_error"
    code: str | None = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else type(self).code
        self.status = status if status is not None else type(self).status
        self.error_type = error_type if error_type is not None else type(self).error_type
        self.headers = headers or {}
        self.upstream_url: str | None = None  # the upstream URL called, for the operator (upstream/failures.py)

    def for_operator(self) -> str:
        """The message as the log line and the transform log show it: with the upstream URL called, if any."""
        return f"{self.message} (upstream: {self.upstream_url})" if self.upstream_url else self.message

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}


class InvalidRequest(ProxyError):
    status = 400
    error_type = "invalid_request_error"
    code = "invalid_request"


class AuthenticationFailed(ProxyError):
    status = 401
    error_type = "invalid_request_error"
    code = "invalid_api_key"


class NotFound(ProxyError):
    status = 404
    error_type = "invalid_request_error"
    code = "unknown_url"


class ModelNotFound(ProxyError):
    status = 404
    error_type = "invalid_request_error"
    code = "model_not_found"


class UpstreamError(ProxyError):
    status = 502
    error_type = "upstream_error"
    code = "upstream_error"


class UpstreamUnavailable(UpstreamError):
    code = "upstream_unavailable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpstreamBadResponse(UpstreamError):
    code = "bad_upstream_response"


class UpstreamDisconnected(UpstreamError):
    code = "upstream_disconnected"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an HTTP error: its status and message are passed on."""


class Overloaded(ProxyError):
    """Every upstream slot is taken and the queue is full or waited too long: come back later."""

    status = 503
    error_type = "server_error"
    code = "server_overloaded"


class ClientDisconnected(ProxyError):
    """The client went away before its answer was ready (nginx's 499: nobody reads this answer)."""

    status = 499
    error_type = "invalid_request_error"
    code = "client_disconnected"
