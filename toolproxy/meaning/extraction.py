"""From a reply's text to the tool calls it holds: dialects find candidate calls, this room decides which count.

By default only calls to tools of this request become calls (a model writing `{"name": "format_disk"}` must not
trigger anything); arguments must be a JSON object, are typed by the tool's schema, then validated. What is
refused goes back as text with an issue recorded: no character of the reply is ever lost. Reasoning is set
aside first; a call found only inside it, with no answer after it, is rescued. What the strict dialects leave as
text goes through schema-anchored recovery (`recovery.py`) last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolproxy.dialects import registry
from toolproxy.dialects.base import Call, Segment, Text, ToolIndex, declared_name, merge_text
from toolproxy.dialects.chain import ChainScanner, scan_whole
from toolproxy.dialects.markers import markers_in
from toolproxy.dialects.registry import AUTO_ORDER, DIALECTS
from toolproxy.meaning import reasoning, schema
from toolproxy.meaning.arguments import arguments_object, placeholders_only, unwrapped, validated
from toolproxy.meaning.demanded import DIALECT as DEMANDED
from toolproxy.meaning.demanded import demanded_call
from toolproxy.meaning.holdback import wrapper_close, wrapper_opener
from toolproxy.meaning.lookalike import demote_quoted, is_attempted
from toolproxy.meaning.recovery import recover
from toolproxy.meaning.recovery_tokens import absorb_tokens


@dataclass(frozen=True, slots=True)
class Policy:
    unknown_tools: str = "text"  # "pass": a call to an undeclared tool is returned anyway (seed 004's option 1)
    invalid_arguments: str = "pass"  # "text": a call whose arguments fail the schema stays text
    reasoning: str = "move"  # "keep" it in content, "move" it to reasoning_content, or "drop" it
    demanded: str | None = None  # the one tool the request's tool_choice demands a call of (meaning/demanded.py)


@dataclass(slots=True)
class Extraction:
    segments: list[Segment]
    issues: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # the issues that are failed attempts to call a tool
    reasoning: str | None = None  # for `reasoning_content`
    kept_reasoning: str = ""  # "keep": the reasoning markup that goes back in front of the content
    denied: list[str] = field(default_factory=list)  # the dialect of each call the access policy refused
    # Each call the answer attempted: (dialect, outcome, repaired), outcome one of ATTEMPT_OUTCOMES.
    attempts: list[tuple[str, str, bool]] = field(default_factory=list)
    # The whitespace the answer's text opens with, kept in front of the content; none where a call or markup set
    # aside (a blank line after `</think>`) came before its first character (`extract`).
    lead: str = ""

    @property
    def calls(self) -> list[Call]:
        return [segment for segment in self.segments if isinstance(segment, Call)]

    def fail(self, issue: str) -> None:
        self.issues.append(issue)
        self.failures.append(issue)

    def content(self) -> str | None:
        """The text around the calls, as the message's content.

        With no call the text is returned untouched but for leading whitespace other than `lead`. Around calls,
        each piece is trimmed of the blank lines that separated it from a call, the first keeping `lead`; content
        is None only when nothing but calls remains. A live stream sends the same (writers.ContentWriter).
        """
        texts = [segment.text for segment in self.segments if isinstance(segment, Text)]
        if not self.calls and not self.denied:
            text = "".join(texts)
            return self.kept_reasoning + text if self.kept_reasoning else self.lead + text.lstrip()
        pieces = [text.strip() for text in (self.kept_reasoning, *texts) if text.strip()]
        if pieces and not self.kept_reasoning:
            pieces[0] = self.lead + pieces[0]
        return "\n\n".join(pieces) or None


def scanner(tools: ToolIndex, dialects: Sequence[str] = ()) -> ChainScanner:
    """A scanner over the pinned dialects, or all of them in the automatic order."""
    return ChainScanner([DIALECTS[name] for name in dialects or AUTO_ORDER], tools)


def extract(text: str, tools: ToolIndex, dialects: Sequence[str] = (), policy: Policy = Policy(),
            reasoning_field: str | None = None, anchored: bool | None = None) -> Extraction:
    """Calls in `text`; reasoning (inline `<think>` or the upstream's reasoning field) handled per policy.
    `anchored`: whether formats no dialect knows are read (`settle`); by default only without pinned dialects."""
    parts = reasoning.split(text)
    thought = "\n\n".join(piece for piece in (reasoning_field or "", parts.reasoning) if piece.strip())
    scanned, recovered = _scan(parts.answer, tools, dialects, anchored)
    answer = demote_quoted(scanned)
    extraction = accept(answer.segments, tools, policy)
    extraction.issues[:0] = recovered
    extraction.issues.extend(answer.issues())
    # A call only in reasoning, with no answer after it, is the model's call; one followed by an answer was
    # considered and left (the answer is what the model chose to say).
    if not extraction.calls and thought and not parts.answer.strip():
        scanned, recovered = _scan(thought, tools, dialects, anchored)
        rescued = accept(demote_quoted(scanned).segments, tools, policy)
        rescued.issues[:0] = recovered
        if rescued.calls:
            extraction.segments.extend(rescued.calls)
            extraction.issues.extend([*rescued.issues, "reasoning: call found only inside reasoning was rescued"])
            extraction.failures.extend(rescued.failures)
            thought = "".join(segment.text for segment in rescued.segments if isinstance(segment, Text)).strip()
    if policy.demanded in tools and not extraction.calls:
        _take_demanded(extraction, parts.answer, tools, policy)
    note_leftover_markup(extraction, tools, answer.quoted)
    extraction.lead = _lead(text, extraction.segments)
    if policy.reasoning == "move":
        extraction.reasoning = thought or None
    elif policy.reasoning == "keep":
        extraction.kept_reasoning = parts.markup
        extraction.reasoning = reasoning_field
    return extraction


def _lead(text: str, segments: list[Segment]) -> str:
    """The whitespace the answer opens with, where it opens with text, and nothing but that whitespace stood in
    the reply before the text's first character (no markup set aside: after `</think>` a blank line is layout)."""
    first = segments[0] if segments else None
    if not isinstance(first, Text) or not first.text.strip():
        return ""
    lead = first.text[: len(first.text) - len(first.text.lstrip())]
    return lead if text.startswith(first.text[: len(lead) + 1]) else ""


def _take_demanded(extraction: Extraction, answer: str, tools: ToolIndex, policy: Policy) -> None:
    """The whole answer as the arguments of the call tool_choice demands, when they validate (demanded.py)."""
    assert policy.demanded is not None
    call = demanded_call(answer, policy.demanded)
    judged = accept([call], tools, replace(policy, invalid_arguments="text")) if call else None
    if judged is not None and judged.calls:
        extraction.segments = judged.segments
        extraction.issues.append(f"{DEMANDED}: the answer is the arguments of the call tool_choice demands")


# Markers that only ever start a tool call, gathered from every dialect's declaration (`registry.CALL_MARKERS`):
# left in the text, they mean a call was attempted and failed (malformed or truncated markup), which is worth an
# issue even though the text is kept.
CALL_MARKERS = registry.CALL_MARKERS


def note_leftover_markup(extraction: Extraction, tools: ToolIndex, quoted: Sequence[Call] = ()) -> None:
    text = "".join(segment.text for segment in extraction.segments if isinstance(segment, Text))
    for call in quoted:  # markup the model quoted on purpose is not a failed attempt at a call
        text = text.replace(call.source, "", 1)
    # One pass for all of them (markers_in): one `in` each over a 256 KB prose reply took 1.8 ms.
    found = [marker for marker in markers_in(text, (*CALL_MARKERS, *(f"<{name}>" for name in tools)))
             if is_attempted(text, marker)]
    if found:
        extraction.fail("tool-call markup left as text (malformed, truncated or refused): " + ", ".join(sorted(found)))
        if not extraction.attempts:  # markup no dialect could read: a call attempted, its JSON unreadable
            extraction.attempts.append(("unknown", "invalid_json", False))


def _scan(text: str, tools: ToolIndex, dialects: Sequence[str],
          anchored: bool | None = None) -> tuple[list[Segment], list[str]]:
    # The whole text is known: only the dialects whose markers it holds are scanned (chain.scan_whole). A pinned
    # format says which spellings are calls: formats no dialect knows are read only in automatic detection.
    anchored = not dialects if anchored is None else anchored
    return settle(scan_whole([DIALECTS[name] for name in dialects or AUTO_ORDER], text, tools), tools, anchored)


def scan_text(text: str, tools: ToolIndex, dialects: Sequence[str]) -> list[Segment]:
    """The segments of `text`, recovery included (its issues are dropped: `extract` keeps them)."""
    return _scan(text, tools, dialects)[0]


def settle(segments: list[Segment], tools: ToolIndex, anchored: bool = True) -> tuple[list[Segment], list[str]]:
    """The scanners' segments made final: fenced calls take their fence, then schema-anchored recovery reads
    what the strict dialects left as text, and special tokens beside a call go with it. Works on merged segments,
    so streaming and one-shot agree. `anchored`: formats no dialect knows are read too (recovery.recover), which
    automatic detection wants and a pinned format (a model's configured or derived dialects) does not."""
    segments, issues = recover(absorb_wrappers(merge_text(segments)), tools, anchored)
    return absorb_wrappers(absorb_tokens(segments, issues)), issues


def absorb_wrappers(segments: list[Segment]) -> list[Segment]:
    """A call wrapped in a Markdown code fence, or in a tag of the model's own alone on the lines around it
    (`<response>` ... `</response>`), takes the wrapper with it, so the content is not left holding an empty
    ```json block or a pair of empty tags (holdback.wrapper_opener). Works on the merged segments, so streaming
    and one-shot agree."""
    out = list(segments)
    for index, segment in enumerate(out):
        if not isinstance(segment, Call) or index == 0 or index + 1 == len(out):
            continue
        before, after = out[index - 1], out[index + 1]
        if not isinstance(before, Text) or not isinstance(after, Text):
            continue
        cut = wrapper_opener(before.text)
        if cut is None:
            continue
        closing = wrapper_close(after.text, before.text[cut:], final=True)
        if closing is None or closing < 0:  # no closer of this opener's kind right after the call
            continue
        out[index - 1] = Text(before.text[:cut])
        out[index] = Call(segment.name, segment.arguments, before.text[cut:] + segment.source + after.text[:closing],
                          segment.dialect)
        out[index + 1] = Text(after.text[closing:])
    return out


def accept(segments: list[Segment], tools: ToolIndex, policy: Policy = Policy()) -> Extraction:
    """Keep the calls the policy allows; the rest become text again, each with an issue."""
    extraction = Extraction([])
    for group in groups(segments):
        if isinstance(group, Text):
            extraction.segments.append(group)
            continue
        judged = [_judge(call, tools, policy, extraction) for call in group]
        if len(group) > 1 and any(isinstance(segment, Text) for segment in judged):
            # Calls written as one JSON list share one source: a refused member sends the list back as text
            # whole, since its own characters cannot be told apart (and text is never lost).
            extraction.fail(f"{group[0].dialect}: a call in a list of {len(group)} was refused; the list stays text")
            extraction.segments.append(Text(group[0].source))
        else:
            extraction.segments.extend(judged)
    extraction.segments = merge_text(extraction.segments)
    return extraction


def groups(segments: list[Segment]) -> list[Text | list[Call]]:
    """Texts alone, and calls grouped: a call with an empty source belongs to the call before it."""
    groups: list[Text | list[Call]] = []
    for segment in segments:
        if isinstance(segment, Call) and not segment.source and groups and isinstance(groups[-1], list):
            groups[-1].append(segment)
        elif isinstance(segment, Call):
            groups.append([segment])
        else:
            groups.append(segment)
    return groups


# How an attempted call ended, in the terms the field compares servers by (the metrics' `outcome`).
ATTEMPT_OUTCOMES = ("valid", "invalid_json", "unknown_name", "schema_mismatch")


def _judge(call: Call, tools: ToolIndex, policy: Policy, extraction: Extraction) -> Segment:
    issues, failures = len(extraction.issues), len(extraction.failures)
    call = _named_as_declared(call, tools, extraction.issues)
    judged = _verdict(call, tools, policy, extraction)
    failure = extraction.failures[-1] if len(extraction.failures) > failures else ""
    repaired = any(" repaired (" in issue or "encoded twice" in issue for issue in extraction.issues[issues:])
    extraction.attempts.append((call.dialect, _attempt_outcome(failure, call, tools), repaired))
    return judged


def _named_as_declared(call: Call, tools: ToolIndex, issues: list[str]) -> Call:
    """The call under the declared name its written one means (`base.declared_name`), said as an issue."""
    if call.name in tools or (name := declared_name(call.name, tools)) is None:
        return call
    issues.append(f"{call.dialect}: tool name {call.name!r} read as the declared {name!r}")
    return Call(name, call.arguments, call.source, call.dialect)


def _attempt_outcome(failure: str, call: Call, tools: ToolIndex) -> str:
    if call.name not in tools:
        return "unknown_name"
    if "not a JSON object" in failure:
        return "invalid_json"
    return "schema_mismatch" if "fail the schema" in failure else "valid"


def _verdict(call: Call, tools: ToolIndex, policy: Policy, extraction: Extraction) -> Segment:
    declared = call.name in tools
    if not declared and policy.unknown_tools != "pass":
        extraction.fail(f"{call.dialect}: call to undeclared tool {call.name!r} kept as text")
        return Text(call.source)
    arguments = arguments_object(call, extraction.issues)
    if arguments is None:
        extraction.fail(f"{call.dialect}: arguments of {call.name!r} are not a JSON object; kept as text")
        return Text(call.source)
    if not declared:
        extraction.issues.append(f"{call.dialect}: call to undeclared tool {call.name!r} passed on (unknown_tools)")
        return Call(call.name, arguments, call.source, call.dialect)
    arguments = schema.coerce(unwrapped(arguments, tools[call.name], call, extraction.issues), tools[call.name])
    if placeholders_only(arguments):
        extraction.fail(f"{call.dialect}: arguments of {call.name!r} are placeholders only; an example, kept as text")
        return Text(call.source)
    arguments, problems = _checked(call, arguments, tools[call.name], extraction)
    if problems:
        verdict = "kept as text" if policy.invalid_arguments == "text" else "passed on"
        extraction.fail(f"{call.dialect}: arguments of {call.name!r} fail the schema ({'; '.join(problems)}); "
                        f"{verdict}")
        if policy.invalid_arguments == "text":
            return Text(call.source)
    return Call(call.name, arguments, call.source, call.dialect)


def _checked(call: Call, arguments: dict[str, Any], tool_schema: Any,
             extraction: Extraction) -> tuple[dict[str, Any], list[str]]:
    try:
        arguments, problems, emptied = validated(arguments, tool_schema)
    except schema.SchemaProblem as problem:
        return arguments, [f"the tool's schema is unusable: {problem}"]
    if emptied:
        extraction.issues.append(f"{call.dialect}: optional arguments of {call.name!r} written as a word for no "
                                 "value (`None`) dropped")
    return arguments, problems
