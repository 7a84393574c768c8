"""Call markup the model quotes instead of writing: "you could call `<tool_call>...</tool_call>`" must not make a
client run a tool (issue 12, reliability #29; continuedev/continue#11070, aosama/astronomical#346).

The rule, one line: a call with text on both sides of it on the same line is quoted. Inline backticks are the
common case (`` `<tool_call>...</tool_call>` `` always has a backtick on each side), a call mid-sentence the
other. A call alone on its line, one that ends a sentence ("Reading it now: <tool_call>..."), one that starts a
line with text after it, and one inside a code fence (models do fence real calls; the fence lines are their own)
are all real. Calls next to each other are each other's neighbours, not text, so a run of calls stays calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolproxy.dialects.base import Call, Segment, Text, merge_text


@dataclass(slots=True)
class Quoting:
    segments: list[Segment]
    quoted: list[Call] = field(default_factory=list)  # the calls turned back into text, in order

    def issues(self) -> list[str]:
        return [f"{call.dialect}: call to {call.name!r} quoted inside a line of text; kept as text"
                for call in self.quoted]


def demote_quoted(segments: list[Segment]) -> Quoting:
    """The segments with every quoted call turned back into its own text (so no character is lost)."""
    result = Quoting([])
    for index, segment in enumerate(segments):
        if isinstance(segment, Call) and _is_quoted(segments, index):
            result.quoted.append(segment)
            result.segments.append(Text(segment.source))
        else:
            result.segments.append(segment)
    result.segments = merge_text(result.segments)
    return result


def _is_quoted(segments: list[Segment], index: int) -> bool:
    before = segments[index - 1] if index > 0 else None
    after = segments[index + 1] if index + 1 < len(segments) else None
    if not isinstance(before, Text) or not isinstance(after, Text):
        return False
    source = segments[index].source  # type: ignore[union-attr]
    # A call whose own markup spans line breaks at its edges (a fence absorbed with it) stands on its own lines.
    if source[:1] == "\n" or source[-1:] == "\n":
        return False
    line_before = before.text[before.text.rfind("\n") + 1 :]
    end = after.text.find("\n")
    line_after = after.text if end < 0 else after.text[:end]
    return bool(line_before.strip()) and bool(line_after.strip())
