"""The dialect interface and the pieces every dialect shares.

A dialect owns syntax only: it turns model text into ordered segments, `Text` and `Call`, whose sources joined
give back the text exactly. Meaning (is the tool declared, what type is an argument) belongs to `schema.py` and
`extraction.py`. No I/O here, no Flask, no requests: this package must stay fast to test and safe to fuzz.

Every dialect is a streaming scanner (`feed` pieces, then `finish`); a one-shot parse is the scanner fed the
whole text, so streaming and non-streaming cannot disagree. Scanners are linear: they only search the held-back
tail plus the new text, and they find JSON ends with a bracket tracker instead of re-decoding on every piece.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

# name -> the tool's `parameters` JSON Schema, for the tools of one request.
ToolIndex: TypeAlias = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call as the model wrote it. `arguments` is raw: a dict, a JSON string, or None for no arguments."""

    name: str
    arguments: Any
    source: str
    dialect: str


Segment: TypeAlias = Text | Call


@dataclass(frozen=True, slots=True)
class Markup:
    """The literals a dialect's calls are written with, for the rooms that look for call markup without parsing
    it: the leftover-markup check (`extraction.py`), wrapper absorption in recovery, and defusing forged markup in
    prompts (`transform/markup.py`). Declared by each dialect, gathered by the registry."""

    openers: tuple[str, ...] = ()  # literals that only ever start a call: left as text, a call attempt failed
    closers: tuple[str, ...] = ()  # literals that only ever end or separate its parts
    wrappers: tuple[tuple[str, str], ...] = ()  # (opener, closer) a model may leave around a call recovery mends


class Scanner(Protocol):
    def feed(self, text: str) -> list[Segment]:
        """Segments that are final given the text so far; text that may start a call is held back."""
        ...

    def finish(self) -> list[Segment]:
        """Everything still held back: an unfinished call goes out as text."""
        ...


