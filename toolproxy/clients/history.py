"""The bridge between the XML tool history of Cline, Roo Code and Kilo Code and native `tool_calls`: their XML
tool uses and `[name for '...'] Result:` user turns as calls and tool messages, and native calls back as their XML.
Pure: no I/O; every scan is linear.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolproxy.clients.examples import INTEGER, NAME, Element, read_elements
from toolproxy.clients.prompt import REACH, ClientTools, Finder
from toolproxy.dialects.base import Call, Text, merge_text, trim_newlines
from toolproxy.dialects.block import pad_newlines, render_value
from toolproxy.dialects.chain import ChainScanner
from toolproxy.dialects.registry import DIALECTS

# --- history: XML tool uses and their results as native calls and tool messages --------------------------------------

_HEADER = re.compile(rf"\[({NAME})(?:\]| for )")
_NOTICE = re.compile(rf"(?:Tool|Skipping tool) \[({NAME})")
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
    elements = read_elements(call.source[len(call.name) + 2 : len(call.source) - len(call.name) - 3])
    return None if elements is None else _group(elements, properties)


def _group(elements: list[Element], properties: Mapping[str, Any]) -> dict[str, Any] | None:
    """Elements as arguments: an array the schema declares is read from repeated elements (Roo's `<suggest>`s,
    `<file>`s), one of them included, or from one element holding `<item>`s; any other repeat becomes a list too."""
    if any(element.attributes for element in elements):
        return None
    grouped: dict[str, list[Element]] = {}
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
    if kind == "array" and value.startswith("<item>") and (elements := read_elements(value)) \
            and all(element.name == "item" and not element.attributes for element in elements):
        return [_typed(element.inner, schema.get("items")) for element in elements]
    if kind == "object" and value.startswith("<") and (elements := read_elements(value)) \
            and (grouped := _group(elements, _properties_of(schema))) is not None:
        return grouped
    if kind == "integer" and INTEGER.fullmatch(value):
        return int(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return trim_newlines(raw)


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
    header = _header(Finder(stripped), names, pieces)
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


def _header(finder: Finder, names: list[str], pieces: dict[int, list[str]], start: int = 0) -> tuple[int, int] | None:
    """`[read_file for 'a.ts'] Result:` at `start`: (the call, where the result begins). The part in brackets may
    hold `]` and line breaks (a command, a regex), so its end is searched for, a bounded distance ahead."""
    found = _HEADER.match(finder.text, start)
    if found is None:
        return None
    end = finder.find(_RESULT_END, found.end() - 1, found.end() + REACH)
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
    finder = Finder(text)
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
