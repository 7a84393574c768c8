"""The tools that Cline, Roo Code and Kilo Code describe in their system prompt, as OpenAI tool definitions, and the
bridge between their XML tool history and native `tool_calls` (the peer NTCA does the same job).

These clients send no `tools`: each tool is a `## name` section with `Description:`, `Parameters:` bullets and
`<name>` usage examples, and results come back as user text that starts `[name for '...'] Result:`. Pure: no I/O,
no globals; every scan is linear (one pass with bounded look-ahead, `str.find`, regexes that cannot backtrack).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolproxy.dialects.base import Call, Text, merge_text
from toolproxy.dialects.block import pad_newlines, render_value
from toolproxy.dialects.chain import ChainScanner
from toolproxy.dialects.registry import DIALECTS


@dataclass(frozen=True, slots=True)
class ClientTools:
    tools: tuple[dict[str, Any], ...]
    style: str  # "cline", "roo" (Kilo Code is a Roo fork) or "unknown"
    problem: str | None = None  # why no tool was found; None when some were

    def index(self) -> dict[str, Mapping[str, Any]]:
        """name -> parameters schema (the ToolIndex the dialects take)."""
        return {tool["function"]["name"]: tool["function"]["parameters"] for tool in self.tools}


# --- the system prompt ---------------------------------------------------------------------------------------------

_NAME = r"[A-Za-z_][\w.\-]{0,63}"
_HEADING = re.compile(rf"^#{{2,3}}[ \t]+({_NAME})[ \t]*$", re.M)
_BOUNDARY = re.compile(r"^(?:#{1,3}[ \t]|={3,}[ \t]*$)", re.M)  # a heading or a `====` separator ends a section
_LABEL = re.compile(r"(?:\*\*)?(Description|(?:Required |Optional )?Parameters|Usage(?: Examples?)?|"
                    r"Examples?\b[^:\n]{0,80})[ \t]*:(?:\*\*)?[ \t]*(.*)")
_BULLET = re.compile(rf"([ \t]*)-[ \t]+({_NAME})[ \t]*:[ \t]*(.*)")
_MARKER = re.compile(r"\((required|optional)\)[ \t]*(?:(string|number|integer|boolean|array|object)\b[ \t]*)?", re.I)
_KINDS = {"number": "integer", "integer": "integer", "boolean": "boolean", "string": "string",
          "array": "array", "object": "object"}
_BOOLEAN_WORDS = re.compile(r"(?:An? )?boolean\b", re.I)
_NUMBER_WORD = re.compile(r"\b(?:number|count)\b", re.I)
_INTEGER = re.compile(r"-?\d{1,18}")
_OPEN = re.compile(rf"<({_NAME})((?:\s[^<>]*)?)>")
_NON_SPACE = re.compile(r"\S")
_FENCE = "\n```"
_REACH = 20_000  # the longest usage example or code fence looked for; keeps every section scan bounded
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
class _Element:
    name: str
    attributes: str
    inner: str


def parse_client_tools(system_prompt: str) -> ClientTools:
    """Every readable `## tool_name` section of the prompt; sections that are not tools (no description, no
    parameters, no usage example) are skipped, and `problem` says why when nothing was found."""
    text = system_prompt.replace("\r\n", "\n")
    tools: list[dict[str, Any]] = []
    names: set[str] = set()
    finder = _Finder(text)
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


class _Finder:
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


def _section_end(finder: _Finder, start: int, name: str) -> int:
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


def _covering_end(finder: _Finder, position: int, stop: int, name: str) -> int | None:
    """The end of an example or fence that opens before `stop` and closes after it, if there is one."""
    opener, closer = f"<{name}>", f"</{name}>"
    while True:
        # Only fences that start a line: three backticks inside a sentence must not swallow the next tools.
        example, fence = finder.find(opener, position, stop), finder.find(_FENCE, position, stop)
        if example < 0 and fence < 0:
            return None
        if fence >= 0 and (example < 0 or fence < example):
            end = finder.find(_FENCE, fence + len(_FENCE), fence + _REACH)
            end = -1 if end < 0 else end + len(_FENCE)
        else:
            end = finder.find(closer, example, example + _REACH)
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


def _examples(body: str, name: str) -> list[list[_Element]]:
    """The parameters of each `<name>...</name>` example that reads as elements; a bare mention of `<name>` in
    prose before an example is skipped by taking the last opener before each closer."""
    opener, closer = f"<{name}>", f"</{name}>"
    examples: list[list[_Element]] = []
    position = 0
    while (start := body.find(opener, position)) >= 0:
        end = body.find(closer, start)
        if end < 0:
            break
        start = body.rfind(opener, start, end)
        elements = _elements(body[start + len(opener) : end])
        if elements is not None:
            examples.append(elements)
        position = end + len(closer)
    return examples


def _properties(section: _Section, examples: list[list[_Element]]) -> tuple[dict[str, Any], list[str]]:
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
    trees = [_elements(value) for value in values if value.strip()]
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
    if kind is None and _NUMBER_WORD.search(description) and any(_INTEGER.fullmatch(w) for w in words) \
            and all(_INTEGER.fullmatch(w) or " " in w for w in words):
        kind = "integer"
    if kind == "array":
        return {"type": "array", "items": {"type": "string"}}
    return {"type": kind or "string"}


def _elements(text: str) -> list[_Element] | None:
    """`<a>..</a> <b x="1">..</b>` as elements (inner text raw); None when anything else is there."""
    elements: list[_Element] = []
    position = 0
    while (found := _NON_SPACE.search(text, position)) is not None:
        tag = _OPEN.match(text, found.start())
        if tag is None or tag.group(2).rstrip().endswith("/"):
            return None
        end = _close_of(text, tag.group(1), tag.end())
        if end < 0:
            return None
        elements.append(_Element(tag.group(1), tag.group(2).strip(), text[tag.end() : end]))
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


# --- history: XML tool uses and their results as native calls and tool messages --------------------------------------

_HEADER = re.compile(rf"\[({_NAME})(?:\]| for )")
_NOTICE = re.compile(rf"(?:Tool|Skipping tool) \[({_NAME})")
_LINE_MARK = re.compile(r"^(?:\[|<environment_details>|<function_results>)", re.M)
_RESULT_END = "] Result:"


def history_to_native(messages: list[dict[str, Any]], tools: ClientTools) -> list[dict[str, Any]]:
    """Assistant turns with XML tool uses as `tool_calls`, the next user turn's reported results as `tool` messages
    (ids from the turn's index and the call's position, so the same history always gets the same ids), and what
    else that user turn says as a user message after them. A call whose result is not reported stays XML text."""
    index = tools.index()
    out: list[dict[str, Any]] = []
    position = 0
    while position < len(messages):
        following = messages[position + 1] if position + 1 < len(messages) else None
        converted = _exchange(position, messages[position], following, index) if index else None
        if converted is None:
            out.append(messages[position])
            position += 1
        else:
            out.extend(converted)
            position += 2
    return out


def _exchange(position: int, message: dict[str, Any], following: dict[str, Any] | None,
              index: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    if message.get("role") != "assistant" or message.get("tool_calls") or following is None \
            or following.get("role") != "user":
        return None
    text = _plain_text(message.get("content"))
    if text is None:
        return None
    calls, segments = _calls(text, index)
    if not calls:
        return None
    results, rest = _results(following.get("content"), [name for name, _ in calls])
    if not results:
        return None
    ids = [_call_id(position, number, name) for number, (name, _) in enumerate(calls)]
    content, number = [], 0
    for segment in segments:
        if isinstance(segment, Call):
            if number not in results:
                content.append(segment.source)  # never reported, so never run: it stays what the model wrote
            number += 1
        else:
            content.append(segment.text)
    answered = sorted(results)
    wire = [{"id": ids[n], "type": "function",
             "function": {"name": calls[n][0], "arguments": json.dumps(calls[n][1], ensure_ascii=False)}}
            for n in answered]
    kept = "".join(content).strip()
    out = [{**message, "content": kept or None, "tool_calls": wire}]
    out += [{"role": "tool", "tool_call_id": ids[n], "content": results[n]} for n in answered]
    return out + ([{**following, "content": rest}] if rest is not None else [])


def _calls(text: str, index: Mapping[str, Mapping[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], list[Any]]:
    """The tool uses in an assistant text (tag-per-tool for declared names, then `<function_calls>`), with their
    arguments; a use whose arguments cannot be held without losing text is turned back into text."""
    scanner = ChainScanner([DIALECTS["roo_xml"], DIALECTS["invoke_xml"]], index)
    calls: list[tuple[str, dict[str, Any]]] = []
    segments: list[Any] = []
    for segment in merge_text(scanner.feed(text) + scanner.finish()):
        arguments = _arguments(segment, index) if isinstance(segment, Call) else None
        if isinstance(segment, Call) and arguments is not None:
            calls.append((segment.name, arguments))
            segments.append(segment)
        else:
            segments.append(segment if isinstance(segment, Text) else Text(segment.source))
    return calls, segments


def _plain_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
        return "\n".join(str(part.get("text", "")) for part in content)
    return None


def _call_id(position: int, number: int, name: str) -> str:
    return "call_" + hashlib.sha256(f"{position}:{number}:{name}".encode()).hexdigest()[:24]


def _arguments(call: Call, index: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Arguments typed by the tool's schema; repeated elements become lists. None when a value cannot be held
    without losing text (attributes on a parameter): the call then stays text."""
    properties = _properties_of(index.get(call.name, {}))
    if call.dialect != "roo_xml":
        raw = call.arguments if isinstance(call.arguments, dict) else {}
        return {key: _typed(value, properties.get(key)) if isinstance(value, str) else value
                for key, value in raw.items()}
    elements = _elements(call.source[len(call.name) + 2 : len(call.source) - len(call.name) - 3])
    return None if elements is None else _group(elements, properties)


