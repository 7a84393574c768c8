"""The tools that Cline, Roo Code and Kilo Code describe in their system prompt, as OpenAI tool definitions (the
peer NTCA does the same job); `client_history.py` bridges their tool history.

These clients send no `tools`: each tool is a `## name` section with `Description:`, `Parameters:` bullets and
`<name>` usage examples, and results come back as user text that starts `[name for '...'] Result:`. Pure: no I/O,
no globals; every scan is linear (one pass with bounded look-ahead, `str.find`, regexes that cannot backtrack).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ClientTools:
    tools: tuple[dict[str, Any], ...]
    style: str  # "cline", "roo" (Kilo Code is a Roo fork) or "unknown"
    problem: str | None = None  # why no tool was found; None when some were

    def index(self) -> dict[str, Mapping[str, Any]]:
        """name -> parameters schema (the ToolIndex the dialects take)."""
        return {tool["function"]["name"]: tool["function"]["parameters"] for tool in self.tools}


# --- the system prompt ---------------------------------------------------------------------------------------------

NAME = r"[A-Za-z_][\w.\-]{0,63}"
_HEADING = re.compile(rf"^#{{2,3}}[ \t]+({NAME})[ \t]*$", re.M)
_BOUNDARY = re.compile(r"^(?:#{1,3}[ \t]|={3,}[ \t]*$)", re.M)  # a heading or a `====` separator ends a section
_LABEL = re.compile(r"(?:\*\*)?(Description|(?:Required |Optional )?Parameters|Usage(?: Examples?)?|"
                    r"Examples?\b[^:\n]{0,80})[ \t]*:(?:\*\*)?[ \t]*(.*)")
_BULLET = re.compile(rf"([ \t]*)-[ \t]+({NAME})[ \t]*:[ \t]*(.*)")
_MARKER = re.compile(r"\((required|optional)\)[ \t]*(?:(string|number|integer|boolean|array|object)\b[ \t]*)?", re.I)
_KINDS = {"number": "integer", "integer": "integer", "boolean": "boolean", "string": "string",
          "array": "array", "object": "object"}
_BOOLEAN_WORDS = re.compile(r"(?:An? )?boolean\b", re.I)
_NUMBER_WORD = re.compile(r"\b(?:number|count)\b", re.I)
INTEGER = re.compile(r"-?\d{1,18}")
_OPEN = re.compile(rf"<({NAME})((?:\s[^<>]*)?)>")
_NON_SPACE = re.compile(r"\S")
_FENCE = "\n```"
REACH = 20_000  # the longest usage example or code fence looked for; keeps every section scan bounded
_MAX_DEPTH = 8  # nesting followed in usage examples


@dataclass(slots=True)
class _Param:
    name: str
    description: str
    required: bool | None  # None: the prompt does not say
    kind: str | None  # a type word after the marker: `(required) number`
    more: list[str] = field(default_factory=list)  # continuation lines, indentation kept

    def text(self) -> str:
        return "\n".join([self.description, textwrap.dedent("\n".join(self.more))]).strip()


@dataclass(slots=True)
class _Section:
    description: list[str] = field(default_factory=list)
    params: list[_Param] = field(default_factory=list)
    nested: dict[str, _Param] = field(default_factory=dict)  # bullets indented under a parameter, by name
    labelled: bool = False
    indent: int = -1  # the indentation of top-level bullets
    last: _Param | None = None  # the bullet that continuation lines belong to


@dataclass(frozen=True, slots=True)
class Element:
    name: str
    attributes: str
    inner: str


def parse_client_tools(system_prompt: str) -> ClientTools:
    """Every readable `## tool_name` section of the prompt; sections that are not tools (no description, no
    parameters, no usage example) are skipped, and `problem` says why when nothing was found."""
    text = system_prompt.replace("\r\n", "\n")
    tools: list[dict[str, Any]] = []
    names: set[str] = set()
    finder = Finder(text)
    covered = 0  # sections never overlap: a heading inside an example or a fence is not one, and scans stay linear
    for heading in _HEADING.finditer(text):
        name = heading.group(1)
        if heading.start() < covered or name in names:
            continue  # a later `## name` (a guideline, an example) does not redefine the tool
        covered = _section_end(finder, heading.end(), name)
        tool = _tool(name, text[heading.end() : covered])
        if tool is not None:
            tools.append(tool)
            names.add(name)
    return ClientTools(tuple(tools), _style(text, names), None if tools else _why_none(text))


def tool_names(system_prompt: str) -> frozenset[str]:
    return frozenset(tool["function"]["name"] for tool in parse_client_tools(system_prompt).tools)


def _why_none(text: str) -> str:
    if not text.strip():
        return "empty system prompt"
    if _HEADING.search(text) is None:
        return "no tool sections found (no '## tool_name' headings)"
    return "no tool sections found (no heading had a description, parameters or a usage example)"


def _style(text: str, names: set[str]) -> str:
    if "You are Roo" in text or "You are Kilo Code" in text:
        return "roo"
    if "You are Cline" in text:
        return "cline"
    if "apply_diff" in names or "<follow_up>" in text:
        return "roo"
    return "cline" if "replace_in_file" in names or "<requires_approval>" in text else "unknown"


class Finder:
    """`str.find` with memory. Sections are scanned in order, so searches for one needle start ever further on;
    remembering where it was (or was not) found keeps a needle that is missing from being looked for again over
    the same stretch by every heading (`## t` + `<t>` repeated must not be quadratic)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._seen: dict[str, tuple[int, int]] = {}  # needle -> (where found or -1, searched up to)

    def find(self, needle: str, start: int, limit: int) -> int:
        hit, upto = self._seen.get(needle, (-1, 0))
        if hit >= start:
            return hit if hit + len(needle) <= limit else -1
        hit = self.text.find(needle, max(start, upto - len(needle) + 1), limit)
        self._seen[needle] = (hit, hit if hit >= 0 else max(limit, upto))
        return hit


