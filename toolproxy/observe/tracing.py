"""OpenTelemetry traces, when configured: one SERVER span per proxied request and one CLIENT span per upstream call,
named and described by the GenAI semantic conventions, with the proxy's own facts under `toolproxy.*`. A client's
W3C `traceparent` is continued, and each upstream call carries its own span's.

A span starts when its request or call starts (so its id can go upstream) and takes its attributes from the finished
record. This module imports the SDK at the top: routes/proxy.py imports it only when tracing is on, so a proxy
without tracing never loads it and its requests pay one `is None` per hook."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from toolproxy.observe.genai import Content, input_messages, output_messages
from toolproxy.observe.record import TransformRecord, usable_secrets
from toolproxy.upstream.client import UpstreamRequest
from toolproxy.upstream.events import EventStream
from toolproxy.version import __version__


class Headers(Protocol):
    """A request's headers (werkzeug's, case-blind)."""

    def get(self, key: str) -> str | None: ...


_PROPAGATOR = TraceContextTextMapPropagator()


class Tracing:
    """The tracer of one app: its provider, batching exporter and propagator."""

    def __init__(self, content: Content, exporter: SpanExporter | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        attributes = {SERVICE_VERSION: __version__}
        if not (environ or {}).get("OTEL_SERVICE_NAME"):
            attributes[SERVICE_NAME] = "toolproxy"  # the SDK would say unknown_service
        self._provider = TracerProvider(resource=Resource.create(attributes))
        self._provider.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter()))
        self._tracer = self._provider.get_tracer("toolproxy", __version__)
        self._content = Content(content.capture, usable_secrets(content.secrets), content.limit)

    def begin(self, headers: Headers, method: str, path: str, started: float) -> RequestTrace:
        """The request's SERVER span, from `started` (time.time()), child of the client's `traceparent` if any."""
        parent = _PROPAGATOR.extract({key: value for key in ("traceparent", "tracestate")
                                      if (value := headers.get(key)) is not None})
        span = self._tracer.start_span(f"{method} {path}", parent, SpanKind.SERVER, start_time=_ns(started),
                                       attributes={"http.request.method": method, "url.path": path,
                                                   "http.route": path})
        return RequestTrace(self._tracer, span, self._content)

    def flush(self, timeout_seconds: float = 5.0) -> bool:
        return self._provider.force_flush(int(timeout_seconds * 1000))

    def shutdown(self) -> None:
        self._provider.shutdown()


@dataclass(slots=True)
class UpstreamSpan:
    """One upstream call's CLIENT span, and the headers that carry its context upstream."""

    span: Span
    stream: bool
    headers: dict[str, str] = field(default_factory=dict)
    answered: bool = False  # its finish reasons and usage are set (a whole answer); a stream's come from the record
    ended: bool = False

    def answer(self, completion: Mapping[str, Any], content: Content) -> None:
        """What a whole answer says: why each choice stopped, the tokens, the model that answered."""
        choices = [choice for choice in completion.get("choices") or [] if isinstance(choice, dict)]
        self.span.set_attribute("gen_ai.response.finish_reasons",
                                [str(choice.get("finish_reason") or "") for choice in choices])
        _set_usage(self.span, completion.get("usage"))
        for key, name in (("model", "gen_ai.response.model"), ("id", "gen_ai.response.id")):
            if isinstance(completion.get(key), str):
                self.span.set_attribute(name, completion[key])
        if content.capture:
            self.span.set_attribute("gen_ai.output.messages", output_messages(choices, content))
        self.answered = True

    def end(self, error: BaseException | None = None) -> None:
        if self.ended:
            return
        if error is not None:
            self.span.set_attribute("error.type", getattr(error, "code", None) or type(error).__name__)
            self.span.set_status(Status(StatusCode.ERROR, str(getattr(error, "message", "")) or None))
        self.span.end()
        self.ended = True


