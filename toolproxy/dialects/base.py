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
import re
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


def trim_newlines(raw: str) -> str:
    """One line break after the opening tag and one before the closing tag are layout, not value."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return raw


_LAYOUT = " \t\r"


def trim_value(raw: str) -> str:
    """A value written between tags, without its layout: the rest of the opening tag's line when it is blank
    (`<parameter=path>\n`), and the closing tag's indentation with the line break before it (`\n  </parameter>`).
    The text itself keeps every space: an `old_string` of an edit is indented code (a number's spaces go when
    `schema.py` types it)."""
    first = raw.find("\n")
    if first < 0:
        return raw
    if not raw[:first].strip(_LAYOUT):
        raw = raw[first + 1 :]
    last = raw.rfind("\n")
    if last >= 0 and not raw[last + 1 :].strip(_LAYOUT):
        raw = raw[:last]
    return raw


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `marker` (what must be held back)."""
    for length in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


_DECODER = json.JSONDecoder()
_UNDECODED = object()  # JsonSpan.value before (or without) a whole decode
_IN_CODE = re.compile(r'["{}\[\]]')
# The rest of a JSON string up to its closing quote, escapes included, in one C-speed match (a loop per escape
# made a 256 KB `write` argument cost 30 ms). The unrolled form (a run of plain characters, then escapes each
# followed by a run) has one way to match, and possessive quantifiers keep sre from even trying others: linear.
# It stops on the closing quote, on a backslash that ends the text, or at the end of the text.
_STRING_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_OPENERS = re.compile(r"[\[{]+")
_CLOSERS = re.compile(r"[\]}]+")


class JsonSpan:
    """Finds where a JSON object or array ends, fed piece by piece from its opening bracket (it must be started
    on that bracket: a stray closer first would end it at once).

    Brackets inside strings do not count, so `"</tool_call>"` or `"}"` in an argument never ends a block.
    Between two strings the brackets are counted in bulk (str.count runs in C) whenever the depth cannot reach
    zero there, which keeps adversarial input like a megabyte of `[` or `{` linear and fast.
    Bracket kinds are not matched here: `json.loads` judges the finished span.
    """

    def __init__(self) -> None:
        self.value: Any = _UNDECODED  # the decoded value, when its first piece held it whole
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self._stepping_until = -1  # in this stretch the bulk count failed: step bracket by bracket
        # How far a bulk count looks ahead; doubled after each success. Without a bound, every new span in text
        # with no more quotes would count to the end of the whole text: quadratic over many small spans.
        self._reach = 256

    def feed(self, text: str, position: int = 0) -> int | None:
        """Index just past the value's end within `text`, or None while it is still open."""
        if self.depth == 0 and not self.in_string and text.startswith(("{", "["), position):
            end = self._decode(text, position)
            if end is not None:
                return end
        self._stepping_until = -1
        while position < len(text):
            if self.escaped:
                self.escaped = False
                position += 1
            elif self.in_string:
                position = self._skip_string(text, position)
            else:
                end, position = self._step_code(text, position)
                if end is not None:
                    return end
        return None

    def _decode(self, text: str, position: int) -> int | None:
        """A whole value (a one-shot parse, or a call that came in one piece) is decoded where it starts, in one
        C pass that also finds its end, and callers use the value instead of decoding it again: the bracket tracker
        read a 200 KB `write` argument at 10 ns a character before json read it once more. A valid value ends where
        the tracker would end it (brackets balance, strings lexed alike), and a value that is invalid or not all
        here fails no later than that end: at most one more read of what the tracker reads anyway."""
        try:
            self.value, end = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        assert isinstance(end, int)
        return end

    def _skip_string(self, text: str, position: int) -> int:
        match = _STRING_REST.match(text, position)  # always matches (perhaps empty)
        end = match.end() if match else position
        if end == len(text):
            return end
        if text[end] == "\\":  # the last character of the text: its escaped character comes with the next piece
            self.escaped = True
        else:
            self.in_string = False
        return end + 1

    def _step_code(self, text: str, position: int) -> tuple[int | None, int]:
        """(end of the value or None, where to go on)."""
        if position >= self._stepping_until:
            limit = min(len(text), position + self._reach)
            quote = text.find('"', position, limit)
            stop = limit if quote < 0 else quote
            closes = text.count("}", position, stop) + text.count("]", position, stop)
            if closes < self.depth:  # the depth cannot reach zero before the next string: count in bulk
                self.depth += text.count("{", position, stop) + text.count("[", position, stop) - closes
                if quote >= 0:
                    self.in_string = True
                else:
                    self._reach *= 2
                return None, stop + (quote >= 0)
            if self.depth:  # (at depth 0 we stand on the opening bracket: one step, then bulk counting again)
                self._stepping_until = stop  # each stretch is counted at most once, so this stays linear
        match = _IN_CODE.search(text, position)
        if match is None:
            return None, len(text)
        if match.group() == '"':
            self.in_string = True
            return None, match.end()
        run = (_OPENERS if match.group() in "[{" else _CLOSERS).match(text, match.start())
        assert run is not None
        count = run.end() - run.start()
        if match.group() in "[{":
            self.depth += count
            return None, run.end()
        if count >= self.depth:
            end = match.start() + self.depth
            self.depth = 0
            return end, end
        self.depth -= count
        return None, run.end()


def is_decoded(value: Any) -> bool:
    """Whether a JsonSpan's `value` holds the decoded value."""
    return value is not _UNDECODED


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