def _section_end(finder: Finder, start: int, name: str) -> int:
    """The next heading or separator that is not inside a usage example or a code fence (diff examples hold
    `=======` lines, file examples may hold `# comments`)."""
    position = start
    while True:
        boundary = _BOUNDARY.search(finder.text, position)
        stop = boundary.start() if boundary else len(finder.text)
        cover = _covering_end(finder, position, stop, name)
        if cover is None:
            return stop
        position = cover


def _covering_end(finder: Finder, position: int, stop: int, name: str) -> int | None:
    """The end of an example or fence that opens before `stop` and closes after it, if there is one."""
    opener, closer = f"<{name}>", f"</{name}>"
    while True:
        # Only fences that start a line: three backticks inside a sentence must not swallow the next tools.
        example, fence = finder.find(opener, position, stop), finder.find(_FENCE, position, stop)
        if example < 0 and fence < 0:
            return None
        if fence >= 0 and (example < 0 or fence < example):
            end = finder.find(_FENCE, fence + len(_FENCE), fence + REACH)
            end = -1 if end < 0 else end + len(_FENCE)
        else:
            end = finder.find(closer, example, example + REACH)
            end = -1 if end < 0 else end + len(closer)
        if end < 0:
            return None
        if end > stop:
            return end
        position = end


def _tool(name: str, body: str) -> dict[str, Any] | None:
    if not body.strip():
        return None
    section = _read_section(body)
    examples = _examples(body, name)
    if not section.labelled and not examples:
        return None
    properties, required = _properties(section, examples)
    function: dict[str, Any] = {"name": name}
    description = "\n".join(section.description).strip()
    if description:
        function["description"] = description
    function["parameters"] = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": function}


def _read_section(body: str) -> _Section:
    """One pass over the lines: which label they are under decides what they are."""
    section = _Section()
    mode, required, blank = "description", None, False
    for line in body.split("\n"):
        label = _LABEL.match(line)
        if label is not None:
            section.labelled = True
            mode, required = _mode_of(label.group(1))
            if label.group(2).strip() and mode == "description":
                section.description.append(label.group(2))
            continue
        if mode == "parameters":
            if _read_parameter_line(section, line, required, blank):
                mode = "description"  # prose after the bullets (`Diff format:`, `Notes:`) describes the tool
                section.description.append(line)
        elif mode == "description":
            section.description.append(line)
        blank = not line.strip()
    return section


