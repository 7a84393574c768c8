"""One repair round: when an answer clearly tried to call a tool and failed, or a required call is missing, the
upstream is asked once more, with the exact error, before the client hears anything. None of the peers does
this; small local models usually get it right the second time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from toolproxy.transform.prompts import Demand
from toolproxy.transform.response import Outcome
from toolproxy.upstream.client import UpstreamRequest


def reason(answer: dict[str, Any], outcome: Outcome, demand: Demand | None) -> str | None:
    """The corrective message to send, or None when the answer is good enough."""
    if outcome.failures:
        return ("Your previous answer tried to call a tool, but the call could not be used: "
                + "; ".join(outcome.failures)
                + ". Write the tool call again, correctly: only the tools you were given, arguments that match "
                  "their parameters, in exactly the format you were shown.")
    has_calls = any(choice["message"].get("tool_calls") for choice in answer["choices"])
    if demand is not None and demand.required and not has_calls:
        wanted = f"the tool `{demand.name}`" if demand.name else "one of the tools"
        return f"You must call {wanted} in this answer. Answer again, with the tool call."
    return None


def ask_again(request: UpstreamRequest, completion: dict[str, Any], correction: str) -> UpstreamRequest:
    """The same request with the failed answer and the correction appended to the conversation."""
    failed = completion["choices"][0]["message"].get("content") or ""
    messages = [*request.body["messages"], {"role": "assistant", "content": failed},
                {"role": "user", "content": correction}]
    return replace(request, body={**request.body, "messages": messages})
