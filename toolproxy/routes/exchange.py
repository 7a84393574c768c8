"""One request on its way through the proxy: the `Exchange` every stage fills in, and what it leaves in the
transform log when it is over."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from toolproxy.config.settings import ModelSettings, Settings
from toolproxy.dialects.base import ToolIndex
from toolproxy.errors import UpstreamError
from toolproxy.meaning.access import AccessPolicy
from toolproxy.meaning.extraction import Policy
from toolproxy.observe import kept
from toolproxy.observe.record import TransformRecord, fill_answer
from toolproxy.routes import repair
from toolproxy.routes.departure import call_watching
from toolproxy.routes.offload import off_loop, text_size
from toolproxy.transform import request_transform
from toolproxy.transform.chat_request import ChatRequest
from toolproxy.transform.response import Outcome, ToolRequest, transform_completion
from toolproxy.upstream import constrain
from toolproxy.upstream.backends import Backend, prepare
from toolproxy.upstream.client import Upstream, UpstreamRequest, public_url
from toolproxy.upstream.events import EventStream, Shortcut
from toolproxy.upstream.relay import Relay

if TYPE_CHECKING:
    from toolproxy.observe.tracing import RequestTrace  # imported only where tracing is on (routes/proxy.py)

logger = logging.getLogger("toolproxy.routes.chat")  # the request's own line comes with its record (observe/logs.py)


@dataclass(slots=True)
class Exchange:
    """One request on its way through the proxy; each stage reads what the earlier ones settled and writes what
    it learns into the record, where it arises."""

    request: ChatRequest
    target: ModelSettings
    settings: Settings
    upstream: Upstream
    upstream_api_key: str | None
    record: TransformRecord  # what the transform log will show
    started: float = field(default_factory=time.monotonic)
    outcome: Outcome = field(default_factory=Outcome)
    vtc: bool = False  # a client that carries tool calls as XML in content (vtc.py)
    tools: ToolIndex = field(default_factory=dict)  # the tools calls may name: the request's, or the client prompt's
    body: dict[str, Any] = field(default_factory=dict)  # what goes upstream (before the per-model transform)
    sink: Callable[[TransformRecord], None] | None = None  # where the record goes when the request is over
    upstream_seconds: float = 0.0
    relay: Relay[Any] | None = None
    client: Any = None  # the client's socket, watched while nothing is written (departure.py); None: unwatched
    notes: list[str] = field(default_factory=list)  # what the route decided, kept across repair rounds
    # The front end's shortcut for a passthrough stream (routes/passthrough.py): upstream events its client may
    # get as they came. None: every event is decoded into neutral items.
    forward: Callable[[Any], Shortcut | None] | None = None
    backend: Backend = field(default_factory=Backend)  # the upstream's kind, as known when the request came
    refused: set[str] = field(default_factory=set)  # tools whose strict schema the server refused (per worker)
    trace: RequestTrace | None = None  # its spans, when tracing is on (observe/tracing.py)

    def __post_init__(self) -> None:
        self.tools = self.tools or self.request.tools
        self.body = self.body or self.request.body
        record, target = self.record, self.target
        record.model, record.upstream = self.request.model, public_url(target.upstream)
        record.mode = target.tool_mode + (" vtc" if self.vtc else "")
        record.tools = self.request.body.get("tools")

    def offer(self, tools: ToolIndex) -> None:
        """The tools calls may name, when the client declared them elsewhere (a VTC client's prompt)."""
        self.tools = tools
        if not self.record.tools:
            self.record.tools = [{"name": name, "parameters": schema} for name, schema in tools.items()]

    def answered(self, texts: list[str], answer: dict[str, Any] | None) -> None:
        """The model's text (per choice, as the upstream wrote it) and the answer the client gets."""
        self.record.raw_text = "\n\n".join(texts)
        self.delivered(answer)

    def delivered(self, answer: dict[str, Any] | None) -> None:
        """The answer as the client gets it (chat-completion shape), when a route wrote it anew."""
        fill_answer(self.record, answer)

    def first_byte(self) -> None:
        """The first content or call is going to the client."""
        if self.record.first_byte_ms is None:
            self.record.first_byte_ms = (time.monotonic() - self.started) * 1000

    def upstream_request(self, *, stream: bool) -> UpstreamRequest:
        body = prepare(request_transform.upstream_body(self.body, self.target, stream=stream), self.backend,
                       constrain=self.target.constrain, unconstrainable=frozenset(self.refused))
        return UpstreamRequest(self.target.upstream or "", body, self.upstream_api_key,
                               deadline=self.started + self.settings.request_timeout)

    def tool_request(self) -> ToolRequest:
        """The tools the answer may call: all, the one tool_choice names, or none."""
        target, demand = self.target, request_transform.demand_of(self.request.body.get("tool_choice"))
        tools = self.tools
        if demand is not None and demand.name:
            tools = {demand.name: tools[demand.name]}
        policy = Policy(target.unknown_tools, target.invalid_arguments, target.reasoning,
                        request_transform.demanded_tool(demand, tools))
        return ToolRequest(tools, target.dialects, policy,
                           parallel_calls=self.request.body.get("parallel_tool_calls") is not False,
                           allow_calls=demand is not None, id_style=target.id_style,
                           access=AccessPolicy(target.allow_tools, target.deny_tools, target.deny_arguments))

    def transform(self, completion: dict[str, Any]) -> dict[str, Any]:
        request, model = self.tool_request(), self.request.model if self.target.upstream_model else None
        answer, self.outcome = off_loop(lambda: transform_completion(completion, request, model=model),
                                        text_size(completion))
        self.outcome.repairs = self.record.repairs
        self.answered([model_text(choice) for choice in completion.get("choices") or []], answer)
        return answer

    def complete(self, upstream_request: UpstreamRequest) -> dict[str, Any]:
        started = time.monotonic()
        try:
            if self.trace is not None:
                return self.trace.complete(upstream_request, self._complete, self.provider())
            return self._complete(upstream_request)
        finally:
            self.upstream_seconds += time.monotonic() - started

    def _complete(self, upstream_request: UpstreamRequest) -> dict[str, Any]:
        return call_watching(lambda: self._complete_constrained(upstream_request), self.client)

    def _complete_constrained(self, upstream_request: UpstreamRequest) -> dict[str, Any]:
        """A 400 for the strict schemas this proxy added is asked once more without them, and remembered."""
        try:
            return self.upstream.complete(upstream_request)
        except UpstreamError as error:
            keys = constrain.without_strict(error, self.body, upstream_request.body)
            if not keys:
                raise
            self.refused.update(keys)
            self.notes.append(f"constrain: the upstream refused strict schemas ({error.message[:200]}); asked again "
                              f"without strict for {', '.join(key.partition(':')[0] for key in keys)}")
            return self.upstream.complete(replace(upstream_request, body=constrain.unmarked(upstream_request.body,
                                                                                            keys)))

    def provider(self) -> str:
        """The upstream's kind for a span: the built-in model, or the server's kind as known (generic if not)."""
        return self.backend.kind if self.target.upstream else "toolproxy.demo"

    def open_stream(self) -> EventStream:
        """The upstream's event stream for this request."""
        upstream_request = self.upstream_request(stream=True)
        if self.trace is not None:
            return self.trace.stream(upstream_request, self.upstream.stream, self.provider())
        return self.upstream.stream(upstream_request)

    def complete_tools(self) -> dict[str, Any]:
        """The upstream's answer with its calls extracted; when a call attempt failed or a required call is
        missing, the upstream is asked once more (per `repair_rounds`) with the exact error."""
        upstream_request = self.upstream_request(stream=False)
        completion = self.complete(upstream_request)
        answer = self.transform(completion)
        demand = request_transform.demand_of(self.request.body.get("tool_choice"))
        rounds = self.target.repair_rounds
        while (reason := repair.reason(answer, self.outcome, demand, rounds_done=self.record.repairs,
                                       repair_rounds=rounds)) is not None:
            self.record.repairs += 1
            upstream_request = repair.ask_again(upstream_request, completion, reason)
            completion = self.complete(upstream_request)
            answer = self.transform(completion)
        if (issue := repair.unkept(answer, demand, self.record.repairs)) is not None:
            self.outcome.issues.append(issue)
        return answer

    def log(self, status: int | str, error: str | None = None, error_code: str | None = None) -> None:
        if self.sink is not None:
            try:
                self.sink(fill_record(self.record, self, status, error, error_code))
            except Exception:  # an outer edge: the transform log must never fail a request
                logger.exception("could not record the transform")


def model_text(choice: dict[str, Any]) -> str:
    """What the model wrote in one choice: its content, and native calls as the server returned them."""
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return ""
    calls = message.get("tool_calls")
    return str(message.get("content") or "") + (f"\n\n[native tool_calls] {json.dumps(calls)}" if calls else "")


def fill_record(record: TransformRecord, exchange: Exchange, status: int | str, error: str | None,
                error_code: str | None = None) -> TransformRecord:
    """What is known only at the end: how it ended, the times, and what the transform did. A stream's outcome is
    complete only once its last choice has finished, so it is read here, once, rather than choice by choice."""
    outcome = exchange.outcome
    record.status, record.error, record.error_code = status, error, error_code
    record.dialects = sorted(set(outcome.dialects))
    record.issues = [*exchange.notes, *outcome.issues]
    record.actions = [issue for issue in outcome.issues if issue.startswith(("access policy", "Stopped by"))]
    record.denied = list(outcome.denied)
    record.attempts = [list(attempt) for attempt in outcome.attempts]
    record.calls = [{**detail, "valid": not any(f"'{detail['name']}'" in failure for failure in outcome.failures)}
                    for detail in outcome.details]
    total = time.monotonic() - exchange.started
    upstream = exchange.upstream_seconds + (exchange.relay.waited if exchange.relay is not None else 0.0)
    record.upstream_ms, record.overhead_ms = upstream * 1000, max(0.0, total - upstream) * 1000
    record.backend = exchange.backend.label if exchange.target.upstream else ""
    kept.keep(record, exchange.settings.log_field_chars)  # the rest of a long answer goes with the request
    return record


