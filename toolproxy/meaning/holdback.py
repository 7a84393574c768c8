"""What a live stream may hold back, and nothing more: the tail that could still begin a call (the scanners
decide), inline reasoning markers cut in half, a wrapper (a Markdown fence, a tag alone on its line) that a
following call would take with it (the whitespace whose fate depends on whether a call comes: writers.py). Shared by
the VTC stream and `stream_strategy: incremental`; pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from toolproxy.dialects.base import Scanner, Segment, Text, partial_suffix
from toolproxy.meaning.channels import ANSWER_MARKUP
from toolproxy.meaning.reasoning import CLOSED_ONLY, MARKERS


class BoundedScanner:
    """A scanner that never holds more than `limit` bytes: past it, what it holds is released as text (a call
    that long is not coming, and the client must not wait for it)."""

    def __init__(self, make: Callable[[], Scanner], limit: int) -> None:
        self._make = make
        self._scanner: Scanner = make()
        self._limit = limit
        self._held = 0
        self.overflowed = False  # the limit was reached once: what was held went out as text

    def feed(self, text: str) -> list[Segment]:
        segments = self._scanner.feed(text)
        released = sum(len(source(segment).encode()) for segment in segments)
        self._held += len(text.encode()) - released
        if self._held > self._limit:
            segments += self._scanner.finish()
            self._scanner, self._held, self.overflowed = self._make(), 0, True
        return segments

    def finish(self) -> list[Segment]:
        return self._scanner.finish()


def source(segment: Segment) -> str:
    return segment.text if isinstance(segment, Text) else segment.source


WAIT_FOR_CLOSER = 4096  # characters a `closed_only` opener is held for, waiting for its closer


# The piece that says a marker was set aside here (an empty one of reasoning): the answer's whitespace before its
# first character is layout after it (Extraction.lead).
MARKUP = (True, "")


class ReasoningStream:
    """Inline `<think>...</think>` (and the other pairs of reasoning.MARKERS) split off as text arrives: yields
    (is_reasoning, text) pieces, and `MARKUP` where a marker was; only a marker cut in half is held. The
    whole-text split (reasoning.split) also takes text before a closer that was never opened as reasoning; a stream
    has sent that text already, so it notes `late_closer` instead. Markup around the answer that the whole-text
    split sets aside wherever it stands (Kimi K3's response channel, Cohere's response tokens:
    channels.ANSWER_MARKUP) is dropped here too."""

    def __init__(self) -> None:
        self._inside: tuple[str, str] | None = None
        self._seen: set[str] = set()  # closers of pairs met already (a later closer is no longer an orphan)
        self._held = ""
        self._blocks: list[list[str]] = []  # each reasoning block's text, for the whole reasoning at the end
        self._just_closed: tuple[str, str] | None = None  # the pair closed with no text since: an opener continues it
        self._waiting: tuple[str, str] | None = None  # the held opener's pair, one that counts only when closed
        self._looked = 0  # how much of the held text was searched for its closer
        self.late_closer = False
        self.unclosed = False

    def feed(self, text: str) -> list[tuple[bool, str]]:
        text, self._held = self._held + text, ""
        if self._waiting is not None and self._still_waiting(text):
            return []
        pieces: list[tuple[bool, str]] = []
        position = 0
        while position < len(text):
            found = self._next_marker(text, position)
            if found is None:
                keep = max(partial_suffix(text[position:], marker) for marker in self._markers())
                self._add(pieces, text[position : len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            start, marker = found
            self._add(pieces, text[position:start])
            waiting = self._waits_for_closer(text, start, marker)
            if waiting is not None:
                self._held, self._waiting = text[start:], waiting
                self._still_waiting(self._held)
                break
            if marker not in ANSWER_MARKUP:
                self._switch(marker, pieces)
            pieces.append(MARKUP)
            position = start + len(marker)
        return [(kind, piece) for kind, piece in pieces if piece or (kind, piece) == MARKUP]

    def finish(self) -> list[tuple[bool, str]]:
        pieces: list[tuple[bool, str]] = []
        if self._waiting is not None:  # never closed: answer, as the whole-text split reads it
            self._inside = None
        self._add(pieces, self._held)
        self._held = ""
        # A pair that counts only when closed was opened and never closed, after the wait: the whole-text split
        # reads it as answer, but a stream has sent it as reasoning already.
        self.unclosed = self._inside in CLOSED_ONLY
        return [(kind, piece) for kind, piece in pieces if piece]

    def _waits_for_closer(self, text: str, start: int, marker: str) -> tuple[str, str] | None:
        """The pair of an opener that counts only when closed, where it must wait (held, up to WAIT_FOR_CLOSER
        characters) until its closer shows whether it is one; None where it need not."""
        pair = next((pair for pair in CLOSED_ONLY if pair[0] == marker), None)
        if self._inside is None and pair is not None and len(text) - start < WAIT_FOR_CLOSER and (
                text.find(pair[1], start) < 0):
            return pair
        return None

    def _still_waiting(self, held: str) -> bool:
        """Whether the held opener still waits; each character is searched once for its closer."""
        assert self._waiting is not None
        closer = self._waiting[1]
        found = held.find(closer, max(0, self._looked - len(closer) + 1))
        if found < 0 and len(held) < WAIT_FOR_CLOSER:
            self._held, self._looked = held, len(held)
            return True
        self._waiting, self._looked = None, 0
        return False

    def issues(self) -> list[str]:
        """What the stream could not do as the whole-text split does, said once it has finished."""
        return [issue for issue, happened in (
            ("incremental: a reasoning closer without opener came after text was sent", self.late_closer),
            ("incremental: a reasoning opener never closed went out as reasoning", self.unclosed)) if happened]

    def thought(self) -> str:
        """The reasoning as the whole-text split gives it: each block trimmed, blank lines between."""
        blocks = ("".join(block).strip() for block in self._blocks)
        return "\n\n".join(block for block in blocks if block)

    def _add(self, pieces: list[tuple[bool, str]], piece: str) -> None:
        if piece:
            self._just_closed = None
        if self._inside is not None:
            self._blocks[-1].append(piece)
        pieces.append((self._inside is not None, piece))

    def _markers(self) -> list[str]:
        if self._inside is not None:
            return [self._inside[1], *ANSWER_MARKUP]
        # A closer met after its pair was seen is plain text, as in the whole-text split, and so is one whose pair
        # counts only when closed.
        return [*(marker for pair in MARKERS for marker in pair
                  if marker not in self._seen and not (marker == pair[1] and pair in CLOSED_ONLY)), *ANSWER_MARKUP]

    def _next_marker(self, text: str, position: int) -> tuple[int, str] | None:
        found = [(index, marker) for marker in self._markers() if (index := text.find(marker, position)) >= 0]
        return min(found) if found else None

    def _switch(self, marker: str, pieces: list[tuple[bool, str]]) -> None:
        if self._inside is not None:  # its closer
            self._inside, self._just_closed = None, self._inside
            return
        pair = next(pair for pair in MARKERS if marker in pair)
        if marker == pair[0]:
            if self._just_closed != pair or not self._blocks:  # (a span that opens where one closed continues it)
                self._blocks.append([])
            self._inside = pair
        elif pair[1] not in self._seen:
            # An orphan closer: the text before it was reasoning, but it has gone out as answer already.
            self.late_closer = True
            pieces[-1] = (True, pieces[-1][1])
            self._blocks.append([pieces[-1][1]])
            self._just_closed = pair
        self._seen.add(pair[1])


# A wrapper a call may take with it (extraction.absorb_wrappers): a Markdown fence (```json), or a line of one
# opening tag of the model's own (`<response>`, `<assistant>` around a JSON call) that the same tag's closer ends
# right after the call. The opener ends the text before the call (within its last WINDOW characters), the closer
# begins the text after it.
_OPENER = re.compile(r"(?:```[\w-]*|<[A-Za-z][\w-]{0,31}>)[ \t]*\n[ \t]*\Z")
_FENCE_OPEN_SO_FAR = re.compile(r"```[\w-]*[ \t]*(?:\n[ \t]*)?\Z|`{1,2}\Z")
_TAG_OPEN_SO_FAR = re.compile(r"[ \t]{0,8}<(?:[A-Za-z][\w-]{0,31}(?:>[ \t]*(?:\n[ \t]*)?)?)?\Z")
# Between a call and its wrapper's closer: layout, and closing braces the model wrote one too many of.
_LEAD = re.compile(r"[ \t]*[}\]]{0,4}[ \t]*\n?[ \t]*")
_TAG_WORD = re.compile(r"<([A-Za-z][\w-]{0,31})>")
WINDOW = 64


def wrapper_opener(text: str) -> int | None:
    """Where the wrapper opener that ends `text` begins, or None; a tag only alone on its line."""
    found = _OPENER.search(text, max(0, len(text) - WINDOW))
    if found is None:
        return None
    return found.start() if text[found.start()] == "`" or _line_starts(text, found.start()) else None


def _line_starts(text: str, position: int) -> bool:
    """Whether only spaces (a few) stand between the start of `position`'s line and it."""
    line = position
    while line > 0 and position - line < 8 and text[line - 1] in " \t":
        line -= 1
    return line == 0 or text[line - 1] == "\n"


