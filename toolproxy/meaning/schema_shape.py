"""What a client's tool schema may cost before anything reads it, and whether it is JSON Schema at all, in time
linear in its size and small: one walk counts its subschemas and their depth (a 400 past the limits) and compiles
its regular expressions, and the meta-schema check runs in Rust (jsonschema-rs), not in Python.

The Python check (`check_schema` against the 2020-12 meta-schema) cost about 1 ms per property: a 7 MiB schema of
70,000 properties held a worker's event loop for over 30 s, and gunicorn killed it with every request it served.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import jsonschema_rs

MAX_SUBSCHEMAS = 5_000  # in one tool's parameters: real tools hold tens to hundreds
MAX_DEPTH = 24  # subschemas within subschemas (in the body this is past 48 levels of JSON, and its limit is 64)
# The drafts jsonschema-rs knows (without the trailing `#`); any other `$schema` is read as the default draft,
# as jsonschema reads it, and Draft 3 (which jsonschema-rs lacks) is checked by jsonschema.
_RUST_DRAFTS = frozenset({"http://json-schema.org/draft-04/schema", "http://json-schema.org/draft-06/schema",
                          "http://json-schema.org/draft-07/schema", "https://json-schema.org/draft/2019-09/schema",
                          "https://json-schema.org/draft/2020-12/schema"})
_DRAFT_3 = "http://json-schema.org/draft-03/schema"
# Where JSON Schema puts subschemas: keywords whose value is a schema, a list of them, or an object of them.
_ONE, _LIST, _OBJECT, _ITEMS = 1, 2, 3, 4
_PLACES = {
    **dict.fromkeys(("additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
                     "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema"), _ONE),
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems"), _LIST),
    **dict.fromkeys(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                     "dependencies"), _OBJECT),
    "items": _ITEMS,
}


class ShapeProblem(ValueError):
    """A schema too large to check, or not JSON Schema: the message says which and the limit."""


def check_shape(schema: Mapping[str, Any], max_subschemas: int = MAX_SUBSCHEMAS, max_depth: int = MAX_DEPTH) -> int:
    """The number of subschemas, once the schema is known to be within the limits, its regular expressions to
    compile and the whole to be valid JSON Schema (ShapeProblem otherwise)."""
    count = _walk(schema, max_subschemas, max_depth)
    _check_meta(schema)
    return count


def _walk(schema: Mapping[str, Any], max_subschemas: int, max_depth: int) -> int:
    """Every subschema once, iteratively, only where JSON Schema puts schemas (an `enum`, a `default` or a
    property named `pattern` is data): counted (`true` and `false` are schemas too), its depth measured, its
    patterns compiled. A few microseconds a subschema, and a schema past the limit costs no more than one within
    it: children are counted before anything looks at them."""
    count = 1
    pending: list[tuple[int, Any]] = [(0, schema)]
    while pending:
        depth, node = pending.pop()
        if depth > max_depth:
            raise ShapeProblem(f"the schema nests subschemas deeper than {max_depth} levels, the most a tool may")
        for key, value in node.items():
            place = _PLACES.get(key)
            if place is None:
                if key == "pattern" and type(value) is str:
                    _compile(value)
                continue
            if key == "patternProperties" and type(value) is dict:
                for pattern in value:
                    _compile(pattern)
            children = [value] if place == _ONE or (place == _ITEMS and type(value) is not list) else (
                value if type(value) is list else list(value.values()) if type(value) is dict else [])
            count += len(children)
            if count > max_subschemas:
                raise ShapeProblem(f"the schema has more than {max_subschemas} subschemas, the most a tool may have")
            pending.extend((depth + 1, child) for child in children if type(child) is dict)
    return count


def _compile(pattern: str) -> None:
    """A pattern must compile as the meta-schema's `format: regex` asks. Compiling is linear in the pattern;
    matching never uses `re` (client_regex runs them with RE2)."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise ShapeProblem(f"not a valid JSON Schema: {pattern!r} is not a regular expression ({error})") from None


def _check_meta(schema: Mapping[str, Any]) -> None:
    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        raise ShapeProblem("not a valid JSON Schema: $schema must be a string")
    uri = (declared or "").rstrip("#")
    if uri == _DRAFT_3:
        _check_draft_3(schema)
        return
    target = schema if not declared or uri in _RUST_DRAFTS else {k: v for k, v in schema.items() if k != "$schema"}
    try:
        jsonschema_rs.meta.validate(dict(target))
    except jsonschema_rs.ValidationError as error:
        raise ShapeProblem(f"not a valid JSON Schema: {error.message}") from None
    except (jsonschema_rs.ReferencingError, ValueError) as error:
        raise ShapeProblem(f"not a valid JSON Schema: {error}") from None


def _check_draft_3(schema: Mapping[str, Any]) -> None:
    try:
        jsonschema.Draft3Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        raise ShapeProblem(f"not a valid JSON Schema: {error.message}") from None
