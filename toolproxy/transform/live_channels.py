"""Replies that open on a channel header (gpt-oss harmony with its tokens or stripped, `<|start|>assistant...`,
Functionary's `>>>`) are split by meaning/channels.py, which reads the whole reply: whether `analysis...` is
reasoning depends on an `assistant<channel>` header that may come much later. Such a reply is therefore held
and answered whole at its end, exactly as buffered answers it; every other reply streams live (transform/live.py).
Pure, no I/O."""

from __future__ import annotations

from typing import Any

from toolproxy.dialects.base import Call
from toolproxy.meaning import reasoning
from toolproxy.meaning.channels import CHANNEL, START, TO_ALL
from toolproxy.meaning.extraction import Extraction
from toolproxy.transform.live import Delta, LiveChoice
from toolproxy.transform.native_stream import NativeCalls
from toolproxy.transform.response import ToolRequest, transform_completion

# What a reply opening on a channel header starts with (after white space): Harmony stripped of its tokens
# (`analysis...`), with them, and Functionary v3.2 (`>>>all` or `>>>NAME`).
_OPENERS = ("analysis", CHANNEL, START, ">>>")


def opens_with_channel(head: str, final: bool = False) -> bool | None:
    """True when the reply opens on a channel header, False when it does not, None while it could still."""
    stripped = head.lstrip()
    if stripped.startswith(_OPENERS):
        return True
    if not final and (not stripped or any(opener.startswith(stripped) for opener in _OPENERS)):
        return None
    return False


class LiveReply:
    """One streamed choice: live unless it opens on a channel header, then whole at its end."""

    def __init__(self, request: ToolRequest, limit: int, verbatim: bool = False) -> None:
        self._request = request
        self._live = LiveChoice(request, limit, verbatim)
        self._head: list[str] = []  # the opening while it could still be a channel header
        self._mode = ""  # "", "live" or "whole"
        self._whole: list[str] = []
        self._recent = ""  # the end of the text so far, to see a channel token arrive later

    @property
    def native(self) -> NativeCalls:
        return self._live.native

    @property
    def extraction(self) -> Extraction:
        return self._live.extraction

    @property
    def calls(self) -> list[Call]:
        return self._live.calls

    def feed(self, text: str) -> Delta:
        if self._mode == "whole":
            self._whole.append(text)
            return Delta()
        if self._mode == "live":
            self._watch(text)
            return self._live.feed(text)
        self._head.append(text)
        verdict = opens_with_channel("".join(self._head))
        return Delta() if verdict is None else self._decide(verdict)

    def feed_reasoning(self, text: str) -> Delta:
        return self._live.feed_reasoning(text)

    def finish(self) -> Delta:
        out = Delta()
        if not self._mode:
            out = self._decide(bool(opens_with_channel("".join(self._head), final=True)))
        if self._mode == "live":
            out.extend(self._live.finish())
            return out
        return self._answer_whole()

    def _decide(self, whole: bool) -> Delta:
        head, self._head = "".join(self._head), []
        self._mode = "whole" if whole else "live"
        return self.feed(head)

    def _watch(self, text: str) -> None:
        """Channel markup after text went out is the one thing this reply cannot match: say so."""
        seen = self._recent + text
        if CHANNEL in seen or TO_ALL in seen:
            self._live.extraction.issues.append("incremental: channel markup came after text was sent")
        self._recent = seen[-len(CHANNEL) :]

    def _answer_whole(self) -> Delta:
        text = "".join(self._whole)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self._live.server_thought:
            message["reasoning_content"] = "".join(self._live.server_thought)
        native = [_wire(call) for call in self.native.finish()]
        self._live.extraction.issues += self.native.dropped
        if native:
            message["tool_calls"] = native
        answer, outcome = transform_completion(
            {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}, self._request)
        extraction = self._live.extraction
        extraction.issues += outcome.issues
        extraction.failures += outcome.failures
        extraction.denied += outcome.denied
        calls = [Call(d["name"], d["arguments"], d["source"], d["dialect"]) for d in outcome.details]
        self._live.calls.extend(calls)
        inline = reasoning.split(text).reasoning if self._request.policy.reasoning == "move" else ""
        whole = Delta(reasoning=inline)
        whole.say(answer["choices"][0]["message"].get("content") or "")
        for call in calls:
            whole.call(call)
        return whole


def _wire(call: Call) -> Any:
    return {"type": "function", "function": {"name": call.name, "arguments": call.arguments}}
