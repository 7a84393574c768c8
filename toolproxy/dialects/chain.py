"""Several dialects over one reply: each dialect scans the text the ones before it left as text.

A call found by an earlier dialect is a boundary for the later ones: they flush what they hold and start
afresh after it, so no later dialect ever sees half of a call, and the order of segments is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolproxy.dialects.base import Dialect, Scanner, Segment, Text, ToolIndex, merge_text
from toolproxy.dialects.markers import markers_in


class ChainScanner:
    def __init__(self, dialects: Sequence[Dialect], tools: ToolIndex) -> None:
        self._dialects = list(dialects)
        self._tools = tools
        self._stages: list[Scanner] = [dialect.scanner(tools) for dialect in self._dialects]

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
                    stage = self._stages[index] = self._dialects[index].scanner(self._tools)
                    out.append(segment)
            if finishing:
                out.extend(stage.finish())
            # One feed per run of text: a stage that splits text into many pieces (every rejected opener is a
            # piece) must not multiply the calls the next stage takes.
            segments = merge_text(out)
        return segments


def scan_whole(dialects: Sequence[Dialect], text: str, tools: ToolIndex) -> list[Segment]:
    """The chain over a whole reply, without the dialects none of whose markers it holds. Exact: every text a
    stage is fed is a piece of the reply, so a dialect whose markers the reply lacks finds no call in any, and a
    stage that finds no call gives its text back whole (merged, as the chain passes it on)."""
    wanted = [dialect.markers(tools) for dialect in dialects]
    present = markers_in(text, {marker for markers in wanted if markers for marker in markers})
    kept = [dialect for dialect, markers in zip(dialects, wanted, strict=True)
            if markers is None or not present.isdisjoint(markers)]
    chain = ChainScanner(kept, tools)
    return merge_text(chain.feed(text) + chain.finish())
