"""The tools that Cline, Roo Code and Kilo Code describe in their system prompt, as OpenAI tool definitions (the
peer NTCA does the same job); `history.py` bridges their tool history.

These clients send no `tools`: each tool is a `## name` section with `Description:`, `Parameters:` bullets and
`<name>` usage examples, and results come back as user text that starts `[name for '...'] Result:`. Pure: no I/O,
no globals; every scan is linear (one pass with bounded look-ahead, `str.find`, regexes that cannot backtrack).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolproxy.clients.examples import NAME, Param, Section, examples_of, properties


@dataclass(frozen=True, slots=True)
class ClientTools:
    tools: tuple[dict[str, Any], ...]
    style: str  # "cline", "roo" (Kilo Code is a Roo fork) or "unknown"
    problem: str | None = None  # why no tool was found; None when some were

    def index(self) -> dict[str, Mapping[str, Any]]:
        """name -> parameters schema (the ToolIndex the dialects take)."""
        return {tool["function"]["name"]: tool["function"]["parameters"] for tool in self.tools}


# --- the system prompt ---------------------------------------------------------------------------------------------

_HEADING = re.compile(rf"^#{{2,3}}[ \t]+({NAME})[ \t]*$", re.M)
_BOUNDARY = re.compile(r"^(?:#{1,3}[ \t]|={3,}[ \t]*$)", re.M)  # a heading or a `====` separator ends a section
_LABEL = re.compile(r"(?:\*\*)?(Description|(?:Required |Optional )?Parameters|Usage(?: Examples?)?|"
                    r"Examples?\b[^:\n]{0,80})[ \t]*:(?:\*\*)?[ \t]*(.*)")
_BULLET = re.compile(rf"([ \t]*)-[ \t]+({NAME})[ \t]*:[ \t]*(.*)")
_MARKER = re.compile(r"\((required|optional)\)[ \t]*(?:(string|number|integer|boolean|array|object)\b[ \t]*)?", re.I)
_KINDS = {"number": "integer", "integer": "integer", "boolean": "boolean", "string": "string",
          "array": "array", "object": "object"}
_FENCE = "\n```"
REACH = 20_000  # the longest usage example or code fence looked for; keeps every section scan bounded


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
    examples = examples_of(body, name)
    if not section.labelled and not examples:
        return None
    schema_properties, required = properties(section, examples)
    function: dict[str, Any] = {"name": name}
    description = "\n".join(section.description).strip()
    if description:
        function["description"] = description
    function["parameters"] = {"type": "object", "properties": schema_properties, "required": required}
    return {"type": "function", "function": function}


def _read_section(body: str) -> Section:
    """One pass over the lines: which label they are under decides what they are."""
    section = Section()
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


def _read_parameter_line(section: Section, line: str, required: bool | None, blank: bool) -> bool:
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


def _add_parameter(section: Section, bullet: re.Match[str], required: bool | None) -> None:
    indent, name, rest = bullet.groups()
    width = len(indent.expandtabs(4))
    marker = _MARKER.match(rest)
    kind = None
    if marker is not None:
        required = marker.group(1).lower() == "required"
        kind = _KINDS.get((marker.group(2) or "").lower())
        rest = rest[marker.end() :]
    param = Param(name, rest.strip(), required, kind)
    if section.indent < 0:
        section.indent = width
    if width > section.indent:
        section.nested.setdefault(name, param)  # `  - path:` under Roo's `- args:`
    else:
        section.params.append(param)
    section.last = param


