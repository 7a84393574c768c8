"""Chat-completion chunks the proxy writes itself: a finished answer told as a stream, the role chunk that opens
a committed one, and the shape of one choice's delta."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from toolproxy.transform.response import new_completion_id


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    """The id, created and model every chunk of one stream shares."""

    id: str
    created: int
    model: str

    @classmethod
    def new(cls, model: str) -> ChunkHeader:
        return cls(new_completion_id(), int(time.time()), model)

    def chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": choices, **extra}


def role_chunk(header: ChunkHeader, index: int = 0) -> dict[str, Any]:
    return header.chunk([delta_of(index, {"role": "assistant"})])


def completion_chunks(completion: dict[str, Any], header: ChunkHeader, *, include_usage: bool,
                      role_sent: bool) -> list[dict[str, Any]]:
    """A finished answer as a stream: role, content, one chunk per tool call, finish, usage."""
    chunks: list[dict[str, Any]] = []
    for position, choice in enumerate(completion["choices"]):
        index = choice.get("index", position)
        message = choice["message"]
        if not role_sent:
            chunks.append(role_chunk(header, index))
        if message.get("content"):
            chunks.append(header.chunk([delta_of(index, {"content": message["content"]})]))
        for call_index, call in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{"index": call_index, **call}]}
            chunks.append(header.chunk([delta_of(index, delta)]))
        chunks.append(header.chunk([delta_of(index, {}, choice.get("finish_reason") or "stop")]))
    if include_usage:
        chunks.append(header.chunk([], usage=completion.get("usage")))
    return chunks


def delta_of(index: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
