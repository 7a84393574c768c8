"""The built-in demo model: answers when no upstream is configured, so a new user can try every feature with
curl and no GPU. It writes tool calls as text, the way local models do, and the proxy extracts them like any
other model's. Pick the text form with a word in the prompt: "xml" (Roo style), "json" (bare), else `<tools>`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from toolproxy.transform.response import new_completion_id

DEMO_MODEL = "toolproxy-demo"
_PATH = re.compile(r"[\w.~-]*/[\w./~-]+|[\w-]+\.\w{1,5}\b")
_WORD = re.compile(r"\s*\S+")
_GREETING = ("Hello from toolproxy's built-in demo model. No upstream is configured, so this is a scripted "
             "answer: set TOOLPROXY_UPSTREAM=http://HOST:PORT/v1 to proxy a real model. Send `tools` with your "
             "request to watch a tool call written as text come back as `tool_calls`.")


class DemoUpstream:
    def complete(self, request: Any) -> dict[str, Any]:
        text = reply_text(request.body)
        return {
            "id": new_completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.body.get("model", DEMO_MODEL),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": _usage(request.body, text),
        }

    def stream(self, request: Any) -> _DemoStream:
        return _DemoStream(self.complete(request), bool((request.body.get("stream_options") or {})
                                                         .get("include_usage")))

    def models(self, base_url: str | None, api_key: str | None) -> dict[str, Any]:
        return {"object": "list",
                "data": [{"id": DEMO_MODEL, "object": "model", "created": 0, "owned_by": "toolproxy"}]}


class _DemoStream:
    def __init__(self, completion: dict[str, Any], include_usage: bool) -> None:
        self._completion = completion
        self._include_usage = include_usage

    def __iter__(self) -> Iterator[dict[str, Any]]:
        head = {key: self._completion[key] for key in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"
        text = self._completion["choices"][0]["message"]["content"]
        yield {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
        for word in _WORD.findall(text):
            yield {**head, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
        yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if self._include_usage:
            yield {**head, "choices": [], "usage": self._completion["usage"]}

    def close(self) -> None:
        return None


def reply_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "tool":
        result = _text_of(last.get("content"))
        return f"The tool answered:\n\n{result[:500]}\n\n(That was toolproxy's demo model.)"
    tools = [tool["function"] for tool in body.get("tools") or [] if isinstance(tool.get("function"), dict)]
    if not tools or body.get("tool_choice") == "none":
        return _GREETING
    prompt = _text_of(last.get("content"))
    tool = _choose_tool(tools, prompt)
    arguments = _arguments(tool.get("parameters") or {}, prompt)
    return _write_call(tool["name"], arguments, prompt.lower())


def _choose_tool(tools: list[dict[str, Any]], prompt: str) -> dict[str, Any]:
    words = set(re.findall(r"[a-z0-9]+", prompt.lower()))
    for tool in tools:
        if words & set(re.findall(r"[a-z0-9]+", str(tool.get("name", "")).lower())):
            return tool
    return tools[0]


def _arguments(schema: dict[str, Any], prompt: str) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    wanted = schema.get("required") or list(properties)[:1]
    return {name: _sample(name, properties.get(name) or {}, prompt) for name in wanted}


def _sample(name: str, schema: dict[str, Any], prompt: str) -> Any:
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    path = _PATH.search(prompt)
    if path and any(hint in name.lower() for hint in ("path", "file", "dir")):
        return path.group()
    return prompt.strip()[:80] or name


def _write_call(name: str, arguments: dict[str, Any], prompt: str) -> str:
    intro = f"I'll use the {name} tool for that.\n\n"
    if "xml" in prompt:
        fields = "".join(f"<{key}>{value if isinstance(value, str) else json.dumps(value)}</{key}>\n"
                         for key, value in arguments.items())
        return f"{intro}<{name}>\n{fields}</{name}>"
    call = json.dumps({"name": name, "arguments": arguments})
    if "json" in prompt:
        return f"{intro}{call}"
    return f"{intro}<tools>\n{call}\n</tools>"


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
    prompt_tokens = sum(len(_text_of(message.get("content")).split()) for message in body.get("messages") or [])
    completion_tokens = len(text.split())
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
