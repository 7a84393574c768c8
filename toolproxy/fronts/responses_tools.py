"""The tools of a Responses request as the upstream sees them, and the way back: `function` tools as they are;
`custom` (freeform) tools as a function with one string parameter, `input`; the functions of a `namespace`
under a flat name that maps back to the namespace and the function; every other kind (web_search,
image_generation, tool_search, local_shell, ...) left out, with a note, since the upstream cannot run it.
Pure, no I/O."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from toolproxy.errors import InvalidRequest
from toolproxy.transform.chat_request import TOOL_NAME, check_parameters

CUSTOM_ARGUMENT = "input"  # the one parameter a freeform tool gets upstream
NAMESPACE_JOIN = "__"  # multi_agent_v1 + spawn_agent -> multi_agent_v1__spawn_agent
MAX_NAME = 64
_CUSTOM_NOTE = ("Its input is raw text, not JSON: put the whole of it, exactly as it should be received, in the "
                f"`{CUSTOM_ARGUMENT}` string.")


@dataclass(frozen=True, slots=True)
class ToolRef:
    """What an upstream tool name stands for in the client's request."""

    kind: str  # "function" or "custom"
    name: str
    namespace: str | None = None


@dataclass(slots=True)
class ToolNames:
    """The request's tools by the name the upstream knows them by, both ways."""

    by_flat: dict[str, ToolRef] = field(default_factory=dict)
    by_ref: dict[tuple[str | None, str], str] = field(default_factory=dict)

    def add(self, ref: ToolRef) -> str:
        """The flat name for `ref`: its own when free, else one that no other tool of the request has."""
        wanted = ref.name if ref.namespace is None else f"{ref.namespace}{NAMESPACE_JOIN}{ref.name}"
        flat = _fitted(wanted)
        suffix = 1
        while flat in self.by_flat:
            suffix += 1
            flat = _fitted(wanted, f"_{suffix}")
        self.by_flat[flat] = ref
        self.by_ref[(ref.namespace, ref.name)] = flat
        return flat

    def flat(self, name: str, namespace: str | None = None) -> str:
        """The upstream name of a tool the history names (one no longer offered keeps a name of the same form)."""
        known = self.by_ref.get((namespace, name))
        if known is not None:
            return known
        return name if namespace is None else _fitted(f"{namespace}{NAMESPACE_JOIN}{name}")

    def ref(self, flat: str) -> ToolRef:
        return self.by_flat.get(flat) or ToolRef("function", flat)


def _fitted(name: str, suffix: str = "") -> str:
    """A name the chat protocol accepts (64 characters at most): a long one keeps its start and a short hash."""
    if len(name) + len(suffix) <= MAX_NAME:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - len(suffix) - 9]}_{digest}{suffix}"


