"""Parameter schemas from a client prompt's `<name>...</name>` usage examples: the elements each example holds,
nested objects and `<item>` arrays, and leaf types only where the prompt leaves no doubt. Pure and linear."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

NAME = r"[A-Za-z_][\w.\-]{0,63}"
_BOOLEAN_WORDS = re.compile(r"(?:An? )?boolean\b", re.I)
_NUMBER_WORD = re.compile(r"\b(?:number|count)\b", re.I)
INTEGER = re.compile(r"-?\d{1,18}")
_OPEN = re.compile(rf"<({NAME})((?:\s[^<>]*)?)>")
_NON_SPACE = re.compile(r"\S")
MAX_DEPTH = 8  # nesting followed in usage examples


@dataclass(slots=True)
class Param:
    name: str
    description: str
    required: bool | None  # None: the prompt does not say
    kind: str | None  # a type word after the marker: `(required) number`
    more: list[str] = field(default_factory=list)  # continuation lines, indentation kept

    def text(self) -> str:
        return "\n".join([self.description, textwrap.dedent("\n".join(self.more))]).strip()


@dataclass(slots=True)
class Section:
    description: list[str] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    nested: dict[str, Param] = field(default_factory=dict)  # bullets indented under a parameter, by name
    labelled: bool = False
    indent: int = -1  # the indentation of top-level bullets
    last: Param | None = None  # the bullet that continuation lines belong to


@dataclass(frozen=True, slots=True)
class Element:
    name: str
    attributes: str
    inner: str


def examples_of(body: str, name: str) -> list[list[Element]]:
    """The parameters of each `<name>...</name>` example that reads as elements; a bare mention of `<name>` in
    prose before an example is skipped by taking the last opener before each closer."""
    opener, closer = f"<{name}>", f"</{name}>"
    examples: list[list[Element]] = []
    position = 0
    while (start := body.find(opener, position)) >= 0:
        end = body.find(closer, start)
        if end < 0:
            break
        start = body.rfind(opener, start, end)
        elements = read_elements(body[start + len(opener) : end])
        if elements is not None:
            examples.append(elements)
        position = end + len(closer)
    return examples


def properties(section: Section, examples: list[list[Element]]) -> tuple[dict[str, Any], list[str]]:
    params = {param.name: param for param in section.params}
    names = list(params) or list(dict.fromkeys(element.name for example in examples for element in example))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name in names:
        values = [element.inner for example in examples for element in example if element.name == name]
        param = params.get(name)
        schema = shape(values, section.nested, 1) or leaf(values, param)
        if param is not None and param.text():
            schema["description"] = param.text()
        properties[name] = schema
        in_all = bool(examples) and all(any(element.name == name for element in example) for example in examples)
        said = param.required if param is not None else None
        if said or (said is None and in_all and not any("(optional)" in value for value in values)):
            required.append(name)
    return properties, required


def shape(values: list[str], nested: dict[str, Param], depth: int) -> dict[str, Any] | None:
    """An object (or an array of `<item>`s) when every example value is nested elements; None for plain text."""
    trees = [read_elements(value) for value in values if value.strip()]
    if not trees or depth > MAX_DEPTH or any(not tree for tree in trees):
        return None
    parsed = [tree for tree in trees if tree]
    children = list(dict.fromkeys(element.name for tree in parsed for element in tree))
    if children == ["item"]:
        items = [element.inner for tree in parsed for element in tree]
        return {"type": "array", "items": shape(items, nested, depth + 1) or leaf(items, None)}
    properties: dict[str, Any] = {}
    for child in children:
        inner = [element.inner for tree in parsed for element in tree if element.name == child]
        param = nested.get(child)
        schema = shape(inner, nested, depth + 1) or leaf(inner, param)
        if any(sum(element.name == child for element in tree) > 1 for tree in parsed):
            schema = {"type": "array", "items": schema}  # a repeated element (`<suggest>`, `<file>`) is a list
        if param is not None and param.text():
            schema["description"] = param.text()
        properties[child] = schema
    required = [child for child in children if all(any(e.name == child for e in tree) for tree in parsed)
                and (nested[child].required is not False if child in nested else True)]
    return {"type": "object", "properties": properties, "required": required}


def leaf(values: list[str], param: Param | None) -> dict[str, Any]:
    """A string unless the prompt leaves no doubt: a type word, `A boolean ...`, a `true or false` placeholder,
    or a `number` whose examples are integers and never another single word."""
    description = param.text() if param is not None else ""
    kind = param.kind if param is not None else None
    words = [value.strip() for value in values]
    if kind is None and (_BOOLEAN_WORDS.match(description) or any(w.startswith("true or false") for w in words)):
        kind = "boolean"
    if kind is None and _NUMBER_WORD.search(description) and any(INTEGER.fullmatch(w) for w in words) \
            and all(INTEGER.fullmatch(w) or " " in w for w in words):
        kind = "integer"
    if kind == "array":
        return {"type": "array", "items": {"type": "string"}}
    return {"type": kind or "string"}


def read_elements(text: str) -> list[Element] | None:
    """`<a>..</a> <b x="1">..</b>` as elements (inner text raw); None when anything else is there."""
    elements: list[Element] = []
    position = 0
    while (found := _NON_SPACE.search(text, position)) is not None:
        tag = _OPEN.match(text, found.start())
        if tag is None or tag.group(2).rstrip().endswith("/"):
            return None
        end = close_of(text, tag.group(1), tag.end())
        if end < 0:
            return None
        elements.append(Element(tag.group(1), tag.group(2).strip(), text[tag.end() : end]))
        position = end + len(tag.group(1)) + 3
    return elements


def close_of(text: str, name: str, position: int) -> int:
    """Where the element opened just before `position` closes, counting nested elements of the same name."""
    opener, closer = f"<{name}", f"</{name}>"
    depth = 1
    while (close := text.find(closer, position)) >= 0:
        nested = text.find(opener, position, close)
        if nested >= 0 and text[nested + len(opener) : nested + len(opener) + 1] in (">", " ", "\t", "\n"):
            depth += 1
            position = nested + len(opener)
            continue
        if nested >= 0:
            position = nested + len(opener)
            continue
        depth -= 1
        if depth == 0:
            return close
        position = close + len(closer)
    return -1
