"""Meaning of arguments: values typed by the tool's declared JSON Schema, for every dialect alike.

The declared type decides: `"60000"` becomes 60000 only where the schema says number or integer, and a string
field stays a string even when it looks like a number (ids like "12345" must not turn into integers).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_INTEGER = re.compile(r"-?\d+")
_BOOLEANS = {"true": True, "false": False}


def coerce(value: Any, schema: Any) -> Any:
    """`value` with strings turned into the types the schema declares, recursively; anything else unchanged."""
    if not isinstance(schema, Mapping):
        return value
    types = declared_types(schema)
    if isinstance(value, str) and types and "string" not in types:
        return _from_string(value, types)
    if isinstance(value, dict) and ("object" in types or "properties" in schema):
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            return {key: coerce(item, properties.get(key)) for key, item in value.items()}
    if isinstance(value, list) and "array" in types:
        return [coerce(item, schema.get("items")) for item in value]
    return value


def declared_types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return {str(item) for item in kind}
    return {kind} if isinstance(kind, str) else set()


def _from_string(text: str, types: set[str]) -> Any:
    stripped = text.strip()
    for kind in ("integer", "number", "boolean", "array", "object", "null"):
        if kind in types:
            converted = _CONVERTERS[kind](stripped)
            if converted is not _NO:
                return converted
    return text


_NO = object()


def _to_integer(text: str) -> Any:
    if _INTEGER.fullmatch(text):
        return int(text)
    number = _to_number(text)
    # "230.0" is an integer written as a float (mlx-lm PR #1417 dropped whole calls over this).
    return int(number) if isinstance(number, float) and number.is_integer() else _NO


def _to_number(text: str) -> Any:
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        number = float(text)
    except ValueError:
        return _NO
    return number if math.isfinite(number) else _NO


def _to_boolean(text: str) -> Any:
    return _BOOLEANS.get(text.lower(), _NO)


def _to_json(kind: type) -> Any:
    def convert(text: str) -> Any:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return _NO
        return value if isinstance(value, kind) else _NO

    return convert


def _to_null(text: str) -> Any:
    return None if text.lower() in ("null", "none") else _NO


_CONVERTERS = {
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "array": _to_json(list),
    "object": _to_json(dict),
    "null": _to_null,
}
