"""Meaning of arguments: values typed by the tool's declared JSON Schema, then validated, for every dialect.

The declared type decides: `"60000"` becomes 60000 only where the schema says number or integer, and a string
field stays a string even when it looks like a number (ids like "12345" must not turn into integers).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import orjson
import referencing.exceptions
from referencing import Registry

from toolproxy.meaning.schema_cache import Kept
from toolproxy.meaning.schema_keywords import keywords_for
from toolproxy.meaning.schema_refs import endless_reference
from toolproxy.meaning.schema_shape import ShapeProblem, check_shape

_INTEGER = re.compile(r"-?\d+")
_BOOLEANS = {"true": True, "false": False}


def coerce(value: Any, schema: Any) -> Any:
    """`value` with strings turned into the types the schema declares, recursively; anything else unchanged."""
    if not isinstance(schema, Mapping):
        return value
    types = declared_types(schema)
    if isinstance(value, str) and types and "string" not in types:
        return _from_string(value, types)
    if value == "null" and "null" in types:  # a string or null: the bare word is the null (vLLM and SGLang agree)
        return None
    if isinstance(value, dict) and ("object" in types or "properties" in schema):
        properties = _object_properties(schema)
        if isinstance(properties, Mapping):
            return {key: coerce(item, properties.get(key)) for key, item in value.items()}
    if isinstance(value, list) and "array" in types:
        return [coerce(item, schema.get("items")) for item in value]
    return value


def _object_properties(schema: Mapping[str, Any]) -> Any:
    """The properties an object value is typed by: the schema's own, or those of its one `anyOf`/`oneOf` branch
    that declares some (`{"oneOf": [{"type": "integer"}, {"type": "object", "properties": {"max": ...}}]}`, as
    MiniMax-M3 nests `<limit><max>10</max></limit>`, llama.cpp's tests/test-chat.cpp)."""
    if "properties" in schema:
        return schema["properties"]
    listed = [schema.get(keyword) for keyword in ("anyOf", "oneOf")]
    branches = [branch["properties"] for each in listed if isinstance(each, list)
                for branch in each if isinstance(branch, Mapping) and "properties" in branch]
    return branches[0] if len(branches) == 1 else None


def declared_types(schema: Mapping[str, Any]) -> set[str]:
    """The types a value may have: `type` (a name or a list), and the `type` of each `anyOf`/`oneOf` branch, as
    Pydantic writes `Optional[int]` (`{"anyOf": [{"type": "integer"}, {"type": "null"}]}`). Type names that are not
    JSON Schema's but that tool schemas written by hand use (`float`, `int`, `bool`) count as the ones they mean."""
    types = _type_names(schema.get("type"))
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, Mapping):
                    types |= _type_names(branch.get("type"))
    return {_TYPE_ALIASES.get(kind, kind) for kind in types}


_TYPE_ALIASES = {"float": "number", "double": "number", "int": "integer", "bool": "boolean"}


def _type_names(kind: Any) -> set[str]:
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


# --- validation -----------------------------------------------------------------------------------------------

# A registry that knows no documents and retrieves none: a remote `$ref` (http://, file://) in a client's schema
# is never fetched (SSRF, local file disclosure); it simply fails to resolve.
_NO_RETRIEVAL = Registry()


class SchemaProblem(ValueError):
    """A tool's schema that cannot be used to validate (jsonschema's SchemaError, in our terms)."""


def validate(arguments: Any, schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with the arguments, in words for the model and the log; [] when they are valid."""
    validator = validator_for(schema)
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda error: list(error.path))
        return [_describe(error) for error in errors[:5]]
    except referencing.exceptions.Unresolvable as error:
        return [f"the schema refers to {error.ref!r}, which is not fetched"]
    except jsonschema.exceptions.ValidationError as error:  # raised by a $ref that cannot be resolved
        return [error.message]
    except RecursionError:
        # The last bound, for loops `endless_reference` cannot see (through `$id`s or anchors): the arguments
        # are depth-limited JSON, so only such a loop gets here, and it is the schema's fault, not a 500.
        return ["the schema refers to itself too deeply to be checked"]


@dataclass(frozen=True, slots=True)
class _Checked:
    validator: Any
    subschemas: int  # what checking it cost, for a request's bound on all its tools together


# 512 schemas, and 16 MiB of their JSON: 512 kept validators of megabyte schemas would hold gigabytes.
_cached_validator: Kept[_Checked] = Kept(entries=512, key_bytes=16 * 1024 * 1024)


def check(schema: Mapping[str, Any]) -> int:
    """The number of subschemas in the schema; SchemaProblem when it is too large to check (schema_shape.py) or
    not valid JSON Schema."""
    return _checked(schema).subschemas


def validator_for(schema: Mapping[str, Any]) -> Any:
    """One validator per distinct schema, built once: agents send the same tools on every request."""
    return _checked(schema).validator


def _checked(schema: Mapping[str, Any]) -> _Checked:
    key = _key(schema)
    return _cached_validator.get(key, lambda: _build(schema, key))


def _key(schema: Mapping[str, Any]) -> str | bytes:
    """The schema as sorted JSON. orjson writes it 3 to 4 times faster than `json` (a tool's schema is keyed on
    every request and every checked call), but writes NaN and infinities as null: a key with a null in it names
    the schema alone only when it reads back as the schema; otherwise, and for what orjson refuses, `json`."""
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        key = None
    if key is not None and (b"null" not in key or orjson.loads(key) == schema):
        return key
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise SchemaProblem("the schema is not JSON") from None


def _build(client: Mapping[str, Any], key: str | bytes) -> _Checked:
    """The client's schema checked (before anything copies it: a schema past the limits costs only the look that
    finds it so), then its validator, over a copy of its own."""
    try:
        subschemas = check_shape(client)
    except ShapeProblem as problem:
        raise SchemaProblem(str(problem)) from None
    schema = orjson.loads(key) if isinstance(key, bytes) else json.loads(key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    endless = endless_reference(schema)
    if endless is not None:
        raise SchemaProblem(f"the schema refers to itself without end (through {endless!r}), so no value could "
                            "ever be checked against it")
    # The client's regular expressions run with RE2, never with Python's backtracking `re` (schema_keywords).
    # Formats are not checked (no format checker is given), so none of them runs a regex either.
    safe = jsonschema.validators.extend(cls, keywords_for(schema))  # type: ignore[no-untyped-call]
    return _Checked(safe(schema, registry=_NO_RETRIEVAL), subschemas)


def _describe(error: jsonschema.exceptions.ValidationError) -> str:
    where = "/".join(str(part) for part in error.path)
    return f"{where}: {error.message}" if where else error.message
