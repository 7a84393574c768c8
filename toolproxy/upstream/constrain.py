"""Constrained calls: which tools go to vLLM or SGLang with `strict: true`, so that their grammar engine
(xgrammar by default) writes the call. A schema the engine is known to refuse goes without; a 400 caused by a
strict schema is retried once without it (routes/exchange.py), and the tool is not sent strict again by this
worker. Pure."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

# Keywords xgrammar refuses or ignores in a way that would reject valid calls: `$ref`/`$defs`
# (smg-project/smg#2392), `minItems` (vllm-project/vllm#21840), and the conditional and negated forms a grammar
# cannot express.
REFUSED_KEYWORDS = frozenset({"$ref", "$defs", "definitions", "minItems", "maxItems", "not", "if", "then", "else",
                              "dependentSchemas", "dependentRequired", "dependencies", "patternProperties",
                              "unevaluatedProperties", "unevaluatedItems", "contains", "$dynamicRef"})
# Regular-expression features a grammar has no rule for: lookaround and backreferences.
_UNGRAMMATICAL = re.compile(r"\(\?[=!<]|\\[1-9]|\\k<")
MAX_DEPTH = 32


def refusal(schema: Any, depth: int = 0) -> str | None:
    """Why the grammar engine would refuse this schema, or None when it takes it."""
    if depth > MAX_DEPTH:
        return "nested too deep"
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key in REFUSED_KEYWORDS:
                return f"`{key}`"
            if key == "pattern" and isinstance(value, str) and _UNGRAMMATICAL.search(value):
                return f"the pattern {value[:40]!r}"
            found = refusal(value, depth + 1)
            if found is not None:
                return found
    elif isinstance(schema, list):
        for item in schema:
            found = refusal(item, depth + 1)
            if found is not None:
                return found
    return None


def tool_key(tool: Mapping[str, Any]) -> str:
    """A tool by its name and schema: the same name with another schema is another tool."""
    function = tool.get("function")
    function = function if isinstance(function, Mapping) else {}
    schema = json.dumps(function.get("parameters"), sort_keys=True, default=str)
    return f"{function.get('name')}:{hashlib.sha256(schema.encode()).hexdigest()[:16]}"


def with_strict(tools: list[Any], unconstrainable: frozenset[str]) -> list[Any]:
    """Each tool the engine takes, marked `strict: true` (one the client marked itself is left as it is)."""
    marked = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (not isinstance(function, Mapping) or "strict" in function or tool_key(tool) in unconstrainable
                or refusal(function.get("parameters")) is not None):
            marked.append(tool)
        else:
            marked.append({**tool, "function": {**function, "strict": True}})
    return marked


def strict_keys(body: Mapping[str, Any], sent: Mapping[str, Any]) -> list[str]:
    """The tools this proxy marked strict in `sent` (the client's own `strict` is the client's business)."""
    original = {tool_key(tool): tool for tool in body.get("tools") or [] if isinstance(tool, Mapping)}
    return [tool_key(tool) for tool in sent.get("tools") or [] if isinstance(tool, Mapping)
            and (tool.get("function") or {}).get("strict") is True
            and "strict" not in (original.get(tool_key(tool), {}).get("function") or {})]


def without_strict(error: Exception, body: Mapping[str, Any], sent: Mapping[str, Any]) -> list[str]:
    """The tools to send again without `strict` when `error` is the upstream's 400 for the strict schemas this
    proxy added (none when it is any other error: then nothing is retried)."""
    if getattr(error, "status", None) != 400:
        return []
    marked = strict_keys(body, sent)
    if not marked:
        return []
    # The engine's message names the tool when it can; when it does not, every tool marked here is suspect.
    message = str(getattr(error, "message", ""))
    named = [key for key in marked if f"'{key.partition(':')[0]}'" in message or
             f'"{key.partition(":")[0]}"' in message]
    return named or marked


def unmarked(sent: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """`sent` with `strict` taken off these tools."""
    tools = [{**tool, "function": {key: value for key, value in tool["function"].items() if key != "strict"}}
             if isinstance(tool, Mapping) and tool_key(tool) in keys else tool for tool in sent.get("tools") or []]
    return {**sent, "tools": tools}
