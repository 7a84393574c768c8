"""Talking to the OpenAI-compatible upstream through the pooled adapter of one `requests.Session` (session.py).

The only room that calls `requests`: its exceptions are translated here, once, into `Upstream*` errors that
carry the status and OpenAI error object the client should see.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import gevent
import requests
from gevent import monkey
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from toolproxy.errors import (
    UpstreamBadResponse,
    UpstreamDisconnected,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from toolproxy.upstream import session
from toolproxy.upstream.deadline import capped, enforced
from toolproxy.upstream.deadline import check as check_deadline
from toolproxy.upstream.refusals import error_from_object, status_error, without_key
from toolproxy.wire import jsonwire, shape, sse

logger = logging.getLogger(__name__)

READ_SIZE = 64 * 1024
DRAIN_SECONDS = 1.0  # the longest a finished stream waits for the end of its body (see _read_to_end)
USER_AGENT = "toolproxy/0.1"


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    base_url: str
    body: dict[str, Any]
    api_key: str | None = field(default=None, repr=False)
    deadline: float | None = None  # time.monotonic() by which the whole answer must be in


class EventStream(Protocol):
    """Chat-completion chunks as they arrive; `close()` drops the connection (the server stops generating)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class Upstream(Protocol):
    def complete(self, request: UpstreamRequest) -> dict[str, Any]: ...

    def stream(self, request: UpstreamRequest) -> EventStream: ...

    def models(self, base_url: str, api_key: str | None) -> dict[str, Any]: ...


class HttpUpstream:
    def __init__(self, *, connect_timeout: float, read_timeout: float, max_bytes: int, max_depth: int,
                 max_containers: int = 100_000, models_timeout: float = 5.0, pool_size: int = 256) -> None:
        self._timeout = (connect_timeout, read_timeout)
        self._max_bytes = max_bytes
        self._max_depth = max_depth
        self._max_containers = max_containers
        self._models_timeout = models_timeout
        self._session = session.new_session(pool_size)
        self._verify: bool | str = True if self._session.verify is None else self._session.verify
        self._proxies = session.Proxies()

    def complete(self, request: UpstreamRequest) -> dict[str, Any]:
        with enforced(request.deadline):
            response = self._post(request)
            try:
                if "text/event-stream" in response.headers.get("Content-Type", ""):
                    raise UpstreamBadResponse("the upstream answered a non-streaming request with an event stream")
                return shape.check_completion(self._decode_object(self._read_body(response, request.deadline)))
            finally:
                response.close()

    def stream(self, request: UpstreamRequest) -> EventStream:
        response = self._post(request)
        content_type = response.headers.get("Content-Type", "")
        if "text/event-stream" not in content_type:
            try:
                body = self._decode_object(self._read_body(response))
            finally:
                response.close()
            raise without_key(UpstreamBadResponse(f"the upstream answered a streaming request with "
                                                  f"{content_type or 'no type'}: {str(body)[:200]}"), request.api_key)
        return _HttpEventStream(response, self._max_bytes, request.api_key)

    def models(self, base_url: str, api_key: str | None) -> dict[str, Any]:
        """The model list, within `models_timeout`: a hung upstream must not hang a client's start-up."""
        deadline = time.monotonic() + self._models_timeout
        with enforced(deadline):
            response = self._send("GET", f"{base_url}/models", api_key, deadline=deadline)
            try:
                return self._decode_object(self._read_body(response, deadline))
            finally:
                response.close()

    def answers(self, base_url: str) -> bool:
        """Whether the upstream answers `/models` within two seconds (for the dashboard, never a request)."""
        try:
            with self._session.get(f"{base_url}/models", timeout=(1, 2), headers=_headers(None),
                                   proxies=self._proxies(base_url)) as response:
                return response.status_code < 500
        except requests.RequestException:
            return False

    def _post(self, request: UpstreamRequest) -> requests.Response:
        return self._send("POST", f"{request.base_url}/chat/completions", request.api_key,
                          jsonwire.encode(request.body), request.deadline)

    def _send(self, method: str, url: str, api_key: str | None, data: bytes | None = None,
              deadline: float | None = None) -> requests.Response:
        """The response once its headers are in; an HTTP error status is raised as the upstream's error."""
        try:
            response = self._exchange(method, url, api_key, data, capped(self._timeout, deadline))
        except requests.RequestException as error:
            raise _translate(error) from None
        if 300 <= response.status_code < 400:
            response.close()  # the target is not named: it may be an internal host
            raise UpstreamBadResponse(f"the upstream answered {response.status_code}, a redirect, which toolproxy "
                                      "does not follow: configure the URL it redirects to")
        if response.status_code >= 400:
            try:
                raise without_key(status_error(response.status_code, self._read_body(response, deadline),
                                                response.headers), api_key)
            finally:
                response.close()
        return response

    def _exchange(self, method: str, url: str, api_key: str | None, data: bytes | None,
                  timeout: tuple[float, float]) -> requests.Response:
        """One request through requests' transport adapter, without a Session's per-request work (cookie jars,
        hooks, settings merges, redirects): a third of an upstream call's CPU, and nothing a proxy wants (one
        client's upstream cookies must not reach the next)."""
        prepared = requests.PreparedRequest()
        prepared.prepare(method=method, url=url, headers=_headers(api_key), data=data)
        return self._session.get_adapter(url).send(prepared, stream=True, timeout=timeout,
                                                   verify=self._verify, proxies=self._proxies(url))

    def _read_body(self, response: requests.Response, deadline: float | None = None) -> bytes:
        """The whole body, decompressed, refusing more than the configured size (a gzip bomb included) and, read
        after read, anything past the deadline (an upstream trickling bytes never trips a read timeout)."""
        body = bytearray()
        try:
            while chunk := response.raw.read1(READ_SIZE, decode_content=True):
                body += chunk
                if len(body) > self._max_bytes:
                    raise UpstreamBadResponse(f"the upstream response exceeded {self._max_bytes} bytes")
                check_deadline(deadline)
        except (requests.RequestException, OSError, Urllib3Error) as error:
            raise _translate(error) from None
        return bytes(body)

    def _decode_object(self, body: bytes) -> dict[str, Any]:
        try:
            value = jsonwire.loads(body, self._max_depth, self._max_containers)
        except jsonwire.JsonWireError as error:
            raise UpstreamBadResponse(f"the upstream's answer is not usable JSON: {error}") from None
        if not isinstance(value, dict):
            raise UpstreamBadResponse("the upstream's answer is not a JSON object")
        return value


