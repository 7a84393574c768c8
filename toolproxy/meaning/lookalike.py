"""Call markup the model quotes instead of writing: "you could call `<tool_call>...</tool_call>`" must not make a
client run a tool (issue 12, reliability #29; continuedev/continue#11070, aosama/astronomical#346).

The rule, one line: a call with text on both sides of it on the same line is quoted. Inline backticks are the
common case (`` `<tool_call>...</tool_call>` `` always has a backtick on each side), a call mid-sentence the
other. A call alone on its line, one that ends a sentence ("Reading it now: <tool_call>..."), one that starts a
line with text after it, and one inside a code fence (models do fence real calls; the fence lines are their own)
are all real. Calls next to each other are each other's neighbours, not text, so a run of calls stays calls (a
`;` or `,` between them included), and so are lines of nothing but tags around a call. A call that begins and
ends with special tokens (`<|python_start|>...<|python_end|>`, tokens.py's shapes) is the model's own markup, not a
quotation, unless a quote mark or backtick stands right beside it (SGLang's pythonic detector test writes such a
call between two sentences). And a call the words right before it lead to as an example ("You invoke it like
this:", "For example:") is shown, not made, wherever it stands.

Markup no dialect read (`The `<tool_call>` tag indicates ...`) is judged by the same rule: quoted when text
stands before it on its line and, after it, a closing quote or a word; a failed call's markup is followed by its
own JSON or tags, or ends its line (`quotes_markup`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toolproxy.dialects.base import Call, Segment, Text, merge_text
from toolproxy.dialects.tokens import strip_trailing_token, token_end
from toolproxy.meaning.anchor_markup import is_tags


@dataclass(slots=True)
class Quoting:
    segments: list[Segment]
    quoted: list[Call] = field(default_factory=list)  # the calls turned back into text, in order

    def issues(self) -> list[str]:
        return [f"{call.dialect}: call to {call.name!r} quoted inside a line of text (or led to as an example); "
                "kept as text" for call in self.quoted]


def demote_quoted(segments: list[Segment]) -> Quoting:
    """The segments with every quoted call turned back into its own text (so no character is lost)."""
    result = Quoting([])
    runs = _runs(segments)
    for index, segment in enumerate(segments):
        if isinstance(segment, Call) and _is_quoted(segments, *runs[index]):
            result.quoted.append(segment)
            result.segments.append(Text(segment.source))
        else:
            result.segments.append(segment)
    result.segments = merge_text(result.segments)
    return result


def _runs(segments: list[Segment]) -> list[tuple[int, int]]:
    """For each segment, the first and last index of the run of calls it stands in: calls separated by nothing but
    a `;` or `,` (`{...}; {...}; {...}` as Llama 3 writes several) are judged as one, by the text around the run."""
    firsts, lasts = list(range(len(segments))), list(range(len(segments)))
    for index in range(2, len(segments)):
        if isinstance(segments[index], Call) and _separates_calls(segments, index - 1):
            firsts[index] = firsts[index - 2]
    for index in reversed(range(len(segments) - 2)):
        if isinstance(segments[index], Call) and _separates_calls(segments, index + 1):
            lasts[index] = lasts[index + 2]
    return list(zip(firsts, lasts, strict=True))


# The words a model leads to an example with, at the end of the sentence right before the call: "You invoke it like
# this:", "For example:", "The call would look like this:". A model that makes a call says what it does ("Reading
# it now:"), not how one is written.
_EXAMPLE_LEAD = re.compile(r"(?i:\b(?:for example|for instance|e\.g\.|an example|example (?:call|usage|request)"
                           r"|like this|like so|would look like|looks like this|the syntax(?: is)?))[^.!?\n:]{0,40}\Z")
# After the lead's colon: the line's end, and a code fence's opening line.
_AFTER_COLON = re.compile(r"[ \t]*\n?(?:[ \t]*```[\w-]{0,16}[ \t]*\n)?[ \t]*\Z")
LEAD_REACH = 160  # how far back from a call its leading words are looked for


def introduces_example(text: str) -> bool:
    """Whether `text`, the text right before a call, ends by leading to an example of a call: a colon, then only
    layout, with the example's words in the sentence before it (found with one rfind for most texts)."""
    colon = text.rfind(":", max(0, len(text) - LEAD_REACH))
    if colon < 0 or _AFTER_COLON.match(text, colon + 1) is None:
        return False
    return _EXAMPLE_LEAD.search(text, max(0, colon - 80), colon) is not None