def chat_tools(tools: Any, names: ToolNames, notes: list[str]) -> list[dict[str, Any]]:
    """The request's tools as chat-completion functions, filling `names`; what is left out is noted."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidRequest("tools must be an array", param="tools", code="invalid_type")
    pending: list[tuple[dict[str, Any], ToolRef]] = []
    for position, tool in enumerate(tools):
        pending += _members(tool, f"tools[{position}]", notes)
    # Top-level tools first, so that each keeps its own name; a namespace's functions take what is left.
    pending.sort(key=lambda entry: entry[1].namespace is not None)
    return [_function(tool, names.add(ref), ref) for tool, ref in pending]


def _members(tool: Any, where: str, notes: list[str]) -> list[tuple[dict[str, Any], ToolRef]]:
    if not isinstance(tool, dict):
        raise InvalidRequest(f"{where} must be an object", param=where, code="invalid_type")
    kind = tool.get("type")
    if kind in ("function", "custom"):
        name = _name(tool, where)
        if kind == "function" and tool.get("parameters") is not None:
            check_parameters(tool["parameters"], f"{where}.parameters", name)
        return [(tool, ToolRef(str(kind), name))]
    if kind != "namespace":
        notes.append(f"responses: tool {where} of type {kind!r} left out: the upstream cannot run it")
        return []
    namespace = _name(tool, where)
    members = tool.get("tools")
    if not isinstance(members, list):
        raise InvalidRequest(f"{where}.tools must be an array", param=f"{where}.tools", code="invalid_type")
    found: list[tuple[dict[str, Any], ToolRef]] = []
    for position, member in enumerate(members):
        for inner, ref in _members(member, f"{where}.tools[{position}]", notes):
            if ref.namespace is not None:
                raise InvalidRequest("a namespace cannot hold another namespace", param=f"{where}.tools[{position}]",
                                     code="invalid_value")
            found.append((inner, ToolRef(ref.kind, ref.name, namespace)))
    return found


def _name(tool: dict[str, Any], where: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise InvalidRequest(f"{where}.name must be 1 to 64 letters, digits, _ or -; got {name!r}",
                             param=f"{where}.name", code="invalid_value")
    return name


def _function(tool: dict[str, Any], flat: str, ref: ToolRef) -> dict[str, Any]:
    description = tool.get("description")
    function: dict[str, Any] = {"name": flat}
    if ref.namespace is not None:
        function["description"] = f"(`{ref.name}` of the tool group `{ref.namespace}`) {description or ''}".strip()
    elif isinstance(description, str):
        function["description"] = description
    if ref.kind == "custom":
        function["description"] = _custom_description(function.get("description"), tool.get("format"))
        function["parameters"] = {"type": "object", "properties": {CUSTOM_ARGUMENT: {"type": "string"}},
                                  "required": [CUSTOM_ARGUMENT], "additionalProperties": False}
        return {"type": "function", "function": function}
    parameters = tool.get("parameters")
    function["parameters"] = parameters if parameters is not None else {"type": "object", "properties": {}}
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def _custom_description(description: Any, text_format: Any) -> str:
    """A freeform tool's description with what its raw input must look like (the grammar, when it has one)."""
    parts = [description] if isinstance(description, str) and description else []
    parts.append(_CUSTOM_NOTE)
    if isinstance(text_format, dict) and text_format.get("type") == "grammar":
        syntax, definition = text_format.get("syntax"), text_format.get("definition")
        if isinstance(definition, str):
            kind = f"{syntax} grammar" if isinstance(syntax, str) and syntax else "grammar"
            parts.append(f"The input must match this {kind}:\n{definition}")
    return "\n\n".join(parts)


def custom_input(arguments: str) -> str:
    """A freeform call's raw input from the arguments the model gave its one-string function: `input`, or the
    only string it wrote under another name, or else the arguments as written (nothing is dropped)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if isinstance(value, dict):
        if isinstance(value.get(CUSTOM_ARGUMENT), str):
            return str(value[CUSTOM_ARGUMENT])
        strings = [item for item in value.values() if isinstance(item, str)]
        if len(value) == 1 and strings:
            return strings[0]
    return arguments


def chat_tool_choice(choice: Any, names: ToolNames, notes: list[str]) -> tuple[Any, set[str] | None]:
    """The chat tool_choice, and the tools it allows (None: all of them)."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice, None
    if not isinstance(choice, dict):
        raise InvalidRequest('tool_choice must be "none", "auto", "required" or an object', param="tool_choice",
                             code="invalid_value")
    kind = choice.get("type")
    if kind in ("function", "custom"):
        name = choice.get("name")
        flat = names.by_ref.get((_namespace_of(choice), name)) if isinstance(name, str) else None
        if flat is None:
            raise InvalidRequest(f"tool_choice names {name!r}, which is not one of the request's tools",
                                 param="tool_choice", code="invalid_value")
        return {"type": "function", "function": {"name": flat}}, None
    if kind == "allowed_tools":
        return _allowed(choice, names)
    notes.append(f"responses: tool_choice of type {kind!r} became auto: that tool was left out")
    return "auto", None


def _allowed(choice: dict[str, Any], names: ToolNames) -> tuple[Any, set[str] | None]:
    mode = choice.get("mode", "auto")
    tools = choice.get("tools")
    if mode not in ("auto", "required") or not isinstance(tools, list):
        raise InvalidRequest('tool_choice allowed_tools needs mode "auto" or "required" and a list of tools',
                             param="tool_choice", code="invalid_value")
    keys = [(_namespace_of(tool), str(tool.get("name"))) for tool in tools if isinstance(tool, dict)]
    return mode, {flat for key in keys if (flat := names.by_ref.get(key)) is not None}


def _namespace_of(tool: dict[str, Any]) -> str | None:
    namespace = tool.get("namespace")
    return namespace if isinstance(namespace, str) else None
