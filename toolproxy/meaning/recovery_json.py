"""The shapes of a call written as JSON that recovery (`recovery.py`) reads: a name under one of several keys, the
arguments under one of several keys or flat beside it, OpenAI's `{"type": "function", "function": {...}}`, a
JSON-RPC request, a list of them, and that list as the one field of an object. Shape only: whether the name is
declared and the arguments validate is recovery's to judge."""

from __future__ import annotations

from typing import Any

_NAME_KEYS = ("name", "tool_name", "tool", "function_name")
_LIST_KEY = "tool_calls"
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "params", "input", "tool_arguments")
_IGNORED_KEYS = frozenset({"type", "id", "jsonrpc"})
# Beside an arguments key, the call's own id or place may stand too (Command R's `"tool_call_id": "0"`); without
# one such a key could be an argument.
_BESIDE_ARGUMENTS = _IGNORED_KEYS | {"tool_call_id", "call_id", "index"}


def call_shapes(value: Any) -> list[tuple[str, Any, list[str]]] | None:
    """(name, arguments, rules) for each call a JSON value holds when every member is call-shaped, else None. The
    list may come as the one field of an object, as in an API's response (`{"tool_calls": [...]}`, Devstral and
    Gemma 3 writing OpenAI's message into content)."""
    listed = value.get(_LIST_KEY) if isinstance(value, dict) and len(value) == 1 else None
    members = listed if isinstance(listed, list) else value if isinstance(value, list) else [value]
    shaped = [one for one in map(_shape, members) if one is not None]
    if not members or len(shaped) < len(members):
        return None
    rules = ["tool_calls_object"] if isinstance(listed, list) else []
    return [(name, arguments, [*rules, *own]) for name, arguments, own in shaped]


def _shape(value: Any) -> tuple[str, Any, list[str]] | None:
    if not isinstance(value, dict):
        return None
    rules: list[str] = []
    if value.get("type") == "function" and isinstance(value.get("function"), dict):
        value, rules = value["function"], ["type_function_wrapper"]
    name_key = next((key for key in _NAME_KEYS if isinstance(value.get(key), str)), None)
    if name_key is None and "jsonrpc" in value and isinstance(value.get("method"), str):
        name_key = "method"
        rules.append("jsonrpc_method")
    if name_key is None:
        return None
    if name_key not in ("name", "method"):
        rules.append(f"{name_key}_key")
    argument_key = next((key for key in _ARGUMENT_KEYS if key in value), None)
    rest = {key: item for key, item in value.items() if key != name_key and key != argument_key}
    if argument_key is None:
        rules.append("flat_arguments")
        return value[name_key], {key: item for key, item in rest.items() if key not in _IGNORED_KEYS}, rules
    if any(key not in _BESIDE_ARGUMENTS for key in rest):
        return None
    if argument_key not in ("arguments", "parameters"):
        rules.append(f"{argument_key}_key")
    return value[name_key], value[argument_key], rules
