"""Several dialects over one reply: each dialect scans the text the ones before it left as text.

A call found by an earlier dialect is a boundary for the later ones: they flush what they hold and start
afresh after it, so no later dialect ever sees half of a call, and the order of segments is kept. Most replies
hold the markers of one dialect or none: a whole reply skips the dialects whose markers it lacks (`scan_whole`),
and a stream builds a dialect's scanner only once its marker comes (`LazyStage`).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolproxy.dialects.base import Dialect, Scanner, Segment, Text, ToolIndex, merge_text
from toolproxy.dialects.markers import markers_in


class ChainScanner:
    def __init__(self, dialects: Sequence[Dialect], tools: ToolIndex, lazy: bool = True) -> None:
        self._dialects = list(dialects)
        self._tools = tools
        self._lazy = lazy
        self._stages: list[Scanner] = [self._stage(dialect) for dialect in self._dialects]

    def feed(self, text: str) -> list[Segment]:
        return self._run([Text(text)], finishing=False)

    def finish(self) -> list[Segment]:
        return self._run([], finishing=True)

    def _run(self, segments: list[Segment], finishing: bool) -> list[Segment]:
        for index, stage in enumerate(self._stages):
            out: list[Segment] = []
            for segment in segments:
                if isinstance(segment, Text):
                    out.extend(stage.feed(segment.text))
                else:
                    out.extend(stage.finish())
                    stage = self._stages[index] = self._stage(self._dialects[index])
                    out.append(segment)
            if finishing:
                out.extend(stage.finish())
            # One feed per run of text: a stage that splits text into many pieces (every rejected opener is a
            # piece) must not multiply the calls the next stage takes. (One piece of text is merged already.)
            single = len(out) == 1 and isinstance(out[0], Text) and out[0].text
            segments = out if single else merge_text(out)
        return segments

    def _stage(self, dialect: Dialect) -> Scanner:
        markers = dialect.markers(self._tools)
        if self._lazy and dialect.holds_only_markers and markers is not None:
            return LazyStage(dialect, self._tools, markers)
        return dialect.scanner(self._tools)


class LazyStage:
    """A dialect's stage before its scanner is built: while none of its markers has come, it gives back what the
    scanner would (all the text but an end that may begin a marker, `holds_only_markers`), and so nothing changes
    downstream. When a marker comes the scanner is built and fed the text so far, whose output is what went out
    already, so that its state (the character before, where a line starts) is as if it had been fed all along."""

    def __init__(self, dialect: Dialect, tools: ToolIndex, markers: tuple[str, ...]) -> None:
        self._dialect, self._tools, self._markers = dialect, tools, tuple(marker for marker in markers if marker)
        self._scanner: Scanner | None = None
        self._sent: list[str] = []  # the text given back so far (the pieces are the ones passed on: no copies)
        self._held = ""

    def feed(self, text: str) -> list[Segment]:
        if self._scanner is not None:
            return self._scanner.feed(text)
        joined = self._held + text
        for marker in self._markers:
            if marker in joined:
                return self._wake(text)
        cut = len(joined) - held_end(joined, self._markers)
        out, self._held = joined[:cut], joined[cut:]
        if not out:
            return []
        self._sent.append(out)
        return [Text(out)]

    def finish(self) -> list[Segment]:
        if self._scanner is not None:
            return self._scanner.finish()
        held, self._held, self._sent = self._held, "", []
        return [Text(held)] if held else []

    def _wake(self, text: str) -> list[Segment]:
        scanner = self._scanner = self._dialect.scanner(self._tools)
        scanner.feed("".join(self._sent) + self._held)  # gives back `_sent` again, and holds `_held` again
        self._sent, self._held = [], ""
        return scanner.feed(text)


def held_end(text: str, markers: Sequence[str]) -> int:
    """Length of the longest end of `text` that is a proper beginning of a marker (the text holds no whole one).
    Such an end starts with the marker's first character: one C search each finds where it may begin."""
    longest = 0
    for marker in markers:
        start = text.find(marker[0], max(0, len(text) - len(marker) + 1))
        while start >= 0:
            if marker.startswith(text[start:]):
                longest = max(longest, len(text) - start)
                break
            start = text.find(marker[0], start + 1)
    return longest


def scan_whole(dialects: Sequence[Dialect], text: str, tools: ToolIndex) -> list[Segment]:
    """The chain over a whole reply, without the dialects none of whose markers it holds. Exact: every text a
    stage is fed is a piece of the reply, so a dialect whose markers the reply lacks finds no call in any, and a
    stage that finds no call gives its text back whole (merged, as the chain passes it on)."""
    wanted = [dialect.markers(tools) for dialect in dialects]
    present = markers_in(text, {marker for markers in wanted if markers for marker in markers})
    kept = [dialect for dialect, markers in zip(dialects, wanted, strict=True)
            if (markers is None or not present.isdisjoint(markers)) and _may_hold_call(dialect, text)]
    chain = ChainScanner(kept, tools, lazy=False)  # the markers of every dialect kept are there already
    return merge_text(chain.feed(text) + chain.finish())


def _may_hold_call(dialect: Dialect, text: str) -> bool:
    """A dialect's own test, beyond its markers, that a whole reply may hold one of its calls, where it has one
    (`may_hold_call`). A marker is also what a stream holds back, so it may be a mere part of a call (MiniMax's
    wrapper `tool_call` is in every hermes reply); the test names what every call holds besides. It must be exact
    in the same way: a reply it refuses holds no call of the dialect in any piece of it."""
    test = getattr(dialect, "may_hold_call", None)
    return test is None or bool(test(text))