class RequestTrace:
    """One request's spans: the SERVER span, and a CLIENT span per upstream call."""

    def __init__(self, tracer: trace.Tracer, span: Span, content: Content) -> None:
        self._tracer, self._span, self._content = tracer, span, content
        self.calls: list[UpstreamSpan] = []

    def upstream(self, body: Mapping[str, Any], base_url: str | None, *, stream: bool, provider: str) -> UpstreamSpan:
        """A CLIENT span for the call about to go upstream with `body`; its `headers` go with it. `provider`: the
        server's kind (upstream/backends.py: vllm, ollama, ...), as the conventions name one they do not list."""
        model = str(body.get("model") or "")
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                                      "gen_ai.request.model": model, "gen_ai.request.stream": stream}
        attributes |= _server(base_url) | _parameters(body)
        if self._content.capture:
            attributes["gen_ai.input.messages"] = input_messages(body.get("messages"), self._content)
        span = self._tracer.start_span(f"chat {model}".strip(), trace.set_span_in_context(self._span),
                                       SpanKind.CLIENT, attributes=attributes)
        call = UpstreamSpan(span, stream)
        _PROPAGATOR.inject(call.headers, trace.set_span_in_context(span))
        self.calls.append(call)
        return call

    def complete(self, request: UpstreamRequest, send: Callable[[UpstreamRequest], dict[str, Any]],
                 provider: str) -> dict[str, Any]:
        """`send(request)` inside a CLIENT span whose context goes upstream with it."""
        call = self.upstream(request.body, request.base_url, stream=False, provider=provider)
        try:
            completion = send(replace(request, headers=call.headers))
        except BaseException as error:
            call.end(error)
            raise
        call.answer(completion, self._content)
        call.end()
        return completion

    def stream(self, request: UpstreamRequest, open_stream: Callable[[UpstreamRequest], EventStream],
               provider: str) -> EventStream:
        """`open_stream(request)` in a CLIENT span that ends with the request's record (`finish`)."""
        call = self.upstream(request.body, request.base_url, stream=True, provider=provider)
        try:
            return open_stream(replace(request, headers=call.headers))
        except BaseException as error:
            call.end(error)
            raise

    def finish(self, record: TransformRecord) -> None:
        """The record's facts on the SERVER span, and every span ended (a stream's when its record is written)."""
        for call in self.calls:
            if not call.ended:
                _stream_facts(call, record, self._content)
                call.end()
        span = self._span
        span.set_attributes(_request_facts(record))
        if isinstance(record.status, int):
            span.set_attribute("http.response.status_code", record.status)
        if isinstance(record.status, int) and record.status >= 500:
            span.set_attribute("error.type", record.error_code or str(record.status))
            span.set_status(Status(StatusCode.ERROR, record.error_code or None))
        span.end()


def _request_facts(record: TransformRecord) -> dict[str, Any]:
    calls = [call for call in record.calls if isinstance(call, dict)]
    facts: dict[str, Any] = {
        "gen_ai.request.model": record.model, "toolproxy.record_id": record.request_id,
        "toolproxy.route": record.route, "toolproxy.protocol": record.protocol, "toolproxy.mode": record.mode,
        "toolproxy.dialects": list(record.dialects),
        "toolproxy.calls": [str(call.get("name") or "") for call in calls if call.get("valid") is not False],
        "toolproxy.calls_invalid": sum(call.get("valid") is False for call in calls),
        "toolproxy.repairs": record.repairs, "toolproxy.issues": len(record.issues),
        "toolproxy.overhead_ms": round(record.overhead_ms, 3), "toolproxy.upstream_ms": round(record.upstream_ms, 3),
    }
    if record.strategy:
        facts["toolproxy.strategy"] = record.strategy
    if record.first_byte_ms is not None:
        facts["toolproxy.first_byte_ms"] = round(record.first_byte_ms, 3)
    if record.finish_reason:
        facts["gen_ai.response.finish_reasons"] = [record.finish_reason]
    if record.status == "client_disconnected":
        facts["toolproxy.client_disconnected"] = True
    return facts


def _stream_facts(call: UpstreamSpan, record: TransformRecord, content: Content) -> None:
    """A streamed call ends with its record: what the stream said is what the record kept."""
    if not call.answered and record.finish_reason:
        call.span.set_attribute("gen_ai.response.finish_reasons", [record.finish_reason])
    if content.capture and not call.answered and record.raw_text:
        choices = [{"message": {"role": "assistant", "content": record.raw_text},
                    "finish_reason": record.finish_reason or ""}]
        call.span.set_attribute("gen_ai.output.messages", output_messages(choices, content))
    if record.error_code and not (isinstance(record.status, int) and record.status < 400):
        call.span.set_attribute("error.type", record.error_code)
        call.span.set_status(Status(StatusCode.ERROR, record.error_code))


def _set_usage(span: Span, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key, name in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                      ("completion_tokens", "gen_ai.usage.output_tokens")):
        if isinstance(usage.get(key), int) and not isinstance(usage.get(key), bool):
            span.set_attribute(name, usage[key])


_PARAMETERS = {"temperature": "gen_ai.request.temperature", "top_p": "gen_ai.request.top_p",
               "max_tokens": "gen_ai.request.max_tokens", "max_completion_tokens": "gen_ai.request.max_tokens",
               "seed": "gen_ai.request.seed"}


def _parameters(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters sent, where they are plain numbers."""
    return {name: body[key] for key, name in _PARAMETERS.items()
            if isinstance(body.get(key), (int, float)) and not isinstance(body.get(key), bool)}


def _server(base_url: str | None) -> dict[str, Any]:
    """server.address and server.port of the upstream (never its path or credentials); none for the demo model."""
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    found: dict[str, Any] = {"server.address": parts.hostname or ""}
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    if port:
        found["server.port"] = port
    return found


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)
