"""Scripted upstreams that behave as each server kind does, for tests/fake_upstream.py's `script`: what each
serves for the proxy's probes (upstream/backends.py says where each fact comes from), and how each treats
`tool_choice` and `strict` on a chat request.

- vllm / sglang: `strict: true` on a tool whose schema uses `$ref`/`$defs` or `minItems` is a 400, as xgrammar
  refuses them; `tool_choice` required/named is honoured.
- llamacpp: required/named honoured (its grammar); `Server: llama.cpp`; /props with a chat template.
- llama-cpp-python: tools ignored without `tool_choice`; `required` is a 500 (an assertion in its
  chatml-function-calling handler); a stream with tools under `auto` answers 200 and then breaks.
- ollama / lmstudio: `tool_choice` ignored: the scripted `answers` come back whatever was asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from tests.fake_upstream import Received, Wire, as_chunks, completion

CHAT_TEMPLATE = "{%- if tools %}<|im_start|>system\n# Tools\n{{ tools | tojson }}{%- endif %}"
VERSION_PATHS = {"vllm": ("/version", {"version": "0.11.2"}),
                 "sglang": ("/server_info", {"version": "0.5.4", "model_path": "/models/m", "tp_size": 1}),
                 "ollama": ("/api/version", {"version": "0.12.6"})}
MODEL_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp", "llama-cpp-python": "me",
                "ollama": "library", "lmstudio": "organization_owner", "mlx": "user", "generic": "someone"}
# What the scripted engine refuses: what toolproxy knows (it never sends these strict) and `uniqueItems`, which
# it does not, so that the retry without strict is exercised as an engine version with a new limit would.
GRAMMAR_REFUSES = ("$ref", "$defs", "minItems", "uniqueItems")


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def server(kind: str, answers: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
           chats: list[dict[str, Any]] | None = None) -> Callable[[Received, Wire], None]:
    """A script for a server of this kind. `answers(body)` gives the message (content / tool_calls) it would write
    when nothing forces it; `chats` collects the bodies of the chat requests it got."""
    answers = answers or (lambda body: {"content": "hello"})

    def script(request: Received, wire: Wire) -> None:
        if request.method == "GET":
            _serve_probe(kind, request.path, wire)
            return
        body = request.json()
        if chats is not None:
            chats.append(body)
        _chat(kind, body, answers, wire)

    return script


def _serve_probe(kind: str, path: str, wire: Wire) -> None:
    headers = {"Server": "llama.cpp"} if kind == "llamacpp" else {"Server": "BaseHTTP/0.6 Python/3.12.3"} \
        if kind == "mlx" else {"Server": "uvicorn"}
    if path == "/v1/models":
        model = {"id": "m", "object": "model", "owned_by": MODEL_OWNERS[kind]}
        if kind == "llama-cpp-python":
            model["permissions"] = []
        wire.send_json({"object": "list", "data": [model]}, headers=headers)
    elif kind == "llamacpp" and path == "/props":
        wire.send_json({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1,
                        "chat_template": CHAT_TEMPLATE, "build_info": "b6700-3df1a2b"}, headers=headers)
    elif kind in VERSION_PATHS and path == VERSION_PATHS[kind][0]:
        wire.send_json(VERSION_PATHS[kind][1], headers=headers)
    else:
        wire.send_json({"detail": "Not Found"}, status=404, headers=headers)


def _chat(kind: str, body: dict[str, Any], answers: Callable[[dict[str, Any]], dict[str, Any]], wire: Wire) -> None:
    tools = body.get("tools") or []
    refused = [tool["function"]["name"] for tool in tools if _refused(tool)]
    if kind in ("vllm", "sglang") and refused:
        wire.send_json({"object": "error", "message": f"xgrammar: unsupported JSON schema in strict tool "
                                                      f"'{refused[0]}'",
                        "type": "BadRequestError", "param": None, "code": 400}, status=400)
        return
    if kind == "llama-cpp-python" and tools and body.get("tool_choice") == "required":
        wire.send_raw(b"Internal Server Error", status=500, headers={"Content-Type": "text/plain"})
        return
    if kind == "llama-cpp-python" and tools and body.get("stream") and body.get("tool_choice", "auto") == "auto" \
            and "tool_choice" in body:
        wire.send_head(200, {"Content-Type": "text/event-stream"})
        wire.send_chunk(b": ping\n\n")
        wire.sock.close()  # "Automatic streaming tool choice is not supported", raised after the 200
        return
    message = _message(kind, body, tools, answers)
    payload = completion(message.pop("content", None), "tool_calls" if message.get("tool_calls") else "stop",
                         **message)
    if body.get("stream"):
        wire.send_events(as_chunks(payload))
    else:
        wire.send_json(payload)


def _message(kind: str, body: dict[str, Any], tools: list[Any],
             answers: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    choice = body.get("tool_choice")
    honours = kind in ("vllm", "sglang", "llamacpp") or (kind == "llama-cpp-python" and isinstance(choice, dict))
    if tools and honours and (choice == "required" or isinstance(choice, dict)):
        name = choice["function"]["name"] if isinstance(choice, dict) else tools[0]["function"]["name"]
        return {"content": None, "tool_calls": [call(name, {"path": "/forced"})]}
    if kind == "llama-cpp-python" and tools and "tool_choice" not in body:
        return {"content": "I cannot see any tools."}  # its function-calling format ignored them
    return answers(body)


def _refused(tool: dict[str, Any]) -> bool:
    function = tool.get("function") or {}
    return function.get("strict") is True and any(word in json.dumps(function.get("parameters"))
                                                  for word in GRAMMAR_REFUSES)


def sequence(*messages: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Answers in turn, the last one repeated."""
    items: Iterator[dict[str, Any]] = iter(messages)
    last = {"content": ""}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal last
        last = dict(next(items, last))
        return dict(last)

    return answer
