"""A call's arguments as the JSON object its tool takes: decoded from the text a dialect found, repaired where
the damage is unambiguous, decoded once more where a server encoded them twice, and unwrapped where a model put them
all under one key the schema does not declare. Each mend is recorded as an issue. And arguments that are only
placeholders (`{"city": "your_city_here"}`) make the call an example, not a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from toolproxy.dialects.base import Call
from toolproxy.meaning import schema
from toolproxy.meaning.json_repair import repair_arguments

# Keys models wrap all the arguments in when the schema has no such property (DeepSeek V3.2 and V4 write
# `<parameter name="arguments" string="false">{...}</parameter>`).
# `properties` too: a small model prompted with the schema copies its shape (`{"properties": {...}}`, perhaps with
# the schema's `type` and `required` beside it).
_WRAPPER_KEYS = frozenset({"arguments", "input", "args", "parameters", "params", "properties"})
_SCHEMA_SHAPE_KEYS = frozenset({"properties", "type", "required"})
# A value that stands for one the reader must fill in: `your_city_here`, `YOUR_API_KEY`, `<city>`, `{{path}}`,
# `${name}`. (Not `...`: reports elide real values so, and a model's own `...` is no clearer.)
# `<city>` is words only: a value of HTML (`<img src=x>`) is a value.
_PLACEHOLDER = re.compile(r"(?i:your)[_-]\w{1,40}|<[A-Za-z][\w .-]{0,38}>|\{\{[^{}\n]{1,40}\}\}|\$\{[^{}\n]{1,40}\}")
# A slot left to fill inside a short value: `next Thursday at [specific time]`, `Dear [Your Name]`. Words in square
# brackets, two at least (`[WIP]`, `[x]` and `arr[i]` are values; `[text](url)` is a Markdown link, `[[a note]]` a
# wiki link); only in a value of one short line, since a long text (a letter written to a file) may be a template
# on purpose.
_SLOT = re.compile(r"(?<![\w\[\]])\[[A-Za-z]{1,20}(?: [A-Za-z]{1,20}){1,5}\](?![(\]])")
_SHORT_VALUE = 80


def placeholders_only(arguments: dict[str, Any]) -> bool:
    """Whether the arguments only show how a call would look: every string (one at least) a placeholder, or one
    short value with a slot left to fill (phi4-mini: "here's what it would conceptually look like: <tool_call>{...
    "your_city_here"}</tool_call>"; LFM2.5: "Let me know the title and time!" then a call with `[specific time]`).
    Running it would act on a value nobody chose."""
    found = list(strings(arguments))
    return bool(found) and (all(_PLACEHOLDER.fullmatch(value.strip()) for value in found)
                            or any(_has_slot(value) for value in found))


def _has_slot(value: str) -> bool:
    return len(value) <= _SHORT_VALUE and "[" in value and "\n" not in value and _SLOT.search(value) is not None


def strings(value: Any) -> Iterator[str]:
    """Every string inside the arguments, nested ones included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def unwrapped(arguments: dict[str, Any], tool_schema: Any, call: Call, issues: list[str]) -> dict[str, Any]:
    """All the arguments as one object under a wrapper key the schema does not declare (or as the schema's own
    `properties`, beside its `type` and `required`), when the object's own keys are the schema's: the object
    (vLLM's DSML parsers do the same)."""
    properties = tool_schema.get("properties") if isinstance(tool_schema, dict) else None
    if not isinstance(properties, dict):
        return arguments
    if len(arguments) > 1 and "properties" in arguments and _SCHEMA_SHAPE_KEYS.issuperset(arguments) and not (
            _SCHEMA_SHAPE_KEYS & properties.keys()):
        key, inner = "properties", arguments["properties"]  # the schema's shape: its properties are the arguments
    elif len(arguments) == 1:
        (key, inner), = arguments.items()
    else:
        return arguments
    if isinstance(inner, str) and inner.lstrip().startswith("{"):
        inner = repair_arguments(inner).value  # the object written as a string (`string="true"`), mended as any
        if inner is None:
            return arguments
    if key not in _WRAPPER_KEYS or key in properties or not isinstance(inner, dict) or not inner:
        return arguments
    if any(name not in properties for name in inner):
        return arguments
    issues.append(f"{call.dialect}: arguments of {call.name!r} wrapped in {key!r}; unwrapped")
    return inner


def arguments_object(call: Call, issues: list[str]) -> dict[str, Any] | None:
    """The arguments as a JSON object. Text that is almost JSON (a trailing comma, a dropped final brace, single
    quotes) is repaired when the repair is unambiguous, and the repair is recorded."""
    arguments = call.arguments
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = _decode_twice(json.loads(arguments), call, issues)
        except (ValueError, RecursionError):
            repaired = repair_arguments(arguments)
            if repaired.value is None:
                return None
            fixes = ", ".join(repaired.fixes)
            issues.append(f"{call.dialect}: arguments of {call.name!r} repaired ({fixes})")
            return repaired.value
    return arguments if isinstance(arguments, dict) else None


def _decode_twice(value: Any, call: Call, issues: list[str]) -> Any:
    """Arguments encoded twice (a JSON string holding the JSON object, sent by some servers' native parsers)
    are decoded once more when that gives an object."""
    if not isinstance(value, str):
        return value
    try:
        inner = json.loads(value)
    except (ValueError, RecursionError):
        return value
    if isinstance(inner, dict):
        issues.append(f"{call.dialect}: arguments of {call.name!r} were encoded twice; decoded")
        return inner
    return value


_NULL_WORDS = frozenset({"None", "null", "NULL", "nil"})


def validated(arguments: dict[str, Any], tool_schema: Any) -> tuple[dict[str, Any], list[str], bool]:
    """The arguments, the schema's problems with them, and whether optional arguments written as a word for no
    value (`"None"`, `"null"`) were dropped to mend them: only when the call fails as written (Gemma 4 writes
    `phase:<|"|>None<|"|>` for a filter it does not set, and the enum refuses the word). Raises
    schema.SchemaProblem as schema.validate does."""
    problems = schema.validate(arguments, tool_schema)
    emptied = _null_words_dropped(arguments, tool_schema) if problems else None
    if emptied is not None and not schema.validate(emptied, tool_schema):
        return emptied, [], True
    return arguments, problems, False


def _null_words_dropped(arguments: dict[str, Any], tool_schema: Any) -> dict[str, Any] | None:
    properties = tool_schema.get("properties") if isinstance(tool_schema, dict) else None
    required = tool_schema.get("required", ()) if isinstance(tool_schema, dict) else ()
    if not isinstance(properties, dict) or not isinstance(required, list | tuple):
        return None
    empty = [key for key, value in arguments.items()
             if isinstance(value, str) and value.strip() in _NULL_WORDS and key in properties and key not in required]
    return {key: value for key, value in arguments.items() if key not in empty} if empty else None
