"""A scripted model for the agent runs: it asks to read one file, writing the call as text in a chosen form, and
answers with text once the file's content has come back after the last real user instruction.

"After the last instruction", not "in the last message": OpenClaw appends a user message after tool results, and
a model that looks only at the last message would ask for the file forever. An instruction is a user message
that carries the task's marker and not the file's content (a tool result may quote the task, never the reverse).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fake_upstream import Received, Wire, as_chunks, completion

FORMS = ("hermes", "qwen3_coder", "roo_xml")
INTRO = "I will read it."  # every answer that makes a call starts so
# Read tools as agents name them (Cline 3 reads a list of files), and the names their path argument goes by.
READ_TOOLS = ("read", "read_file", "Read", "view", "read_text_file", "readFile", "read_files")
PATH_ARGUMENTS = ("path", "filePath", "file_path", "absolute_path", "target_file", "file")


def text_of(content: Any) -> str:
    """A message's text, whether content is a string or a list of parts (the AI SDK sends parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return ""


def read_tool(body: dict[str, Any], path: str) -> tuple[str, dict[str, Any]] | None:
    """(tool name, arguments) that read `path`, from native `tools` or from the system prompt of a client that
    sends none (its XML tool uses); None when the request offers no way to read a file (a title request)."""
    tools = {tool["function"]["name"]: tool["function"].get("parameters") or {} for tool in body.get("tools") or []}
    for name in READ_TOOLS:
        if name in tools:
            properties = tools[name].get("properties") or {}
            if properties.get("files", {}).get("type") == "array":
                return name, {"files": [{"path": path}]}
            return name, {next((arg for arg in PATH_ARGUMENTS if arg in properties), "path"): path}
    system = "\n".join(text_of(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    return next(((name, {"path": path}) for name in READ_TOOLS if f"<{name}>" in system), None)


def render(form: str, name: str, arguments: dict[str, Any]) -> str:
    """The call as a local model would write it in its text; XML forms write a list or object as JSON."""
    values = {key: value if isinstance(value, str) else json.dumps(value) for key, value in arguments.items()}
    if form == "hermes":
        return f'{INTRO}\n<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'
    if form == "qwen3_coder":
        parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in values.items())
        return f"{INTRO}\n<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"
    parameters = "".join(f"<{key}>{value}</{key}>\n" for key, value in values.items())
    return f"{INTRO}\n\n<{name}>\n{parameters}</{name}>"


@dataclass
class ScriptedModel:
    """The upstream's script (see tests/fake_upstream.py); one instance per agent run."""

    form: str
    path: str  # the file to read, absolute
    marker: str  # in the task, never in the file
    secret: str  # in the file, never in the task
    requests: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Received, wire: Wire) -> None:
        body = request.json()
        text = self.answer(body)
        with self._lock:
            self.requests.append(body)
            self.answers.append(text)
        payload = completion(text)
        if body.get("stream"):
            wire.send_events(as_chunks(payload))
        else:
            wire.send_json(payload)

    def answer(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        tool = read_tool(body, self.path)
        if tool is None or not any(self.marker in text_of(m.get("content")) for m in messages):
            return "OK."  # a side request (a title, a summary): plain text, no call
        if self.has_result(messages):
            return f"Done. The file says: {self.secret}"
        return render(self.form, *tool)

    def has_result(self, messages: list[dict[str, Any]]) -> bool:
        """The file's content came back after the last real user instruction."""
        last = max((i for i, m in enumerate(messages) if self.is_instruction(m)), default=-1)
        return any(self.secret in text_of(m.get("content")) for m in messages[last + 1:])

    def is_instruction(self, message: dict[str, Any]) -> bool:
        text = text_of(message.get("content"))
        return message.get("role") == "user" and self.marker in text and self.secret not in text
