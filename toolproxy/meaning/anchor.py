"""The last rule of recovery: a call in a form no dialect knows, found by what the proxy knows for sure, the
declared tools.

Each model family brings its own spelling of a call, and the dialects only read the spellings met so far. What
every spelling shares is a declared tool's name standing in markup, then its arguments: a JSON object, a Python
argument list, or key and value pairs keyed by the tool's own parameter names (`anchor_pairs.py`). So a call is
read wherever a declared name has nothing but markup before it on its line (`anchor_markup.py`: tags, special
tokens, brackets, `key=` labels, a namespace), only markup between it and its arguments, and nothing but markup
after them on their last line. Prose mentioning a tool (`I will call read_file {...}`, `- read_file {...} first`)
has a word where markup must be, and stays text; a call is made only when the name is declared and the arguments
validate (recovery's check), so a guess costs a missed call, never a false one.

The call's source takes the markup lines around it (its wrapper's opener and closers), so content keeps none.
Linear: names are found by one pattern, a cheap look at the character before rejects most mentions, and at most
`MAX_TRIED` candidates are read per text, each reading forward over a bounded stretch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, merge_text
from toolproxy.dialects.cursor import Cursor
from toolproxy.dialects.pythonic_values import keywords
from toolproxy.meaning.anchor_markup import (
    after_markup,
    closes,
    fence_around,
    is_gap,
    is_markup,
    line_start,
    markup_lines_after,
    markup_lines_before,
    markup_start,
    opens,
    token_closed,
)
from toolproxy.meaning.anchor_object import loose_object
from toolproxy.meaning.anchor_pairs import names_a_key, read_pairs

MAX_TRIED = 32
_SPARSE = 64  # mentions refused by `_stands_alone` before the scan switches to `_candidates`
_GAP = 160  # how far after the name its JSON arguments may begin
_PYTHON_REACH = 65536
_NAME_CHARS = re.compile(r"[\w-]")
_OBJECT_IN_PARENTHESES = re.compile(r"\([ \t\n]*\{")
_CLOSE_PARENTHESIS = re.compile(r"[ \t\n]*\)")
# Arguments whose own end does not show they are whole: pairs (another may have followed) and none at all. An
# object or an argument list closes itself, so a call of one that ends the answer is whole even where its wrapper's
# closer is missing (LM Studio drops gpt-oss's `<|call|>`); one followed by more than markup is not.
_OPEN_ENDED = frozenset({"anchored_pairs", "anchored_no_arguments"})
_CALL_WORD = re.compile(r"(?i)tool|call|function|invoke|action")  # markup that says a call follows
_ATTRIBUTE_END = re.compile(r"[\"'\u201d]?[ \t]*/?>")  # the end of the tag whose attribute the name is
_MARKED = re.compile(r"[<\[]")  # a tag, token or bracket before a name: not a bare line
# Checks a call's name and raw arguments; the typed arguments, or None to leave the text as it is.
Check = Callable[[str, Any, list[str]], Any]


@dataclass(frozen=True, slots=True)
class _Found:
    start: int
    end: int
    arguments_end: int
    name: str
    arguments: Any
    rule: str
    markerless: bool  # no tag, token or bracket stands before the name: a bare line, or a line of JSON
    in_object: bool  # the name is a value in an object (`{"name": "x", "arguments": {..}}`): a line of JSON


def _alternatives(tools: frozenset[str]) -> str:
    return "|".join(re.escape(name) for name in sorted(tools, key=len, reverse=True))


@lru_cache(maxsize=256)
def _names(tools: frozenset[str]) -> re.Pattern[str]:
    return re.compile(_alternatives(tools))


def anchored_names(tools: ToolIndex) -> re.Pattern[str]:
    """One pattern for every declared name (what marks the next call's opener, where markup lines are taken)."""
    return _names(frozenset(name for name in tools if name))


@lru_cache(maxsize=256)
def _candidates(tools: frozenset[str]) -> re.Pattern[str]:
    """`_stands_alone` as a pattern, for a text dense with mentions: scanning every position costs more than a
    literal search where mentions are few, and costs no Python per mention where they are many."""
    return re.compile(rf"(?:^|(?<=[^\w \t-]))[ \t]{{0,8}}(?P<name>{_alternatives(tools)})(?![\w-])", re.MULTILINE)


def _stands_alone(text: str, start: int, end: int) -> bool:
    """A cheap first look: the name is a whole word, and no word of prose stands right before it (`call
    read_file`), within 8 spaces; a line's start, a namespace's dot or any markup may."""
    if end < len(text) and _NAME_CHARS.match(text, end):
        return False
    before = start
    while before > 0 and start - before < 8 and text[before - 1] in " \t":
        before -= 1
    if before == 0 or text[before - 1] == "\n":
        return True
    return not _NAME_CHARS.match(text, before - 1) and text[before - 1] not in " \t"


def anchored_calls(text: str, tools: ToolIndex, check: Check, dialect: str) -> list[Segment]:
    """`text` as text and the calls found in it by their declared names."""
    declared = frozenset(name for name in tools if name)
    names, candidates = _names(declared), _candidates(declared)
    out: list[Segment] = []
    bare: list[bool] = []  # for each call found, whether it is bare (`_Found.markerless`)
    kept = position = tried = markup_from = 0
    finder, rejected = names, 0  # sparse mentions: a literal search skips prose at C speed
    while tried < MAX_TRIED and (hit := finder.search(text, position)):
        position = hit.end()
        name = names.match(text, hit.start("name") if finder is candidates else hit.start())
        assert name is not None
        if finder is names and not _stands_alone(text, name.start(), name.end()):
            rejected += 1
            if rejected == _SPARSE:
                finder = candidates  # dense mentions: the same test, moved into the C scan
            continue
        tried += 1
        found = _read(text, name, kept, tools, names, markup_from)
        if found is None or (found.markerless and _describes(found.arguments)):
            continue  # `read_file {"path": "string"}`, `{"name": "read_file", "arguments": {"path": "string"}}`
        typed = check(found.name, found.arguments, [found.rule])
        if typed is None:
            continue
        echoed = _echoed(out, found, typed, text[kept : found.start])
        if echoed is not None:  # one call, its echo in its source
            out[-1] = Call(found.name, typed, echoed.source + text[kept : found.end], dialect)
            kept = position = found.end
            continue
        out.append(Text(text[kept : found.start]))
        out.append(Call(found.name, typed, text[found.start : found.end], dialect))
        joined = bool(bare) and found.start == kept  # right after the call before, in its markup (`[f(), g()]`)
        bare.append(bare[-1] if joined else found.markerless and not found.in_object)
        kept = position = found.end
        markup_from = found.arguments_end
    out.append(Text(text[kept:]))
    return _bare_calls_last(out, bare)


def _echoed(out: list[Segment], found: _Found, typed: Any, between: str) -> Call | None:
    """The call right before, where this one repeats it, with arguments and nothing but markup between: the model
    echoed its call list (LFM2 writes `[f(a=1)]<|tool_call_end|>[f(a=1)]<|tool_call_end|>`), and running the
    action twice is worse than not running a repeat the model meant."""
    before = out[-1] if out else None
    if isinstance(before, Call) and before.name == found.name and before.arguments == typed and typed != {} and (
            is_markup(between, 0, len(between))):
        return before
    return None


def _bare_calls_last(segments: list[Segment], bare: list[bool]) -> list[Segment]:
    """Bare calls (a name at the start of a line with no markup around it) only where nothing but calls and
    markup follows them (`web_search {...}` then `That is the whole request.` is an example shown in prose), where
    the answer holds one (`read_file: {...}` line after line lists tools). Read from the end, so a bare call
    demoted to text demotes the bare calls before it."""
    several = sum(bare) > 1
    out: list[Segment] = []
    calls = iter(reversed(bare))
    clean = True  # nothing but calls and markup after this point
    for segment in reversed(segments):
        if isinstance(segment, Text):
            clean = clean and is_markup(segment.text, 0, len(segment.text))
        elif next(calls) and (several or not clean):
            segment = Text(segment.source)
        out.append(segment)
    return merge_text(reversed(out))


_TYPE_NAMES = frozenset({"string", "str", "integer", "int", "number", "float", "boolean", "bool", "object",
                         "array", "list", "dict", "null", "any"})


def _describes(arguments: Any) -> bool:
    """Whether every value names a type (`{"path": "string", "limit": "integer"}`): a signature, not a call."""
    values = list(arguments.values()) if isinstance(arguments, dict) else []
    return bool(values) and all(isinstance(value, str) and value.strip().lower() in _TYPE_NAMES for value in values)


def _read(text: str, name: re.Match[str], floor: int, tools: ToolIndex, names: re.Pattern[str],
          markup_from: int) -> _Found | None:
    """The call at a declared name, or None. `floor`: where the call before ended; `markup_from`: where the markup
    after its arguments began (the closer of one call and the opener of the next are one stretch of markup)."""
    line = line_start(text, name.start(), floor)
    start = None if line is None else markup_start(text, line, name.start())
    if start is None or names.search(text, start, name.start()):
        return None  # prose right before the name, or another tool's name in its markup (which one is meant?)
    read = _arguments(text, name, tools[name.group()], names) or _no_arguments(text, name, start)
    if read is None:
        return None
    arguments, arguments_end, rule = read
    end = after_markup(text, arguments_end, names)
    if end is None:
        end = token_closed(text, markup_from if start == floor else start, name.start(), arguments_end)
    if end is None:
        return None
    if start == line:
        start = floor if floor and is_markup(text, floor, start) else markup_lines_before(text, start, floor)
    if opens(text, start, name.start()) and not closes(text, arguments_end, names) and (
            rule in _OPEN_ENDED or not is_markup(text, arguments_end, len(text))):
        return None  # opened and never closed: cut short (max_tokens), or its markup goes on where we stopped
    markerless = is_markup(text, start, name.start()) and not _MARKED.search(text, start, name.start())
    fenced = text.find("```", name.end(), arguments_end) >= 0
    end = markup_lines_after(text, end, names, fenced)
    fence = fence_around(text, start, end, floor) if markerless else None
    if fence is not None:
        start, end = fence  # a fence that holds the call alone is its markup (still a bare call: prose after it
        # makes it an example)
    return _Found(start, end, arguments_end, name.group(), arguments, rule, markerless,
                  "{" in text[start : name.start()])


def _arguments(text: str, name: re.Match[str], tool_schema: Any, names: re.Pattern[str]) -> tuple[Any, int, str] | None:
    """The raw arguments after a name (`(key=value)`, `{...}`, pairs keyed by the tool's parameter names, or none
    where the call closes right after its name) and where they end."""
    position = name.end()
    if text.startswith("(", position):
        inside = _OBJECT_IN_PARENTHESES.match(text, position)
        if inside is not None:  # `name({"city": "Paris"})`, as Kimi K2.5 and pseudo-code write it
            found = _json(text, inside.end() - 1)
            closed = _CLOSE_PARENTHESIS.match(text, found[1]) if found is not None else None
            return (found[0], closed.end(), found[2]) if found is not None and closed is not None else None
        python = _python(text, position + 1)
        loose = loose_object(text, position) if python is None else None
        return python or ((loose[0], loose[1], "anchored_loose_object") if loose is not None else None)
    properties = tool_schema.get("properties") if isinstance(tool_schema, dict) else None
    keys = frozenset(properties) if isinstance(properties, dict) else frozenset()
    brace = text.find("{", position, position + _GAP)
    if brace >= 0 and is_gap(text, position, brace) and not names.search(text, position, brace) and not (
            names_a_key(text, position, brace, keys)):  # `<parameter name="meta">{"k": 1}`: a pair's value
        return _json(text, brace)  # an object that does not decode is not read again as pairs
    pairs = read_pairs(text, position, keys, names)
    if pairs is not None:
        return pairs.values, pairs.end, "anchored_pairs"
    return None


def _no_arguments(text: str, name: re.Match[str], start: int) -> tuple[Any, int, str] | None:
    """A call with no arguments, closed right after its name: the name as an attribute's value (`<invoke
    name="refresh"></invoke>`), or after markup that says it is a call (`<tool_call>get_date<tool_sep></tool_call>`).
    The schema then allows no arguments or not."""
    before = text[max(0, name.start() - 2) : name.start()]
    if before.endswith("=") or before in ('="', "='", "=\u201c"):
        after = _ATTRIBUTE_END.match(text, name.end())
        end = after.end() if after else None
    else:
        bare_name = text[name.start() - 1 : name.start()] not in ("'", '"')  # not a string of a JSON object
        end = name.end() if bare_name and _CALL_WORD.search(text, start, name.start()) else None
    # Closed by a closer only: a name then the next call's (`[A(A=)A(`) has arguments it could not read.
    return ({}, end, "anchored_no_arguments") if end is not None and closes(text, end) else None


def _json(text: str, brace: int) -> tuple[Any, int, str] | None:
    """A JSON object, or one that is almost JSON (`anchor_object.py`: bare keys, quote tokens, bare words)."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, brace)
    except (ValueError, RecursionError):
        loose = loose_object(text, brace)
        return (loose[0], loose[1], "anchored_loose_object") if loose is not None else None
    return (value, end, "anchored_json") if isinstance(value, dict) else None


def _python(text: str, start: int) -> tuple[Any, int, str] | None:
    """`key=value, ...)` read by the pythonic dialect's own value reader, on a bounded stretch."""
    cursor = Cursor()
    cursor.append(text[start : start + _PYTHON_REACH])
    cursor.ended = True
    reader = keywords(cursor)
    try:
        while True:
            next(reader)
    except StopIteration as stop:
        arguments = stop.value
    return (arguments, start + cursor.position, "anchored_python") if arguments is not None else None
