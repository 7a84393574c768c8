"""What one request leaves in the transform log: the record, filled from the exchange once it is over."""

from __future__ import annotations

import json
import os
import secrets
import string
import time
from typing import TYPE_CHECKING, Any

from toolproxy.observe.translog import TransformRecord
from toolproxy.routes.proxy import public_url

if TYPE_CHECKING:
    from toolproxy.routes.chat import Exchange

_ALPHABET = string.ascii_letters + string.digits


def new_record(client: str, address: str, request_bytes: int) -> TransformRecord:
    request_id = "req_" + "".join(secrets.choice(_ALPHABET) for _ in range(16))
    return TransformRecord(request_id, time.time(), client=client, address=address, request_bytes=request_bytes,
                           worker=os.getpid())


def fill(record: TransformRecord, exchange: Exchange, status: int | str, error: str | None,
         error_code: str | None = None) -> TransformRecord:
    outcome, request = exchange.outcome, exchange.request
    record.model, record.route, record.status, record.error = request.model, exchange.route, status, error
    record.error_code = error_code
    record.mode = exchange.target.tool_mode + (" vtc" if exchange.vtc else "")
    record.upstream = public_url(exchange.target.upstream)
    record.dialects = sorted(set(outcome.dialects))
    record.issues = list(outcome.issues)
    record.actions = [issue for issue in outcome.issues if issue.startswith(("access policy", "Stopped by"))]
    record.repairs = exchange.repairs
    record.tools = request.body.get("tools") or (
        [{"name": name, "parameters": schema} for name, schema in exchange.tools.items()] if exchange.vtc else None)
    record.raw_text = "\n\n".join(exchange.raw_texts)
    record.calls = [{**detail, "valid": not any(f"'{detail['name']}'" in failure for failure in outcome.failures)}
                    for detail in outcome.details]
    _fill_answer(record, exchange.final)
    total = time.monotonic() - exchange.started
    upstream = exchange.upstream_seconds + (exchange.relay.waited if exchange.relay is not None else 0.0)
    record.upstream_ms, record.overhead_ms = upstream * 1000, max(0.0, total - upstream) * 1000
    return record


def _fill_answer(record: TransformRecord, answer: dict[str, Any] | None) -> None:
    if not answer or not answer.get("choices"):
        return
    message = answer["choices"][0].get("message") or {}
    record.finish_reason = answer["choices"][0].get("finish_reason")
    calls = [{"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
             for call in message.get("tool_calls") or []]
    record.client_content = message.get("content")
    record.client_text = (message.get("content") or "") + (
        "\n\n" + json.dumps(calls, ensure_ascii=False, indent=2) if calls else "")
    record.response_bytes = len(record.client_text.encode("utf-8", errors="replace"))
