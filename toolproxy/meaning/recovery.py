"""Schema-anchored recovery: the last pass over what the strict dialects left as text.

Real models damage their calls (an opener dropped and its closer kept, closers missing at the end, the wrong key
for the arguments, several JSON calls on one line). The proxy knows what a parser alone does not: the declared
tools and their schemas. So this pass is lenient about syntax and strict about meaning: a recovered call needs a
declared name and arguments that validate after coercion, or it stays text. Each rule that fired is recorded as an
issue named `recovered:<rule>`, so the dashboard shows which one.

It runs on the scanners' merged segments, the same in streaming and one-shot, and only looks at text: a call a
strict dialect found is never re-read. Linear: candidates are found by one pattern, each attempt reads forward
only, and after `MAX_FAILED` failed attempts a text is left alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolproxy.dialects import registry
from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, merge_text
from toolproxy.meaning import schema
from toolproxy.meaning.anchor import anchored_calls, anchored_names
from toolproxy.meaning.anchor_markup import after_markup, markup_lines_after, markup_lines_before
from toolproxy.meaning.arguments import unwrapped, validated
from toolproxy.meaning.json_repair import RepairResult, repair_arguments
from toolproxy.meaning.recovery_json import call_shapes
from toolproxy.meaning.recovery_xml import Read, read_arrow_call, read_kimi_call, read_xml_call

MAX_FAILED = 64
_KIMI = "<|tool_call_begin|>"
DIALECT = "recovered"
# A candidate: markup a damaged call starts with, or a JSON object or list whose first key is a string.
_CANDIDATE = re.compile(r"<tool_call>|<function[= ]|<name>|\[TOOL_CALL\]|<\|tool_call_begin\|>"
                        r'|\{(?=\s{0,64}")|\[(?=\s{0,64}\{\s{0,64}")')
# Wrappers models leave around a call: every dialect's own (`registry.WRAPPERS`), and damaged forms no dialect
# writes, seen in real output. A closer found with no opener before the call is absorbed all the same.
DAMAGED_WRAPPERS = (("[TOOL_REQUEST]", "[END_TOOL_REQUEST]"), ("<function_call>", "</function_call>"),
                    ("[TOOL_CALL]", "[/TOOL_CALL]"), ("<functioncall", ">"))
WRAPPERS = (*registry.WRAPPERS, *DAMAGED_WRAPPERS)
_OPENERS = tuple(opener for opener, _ in WRAPPERS)
_ORPHAN_CLOSERS = tuple(closer for _, closer in WRAPPERS if closer != ">")


def recover(segments: list[Segment], tools: ToolIndex, anchored: bool = True) -> tuple[list[Segment], list[str]]:
    """Calls recovered from the text segments, then the wrappers around every call absorbed into it. `anchored`:
    last, calls in a form no dialect knows (`anchor.py`); off where the model's format is pinned, since a pinned
    format says which spellings are calls (Python syntax in a Qwen3-Coder model's prose is not one)."""
    issues: list[str] = []
    if not tools:
        return segments, issues
    out: list[Segment] = []
    for segment in segments:
        if isinstance(segment, Text) and (any(name in segment.text for name in tools) or _KIMI in segment.text):
            for piece in _recover_text(segment.text, tools, issues):
                out.extend(_anchored(piece, tools, issues) if anchored and isinstance(piece, Text) else [piece])
        else:
            out.append(segment)
    return _absorb_markup_lines(_absorb_wrappers(merge_text(out), issues), tools), issues


def _recover_text(text: str, tools: ToolIndex, issues: list[str]) -> list[Segment]:
    out: list[Segment] = []
    kept = position = 0  # text[kept:] is not yet emitted; candidates are looked for from `position`
    last_json_end = -1
    failed = 0
    repaired_once = False  # a missing final brace is mended once per text: only the answer's end can lack it
    while failed < MAX_FAILED and (match := _CANDIDATE.search(text, position)):
        start = match.start()
        found: tuple[int, list[Segment]] | int | None
        if start and text[start - 1] == "`":  # markup quoted inline is an example, not a call
            position = match.end()
            continue
        if match.group() == "[TOOL_CALL]":
            found = _to_calls(text, start, read_arrow_call(text, start, tools), tools, issues)
        elif match.group() == _KIMI:
            found = _to_calls(text, start, read_kimi_call(text, start, tools), tools, issues)
        elif match.group()[0] in "{[":
            if not _json_may_start(text, kept, start, last_json_end):
                position = match.end()
                continue
            found = _read_json(text, start, tools, issues, repair=not repaired_once)
            repaired_once = repaired_once or found is None
            if isinstance(found, int):  # decoded, but not a call: skip the whole value
                position = last_json_end = found
                continue
        else:
            found = _to_calls(text, start, read_xml_call(text, start, tools), tools, issues)
        if found is None or isinstance(found, int):
            failed += 1
            position = match.end()
            continue
        end, calls = found
        out.append(Text(text[kept:start]))
        out.extend(calls)
        kept = position = last_json_end = end
    out.append(Text(text[kept:]))
    return out


def _anchored(text: Text, tools: ToolIndex, issues: list[str]) -> list[Segment]:
    """What the rules above left as text, read last by the tools' names alone (`anchor.py`): a form no dialect
    knows."""
    def check(name: str, arguments: Any, rules: list[str]) -> Any:
        return _checked(name, arguments, tools, issues, rules)

    return anchored_calls(text.text, tools, check, DIALECT) if text.text else []


def _json_may_start(text: str, kept: int, start: int, last_json_end: int) -> bool:
    """A JSON call is looked for at the start of a line, right after a wrapper's opener or a call, or after a
    decoded JSON value and a separator (`;`, `,`): never in the middle of a sentence."""
    if last_json_end >= 0 and start - last_json_end <= 16 and text[last_json_end:start].strip() in ("", ";", ","):
        return True
    line_start = text.rfind("\n", max(kept, start - 256), start) + 1
    if line_start == 0 and start - kept > 256:
        return False
    before = text[max(line_start, kept) : start].rstrip()
    return not before or before.endswith(_OPENERS)


def _read_json(text: str, start: int, tools: ToolIndex, issues: list[str],
               repair: bool) -> tuple[int, list[Segment]] | int | None:
    """Calls from the JSON value at `start`; the end of a value that holds none; None when nothing decodes."""
    rules: list[str] = []
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        tail = text[start:].rstrip()
        if not repair or len(tail) > 16384 or not tail.endswith(("}", "]")):
            return None
        repaired = repair_arguments(tail).value if tail.startswith("{") else _repair_list(tail)
        if repaired is None:
            return None
        value, end = repaired, len(text)
        rules.append("missing_final_brace")
    shaped = call_shapes(value)
    if shaped is None:
        return end
    calls: list[Segment] = []
    for name, arguments, shape_rules in shaped:
        checked = _checked(name, arguments, tools, issues, [*rules, *shape_rules])
        if checked is None:
            return end
        calls.append(Call(name, checked, "", DIALECT))
    first = calls[0]
    assert isinstance(first, Call)
    calls[0] = Call(first.name, first.arguments, text[start:end], DIALECT)
    return end, calls


def _repair_list(tail: str) -> Any:
    """A list of calls whose closing `]` (and perhaps the last `}`) is missing at the very end of the answer."""
    if not tail.startswith("["):
        return None
    repaired = repair_arguments('{"_":' + tail + ("]}" if not tail.endswith("]") else "}"))
    if repaired.value is None:
        repaired = repair_arguments('{"_":' + tail + "}]}")
    return repaired.value["_"] if repaired.value is not None else None


def _to_calls(text: str, start: int, read: Read | None, tools: ToolIndex,
              issues: list[str]) -> tuple[int, list[Segment]] | None:
    if read is None:
        return None
    checked = _checked(read.name, read.arguments, tools, issues, list(read.rules))
    return None if checked is None else (read.end, [Call(read.name, checked, text[start : read.end], DIALECT)])


def _checked(name: str, arguments: Any, tools: ToolIndex, issues: list[str], rules: list[str]) -> Any:
    """The arguments, typed, when the name is declared and they validate; the rules are then recorded."""
    if name not in tools:
        return None
    if isinstance(arguments, str):
        decoded = repair_arguments(arguments) if arguments.strip() else RepairResult({}, ())
        arguments = decoded.value
        rules.append("double_encoded_arguments")
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        return None
    tool_schema = tools[name]
    arguments = unwrapped(arguments, tool_schema, Call(name, arguments, "", DIALECT), issues)  # `{"args": {..}}`
    properties = tool_schema.get("properties")
    if isinstance(properties, dict) and any(key not in properties for key in arguments):
        return None
    typed = schema.coerce(arguments, tool_schema)
    try:
        typed, problems, _ = validated(typed, tool_schema)
    except schema.SchemaProblem:
        return None
    if problems:
        issues.append(f"recovered: a damaged call to {name!r} stays text, its arguments fail the schema "
                      f"({'; '.join(problems)})")
        return None
    issues.extend(f"recovered:{rule}" for rule in dict.fromkeys(rules or ["lenient_reader"]))
    return typed


def _absorb_markup_lines(segments: list[Segment], tools: ToolIndex) -> list[Segment]:
    """Lines of nothing but tags and tokens right before and after a recovered call are its wrapper, whichever
    words it uses: they go into its source, as the name-anchored fallback's do. (Only recovered calls: a live
    stream has sent the lines before a dialect's call already, and must end as buffered does.)"""
    out = list(segments)
    names = None
    for index, segment in enumerate(out):
        if not isinstance(segment, Call) or segment.dialect != DIALECT or not segment.source:
            continue
        names = names or anchored_names(tools)  # only where a call was recovered: most replies have none
        prefix = suffix = ""
        before = out[index - 1] if index else None
        if isinstance(before, Text):
            start = markup_lines_before(before.text, len(before.text), 0)
            prefix, out[index - 1] = before.text[start:], Text(before.text[:start])
        after = out[index + 1] if index + 1 < len(out) else None
        line_end = after_markup(after.text, 0, names) if isinstance(after, Text) else None
        if isinstance(after, Text) and line_end is not None and after.text[line_end - 1 : line_end] in ("\n", ""):
            end = markup_lines_after(after.text, line_end, names, fenced=False)
            suffix, out[index + 1] = after.text[:end], Text(after.text[end:])
        if prefix or suffix:
            out[index] = Call(segment.name, segment.arguments, prefix + segment.source + suffix, segment.dialect)
    return merge_text(out)


def _cut_closer(tail: str) -> bool:
    """Whether the end of a reply is a closer cut short by max_tokens (`</tool` after a whole call): a start of
    markup (`</`, `<|`) that only a known closer begins with."""
    tail = tail.rstrip()
    return tail.startswith(("</", "<|")) and any(len(tail) < len(c) and c.startswith(tail) for c in _ORPHAN_CLOSERS)


def _absorb_wrappers(segments: list[Segment], issues: list[str]) -> list[Segment]:
    """A wrapper's opener just before a call and its closer just after go into the call's source; a known closer
    right after a call with no opener before it too (`closer_without_opener`)."""
    out = list(segments)
    open_closer: str | None = None
    for index, segment in enumerate(out):
        if not isinstance(segment, Call) or not segment.source:
            continue
        head = index
        last = index
        while last + 1 < len(out) and isinstance(out[last + 1], Call) and not out[last + 1].source:  # type: ignore[union-attr]
            last += 1
        before = out[head - 1] if head else None
        prefix = suffix = ""
        if isinstance(before, Text):
            stripped = before.text.rstrip()
            opener = next((o for o in _OPENERS if stripped.endswith(o)), None)
            if opener is not None:
                cut = len(stripped) - len(opener)
                prefix = before.text[cut:]
                out[head - 1] = Text(before.text[:cut])
                open_closer = dict(WRAPPERS)[opener]
                issues.append("recovered:wrapper_absorbed")
        after = out[last + 1] if last + 1 < len(out) else None
        if isinstance(after, Text):
            stripped = after.text.lstrip()
            closer = open_closer if open_closer and stripped.startswith(open_closer) else next(
                (c for c in _ORPHAN_CLOSERS if stripped.startswith(c)), None)
            if closer is None and last + 2 == len(out) and _cut_closer(stripped):
                closer = stripped
                issues.append("recovered:truncated_closer")
            elif closer is not None and closer != open_closer:
                issues.append("recovered:closer_without_opener")
            if closer is not None:
                cut = len(after.text) - len(stripped) + len(closer)
                suffix = after.text[:cut]
                out[last + 1] = Text(after.text[cut:])
                open_closer = None
        if prefix or suffix:
            call = out[head]
            assert isinstance(call, Call)
            out[head] = Call(call.name, call.arguments, prefix + call.source + suffix, call.dialect)
    return merge_text(out)