class Dialect(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def holds_only_markers(self) -> bool:
        """Whether its scanner, fed text without a whole marker, gives back all of it but the longest end that may
        begin one: a stream then builds it only once a marker comes (chain.py)."""
        ...

    @property
    def markup(self) -> Markup: ...

    def markers(self, tools: ToolIndex) -> tuple[str, ...] | None:
        """Literals of which every call of this dialect holds one (its openers), or None when a call may begin
        anywhere: a whole reply without any of them holds no call of this dialect, so it need not be scanned."""
        ...

    def scanner(self, tools: ToolIndex) -> Scanner: ...


class RenderingDialect(Dialect, Protocol):
    """A dialect that can also write a call (for prompts, history, and the round-trip property)."""

    def render_call(self, name: str, arguments: Mapping[str, Any]) -> str: ...


def parse(dialect: Dialect, text: str, tools: ToolIndex) -> list[Segment]:
    """One-shot parse: the streaming scanner fed the whole text."""
    scanner = dialect.scanner(tools)
    return merge_text(scanner.feed(text) + scanner.finish())


def merge_text(segments: Iterable[Segment]) -> list[Segment]:
    """Adjacent text segments joined into one, empty ones dropped, so results compare simply. Linear: pieces
    are collected and joined once (repeated `+=` on a growing string would be quadratic)."""
    merged: list[Segment] = []
    pieces: list[str] = []
    for segment in segments:
        if isinstance(segment, Text):
            pieces.append(segment.text)
            continue
        if pieces and (text := "".join(pieces)):
            merged.append(Text(text))
        pieces = []
        merged.append(segment)
    if pieces and (text := "".join(pieces)):
        merged.append(Text(text))
    return merged


def source_of(segments: Iterable[Segment]) -> str:
    """The model text the segments came from: the no-text-lost property is `source_of(parse(t)) == t`."""
    return "".join(segment.text if isinstance(segment, Text) else segment.source for segment in segments)


def declared_name(written: str, tools: ToolIndex) -> str | None:
    """The declared tool a written name means: the name itself; the last part of a namespaced name
    (`default_api:read_file`); or, of those, the one tool whose name differs only in writing `-` for `_` or `_`
    for `-` (Gemma 4 wrote `execute-code` for `execute_code`, stevelittlefish/llm_proxy). None when no tool is
    meant, or two are (`read-file` and `read_file` both declared)."""
    if written in tools:
        return written
    last = written.rpartition(":")[2]
    if last in tools:
        return last
    spelled = last.replace("-", "_")
    meant = [name for name in tools if name.replace("-", "_") == spelled]
    return meant[0] if len(meant) == 1 else None


def trim_newlines(raw: str) -> str:
    """One line break after the opening tag and one before the closing tag are layout, not value."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return raw


_LAYOUT = " \t\r"


def trim_value(raw: str, paired: bool = False) -> str:
    """A value written between tags, without its layout: the rest of the opening tag's line when it is blank
    (`<parameter=path>\n`), and the closing tag's indentation with the line break before it (`\n  </parameter>`).
    The text itself keeps every space: an `old_string` of an edit is indented code (a number's spaces go when
    `schema.py` types it).

    `paired`: the family's chat template writes no layout around values (GLM, MiniMax-M2, Seed-OSS, DSML), so a
    value's own line break stays (`<arg_value>x = 1\n</arg_value>` holds "x = 1\n"); layout is taken off only
    where it stands on both sides, as a model drifting into Qwen3-Coder's layout writes it.

    Two more kinds of layout, written by models rather than templates: a one-line value padded on both sides
    (`<parameter=cmd> ls -lha </parameter>`, Qwen3-Coder on llama.cpp), and a call indented as a whole, the value's
    lines as far as its closing tag (`\n cd x\n </parameter>`, Nemotron 3). Rendering never writes either
    (`block.pad_newlines`), so a value written by a template is read back as it was."""
    first = raw.find("\n")
    if first < 0:
        return _unpadded(raw)
    if paired and (raw[:first].strip(_LAYOUT) or raw[raw.rfind("\n") + 1 :].strip(_LAYOUT)):
        return raw
    if not raw[:first].strip(_LAYOUT):
        raw = raw[first + 1 :]
    last = raw.rfind("\n")
    if last >= 0 and not raw[last + 1 :].strip(_LAYOUT):
        raw = _dedented(raw[:last], raw[last + 1 :].rstrip("\r"))
    return raw


_PADDING = " \t"


def padded(value: str) -> bool:
    """A one-line value with white space on both of its sides, which `trim_value` takes for padding."""
    return value[:1] in _PADDING and value[-1:] in _PADDING and bool(value.strip(_PADDING))


def _unpadded(raw: str) -> str:
    """A one-line value without the white space on both of its sides; one with it on one side only keeps it
    (an edit's `old_string` may be indented code)."""
    return raw.strip(_PADDING) if padded(raw) else raw


def _dedented(value: str, indent: str) -> str:
    """The value's lines without the closing tag's indentation, when every line that is not blank begins with it;
    else as they are."""
    if not indent:
        return value
    lines = value.split("\n")
    if not all(line.startswith(indent) or not line.strip(_LAYOUT) for line in lines):
        return value
    return "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines)


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `marker` (what must be held back)."""
    for length in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


def decode_json(text: str) -> Any:
    """The JSON value in `text`, or raise ValueError (json's own errors and over-deep nesting alike)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def call_from_json(value: Any) -> tuple[str, Any] | None:
    """(name, raw arguments) when a decoded JSON value has the shape of one tool call, else None.

    Accepts what models write: `{"name", "arguments"}`, `{"name", "parameters"}` (Llama 3), and the OpenAI
    shape `{"type": "function", "function": {"name", "arguments"}}`.
    """
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and "name" not in value:
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    allowed = {"name", "arguments", "parameters", "type", "id"}
    if set(value) - allowed:
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if arguments is not None and not isinstance(arguments, (dict, str)):
        return None
    return name, arguments


def text_property(schema: Any) -> str:
    """The one property a raw text input can fill: the only property, or the only required string one."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        return ""
    if len(properties) == 1:
        return str(next(iter(properties)))
    required = [key for key in schema.get("required", ()) if isinstance(properties.get(key), Mapping)
                and properties[key].get("type") == "string"]
    return str(required[0]) if len(required) == 1 else ""
