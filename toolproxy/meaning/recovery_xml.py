"""Lenient readers for damaged XML-shaped calls and MiniMax's `[TOOL_CALL]` arrow syntax, used by `recovery.py`
on the text the strict dialects left.

Each reader starts at one position and returns where the call ends, its name, its raw arguments and the names of
the damages it mended, or None. Readers only move forward: names are read with bounded patterns and a value ends
at the first closer or opener found with one `search`, so a reader costs at most the text it walks over.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toolproxy.dialects.base import ToolIndex

_NAME = re.compile(r"[^\s<>\"'=/]{1,128}")
# Where a value ends: its own closer, the next parameter, the end of the function or of the wrapper, or the next
# call's opener (a value whose closer is missing runs up to it).
_VALUE_END = re.compile(r"</parameter>|<parameter[= ]|</param>|<param |</arg_value>|<arg_key>|</function>"
                        r"|</tool_call>|<tool_call>|<function=")
_WRAPPER, _END_WRAPPER = "<tool_call>", "</tool_call>"
_SPACE = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class Read:
    end: int
    name: str
    arguments: Any  # dict of raw string values (XML forms) or a decoded JSON value
    rules: tuple[str, ...]


def _skip(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match else position


def _name_until(text: str, start: int, stop: str) -> tuple[str, int] | None:
    """The name between `start` and `stop` (within 130 characters) and the position after `stop`."""
    end = text.find(stop, start, start + 130)
    if end < 0:
        return None
    name = text[start:end].strip()
    return (name, end + len(stop)) if _NAME.fullmatch(name) else None


def read_xml_call(text: str, start: int, tools: ToolIndex) -> Read | None:
    """A Qwen3-Coder, GLM or MiniCPM style call with its markup damaged: closers missing, a truncated or stray
    closer, the name written as `<name>NAME`, `<tool_call>NAME` or `<function>NAME</function>` + JSON."""
    position, rules = start, []
    wrapped = text.startswith(_WRAPPER, position)
    if wrapped:
        position = _skip(text, position + len(_WRAPPER))
    expects_function_end = True
    json_arguments = False
    if text.startswith("<function=", position):
        found = _name_until(text, position + len("<function="), ">")
    elif text.startswith('<function name="', position):
        found = _name_until(text, position + len('<function name="'), '">')
        rules.append("opener_variant")
    elif text.startswith("<name>", position):
        match = _NAME.match(text, position + len("<name>"))
        found = (match.group(), match.end()) if match else None
        rules.append("opener_variant")
    elif wrapped and text.startswith("<function>", position):
        found = _name_until(text, position + len("<function>"), "</function>")
        expects_function_end, json_arguments = False, True
        rules.append("opener_variant")
    elif wrapped:
        match = _NAME.match(text, position)
        found = (match.group(), match.end()) if match else None
        expects_function_end = False
        rules.append("opener_variant")
    else:
        return None
    if found is None or found[0] not in tools:
        return None
    name, position = found
    after_name = _skip(text, position)
    for stray in ("</parameter>", "</name>"):
        if text.startswith(stray, after_name):
            position = after_name + len(stray)
            rules.append("stray_closer")
            break
    if json_arguments:
        body = _json_object(text, _skip(text, position))
        if body is None:
            return None
        arguments, position = body
    else:
        parameters = _parameters(text, position)
        if parameters is None:
            return None
        arguments, position, damaged = parameters
        if damaged:
            rules.append("closer_missing")
    return _close(text, position, Read(position, name, arguments, tuple(rules)), wrapped, expects_function_end)


def _json_object(text: str, position: int) -> tuple[Any, int] | None:
    if not text.startswith("{", position):
        return None
    try:
        value, end = json.JSONDecoder().raw_decode(text, position)
    except ValueError:
        return None
    return (value, end) if isinstance(value, dict) else None


def _parameters(text: str, position: int) -> tuple[dict[str, str], int, bool] | None:
    """`<parameter=K>`, `<parameter name="K">`, `<param name="K">` and GLM's `<arg_key>K</arg_key><arg_value>`;
    values trimmed (schema typing comes later). True when a value's closer was missing; None when a value runs to
    the end of the text or a parameter is written twice."""
    arguments: dict[str, str] = {}
    damaged = False
    while True:
        position = _skip(text, position)
        if text.startswith("<parameter=", position):
            found, closer = _name_until(text, position + len("<parameter="), ">"), "</parameter>"
        elif text.startswith('<parameter name="', position):
            found, closer = _name_until(text, position + len('<parameter name="'), '">'), "</parameter>"
        elif text.startswith('<param name="', position):
            found, closer = _name_until(text, position + len('<param name="'), '">'), "</param>"
        elif text.startswith("<arg_key>", position):
            found, closer = _name_until(text, position + len("<arg_key>"), "</arg_key>"), "</arg_value>"
            if found is not None:
                value_at = _skip(text, found[1])
                found = (found[0], value_at + len("<arg_value>")) if text.startswith("<arg_value>", value_at) else None
        else:
            return arguments, position, damaged
        if found is None:
            return arguments, position, damaged
        key, value_start = found
        if key in arguments:
            return None  # a parameter written twice: which value is meant? (as the almost-JSON reader refuses)
        end = _VALUE_END.search(text, value_start)
        if end is None:
            return None  # the value runs to the end of the answer: cut short (max_tokens), never a call
        value_end = end.start()
        arguments[key] = text[value_start:value_end].strip()
        if end.group() == closer:
            position = end.end()
        elif end.group() in (_WRAPPER, "<function=") or not arguments[key]:
            return None  # an empty value, or one only the next call's opener ends, is not a value
        else:
            damaged, position = True, value_end


def _close(text: str, position: int, read: Read, wrapped: bool, expects_function_end: bool) -> Read | None:
    rules = list(read.rules)
    at = _skip(text, position)
    if expects_function_end:
        if text.startswith("</function>", at):
            position = at = _skip(text, at + len("</function>"))
        elif not read.arguments:
            return None  # a bare opener with nothing after it is not a call, however often it repeats
        elif "closer_missing" not in rules:
            rules.append("closer_missing")
    if text.startswith("</arg_value>", at):
        position = at = _skip(text, at + len("</arg_value>"))
        rules.append("stray_closer")
    rest = text[at : at + len(_END_WRAPPER) + 1]
    if text.startswith(_END_WRAPPER, at):
        position = at + len(_END_WRAPPER)
        if not wrapped:
            rules.append("closer_without_opener")
    elif wrapped and rest and at + len(rest) == len(text) and _END_WRAPPER.startswith(rest.rstrip()):
        position = len(text)
        rules.append("truncated_closer")
    elif at == len(text) or text.startswith((_WRAPPER, "<function="), at):
        if wrapped and not expects_function_end and "stray_closer" not in rules:
            return None  # GLM's form ends only with its closer: a reply stopping after a value may be cut short
        if wrapped and "closer_missing" not in rules:
            rules.append("closer_missing")
    elif "closer_missing" in rules or wrapped:
        return None  # damaged markup is only trusted where nothing but its own closer follows it
    return Read(position, read.name, read.arguments, tuple(rules))


_ARROW_HEAD = re.compile(r'\[TOOL_CALL\]\s{0,16}\{\s{0,16}tool\s{0,4}=>\s{0,4}"([^"\n]{1,128})"\s{0,4},\s{0,16}'
                         r"args\s{0,4}=>\s{0,4}\{")
_ARROW_END = "[/TOOL_CALL]"


def read_arrow_call(text: str, start: int, tools: ToolIndex) -> Read | None:
    """`[TOOL_CALL] {tool => "NAME", args => { --key "value" ... }} [/TOOL_CALL]`, one `--key value` a line."""
    head = _ARROW_HEAD.match(text, start)
    if head is None or head.group(1) not in tools:
        return None
    body_end = text.find("}}", head.end(), head.end() + 65536)
    if body_end < 0:
        return None
    arguments: dict[str, Any] = {}
    for line in text[head.end() : body_end].splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("--"):
            return None
        key, _, value = line[2:].partition(" ")
        value = value.strip()
        if not _NAME.fullmatch(key):
            return None
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = json.loads(value)
            except ValueError:
                value = value[1:-1]
        arguments[key] = value
    position = _skip(text, body_end + 2)
    if text.startswith(_ARROW_END, position):
        position += len(_ARROW_END)
    elif text[position:].strip():
        return None
    return Read(position, head.group(1), arguments, ("arrow_pseudo_call",))


_KIMI_BEGIN, _KIMI_ARGUMENT, _KIMI_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_KIMI_ID = re.compile(r"\s*([^\s<>{}]{1,256})\s*")
# An id that names no function (`functions:0` read as `functions`, `call_0`, `0`): only then is the tool found by
# its schema.
_NAMELESS_ID = re.compile(r"(?:functions?|tools?|call)?[._:-]?\d*")


def read_kimi_call(text: str, start: int, tools: ToolIndex) -> Read | None:
    """A Kimi-K2 call the strict reader refused: arguments encoded as a JSON string, or an id that names no
    function (`functions:0`, `call_0`), in which case the one declared tool whose schema accepts the arguments; an
    id naming an undeclared tool (`functions.invalid.0`) is refused."""
    head = _KIMI_ID.match(text, start + len(_KIMI_BEGIN))
    if head is None or not text.startswith(_KIMI_ARGUMENT, head.end()):
        return None
    position = _skip(text, head.end() + len(_KIMI_ARGUMENT))
    try:
        arguments, position = json.JSONDecoder().raw_decode(text, position)
    except (ValueError, RecursionError):
        return None
    position = _skip(text, position)
    if not text.startswith(_KIMI_END, position):
        return None
    call_id = head.group(1)
    name, colon, index = call_id.rpartition(":")
    name = (name if colon and index.isdigit() else call_id).removeprefix("functions.")
    rules = ["kimi_lenient"]
    if name in tools and not isinstance(arguments, str):
        return None  # the strict reader's own form: it refused it for a reason (a neighbour's broken JSON)
    if name not in tools:
        if not _NAMELESS_ID.fullmatch(name):
            return None  # the id names a tool, one not declared: never another tool in its place
        name = _only_tool_accepting(arguments, tools)
        rules.append("name_from_schema")
    return Read(position + len(_KIMI_END), name, arguments, tuple(rules)) if name else None


def _only_tool_accepting(arguments: Any, tools: ToolIndex) -> str:
    from toolproxy.meaning import schema  # the schema check is meaning's; the reader itself is syntax

    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    if not isinstance(arguments, dict) or not arguments:
        return ""
    accepting = []
    for name, tool_schema in tools.items():
        properties = tool_schema.get("properties")
        if isinstance(properties, dict) and any(key not in properties for key in arguments):
            continue
        try:
            if not schema.validate(schema.coerce(arguments, tool_schema), tool_schema):
                accepting.append(name)
        except schema.SchemaProblem:
            continue
    return accepting[0] if len(accepting) == 1 else ""
