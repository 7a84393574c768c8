"""Virtual tool calling (seed 000): clients such as Cline, Roo Code and Kilo Code send no `tools`; their system
prompt teaches XML tool uses inside `content`, and they expect XML back. Their calls are found like any other
(so validation, the loop guard and the access policy hold for them too), then written back as XML in the form
the client uses, with `tool_calls` removed so nothing is delivered twice."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolproxy.clients.history import native_to_xml
from toolproxy.clients.prompt import ClientTools, parse_client_tools
from toolproxy.dialects.base import Call, Segment, ToolIndex
from toolproxy.transform.request_transform import text_of

HEADER = "X-Toolproxy-VTC"


@dataclass(frozen=True, slots=True)
class RouteChoice:
    vtc: bool
    reason: str  # for the transform log: why this route


def choose_route(user_agent: str, header: str | None, patterns: Sequence[str], has_tools: bool) -> RouteChoice:
    """VTC or native. The request body is a fact, the User-Agent a hint: a request that carries `tools` is answered
    with native `tool_calls` whatever its User-Agent (Kilo Code CLI 7.7.7 says `Kilo-Code/7.7.7` and sends 16
    native tools; XML in content made it run none). The explicit header wins over both."""
    flag = (header or "").strip().lower()
    if flag in ("on", "off"):
        return RouteChoice(flag == "on", f"{HEADER}: {flag}")
    agent = user_agent.lower()
    matched = next((pattern for pattern in patterns if pattern and pattern in agent), None)
    if matched is None:
        return RouteChoice(False, "native: the User-Agent matches no VTC client pattern")
    if has_tools:
        return RouteChoice(False, f"native: the request carries tools (the User-Agent matches {matched!r})")
    return RouteChoice(True, f"vtc: no tools in the request and the User-Agent matches {matched!r}")


def system_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(text_of(message.get("content")) for message in messages
                       if message.get("role") in ("system", "developer"))


def client_tools(messages: Sequence[Mapping[str, Any]]) -> ClientTools:
    """The tools the client's system prompt describes."""
    return parse_client_tools(system_prompt(messages))


def xml_form(messages: Sequence[Mapping[str, Any]]) -> str:
    """"invoke" when the client teaches or uses `<function_calls>`/`<invoke>`, else its own tag-per-tool form."""
    text = "".join(text_of(message.get("content")) for message in messages
                   if message.get("role") in ("system", "developer", "assistant"))
    return "invoke" if "<function_calls>" in text or "<invoke " in text else "tags"




def structured_history(messages: list[dict[str, Any]], tools: ToolIndex,
                       dialects: Sequence[str]) -> list[dict[str, Any]]:
    """The conversation with the XML tool uses in assistant turns as `tool_calls`, and the user turn that
    answers them as a tool result (VTC clients send results as the next user message), for the loop guard."""
    from toolproxy.meaning.extraction import extract

    structured: list[dict[str, Any]] = []
    for message in messages:
        if structured and structured[-1].get("tool_calls") and message.get("role") == "user":
            message = {**message, "role": "tool"}
        elif message.get("role") == "assistant" and isinstance(message.get("content"), str):
            calls = extract(message["content"], tools, dialects).calls
            if calls:
                message = {**message, "tool_calls": [
                    {"type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                    for call in calls]}
        structured.append(message)
    return structured


class XmlWriter:
    """Text and calls as the client's content: calls as XML with `newlines` line breaks before them (counting
    the ones the text already ends with, since streamed text cannot be taken back)."""

    def __init__(self, form: str, newlines: int, client: ClientTools) -> None:
        # The client's own prompt decides the shapes (Roo reads a list as repeated elements, for example).
        self._style = "invoke" if form == "invoke" else client.style
        self._client = client
        self._newlines = newlines
        self._trailing = newlines  # at the very start no break is needed

    def write(self, segments: Iterable[Segment]) -> str:
        pieces = []
        for segment in segments:
            if isinstance(segment, Call):
                xml = native_to_xml([(segment.name, segment.arguments)], self._style, self._client)
                piece = "\n" * max(0, self._newlines - self._trailing) + xml
            else:
                piece = segment.text
            if piece:
                pieces.append(piece)
                stripped = piece.rstrip("\n")
                self._trailing = len(piece) - len(stripped) if stripped else self._trailing + len(piece)
        return "".join(pieces)
