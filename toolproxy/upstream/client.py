"""Talking to the OpenAI-compatible upstream through the pooled adapter of one `requests.Session` (session.py).

With its event streams (events.py) the only room that calls `requests`: its exceptions are translated once
(failures.py) into `Upstream*` errors that carry the status and OpenAI error object the client should see.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import HTTPError as Urllib3Error

from toolproxy.errors import UpstreamBadResponse, UpstreamError
from toolproxy.upstream import session
from toolproxy.upstream.deadline import capped, enforced
from toolproxy.upstream.deadline import check as check_deadline
from toolproxy.upstream.events import EventStream, HttpEventStream
from toolproxy.upstream.failures import calling, translate
from toolproxy.upstream.forwarded import ForwardCall, Forwarded
from toolproxy.upstream.refusals import status_error, without_key
from toolproxy.wire import jsonwire, shape

logger = logging.getLogger(__name__)

READ_SIZE = 64 * 1024
USER_AGENT = "toolproxy/0.1"
CHECK_BYTES = 1024 * 1024  # what a health check reads of `/models`: a model list is a few KB


@dataclass(frozen=True, slots=True)
class ModelsCheck:
    """What a health check of an upstream's `/models` found: whether it answers, and in a few words how."""

    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    base_url: str
    body: dict[str, Any]
    api_key: str | None = field(default=None, repr=False)
    deadline: float | None = None  # time.monotonic() by which the whole answer must be in
    headers: Mapping[str, str] = field(default_factory=dict)  # sent as well: a trace's `traceparent`


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
        with calling(f"{request.base_url}/chat/completions"), enforced(request.deadline):
            response = self._post(request)
            try:
                if "text/event-stream" in response.headers.get("Content-Type", ""):
                    raise UpstreamBadResponse("the upstream answered a non-streaming request with an event stream")
                return shape.check_completion(self._decode_object(self._read_body(response, request.deadline)))
            finally:
                response.close()

    def stream(self, request: UpstreamRequest) -> EventStream:
        url = f"{request.base_url}/chat/completions"
        with calling(url):
            response = self._post(request)
            content_type = response.headers.get("Content-Type", "")
            if "text/event-stream" not in content_type:
                try:
                    body = self._decode_object(self._read_body(response))
                finally:
                    response.close()
                raise without_key(UpstreamBadResponse(f"the upstream answered a streaming request with "
                                                      f"{content_type or 'no type'}: {str(body)[:200]}"),
                                  request.api_key)
        return HttpEventStream(response, self._max_bytes, request.api_key, url)

    def models(self, base_url: str, api_key: str | None) -> dict[str, Any]:
        """The model list, within `models_timeout`: a hung upstream must not hang a client's start-up."""
        deadline = time.monotonic() + self._models_timeout
        with calling(f"{base_url}/models"), enforced(deadline):
            response = self._send("GET", f"{base_url}/models", api_key, deadline=deadline)
            try:
                return self._decode_object(self._read_body(response, deadline))
            finally:
                response.close()

    def tokenize(self, base_url: str, body: dict[str, Any], api_key: str | None) -> dict[str, Any]:
        """The server's own tokenizer's answer (`POST /tokenize` at the root beside `/v1`, where vLLM and
        llama.cpp serve it), within `models_timeout`, size-capped and never redirected like every upstream call."""
        deadline = time.monotonic() + self._models_timeout
        url = f"{server_root(base_url)}/tokenize"
        with calling(url), enforced(deadline):
            response = self._send("POST", url, api_key, jsonwire.encode(body), deadline)
            try:
                return self._decode_object(self._read_body(response, deadline))
            finally:
                response.close()

    def forward(self, call: ForwardCall) -> Forwarded:
        """The upstream's answer to a request passed on: an error status raised as the upstream's error; an event
        stream read as it comes (within the deadline); anything else read whole, within the size limit."""
        with calling(call.url):
            response = self._send(call.method, call.url, call.api_key, call.body or None, call.deadline,
                                  content_type=call.content_type)
            content_type = response.headers.get("Content-Type", "application/octet-stream")
            if "text/event-stream" in content_type:
                return Forwarded(content_type, chunks=self._reads(response, call), close=response.close)
            try:
                return Forwarded(content_type, bytes(self._read_body(response, call.deadline)))
            finally:
                response.close()

    def _reads(self, response: requests.Response, call: ForwardCall) -> Iterator[bytes]:
        with calling(call.url):
            try:
                while chunk := response.raw.read1(READ_SIZE, decode_content=True):
                    yield chunk
                    check_deadline(call.deadline)
            except (requests.RequestException, OSError, Urllib3Error) as error:
                raise translate(error) from None
            finally:
                response.close()

    def answers(self, base_url: str) -> bool:
        """Whether the upstream answers `/models`, as `check_models` finds out (bounded the same way)."""
        return self.check_models(base_url).ok

    def check_models(self, base_url: str) -> ModelsCheck:
        """What the upstream's `/models` says to a health check (never to a request): no redirect followed, at
        most CHECK_BYTES read, decompressed (a gzip bomb stops there), all within `models_timeout` (a trickling
        body too). No key is sent, so an upstream that wants one still answers, with a 401."""
        deadline = time.monotonic() + self._models_timeout
        try:
            with enforced(deadline):
                response = self._exchange("GET", f"{base_url}/models", None, None, capped(self._timeout, deadline))
                try:
                    return self._judge(response, deadline)
                finally:
                    response.close()
        except (requests.RequestException, OSError, Urllib3Error) as error:
            return ModelsCheck(False, translate(error).message)
        except UpstreamError as error:
            return ModelsCheck(False, error.message)

    def _judge(self, response: requests.Response, deadline: float) -> ModelsCheck:
        status = response.status_code
        if 300 <= status < 400:  # not followed: its target may be an internal host
            return ModelsCheck(False, f"answered {status}, a redirect, which toolproxy does not follow")
        if status != 200:
            return ModelsCheck(status < 500, f"HTTP {status}")  # a 401 still answers: no key was sent
        return ModelsCheck(True, _model_count(self._read_at_most(response, CHECK_BYTES, deadline)))

    def _read_at_most(self, response: requests.Response, limit: int, deadline: float) -> bytes | None:
        """The body, decompressed, if it is at most `limit` bytes; None when it is longer (the rest is never read:
        urllib3 decompresses no more than each read asks for)."""
        body = bytearray()
        while chunk := response.raw.read1(min(READ_SIZE, limit + 1 - len(body)), decode_content=True):
            body += chunk
            if len(body) > limit:
                return None
            check_deadline(deadline)
        return bytes(body)

    def _post(self, request: UpstreamRequest) -> requests.Response:
        return self._send("POST", f"{request.base_url}/chat/completions", request.api_key,
                          jsonwire.encode(request.body), request.deadline, extra=request.headers)

    def _send(self, method: str, url: str, api_key: str | None, data: bytes | None = None,
              deadline: float | None = None, content_type: str = "application/json",
              extra: Mapping[str, str] | None = None) -> requests.Response:
        """The response once its headers are in; an HTTP error status is raised as the upstream's error."""
        try:
            response = self._exchange(method, url, api_key, data, capped(self._timeout, deadline), content_type,
                                      extra)
        except requests.RequestException as error:
            raise translate(error) from None
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
                  timeout: tuple[float, float], content_type: str = "application/json",
                  extra: Mapping[str, str] | None = None) -> requests.Response:
        """One request through requests' transport adapter, without a Session's per-request work (cookie jars,
        hooks, settings merges, redirects): a third of an upstream call's CPU, and nothing a proxy wants (one
        client's upstream cookies must not reach the next)."""
        prepared = requests.PreparedRequest()
        prepared.prepare(method=method, url=url, data=data,
                         headers={**(extra or {}), **_headers(api_key), "Content-Type": content_type})
        return self._session.get_adapter(url).send(prepared, stream=True, timeout=timeout,
                                                   verify=self._verify, proxies=self._proxies(url))

    def _read_body(self, response: requests.Response, deadline: float | None = None) -> bytearray:
        """The whole body, decompressed, refusing more than the configured size (a gzip bomb included) and, read
        after read, anything past the deadline (an upstream trickling bytes never trips a read timeout). Decoded
        where it was read: a copy into `bytes` was a second 256 KB answer, held until the decode ended."""
        body = bytearray()
        try:
            while chunk := response.raw.read1(READ_SIZE, decode_content=True):
                body += chunk
                if len(body) > self._max_bytes:
                    raise UpstreamBadResponse(f"the upstream response exceeded {self._max_bytes} bytes")
                check_deadline(deadline)
        except (requests.RequestException, OSError, Urllib3Error) as error:
            raise translate(error) from None
        return body

    def _decode_object(self, body: bytes | bytearray) -> dict[str, Any]:
        try:
            value = jsonwire.loads(body, self._max_depth, self._max_containers)
        except jsonwire.JsonWireError as error:
            raise UpstreamBadResponse(f"the upstream's answer is not usable JSON: {error}") from None
        if not isinstance(value, dict):
            raise UpstreamBadResponse("the upstream's answer is not a JSON object")
        return value


def _model_count(body: bytes | None) -> str:
    """How a `/models` answer reads: its number of models, or why not."""
    if body is None:
        return f"a model list over {CHECK_BYTES} bytes (not read further)"
    try:
        value = jsonwire.loads(body, 16, 10_000)
    except jsonwire.JsonWireError:
        return "not a model list"
    models = value.get("data") if isinstance(value, dict) else None
    if not isinstance(models, list):
        return "not a model list"
    return "1 model" if len(models) == 1 else f"{len(models)} models"


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def server_root(base_url: str) -> str:
    """The server a base URL names, without its API's version path (`http://h:8000/v1` -> `http://h:8000`)."""
    return base_url.removesuffix("/v1")


def public_url(url: str | None) -> str:
    """scheme://host:port: no path, and never the credentials a URL may carry."""
    if not url:
        return "demo"
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"
