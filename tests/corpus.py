"""A corpus of real model output and how one case of it is judged, shared by the real-world ratchet
(`tests/test_realworld.py`) and the held-out measurement (`bench/heldout.py`), so both judge alike.

A case is `<case>.txt`, what the model wrote, and `<case>.json`: its source (`owner/repo#N`), model, server, the
tools of the request and what a careful human would extract (`content`, `tool_calls`, optionally
`reasoning_content`; `reasoning_field` is reasoning the server delivered in its own field). A case is right when
automatic detection gives exactly that one-shot, and right streamed when, besides, every chunking of it (split at
every position when short, random 1-7 character chunks with a fixed seed when long) yields the one-shot segments.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from toolproxy.dialects.base import Segment
from toolproxy.meaning import reasoning
from toolproxy.meaning.extraction import Policy, extract, scanner, settle
from toolproxy.meaning.schema_shape import ShapeProblem, check_shape
from toolproxy.transform.chat_request import TOOL_NAME
from toolproxy.transform.request_transform import demand_of, demanded_tool

SHORT = 400  # texts shorter than this are split at every position; longer ones in random chunks
SEED = 20260522


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    expected: dict[str, Any]

    @property
    def tools(self) -> dict[str, Any]:
        return {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in self.expected["tools"]}

    @property
    def reasoning_field(self) -> str | None:
        return self.expected.get("reasoning_field")

    def wanted(self) -> dict[str, Any]:
        wanted = {
            "content": self.expected["content"],
            "calls": [(call["name"], call["arguments"]) for call in self.expected["tool_calls"]],
        }
        if "reasoning_content" in self.expected:
            wanted["reasoning_content"] = self.expected["reasoning_content"]
        return wanted


def mislabelled(case: Case) -> str | None:
    """Why a case's expectation cannot be what a careful reader extracts, or None. Calls are expected while the
    content keeps the whole reply, the calls' own markup (a miner copied the text into `content` too), or is ""
    where only calls remain (content is then none, as OpenAI writes it)."""
    content = case.expected["content"]
    if not case.expected["tool_calls"] or content is None:
        return None
    if content == "":
        return 'calls expected beside a content of "": with only calls, content is none'
    if content.strip() == case.text.strip():
        return "calls expected while the content keeps the whole reply, the calls' own markup"
    return None


def requestable(path: Path) -> bool:
    """Whether a request may carry the case's tools (the OpenAI name rule and the schema check the proxy enforces):
    a case whose tools break them (LM Studio's "Web Search", KoboldCpp's `"properties": {"type": "object"}`) is read
    by extraction alone; through the proxy its request gets a 400."""
    tools = json.loads(path.read_text(encoding="utf-8"))["tools"]
    return all(TOOL_NAME.fullmatch(tool["function"]["name"]) and _valid_schema(tool["function"].get("parameters"))
               for tool in tools)


def _valid_schema(parameters: Any) -> bool:
    try:
        check_shape(parameters if isinstance(parameters, dict) else {})
    except ShapeProblem:
        return False
    return True


def load_cases(directory: Path) -> list[Case]:
    return [
        Case(
            path.stem,
            path.with_suffix(".txt").read_text(encoding="utf-8"),
            json.loads(path.read_text(encoding="utf-8")),
        )
        for path in sorted(directory.glob("*.json"))
    ]


def one_shot(case: Case) -> dict[str, Any]:
    """The case read as the proxy reads a whole answer, under the request's tool_choice where the case states it."""
    demanded = demanded_tool(demand_of(case.expected.get("tool_choice")), case.tools)
    extraction = extract(case.text, case.tools, policy=Policy(demanded=demanded), reasoning_field=case.reasoning_field)
    got = {"content": extraction.content(), "calls": [(call.name, call.arguments) for call in extraction.calls]}
    if "reasoning_content" in case.expected:
        got["reasoning_content"] = extraction.reasoning
    return got


def chunkings(text: str) -> list[list[str]]:
    """Every two-piece split of a short text plus one character at a time; three seeded random 1-7 character
    chunkings of a long one."""
    if len(text) < SHORT:
        return [[text[:cut], text[cut:]] for cut in range(1, len(text))] + [list(text)]
    rng = random.Random(SEED + len(text))
    result = []
    for _ in range(3):
        pieces, position = [], 0
        while position < len(text):
            step = rng.randint(1, 7)
            pieces.append(text[position : position + step])
            position += step
        result.append(pieces)
    return result


def scan(pieces: list[str], tools: dict[str, Any]) -> list[Segment]:
    scan = scanner(tools)
    return settle([segment for piece in pieces for segment in scan.feed(piece)] + scan.finish(), tools)[0]


def streaming_disagreement(case: Case) -> str | None:
    """Extraction is computed from the scanners' segments, so streaming gives the one-shot result exactly when
    every chunking of the answer and of the reasoning yields the one-shot segments. The first chunking that does
    not, or None. Computed once per case and run: a corpus's per-case tests and its summary ask the same."""
    key = (case.text, case.reasoning_field, json.dumps(case.expected["tools"], sort_keys=True))
    if key not in _DISAGREEMENTS:
        _DISAGREEMENTS[key] = _first_disagreement(case)
    return _DISAGREEMENTS[key]


_DISAGREEMENTS: dict[tuple[str, str | None, str], str | None] = {}


def _first_disagreement(case: Case) -> str | None:
    parts = reasoning.split(case.text)
    for label, text in (("answer", parts.answer), ("reasoning", parts.reasoning), ("field", case.reasoning_field)):
        if not text:
            continue
        whole = scan([text], case.tools)
        for pieces in chunkings(text):
            if scan(pieces, case.tools) != whole:
                return f"{label} split as {pieces[:4]}... gives other segments"
    return None


def false_calls(case: Case, got: dict[str, Any]) -> int:
    """Calls returned beyond those meant, matched by tool name: a call where none was meant, an undeclared tool,
    one call too many."""
    meant = Counter(name for name, _ in case.wanted()["calls"])
    returned = Counter(name for name, _ in got["calls"])
    return sum((returned - meant).values())


def missed_calls(case: Case, got: dict[str, Any]) -> int:
    """Calls meant but not returned, matched by tool name (the mirror of `false_calls`)."""
    meant = Counter(name for name, _ in case.wanted()["calls"])
    returned = Counter(name for name, _ in got["calls"])
    return sum((meant - returned).values())


@dataclass(frozen=True)
class Judged:
    """One case judged: right one-shot, right streamed too, and the false calls of its one-shot answer."""

    one_shot: bool
    streamed: bool
    false: int


def judge(case: Case) -> Judged:
    got = one_shot(case)
    right = got == case.wanted()
    return Judged(right, right and streaming_disagreement(case) is None, false_calls(case, got))


def totals(verdicts: list[Judged]) -> dict[str, int]:
    return {"cases": len(verdicts), "one_shot": sum(v.one_shot for v in verdicts),
            "streaming": sum(v.streamed for v in verdicts), "false_calls": sum(v.false for v in verdicts)}


def xfails(cases: list[Case], reasons: dict[str, str]) -> list[Any]:
    """The cases as test parameters, each named in `reasons` a strict xfail with its reason."""
    return [pytest.param(case, id=case.name,
                         marks=[pytest.mark.xfail(strict=True, reason=reasons[case.name])] if case.name in reasons
                         else [])
            for case in cases]
