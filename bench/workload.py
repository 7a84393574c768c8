"""What the load benchmark sends and what its scripted upstream answers: canned bodies, built once.

The upstream picks its answer by the request's model name (`bench-small`, `bench-big`, `bench-stream`,
`bench-slow`), which every target forwards unchanged, so it never has to decode a body.
"""

from __future__ import annotations

import json
from typing import Any

READ = {"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path"]}}}
WRITE = {"type": "function", "function": {"name": "write", "description": "Write a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]}}}
TOOLS = [READ, WRITE]

STREAM_EVENTS = 200
SLOW_GAP = 0.05


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def completion(text: str) -> bytes:
    """A chat.completion as vLLM writes it, the tool call left in the text (no tool parser on the server)."""
    return dumps({"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "bench",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                               "logprobs": None, "finish_reason": "stop", "stop_reason": None}],
                  "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160}})


SMALL_TEXT = 'I will read it.\n<tool_call>\n{"name": "read", "arguments": {"path": "/src/app.py", "limit": "50"}}' \
             "\n</tool_call>"


def big_text(size: int = 256 * 1024) -> str:
    """A `write` call carrying a source file, so that the whole answer is about `size` bytes on the wire."""
    lines, total, number = [], 0, 0
    while total < size * 0.8:  # JSON escaping of newlines and quotes (twice) brings it to about `size`
        line = f'def handler_{number}(request):\n    return {{"status": "ok", "id": {number}}}  # see "docs"\n'
        lines.append(line)
        total += len(line)
        number += 1
    call = {"name": "write", "arguments": {"path": "src/handlers.py", "content": "".join(lines)}}
    return "Writing the file.\n<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


def huge_prose_with_call(size: int = 8 * 1024 * 1024) -> str:
    """An answer of `size` characters of prose ending in one `read` call (bench/hostile.py: work off the loop)."""
    prose = ("The file holds many lines of ordinary text, and no call among them. " * (size // 60 + 1))[:size]
    return prose + '\n<tool_call>{"name": "read", "arguments": {"path": "a.py"}}</tool_call>'


def adversarial_calls(size: int = 1024 * 1024) -> str:
    """Almost-JSON calls opened and never closed, `size` characters of them (the worst known for extraction)."""
    piece = '{"name": "read", "arguments": {'
    return (piece * (size // len(piece) + 1))[:size]


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish:
        choice["stop_reason"] = None
    event = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench",
             "choices": [choice]}
    return b"data: " + dumps(event) + b"\n\n"


def stream_events(count: int = STREAM_EVENTS) -> list[bytes]:
    """vLLM's shape: a role chunk, `count - 2` tokens, a finish chunk, then [DONE]."""
    tokens = [chunk({"content": f"token{n} "}) for n in range(count - 2)]
    return [chunk({"role": "assistant", "content": ""}), *tokens, chunk({}, "stop"), b"data: [DONE]\n\n"]


def request_body(model: str, *, tools: bool, stream: bool = False, messages: list[Any] | None = None) -> bytes:
    body: dict[str, Any] = {"model": model, "messages": messages or [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Read /src/app.py and tell me what it does."}]}
    if tools:
        body["tools"] = TOOLS
    if stream:
        body["stream"] = True
    return dumps(body)


# The other wire protocols toolproxy speaks to its clients, each asking the same of the same upstream answers as
# `request_body` (the model name picks the answer): path, and body for (model, stream); bench/load.py gives each
# protocol the chat scenarios' rows.
PROTOCOLS: dict[str, tuple[str, Any]] = {
    "Responses": ("/v1/responses", lambda model, stream: dumps({
        "model": model, "instructions": "You are a coding agent.",
        "input": "Read /src/app.py and tell me what it does.", "stream": stream,
        "tools": [{"type": "function", **tool["function"]} for tool in TOOLS]})),
    "Messages": ("/v1/messages", lambda model, stream: dumps({
        "model": model, "max_tokens": 4096, "system": "You are a coding agent.",
        "messages": [{"role": "user", "content": "Read /src/app.py and tell me what it does."}], "stream": stream,
        "tools": [{"name": tool["function"]["name"], "description": tool["function"]["description"],
                   "input_schema": tool["function"]["parameters"]} for tool in TOOLS]})),
}


def transcript(size: int = 1024 * 1024) -> list[dict[str, Any]]:
    """An agent's long conversation: rounds of a `read` call and its result, about `size` bytes of JSON."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 40},
                                      {"role": "user", "content": "Refactor the handlers."}]
    result = "".join(f"line {n}: value = compute({n}) # \"quoted\"\n" for n in range(250))
    number = 0
    while len(dumps(messages)) < size:
        call_id = f"call_{number:024d}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "read", "arguments": json.dumps({"path": f"src/m{number}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        number += 1
    messages.append({"role": "user", "content": "Go on."})
    return messages