def wrapper_tail(text: str) -> int:
    """How many characters at the end of `text` could still become a wrapper opener (0: none)."""
    window = text[-WINDOW:]
    start = window.rfind("```")
    if start >= 0 and _FENCE_OPEN_SO_FAR.match(window, start):
        return len(window) - start
    match = _FENCE_OPEN_SO_FAR.search(window, max(0, len(window) - 2))
    if match is not None:
        return len(window) - match.start()
    offset = len(text) - len(window)
    last = window.rfind("\n")
    for line in (last + 1, window.rfind("\n", 0, max(0, last)) + 1 if last > 0 else -1):
        if line >= 0 and _line_starts(text, offset + line) and _TAG_OPEN_SO_FAR.match(window, line):
            return len(window) - line
    return 0


def closer_of(opener: str) -> str:
    """The closer a wrapper's opener asks for: a fence's, or the tag's own (`</response>`)."""
    tag = _TAG_WORD.search(opener)
    return f"</{tag.group(1)}>" if tag is not None and "`" not in opener else "```"


def wrapper_close(text: str, opener: str, final: bool) -> int | None:
    """The length of the opener's closer (with the layout around it) at the start of `text`; -1 when there is
    none; None while more text could still decide it (`final`: no more text will come before the next call or the
    end)."""
    closer = closer_of(opener)
    lead = _LEAD.match(text)
    assert lead is not None  # the pattern matches the empty string
    rest = text[lead.end() :]
    if rest.startswith(closer):
        after = lead.end() + len(closer)
        trailing = len(text) - after - len(text[after:].lstrip(" \t"))
        end = after + trailing
        if end < len(text) and text[end] == "\n":
            return end + 1
        if end == len(text):
            return end if final else None
        return -1
    return None if not final and closer.startswith(rest) else -1


def quoted_after(text: str, final: bool) -> bool | None:
    """Whether the text after a call (whose own line before it holds text) puts text on the call's line, which
    makes the call a quote (lookalike.demote_quoted); None while more text could still decide it."""
    end = text.find("\n")
    if (text if end < 0 else text[:end]).strip():
        return True
    return False if end >= 0 or final else None