def _mode_of(label: str) -> tuple[str, bool | None]:
    if label == "Description":
        return "description", None
    if label.endswith("Parameters"):
        return "parameters", {"Required": True, "Optional": False}.get(label.split()[0])
    return "example", None


def _read_parameter_line(section: _Section, line: str, required: bool | None, blank: bool) -> bool:
    """Reads one line of a parameter list; True when the line is prose after the list (it then describes the tool)."""
    bullet = _BULLET.fullmatch(line)
    if bullet is not None:
        _add_parameter(section, bullet, required)
        return False
    if not line.strip():
        return False
    if section.last is None:
        section.description.append(line)  # prose before the first bullet
        return False
    if blank and line[0] not in " \t":
        return True
    section.last.more.append(line.rstrip())
    return False


def _add_parameter(section: _Section, bullet: re.Match[str], required: bool | None) -> None:
    indent, name, rest = bullet.groups()
    width = len(indent.expandtabs(4))
    marker = _MARKER.match(rest)
    kind = None
    if marker is not None:
        required = marker.group(1).lower() == "required"
        kind = _KINDS.get((marker.group(2) or "").lower())
        rest = rest[marker.end() :]
    param = _Param(name, rest.strip(), required, kind)
    if section.indent < 0:
        section.indent = width
    if width > section.indent:
        section.nested.setdefault(name, param)  # `  - path:` under Roo's `- args:`
    else:
        section.params.append(param)
    section.last = param


def _examples(body: str, name: str) -> list[list[Element]]:
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


def _properties(section: _Section, examples: list[list[Element]]) -> tuple[dict[str, Any], list[str]]:
    params = {param.name: param for param in section.params}
    names = list(params) or list(dict.fromkeys(element.name for example in examples for element in example))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name in names:
        values = [element.inner for example in examples for element in example if element.name == name]
        param = params.get(name)
        schema = _shape(values, section.nested, 1) or _leaf(values, param)
        if param is not None and param.text():
            schema["description"] = param.text()
        properties[name] = schema
        in_all = bool(examples) and all(any(element.name == name for element in example) for example in examples)
        said = param.required if param is not None else None
        if said or (said is None and in_all and not any("(optional)" in value for value in values)):
            required.append(name)
    return properties, required


def _shape(values: list[str], nested: dict[str, _Param], depth: int) -> dict[str, Any] | None:
    """An object (or an array of `<item>`s) when every example value is nested elements; None for plain text."""
    trees = [read_elements(value) for value in values if value.strip()]
    if not trees or depth > _MAX_DEPTH or any(not tree for tree in trees):
        return None
    parsed = [tree for tree in trees if tree]
    children = list(dict.fromkeys(element.name for tree in parsed for element in tree))
    if children == ["item"]:
        items = [element.inner for tree in parsed for element in tree]
        return {"type": "array", "items": _shape(items, nested, depth + 1) or _leaf(items, None)}
    properties: dict[str, Any] = {}
    for child in children:
        inner = [element.inner for tree in parsed for element in tree if element.name == child]
        param = nested.get(child)
        schema = _shape(inner, nested, depth + 1) or _leaf(inner, param)
        if any(sum(element.name == child for element in tree) > 1 for tree in parsed):
            schema = {"type": "array", "items": schema}  # a repeated element (`<suggest>`, `<file>`) is a list
        if param is not None and param.text():
            schema["description"] = param.text()
        properties[child] = schema
    required = [child for child in children if all(any(e.name == child for e in tree) for tree in parsed)
                and (nested[child].required is not False if child in nested else True)]
    return {"type": "object", "properties": properties, "required": required}


def _leaf(values: list[str], param: _Param | None) -> dict[str, Any]:
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
        end = _close_of(text, tag.group(1), tag.end())
        if end < 0:
            return None
        elements.append(Element(tag.group(1), tag.group(2).strip(), text[tag.end() : end]))
        position = end + len(tag.group(1)) + 3
    return elements


def _close_of(text: str, name: str, position: int) -> int:
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
