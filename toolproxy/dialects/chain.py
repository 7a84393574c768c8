"""Several dialects over one reply: each dialect scans the text the ones before it left as text.

A call found by an earlier dialect is a boundary for the later ones: they flush what they hold and start
afresh after it, so no later dialect ever sees half of a call, and the order of segments is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolproxy.dialects.base import Dialect, Scanner, Segment, Text, ToolIndex, merge_text


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
