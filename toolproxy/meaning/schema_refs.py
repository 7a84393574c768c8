"""Schemas that refer to themselves without end: `{"$ref": "#"}`, or `$defs/x` whose `anyOf` leads back to `x`.

Validation follows such a loop without ever descending into the arguments, so it recurses until Python gives up
(a 500 before this check). A `$ref` reached through `properties` or `items` is fine: each turn of that loop goes
one level deeper into the arguments, whose depth is bounded. So the loops looked for are those made only of
keywords that apply to the same value: `$ref`, `allOf`/`anyOf`/`oneOf`, `not`, `if`/`then`/`else`,
`dependentSchemas`. Only local references (`#...`) are followed; others are never fetched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONES = ("not", "if", "then", "else")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_EDGES = frozenset((*_SAME_VALUE_LISTS, *_SAME_VALUE_ONES, *_REFS, "dependentSchemas"))


def endless_reference(schema: Mapping[str, Any]) -> str | None:
    """The first `$ref` found on a loop that never descends into the value, or None. Iterative and linear in the
    schema's size: every subschema is visited once (a depth-first search with three colours), and the search
    starts only from those with a keyword that leads to another (most have none: a property's `type`)."""
    done: set[int] = set()
    for start in _subschemas(schema):
        if id(start) in done or _EDGES.isdisjoint(start):
            continue
        found = _search_from(start, schema, done)
        if found is not None:
            return found
    return None


def _search_from(start: Mapping[str, Any], root: Mapping[str, Any], done: set[int]) -> str | None:
    on_path: set[int] = {id(start)}
    stack: list[tuple[Mapping[str, Any], Iterator[tuple[str, Any]]]] = [(start, _same_value_edges(start, root))]
    while stack:
        node, edges = stack[-1]
        step = next(edges, None)
        if step is None:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
            continue
        label, target = step
        if id(target) in on_path:
            return label
        if id(target) not in done:
            on_path.add(id(target))
            stack.append((target, _same_value_edges(target, root)))
    return None


def _same_value_edges(node: Mapping[str, Any], root: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(what leads there, subschema) for each keyword that applies a subschema to the same value."""
    for keyword in _REFS:
        reference = node.get(keyword)
        if isinstance(reference, str):
            target = _resolve(reference, root)
            if isinstance(target, Mapping):
                yield reference, target
    for keyword in _SAME_VALUE_LISTS:
        items = node.get(keyword)
        for item in items if isinstance(items, list) else ():
            if isinstance(item, Mapping):
                yield keyword, item
    for keyword in _SAME_VALUE_ONES:
        if isinstance(node.get(keyword), Mapping):
            yield keyword, node[keyword]
    dependent = node.get("dependentSchemas")
    for item in dependent.values() if isinstance(dependent, Mapping) else ():
        if isinstance(item, Mapping):
            yield "dependentSchemas", item


def _resolve(reference: str, root: Mapping[str, Any]) -> Any:
    """A local JSON-pointer reference (`#`, `#/$defs/x`), or None for anything else."""
    if not reference.startswith("#") or (len(reference) > 1 and reference[1] != "/"):
        return None
    target: Any = root
    for part in reference[2:].split("/") if len(reference) > 1 else ():
        key = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping):
            target = target.get(key)
        elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
            target = target[int(key)]
        else:
            return None
    return target


def _subschemas(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every object in the schema document, iteratively (a tool schema is already depth-limited as JSON). Schemas
    are decoded JSON: plain dicts and lists, told apart by their exact type (an abstract `Mapping` check cost
    more than the rest of the walk)."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            yield item
            pending.extend(value for value in item.values() if type(value) in _CONTAINERS)
        elif kind is list:
            pending.extend(value for value in item if type(value) in _CONTAINERS)


_CONTAINERS = (dict, list)