class _HttpEventStream:
    def __init__(self, response: requests.Response, max_bytes: int, api_key: str | None) -> None:
        self._response = response
        self._decoder = sse.EventDecoder(max_bytes)
        self._api_key = api_key

    def __iter__(self) -> Iterator[dict[str, Any]]:
        saw_finish = False
        try:
            for event in self._events():
                if event.data == "[DONE]":
                    self._read_to_end()
                    return
                try:
                    chunk = _decode_chunk(event.data)
                except UpstreamError as error:
                    raise without_key(error, self._api_key) from None
                saw_finish = saw_finish or any(c.get("finish_reason") for c in chunk.get("choices") or [])
                yield chunk
        finally:
            self.close()
        if not saw_finish:
            raise UpstreamDisconnected("the upstream closed the stream before it finished")

    def _events(self) -> Iterator[sse.Event]:
        try:
            while chunk := self._response.raw.read1(READ_SIZE, decode_content=True):
                yield from self._decoder.feed(chunk)
            yield from self._decoder.finish()
        except sse.EventTooLarge as error:
            raise UpstreamBadResponse(str(error)) from None
        except (requests.RequestException, OSError, Urllib3Error) as error:
            raise _translate(error) from None

    def _read_to_end(self) -> None:
        """After [DONE] only the end of the chunked body remains: read it, so the connection goes back to the pool
        (a new one per stream, resolved in gevent's thread pool, cost a tenth of a fast stream's time). More than
        that, or silence (bounded under gunicorn's patched sockets), and the connection is closed as before."""
        with gevent.Timeout(DRAIN_SECONDS if monkey.is_module_patched("socket") else None, False):
            try:
                for _ in range(4):
                    if not self._response.raw.read1(READ_SIZE, decode_content=True):
                        return
            except (requests.RequestException, OSError, Urllib3Error):
                return

    def close(self) -> None:
        self._response.close()


def _decode_chunk(data: str) -> dict[str, Any]:
    try:
        chunk = jsonwire.loads_fast(data)
    except (ValueError, RecursionError):
        raise UpstreamBadResponse(f"the upstream sent an event that is not JSON: {data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise UpstreamBadResponse("the upstream sent an event that is not a JSON object")
    if isinstance(chunk.get("error"), (dict, str)):
        # In-band errors after a 200 (vLLM, sglang): pass them on, never end the stream as if all went well.
        raise error_from_object(chunk, 502)
    return shape.check_chunk(chunk)


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _translate(error: Exception) -> UpstreamError:
    """requests/urllib3 failures in the client's terms; the message names no internal host."""
    if isinstance(error, requests.ConnectTimeout):
        return UpstreamTimeout("the upstream did not accept the connection in time")
    if isinstance(error, (requests.ReadTimeout, ReadTimeoutError, TimeoutError)):
        return UpstreamTimeout("the upstream stopped answering (read timeout)")
    if _is_connect_failure(error):
        return UpstreamUnavailable("the upstream refused the connection or is down")
    return UpstreamDisconnected("the connection to the upstream broke before the answer was complete")


def _is_connect_failure(error: BaseException) -> bool:
    """requests wraps urllib3's NewConnectionError (refused, no route, DNS) a level or two deep."""
    seen: BaseException | None = error
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, NewConnectionError):
            return True
        inner = getattr(seen, "reason", None) or (seen.args[0] if seen.args else None)
        seen = inner if isinstance(inner, BaseException) else None
    return False


def public_url(url: str | None) -> str:
    """scheme://host:port: no path, and never the credentials a URL may carry."""
    if not url:
        return "demo"
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"
