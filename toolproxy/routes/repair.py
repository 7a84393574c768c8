"""One repair round: when an answer clearly tried to call a tool and failed, or a required call is missing, the
upstream is asked once more, with the exact error, before the client hears anything. None of the peers does
this; small local models usually get it right the second time.

`tool_choice` required or named is kept whatever the backend does (Ollama and LM Studio ignore it): an answer
without the call gets one corrective round even with `repair_rounds: 0`, and if that fails too the client gets
the text with `finish_reason: stop` and the record an issue, never a made-up call."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from toolproxy.transform.prompts import Demand
from toolproxy.transform.response import Outcome
from toolproxy.upstream.client import UpstreamRequest


def reason(answer: dict[str, Any], outcome: Outcome, demand: Demand | None, *, rounds_done: int = 0,
           repair_rounds: int = 1) -> str | None:
    """The corrective message to send after `rounds_done` rounds, or None when the answer is good enough or the
    rounds are spent (`repair_rounds` of them, and at least one for a call tool_choice demands)."""
    missing = is_missing(answer, demand)
    if rounds_done >= (max(repair_rounds, 1) if missing else repair_rounds):
        return None
    if outcome.failures:
        return ("Your previous answer tried to call a tool, but the call could not be used: "
                + "; ".join(outcome.failures)
                + ". Write the tool call again, correctly: only the tools you were given, arguments that match "
                  "their parameters, in exactly the format you were shown.")
    if missing:
        assert demand is not None
        wanted = f"the tool `{demand.name}`" if demand.name else "one of the tools"
        return f"You must call {wanted} in this answer. Answer again, with the tool call."
    return None


def is_missing(answer: dict[str, Any], demand: Demand | None) -> bool:
    """Whether tool_choice demands a call (of one tool, when named) that the answer does not make."""
    if demand is None or not demand.required:
        return False
    names = [call["function"]["name"] for choice in answer["choices"]
             for call in choice["message"].get("tool_calls") or []]
    return not names or (demand.name is not None and demand.name not in names)


def unkept(answer: dict[str, Any], demand: Demand | None, rounds: int) -> str | None:
    """The issue for the record when the call tool_choice demands is still missing after the rounds."""
    if not is_missing(answer, demand):
        return None
    assert demand is not None
    wanted = f"a call to {demand.name!r}" if demand.name else "a tool call"
    return (f"tool_choice asked for {wanted}; the upstream answered without it, {rounds + 1} time(s): the text "
            "went to the client as it was, with finish_reason stop")


def ask_again(request: UpstreamRequest, completion: dict[str, Any], correction: str) -> UpstreamRequest:
    """The same request with the failed answer and the correction appended to the conversation."""
    failed = completion["choices"][0]["message"].get("content") or ""
    messages = [*request.body["messages"], {"role": "assistant", "content": failed},
                {"role": "user", "content": correction}]
    return replace(request, body={**request.body, "messages": messages})
