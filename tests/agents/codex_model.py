"""A scripted chat model for Codex's turns through the proxy: asked a task that carries its marker, it writes one
call as text (a shell command through Codex's `exec_command`, or a patch through its freeform `apply_patch`, which
reaches the model as a function with one string parameter, `input`), and once that call's result has come back
after the task it ends the turn with text. Each answer carries reasoning too, as a thinking model's would (Codex
gets it as a reasoning item and sends it back, which the proxy keeps from the upstream). Any other request (none
is expected) gets "OK."."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tests.agents.scripted_model import INTRO, render, text_of
from tests.fake_upstream import Received, Wire, as_chunks, completion

FORMS = ("hermes", "qwen3_coder")
THOUGHT = "The task needs a tool first, then a short answer."
# The shell tools of Codex releases, and how each takes a command line.
SHELLS = {"exec_command": lambda line: {"cmd": line}, "shell_command": lambda line: {"command": line},
          "shell": lambda line: {"command": ["bash", "-lc", line]}}


@dataclass
class CodexModel:
    """`tool` "shell" runs `command`; "patch" applies `patch`. `result` is what the call's output must hold for
    the turn to end; `final` is the text that ends it."""

    form: str
    tool: str
    marker: str
    result: str
    final: str
    command: str = ""
    patch: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Received, wire: Wire) -> None:
        body = request.json()
        text = self.answer(body)
        with self._lock:
            self.requests.append(body)
            self.answers.append(text)
        payload = completion(text, reasoning_content=THOUGHT)
        if body.get("stream"):
            chunks = as_chunks(payload)
            thinking = {**chunks[0], "choices": [{"index": 0, "delta": {"reasoning_content": THOUGHT},
                                                  "finish_reason": None}]}
            wire.send_events([thinking, *chunks])
        else:
            wire.send_json(payload)

    def answer(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        if not any(self.is_instruction(message) for message in messages):
            return "OK."
        if self.has_result(messages):
            return self.final
        call = self.call(body)
        return render(self.form, *call) if call is not None else "I have no tool for that."

    def call(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        offered = {tool["function"]["name"] for tool in body.get("tools") or []}
        if self.tool == "patch":
            return ("apply_patch", {"input": self.patch}) if "apply_patch" in offered else None
        name = next((name for name in SHELLS if name in offered), None)
        return (name, SHELLS[name](self.command)) if name else None

    def has_result(self, messages: list[dict[str, Any]]) -> bool:
        """The call's output came back after the last instruction (as a tool message)."""
        last = max((i for i, m in enumerate(messages) if self.is_instruction(m)), default=-1)
        return any(m.get("role") == "tool" and self.result in text_of(m.get("content")) for m in messages[last + 1:])

    def is_instruction(self, message: dict[str, Any]) -> bool:
        return message.get("role") == "user" and self.marker in text_of(message.get("content"))

    def calls_made(self) -> int:
        return sum(answer.startswith(INTRO) for answer in self.answers)