def _group(elements: list[_Element], properties: Mapping[str, Any]) -> dict[str, Any] | None:
    """Elements as arguments: an array the schema declares is read from repeated elements (Roo's `<suggest>`s,
    `<file>`s), one of them included, or from one element holding `<item>`s; any other repeat becomes a list too."""
    if any(element.attributes for element in elements):
        return None
    grouped: dict[str, list[_Element]] = {}
    for element in elements:
        grouped.setdefault(element.name, []).append(element)
    values: dict[str, Any] = {}
    for name, group in grouped.items():
        schema = properties.get(name)
        if isinstance(schema, Mapping) and schema.get("type") == "array" \
                and not (len(group) == 1 and group[0].inner.strip().startswith("<item>")):
            values[name] = [_typed(element.inner, schema.get("items")) for element in group]
        else:
            typed = [_typed(element.inner, schema) for element in group]
            values[name] = typed[0] if len(typed) == 1 else typed
    return values


def _typed(raw: str, schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    value = raw.strip()
    if kind == "array" and value.startswith("<item>") and (elements := _elements(value)) \
            and all(element.name == "item" and not element.attributes for element in elements):
        return [_typed(element.inner, schema.get("items")) for element in elements]
    if kind == "object" and value.startswith("<") and (elements := _elements(value)) \
            and (grouped := _group(elements, _properties_of(schema))) is not None:
        return grouped
    if kind == "integer" and _INTEGER.fullmatch(value):
        return int(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return _trim_newlines(raw)


def _trim_newlines(raw: str) -> str:
    """One line break after the opening tag and one before the closing tag are layout (as in tag_xml)."""
    return raw.removeprefix("\n").removesuffix("\n")


def _properties_of(schema: Any) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def _results(content: Any, names: list[str]) -> tuple[dict[int, str], Any]:
    """Which call each reported result belongs to (by position), and what is left of the user turn (None when
    nothing but white space is)."""
    if isinstance(content, str):
        parts, joiner = [{"type": "text", "text": piece} for piece in _split(content, names)], ""
    elif isinstance(content, list):
        parts, joiner = content, "\n\n"
    else:
        return {}, content
    pieces: dict[int, list[str]] = {}
    rest: list[Any] = []
    current: int | None = None
    for part in parts:
        text = part.get("text") if isinstance(part, Mapping) and part.get("type") == "text" else None
        if not isinstance(text, str):
            rest.append(part)
            continue
        current = _assign(text, names, pieces, current, rest, part)
    results = {number: joiner.join(piece for piece in texts if piece).strip("\n") for number, texts in pieces.items()}
    if isinstance(content, str):
        left = "".join(part["text"] for part in rest).strip()
        return results, left or None
    has_rest = any(not (isinstance(p, Mapping) and p.get("type") == "text" and not str(p.get("text", "")).strip())
                   for p in rest)
    return results, rest if has_rest else None


def _assign(text: str, names: list[str], pieces: dict[int, list[str]], current: int | None, rest: list[Any],
            part: Any) -> int | None:
    """Files one text part: a result header opens a result, a notice is one, environment details end them."""
    stripped = text.lstrip()
    if stripped.startswith("<environment_details>"):
        rest.append(part)
        return None
    header = _header(_Finder(stripped), names, pieces)
    if header is not None:
        pieces[header[0]] = [stripped[header[1] :]]
        return header[0]
    notice = _NOTICE.match(stripped)
    if notice is not None and (skipped := _open_call(notice.group(1), names, pieces)) is not None:
        pieces[skipped] = [text]  # "Tool [x] was not executed because ...": that is x's result
        return None
    if stripped.startswith("<function_results>") and (number := _open_call(None, names, pieces)) is not None:
        # Cline's Claude 4 prompts report results in order, without a header.
        pieces[number] = [stripped.removeprefix("<function_results>").rstrip().removesuffix("</function_results>")]
        return number
    if current is None:
        rest.append(part)
    else:
        pieces[current].append(text)
    return current


def _header(finder: _Finder, names: list[str], pieces: dict[int, list[str]], start: int = 0) -> tuple[int, int] | None:
    """`[read_file for 'a.ts'] Result:` at `start`: (the call, where the result begins). The part in brackets may
    hold `]` and line breaks (a command, a regex), so its end is searched for, a bounded distance ahead."""
    found = _HEADER.match(finder.text, start)
    if found is None:
        return None
    end = finder.find(_RESULT_END, found.end() - 1, found.end() + _REACH)
    number = _open_call(found.group(1), names, pieces)
    if end < 0 or number is None:
        return None
    return number, end + len(_RESULT_END)


def _open_call(name: str | None, names: list[str], pieces: dict[int, list[str]]) -> int | None:
    """The first call (of that name) that has no result yet."""
    return next((n for n, call in enumerate(names) if n not in pieces and name in (None, call)), None)


def _split(text: str, names: list[str]) -> list[str]:
    """A string turn cut before each result header, `<function_results>` and `<environment_details>` that starts a
    line; joined, the pieces give back the text."""
    cuts = [0]
    finder = _Finder(text)
    for mark in _LINE_MARK.finditer(text):
        start = mark.start()
        if mark.group() != "[" or _header(finder, names, {}, start) is not None:
            cuts.append(start)
    cuts.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(cuts) if b > a]


# --- native calls back as the client's XML ------------------------------------------------------------------------


def native_to_xml(calls: Sequence[tuple[str, Mapping[str, Any]]], style: str, tools: ClientTools | None = None) -> str:
    """Calls as the client writes them: tag-per-tool with one parameter per line ("cline", "roo", "unknown"), or
    `<function_calls><invoke>` ("invoke"). Values are text; multi-line values sit on lines of their own; objects
    are nested tags; a list is `<item>`s as a parameter's value and repeated elements inside an object (Roo's
    `<follow_up><suggest>..</suggest><suggest>..`). With `tools`, a value the schema declares a string but the
    model gave as an object or list is written as JSON text (`use_mcp_tool`'s `arguments`)."""
    index = tools.index() if tools is not None else {}
    if style == "invoke":
        invokes = "".join(_invoke(name, arguments) for name, arguments in calls)
        return f"<function_calls>\n{invokes}</function_calls>"
    return "\n\n".join(_tag_call(name, arguments, _properties_of(index.get(name))) for name, arguments in calls)


def _invoke(name: str, arguments: Mapping[str, Any]) -> str:
    parameters = "".join(f'<parameter name="{key}">{pad_newlines(render_value(value))}</parameter>\n'
                         for key, value in arguments.items() if value is not None)
    return f'<invoke name="{name}">\n{parameters}</invoke>\n'


def _tag_call(name: str, arguments: Mapping[str, Any], properties: Mapping[str, Any]) -> str:
    lines = "".join(f"<{key}>{_tag_value(value, properties.get(key))}</{key}>\n"
                    for key, value in arguments.items() if value is not None)
    return f"<{name}>\n{lines}</{name}>"


def _tag_value(value: Any, schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(value, (dict, list)) and kind == "string":
        value = json.dumps(value, ensure_ascii=False, indent=2)
    if isinstance(value, str):
        # tag_xml and the clients drop one line break at each end, so a multi-line value is padded with one.
        return f"\n{value}\n" if "\n" in value else value
    if isinstance(value, dict):
        properties = _properties_of(schema)
        return "\n" + "".join(_nested(key, item, properties.get(key)) for key, item in value.items()
                              if item is not None)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return "\n" + "".join(f"<item>{_tag_value(item, items)}</item>\n" for item in value)
    return json.dumps(value)


def _nested(key: str, value: Any, schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(value, list) and kind != "string":
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return "".join(f"<{key}>{_tag_value(item, items)}</{key}>\n" for item in value)
    return f"<{key}>{_tag_value(value, schema)}</{key}>\n"
