"""`stream_strategy: incremental`: one streamed choice turned into what the client may be sent now, so that the
whole stream equals the buffered answer (`transform_completion` of the whole text): the same calls, content
and finish_reason. Text goes out as it arrives; only what holdback.py names is held; a call is sent once it is
complete and judged. Pure, no I/O: the route feeds it upstream deltas and encodes what comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from toolproxy.dialects.base import Call, Segment, Text
from toolproxy.meaning.extraction import Extraction, accept, groups, note_leftover_markup, scan_text, scanner
from toolproxy.meaning.holdback import (
    BoundedScanner,
    ReasoningStream,
    quoted_after,
    wrapper_close,
    wrapper_opener,
    wrapper_tail,
)
from toolproxy.meaning.lookalike import LEAD_REACH, Quoting, demote_quoted, introduces_example
from toolproxy.meaning.recovery import recover
from toolproxy.meaning.writers import ContentWriter, VerbatimWriter
from toolproxy.transform.native_stream import NativeCalls
from toolproxy.transform.response import ToolRequest, police

# Damaged call markup that buffered mends (meaning/recovery.py) but a stream has already sent as text.
UNRECOVERED = "incremental: damaged call markup went out as text; stream_strategy buffered would mend it"


@dataclass(slots=True)
class Delta:
    """What may go to the client now, for one choice; `pieces`: its content and calls in the order the model
    wrote them (for a client that reads calls inside the text)."""

    content: str = ""
    reasoning: str = ""
    calls: list[Call] = field(default_factory=list)
    pieces: list[str | Call] = field(default_factory=list)

    def say(self, text: str) -> None:
        if text:
            self.content += text
            self.pieces.append(text)

    def call(self, call: Call) -> None:
        self.calls.append(call)
        self.pieces.append(call)

    def extend(self, more: Delta) -> None:
        self.content += more.content
        self.reasoning += more.reasoning
        self.calls += more.calls
        self.pieces += more.pieces


@dataclass(frozen=True, slots=True)
class _Refusal:
    """Text that stands apart from the text around it: the access policy's sentence in place of a call (which
    separates text as a call does), or native calls refused and given back as text."""

    text: str
    policy: bool = True


@dataclass(slots=True)
class _Waiting:
    """A call whose fate waits on the text after it: whether it takes the wrapper opener before it along
    (extraction.absorb_wrappers; `judged` is then already set), or whether text on its own line makes it a quote
    (lookalike.demote_quoted; judged once it is not)."""

    call: Call
    judged: Call | _Refusal | None = None
    opener: str = ""
    after: str = ""


class LiveChoice:
    def __init__(self, request: ToolRequest, limit: int, verbatim: bool = False) -> None:
        """`verbatim`: the text exactly as written (holdback.VerbatimWriter), not as `Extraction.content()`."""
        self._request = request
        self._split = ReasoningStream()
        self._scanner = BoundedScanner(lambda: scanner(request.tools, request.dialects), limit)
        self._writer: ContentWriter | VerbatimWriter = VerbatimWriter() if verbatim else ContentWriter()
        self._thinking = ContentWriter(keeps_lead=False)
        self._tail = ""  # a wrapper opener in the making
        self._waiting: _Waiting | None = None
        self._lead = ""  # the end of the text since the last call (the text "before" a call: fences, quotes)
        self._line_text = False  # the current line of that text holds more than whitespace
        self._quoted: list[Call] = []
        self.server_thought: list[str] = []  # the server's reasoning field, for the rescue
        self._texts: list[str] = []  # the answer's text as judged, for the leftover-markup check
        self._text_calls = 0  # calls accepted from the answer text: with none, reasoning is searched at the end
        self._dropped = 0
        self.native = NativeCalls()
        self.extraction = Extraction([])  # issues and failures so far
        self.calls: list[Call] = []  # the calls sent, in order

    def feed(self, text: str) -> Delta:
        out = Delta()
        for is_reasoning, piece in self._split.feed(text):
            self._piece(is_reasoning, piece, out)
        return out

    def feed_reasoning(self, text: str) -> Delta:
        """The server's own reasoning field: it goes on as it came."""
        self.server_thought.append(text)
        return Delta(reasoning=text)

    def finish(self) -> Delta:
        out = Delta()
        for is_reasoning, piece in self._split.finish():
            self._piece(is_reasoning, piece, out)
        self._segments(self._scanner.finish(), out)
        self._settle_waiting(out, final=True)
        self._write(self._tail, out)
        self._tail = ""
        self._judge_native(out)
        self._rescue(out)
        self._note()
        out.say(self._writer.finish())
        return out

    def _piece(self, is_reasoning: bool, piece: str, out: Delta) -> None:
        if not is_reasoning:
            self._segments(self._scanner.feed(piece), out)
            return
        self._writer.markup()
        if self._request.policy.reasoning == "move":
            out.reasoning += self._thinking.text(piece)

    def _segments(self, segments: list[Segment], out: Delta) -> None:
        for group in groups(segments):
            if isinstance(group, Text):
                self._text(group.text, out)
            elif len(group) == 1:
                self._one_call(group[0], out)
            else:  # calls written as one list: neither quoted nor fenced (their neighbours are calls)
                self._settle_waiting(out, final=True)
                self._write(self._tail, out)
                self._tail, self._lead, self._line_text = "", "", False
                self._emit(self._judge(list(group)), out)

    def _one_call(self, call: Call, out: Delta) -> None:
        self._settle_waiting(out, final=True)  # the text since the last call is complete
        opener = self._tail if self._tail and wrapper_opener(self._tail) is not None else ""
        quotable = bool(self._lead) and self._line_text and call.source[:1] != "\n" and call.source[-1:] != "\n"
        example = introduces_example(self._lead)  # "You invoke it like this:" (lookalike.py)
        if not opener or example:
            self._write(self._tail, out)
        self._tail, self._lead, self._line_text = "", "", False
        if example:
            self._quoted.append(call)
            self._write(call.source, out)
        elif opener:
            judged = self._judge([call])
            if isinstance(judged[0], Text):  # refused: its text, fence or not, reads the same
                self._write(opener, out)
                self._emit(judged, out)
            else:
                self._waiting = _Waiting(call, judged[0], opener)
        elif quotable:
            self._waiting = _Waiting(call)
        else:
            self._emit(self._judge([call]), out)

    def _judge(self, calls: list[Call]) -> list[Segment | _Refusal]:
        judged = self._accept(calls)
        self._text_calls += len(judged.calls)
        return [policed for segment in judged.segments
                for policed in (self._police([segment]) if isinstance(segment, Call) else [segment])]

    def _text(self, text: str, out: Delta) -> None:
        if self._waiting is not None:
            self._waiting.after += text
            self._settle_waiting(out, final=False)
            return
        if text:
            newline = text.rfind("\n")
            self._lead = (self._lead + text)[-LEAD_REACH:]
            self._line_text = bool(text[newline + 1 :].strip()) if newline >= 0 else (
                self._line_text or bool(text.strip()))
        text = self._tail + text
        keep = wrapper_tail(text)
        self._write(text[: len(text) - keep], out)
        self._tail = text[len(text) - keep :]

    def _settle_waiting(self, out: Delta, final: bool) -> None:
        """Decide a waiting call once the text after it allows (`final`: no more text comes before the next
        call or the end)."""
        waiting = self._waiting
        if waiting is None:
            return
        if waiting.judged is None:
            quoted = quoted_after(waiting.after, final)
            if quoted is None:
                return
            rest = waiting.after
            self._waiting = None
            if quoted:
                self._quoted.append(waiting.call)
                self._write(waiting.call.source, out)
            else:
                self._emit(self._judge([waiting.call]), out)
        else:
            closer = wrapper_close(waiting.after, waiting.opener, final)
            if closer is None:
                return
            rest = waiting.after[max(closer, 0) :]
            self._waiting = None
            if closer < 0:
                self._write(waiting.opener, out)
            self._emit([waiting.judged], out)
        if rest:
            self._text(rest, out)

    def _write(self, text: str, out: Delta) -> None:
        if text:
            self._texts.append(text)
            out.say(self._writer.text(text))

    def _emit(self, segments: Sequence[Segment | _Refusal], out: Delta) -> None:
        for segment in segments:
            if isinstance(segment, Text):
                self._write(segment.text, out)
            elif isinstance(segment, _Refusal):  # a piece of its own, as in Extraction.content()
                self._writer.boundary(call=segment.policy)
                out.say(self._writer.text(segment.text))
                self._writer.boundary(call=segment.policy)
            else:
                self._writer.boundary(call=True)
                if self._request.parallel_calls or not self.calls:
                    self.calls.append(segment)
                    out.call(segment)
                else:
                    self._dropped += 1

    def _accept(self, segments: Sequence[Segment]) -> Extraction:
        judged = accept(list(segments), self._request.tools, self._request.policy)
        self.extraction.issues += judged.issues
        self.extraction.failures += judged.failures
        return judged

    def _police(self, calls: list[Call]) -> list[Call | _Refusal]:
        """The access policy, as `police` applies it: a refused call becomes the sentence saying why."""
        policed = Extraction(list(calls))
        segments = police(policed, self._request.access)
        self.extraction.issues += policed.issues
        self.extraction.denied += policed.denied
        return [segment if isinstance(segment, Call) else _Refusal(segment.text) for segment in segments]

    def _judge_native(self, out: Delta) -> None:
        """The server's own calls, judged like text calls; a refused one goes back as text after the rest."""
        native = self.native.finish()
        self.extraction.issues += self.native.dropped
        if not native:
            return
        self.extraction.issues += [f"native stream: {repair}; normalized" for repair in sorted(self.native.repairs)]
        judged = self._accept(native)
        self._emit(self._police(judged.calls), out)
        texts = [segment.text for segment in judged.segments if isinstance(segment, Text)]
        if texts:
            self._emit([_Refusal("".join(texts), policy=False)], out)

    def _rescue(self, out: Delta) -> None:
        """No call and no answer: a call written only inside the reasoning is made, as extract() does (one
        followed by an answer was considered and left)."""
        if self._text_calls or self.native.calls() or "".join(self._texts).strip():
            return
        thought = "\n\n".join(piece for piece in ("".join(self.server_thought), self._split.thought())
                              if piece.strip())
        if not thought:
            return
        scanned = demote_quoted(scan_text(thought, self._request.tools, self._request.dialects)).segments
        rescued = accept(scanned, self._request.tools, self._request.policy)
        if rescued.calls:
            self.extraction.issues += [*rescued.issues, "reasoning: call found only inside reasoning was rescued"]
            self.extraction.failures += rescued.failures
            self._emit(self._police(rescued.calls), out)

    def _note_unrecovered(self) -> None:
        """Schema-anchored recovery reads the whole answer, and here its text has already gone out as text: say
        what buffered would have mended, so the dashboard shows why this model wants `stream_strategy: buffered`."""
        segments, rules = recover([Text("".join(self._texts))], self._request.tools, not self._request.dialects)
        if any(isinstance(segment, Call) for segment in segments):
            named = ", ".join(dict.fromkeys(rule for rule in rules if rule.startswith("recovered:")))
            self.extraction.issues.append(f"{UNRECOVERED}: {named}")

    def _note(self) -> None:
        self._note_unrecovered()
        leftover = Extraction([Text("".join(self._texts))])
        note_leftover_markup(leftover, self._request.tools, self._quoted)
        self.extraction.issues += Quoting([], self._quoted).issues() + leftover.issues
        self.extraction.failures += leftover.failures
        if self._dropped:
            self.extraction.issues.append(f"parallel_tool_calls is false: {self._dropped} further call(s) dropped")
        if self._scanner.overflowed:
            self.extraction.issues.append("incremental: held text passed the hold-back limit and went out as text")
        self.extraction.issues += self._split.issues()
