"""How tools are taught to a model that has no native tool support: the system-prompt text per dialect, and how
a tool's result is written back into the conversation.

Three styles are written out in full, each in the form its models know: Roo XML (seed 004), the fenced JSON
object of seed 001, and Hermes `<tools>`/`<tool_call>` as Qwen's own chat template writes it. Every other
dialect gets the Hermes-style tool list with its own call syntax as the example.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.registry import DIALECTS

Tool = Mapping[str, Any]  # an OpenAI tool definition's `function` object: name, description, parameters


@dataclass(frozen=True, slots=True)
class Demand:
    """What tool_choice asks of this answer: nothing, any call, or a call to one tool."""

    required: bool = False
    name: str | None = None


def render_tool_prompt(dialect: str, tools: Sequence[Tool], demand: Demand = Demand()) -> str:
    renderer = {"roo_xml": _roo_prompt, "json": _json_prompt, "hermes": _hermes_prompt}.get(dialect)
    body = renderer(tools) if renderer else _generic_prompt(dialect, tools)
    return body + _demand_text(demand)


def render_tool_result(dialect: str, name: str, content: str) -> str:
    """A tool's result as the user turn the dialect's models expect."""
    if dialect in ("hermes", "qwen_tools", "qwen3_coder"):
        return f"<tool_response>\n{content}\n</tool_response>"
    return f"Tool Result from {name}:\n{content}"


def render_call(dialect: str, name: str, arguments: Mapping[str, Any]) -> str:
    renderer = getattr(DIALECTS[dialect], "render_call", None)
    if renderer is None:
        return DIALECTS["hermes"].render_call(name, arguments)  # type: ignore[attr-defined, no-any-return]
    return renderer(name, arguments)  # type: ignore[no-any-return]


def _demand_text(demand: Demand) -> str:
    if demand.name:
        return f"\n\nIn this answer you must call the tool `{demand.name}`."
    if demand.required:
        return "\n\nIn this answer you must call at least one of the tools."
    return ""


def _roo_prompt(tools: Sequence[Tool]) -> str:
    """Seed 004, Direction 1, example 4."""
    sections = "\n\n".join(_roo_tool(tool) for tool in tools)
    return ("You have access to tools that help you accomplish tasks. Use tools by outputting XML-formatted "
            "tool calls.\n\n## Tool Use Rules\n1. Use exactly one tool per message\n2. Format tool calls using "
            "XML with the tool name as the tag\n3. Include all required parameters within parameter tags\n\n"
            "## Tool Call Format\n<tool_name>\n<parameter1>value1</parameter1>\n<parameter2>value2</parameter2>\n"
            f"</tool_name>\n\n## Available Tools\n\n{sections}")


def _roo_tool(tool: Tool) -> str:
    """`## name`, the description, one line per parameter, and a usage example (seed 004, example 1)."""
    parameters = tool.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    lines = [f"## {tool['name']}", f"Description: {tool.get('description') or 'No description'}", "Parameters:"]
    for key, spec in properties.items():
        need = "required" if key in required else "optional"
        kind = spec.get("type", "string") if isinstance(spec, Mapping) else "string"
        note = f" - {spec['description']}" if isinstance(spec, Mapping) and spec.get("description") else ""
        lines.append(f"- {key}: ({need}) {kind if isinstance(kind, str) else '/'.join(kind)}{note}")
    if not properties:
        lines.append("(none)")
    usage = "".join(f"<{key}>{_placeholder(key, spec)}</{key}>\n" for key, spec in properties.items())
    lines += ["", "Usage:", f"<{tool['name']}>\n{usage}</{tool['name']}>"]
    return "\n".join(lines)


def _placeholder(key: str, spec: Any) -> str:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return {"number": "10", "integer": "10", "boolean": "true", "array": "<item>value</item>",
            "object": "<key>value</key>"}.get(kind if isinstance(kind, str) else "", f"{key} value")


def _json_prompt(tools: Sequence[Tool]) -> str:
    """Seed 001, section 3: a fenced JSON object holding OpenAI-shaped tool calls."""
    described = "".join(
        f"\nFunction: {tool['name']}\nDescription: {tool.get('description') or 'No description'}\n"
        f"Parameters: {json.dumps(tool.get('parameters') or {}, indent=2)}\n" for tool in tools)
    example = ('```json\n{\n  "tool_calls": [\n    {\n      "id": "call_<random_id>",\n      "type": "function",\n'
               '      "function": {\n        "name": "<function_name>",\n        "arguments": '
               '"<json_string_of_arguments>"\n      }\n    }\n  ]\n}\n```')
    return ("# Available Functions\n\nYou have access to the following functions. To use a function, respond "
            f"with:\n\n{example}\n\nAvailable functions:\n{described}\nIMPORTANT: Only use listed functions. "
            'The "arguments" field must be a JSON string.')


def _hermes_prompt(tools: Sequence[Tool]) -> str:
    """Qwen2.5's chat template, word for word, so the model sees the format it was trained on."""
    return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
            f"with function signatures within <tools></tools> XML tags:\n<tools>\n{_signatures(tools)}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


def _generic_prompt(dialect: str, tools: Sequence[Tool]) -> str:
    first = tools[0]["name"] if tools else "tool_name"
    example = render_call(dialect, first, {"argument": "value"})
    return ("# Tools\n\nYou may call one or more functions to assist with the user query. The functions, as JSON "
            f"signatures:\n<tools>\n{_signatures(tools)}\n</tools>\n\nTo call a function, write the call exactly "
            f"in this form, with the real arguments:\n{example}")


def _signatures(tools: Sequence[Tool]) -> str:
    return "\n".join(json.dumps({"type": "function", "function": dict(tool)}, ensure_ascii=False) for tool in tools)