def _separates_calls(segments: list[Segment], index: int) -> bool:
    """Whether the text at `index` is only a separator (`;`, `,`, spaces) between two calls."""
    text = segments[index]
    return (0 < index < len(segments) - 1 and isinstance(text, Text) and len(text.text) <= 8
            and not text.text.strip(" \t;,") and isinstance(segments[index - 1], Call)
            and isinstance(segments[index + 1], Call))


def _is_quoted(segments: list[Segment], first: int, last: int) -> bool:
    """Whether the run of calls `segments[first..last]` (often one call) is quoted on its line, or shown as an
    example by the words that lead to it."""
    before = segments[first - 1] if first > 0 else None
    after = segments[last + 1] if last + 1 < len(segments) else None
    if isinstance(before, Text) and introduces_example(before.text):
        return True
    if not isinstance(before, Text) or not isinstance(after, Text):
        return False
    opening, closing = segments[first].source, segments[last].source  # type: ignore[union-attr]
    # A call whose own markup spans line breaks at its edges (a fence absorbed with it) stands on its own lines.
    if opening[:1] == "\n" or closing[-1:] == "\n":
        return False
    if _is_tokened(opening, closing) and before.text[-1:] not in _QUOTES and after.text[:1] not in _QUOTES:
        return False
    line_before = before.text[before.text.rfind("\n") + 1 :]
    end = after.text.find("\n")
    line_after = after.text if end < 0 else after.text[:end]
    if is_tags(line_before) and is_tags(line_after):
        return False  # tags of a wrapper no dialect declared around it (`<x|calls><x|call>{...}</x|call></x|calls>`)
    return bool(line_before.strip()) and bool(line_after.strip())


_REACH = 256  # how far along its line a marker's neighbours are looked for
_CLOSING_QUOTES = "`'\"\u201d\u2019\u00bb"  # and typographic closing quotes
_QUOTES = _CLOSING_QUOTES + "\u201c\u2018\u00ab"  # and typographic opening ones
_WORD_AFTER = re.compile(r"[ \t]+[^\s{\[<(\"'`]")  # white space, then a word, not JSON, a tag or a quote


def _is_tokened(opening: str, closing: str) -> bool:
    """Whether a call's source (or a run's first and last) opens and closes with a special token (each looked for
    within its bounded length)."""
    return token_end(opening, 0) is not None and strip_trailing_token(closing) != closing


def quotes_markup(text: str, start: int, end: int) -> bool:
    """Whether markup at `text[start:end]` that no dialect read is quoted in prose: text before it on its line,
    and after it a closing quote or backtick, or white space and a word. Looks at most `_REACH` characters each way."""
    line_start = text.rfind("\n", max(0, start - _REACH), start) + 1
    if not text[max(line_start, start - _REACH) : start].strip():
        return False
    after = text[end : end + _REACH]
    line_end = after.find("\n")
    after = after if line_end < 0 else after[:line_end]
    return (after != "" and after[0] in _CLOSING_QUOTES) or _WORD_AFTER.match(after) is not None


# How many quoted occurrences of a marker are looked at before the marker counts as attempted all the same: a flood
# of quoted markers costs a bounded look each, and a repair round at worst.
_QUOTED_LIMIT = 64


def is_attempted(text: str, marker: str) -> bool:
    """Whether `marker` stands in `text` other than quoted in prose (`quotes_markup`): a call attempted
    and failed. Quoted markup never starts a repair round."""
    start = text.find(marker)
    for _ in range(_QUOTED_LIMIT):
        if start < 0:
            return False
        if not quotes_markup(text, start, start + len(marker)):
            return True
        start = text.find(marker, start + len(marker))
    return start >= 0
