"""jsonschema's keywords that run a client's regular expression, rewritten to run it with RE2 (`client_regex`):
`pattern` (which `propertyNames` uses too), `patternProperties`, and `additionalProperties`, which must know what
`patternProperties` matched. A pattern RE2 cannot run is not held against the model: a string is taken to match
it, a property name is taken as covered by it.

`unevaluatedProperties` looks through `patternProperties` deep inside jsonschema; in a schema that has both it is
not checked at all (a rare pairing in tool schemas, and never worth a frozen worker).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError

from toolproxy.meaning import client_regex


def keywords_for(schema: Any) -> dict[str, Any]:
    """The keyword functions to lay over the validator class for this schema."""
    keywords: dict[str, Any] = {"pattern": pattern, "patternProperties": pattern_properties,
                                "additionalProperties": additional_properties}
    if _mentions(schema, "patternProperties"):
        keywords["unevaluatedProperties"] = _not_checked
    return keywords


def pattern(validator: Any, regex: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and client_regex.search(regex, instance) is False:
        yield ValidationError(f"{instance!r} does not match {regex!r}")


def pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any,
                       schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for regex, subschema in patterns.items():
        for key, value in instance.items():
            if client_regex.search(regex, key):
                yield from validator.descend(value, subschema, path=key, schema_path=regex)


def additional_properties(validator: Any, allowed: Any, instance: Any,
                          schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = sorted((key for key in instance if not _covered(key, schema)), key=str)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif allowed is False and extras:
        names = ", ".join(repr(extra) for extra in extras)
        if "patternProperties" in schema:
            regexes = ", ".join(repr(regex) for regex in sorted(schema["patternProperties"]))
            yield ValidationError(f"{names} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: "
                                  f"{regexes}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({names} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


def _covered(key: str, schema: Mapping[str, Any]) -> bool:
    """Declared in `properties`, or matched by a `patternProperties` pattern (or by one that cannot be run)."""
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return True
    patterns = schema.get("patternProperties")
    return isinstance(patterns, Mapping) and any(client_regex.search(regex, key) is not False for regex in patterns)


def _not_checked(*_: Any) -> Iterator[ValidationError]:
    return iter(())


def _mentions(value: Any, keyword: str) -> bool:
    """Whether any object in the schema document has this keyword (iterative: no recursion over client data;
    decoded JSON, so plain dicts and lists, told apart by their exact type, which costs far less than `Mapping`)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is dict:
            if keyword in item:
                return True
            pending.extend(child for child in item.values() if type(child) in (dict, list))
        elif type(item) is list:
            pending.extend(child for child in item if type(child) in (dict, list))
    return False
