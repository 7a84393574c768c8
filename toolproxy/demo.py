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

from toolproxy.clients.vtc import client_tools
from toolproxy.meaning.loopguard import is_instruction
from toolproxy.transform.response import new_completion_id

DEMO_MODEL = "toolproxy-demo"
# A file the user names: a path with a slash, or a name with a short extension that starts with a letter (not e.g.).
_PATH = re.compile(r"(?<![\w/])(?:[\w.~-]*/[\w./~-]*\w|(?!(?:e\.g|i\.e)\b)[\w-]+\.[A-Za-z]\w{0,4}\b)")
# Read-like tools across clients (read, read_file, Read, view, view_file, open_file, cat, readFile, ...), compared
# lowercase without separators; and the parameters that take their path.
_READ_TOOLS = frozenset({"read", "readfile", "readfiles", "view", "viewfile", "openfile", "cat", "fileread",
                         "readtextfile", "getfilecontents"})
_PATH_PARAMETERS = frozenset({"path", "filepath", "file", "filename", "targetfile", "absolutepath", "relativepath",
                              "uri"})
_SAFE_DEFAULTS: dict[Any, Any] = {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}
_WORD = re.compile(r"\s*\S+")
_GREETING = ("Hello from toolproxy's built-in demo model. No upstream is configured, so this is a scripted "
             "answer: set TOOLPROXY_UPSTREAM=http://HOST:PORT/v1 to proxy a real model. To watch a tool call "
             "written as text come back as `tool_calls`, send a read tool (such as `read_file`) and name a file, "
             "for example: read the file README.md.")


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

    def batches(self, shortcut: Any = None) -> Iterator[list[bytes | dict[str, Any]]]:
        """Every chunk in a batch of its own, as if each came in its own read: nothing to shortcut."""
        for chunk in self:
            yield [chunk]

    def close(self) -> None:
        return None


def reply_text(body: dict[str, Any]) -> str:
    """One scripted turn. Safe by construction: the only call it makes is to a read-like tool, with a path the user
    wrote, and the user's words never become an argument of any other tool (pointed at this model, OpenClaw once ran
    the prompt as a shell command 125 times). Once a tool has answered, it answers with text, so every client's turn
    ends after one call."""
    messages = [message for message in body.get("messages") or [] if isinstance(message, dict)]
    instruction = _last_instruction(messages)
    if instruction is None:
        return _GREETING
    result = _tool_result_after(messages, instruction)
    if result is not None:
        return f"The tool answered:\n\n{result[:500]}\n\n(toolproxy's demo model makes one call, then stops.)"
    prompt = _text_of(messages[instruction].get("content"))
    call = None if body.get("tool_choice") == "none" else _read_call(_tools_of(body, messages), prompt)
    if call is None:
        return _GREETING
    return _write_call(*call, prompt.lower())


def _last_instruction(messages: list[dict[str, Any]]) -> int | None:
    """The index of the user's latest instruction (not context a client inserted as a user message)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and is_instruction(message) and not _is_vtc_result(message):
            return index
    return None


def _tool_result_after(messages: list[dict[str, Any]], instruction: int) -> str | None:
    """The first tool result since the instruction: a `tool` message, or a VTC client's `[tool] Result:` text."""
    for message in messages[instruction + 1:]:
        if message.get("role") == "tool" or (message.get("role") == "user" and _is_vtc_result(message)):
            return _text_of(message.get("content"))
    return None


def _is_vtc_result(message: dict[str, Any]) -> bool:
    text = _text_of(message.get("content")).lstrip()
    return text.startswith("[") and "] Result:" in text[:300]


def _tools_of(body: dict[str, Any], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's tools, or those a VTC client's system prompt describes (Cline, Roo Code, Kilo Code)."""
    tools = [tool.get("function") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if not tools:
        tools = [tool["function"] for tool in client_tools(messages).tools]
    return [tool for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


def _read_call(tools: list[dict[str, Any]], prompt: str) -> tuple[str, dict[str, Any]] | None:
    """A call to the first read-like tool whose other required parameters need no words of the user's, with the
    path the prompt names; None when the prompt names no file or no such tool exists."""
    path = _PATH.search(prompt)
    if path is None:
        return None
    for tool in tools:
        if _normal(tool["name"]) not in _READ_TOOLS:
            continue
        schema = tool.get("parameters")
        arguments = _read_arguments(schema if isinstance(schema, dict) else {}, path.group())
        if arguments is not None:
            return tool["name"], arguments
    return None


def _read_arguments(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    found = schema.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    path_names = [name for name in properties if _normal(name) in _PATH_PARAMETERS]
    arguments: dict[str, Any] | None = {path_names[0]: path} if path_names else _file_list(properties, path)
    if arguments is None:
        return None
    for name in schema.get("required") or []:
        if name in arguments:
            continue
        kind = (properties.get(name) or {}).get("type")
        if kind not in _SAFE_DEFAULTS:
            return None  # a required text parameter would need the user's words: no call
        arguments[name] = _SAFE_DEFAULTS[kind]
    return arguments


def _file_list(properties: dict[str, Any], path: str) -> dict[str, Any] | None:
    """A list of file requests holding the one path, for tools that read several files in one call (Cline 3's
    `read_files` takes `{"files": [{"path": ..., "start_line": ..., "end_line": ...}]}`)."""
    for name, field in properties.items():
        items = field.get("items") if isinstance(field, dict) and field.get("type") == "array" else None
        entry = _read_arguments(items, path) if isinstance(items, dict) else None
        if entry is not None:
            return {name: [entry]}
    return None


def _normal(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def _write_call(name: str, arguments: dict[str, Any], prompt: str) -> str:
    """The call as local models write it: Roo-style XML for "xml", bare JSON for "json", else a `<tools>` block."""
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
