"""Openers that cannot start a call are skipped by a lookahead, in C. The lookahead must never change what a dialect
finds (it may let through more than the reader accepts, never less), must let an opener whose text is still arriving
through so it is held back, and must keep floods of openers fast through the whole chain (issue 3)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.parse import OPENERS
from tests.dialects import test_more_formats as more_formats
from tests.dialects import test_token_family as token_family
from tests.dialects import test_xml_family as xml_family
from toolproxy.dialects import deepseek, functionary, gemma4, harmony, llama3, mistral, pythonic, wrapped_calls
from toolproxy.dialects.base import Call, Scanner, Segment, Text, ToolIndex, merge_text, parse, source_of
from toolproxy.dialects.block import BlockScanner
from toolproxy.dialects.cursor import OBJECT_LIST, REWIND_LIMIT, SPACE, ahead
from toolproxy.dialects.invoke_tags import PREFIX, token_prefix
from toolproxy.dialects.pythonic import PythonicScanner
from toolproxy.dialects.registry import DIALECTS
from toolproxy.dialects.token_block import TokenBlockScanner
from toolproxy.meaning.extraction import scanner as chain_scanner

# How the block dialects found openers before their lookaheads: every one went to the reader.
PLAIN_HINTS = {
    "qwen3_coder": r"<(?:tool_call>|function=)",
    "glm": r"<tool_call>",
    "kimi_k2": r"<\|tool_call",
    "minimax": rf"<[ \t]{{0,4}}{PREFIX}(?:minimax:tool_call|tool_call)",
    "invoke_xml": rf"<[ \t]{{0,4}}{PREFIX}(?:invoke|function_calls)",
    # (any tag name: a tag named after a declared tool opens a call too)
    "dsml": rf"<[ \t]{{0,4}}{token_prefix('DSML')}(?:tool_calls|function_calls|calls|tool_use|invoke|[A-Za-z_])",
    "kimi_k3": r"<\|open\|>[ \t]{0,4}(?:tools|call)",
    "seed_oss": r"<seed:tool_call>",
}
MARKED_JSON = {"apertus", "nemotron", "nemotron_mini", "apriel"}  # one opener pattern, no lookahead to take out
WITH_LOOKAHEAD = sorted([*PLAIN_HINTS, "deepseek", "harmony", "mistral", "llama3", "command_r", "granite",
                         "phi4_mini", "pythonic",
                         *(name for name in more_formats.NEW if name not in MARKED_JSON)])
TOOLS: ToolIndex = {**token_family.TOOLS, **xml_family.TOOLS, "tool_a": {"type": "object"}}
STEADY = list(OPENERS.values())  # each dialect's opener, as in the bench's floods


def permissive(name: str, tools: ToolIndex) -> Scanner:
    """The dialect's scanner with its lookahead taken out, as a reference."""
    scanner = DIALECTS[name].scanner(tools)
    if isinstance(scanner, PythonicScanner):
        scanner._bracket = re.compile(r"\[")
        scanner._line_bracket = re.compile(r"\n[ \t]*\[")
    elif isinstance(scanner, TokenBlockScanner):
        openers = sorted(scanner._openers, key=len, reverse=True)
        scanner._opener_patterns = tuple(re.compile(re.escape(opener)) for opener in openers)
    else:
        assert isinstance(scanner, BlockScanner)
        scanner._hint = re.compile(PLAIN_HINTS[name])
    return scanner


def run(scanner: Scanner, pieces: list[str]) -> list[Segment]:
    return merge_text([segment for piece in pieces for segment in scanner.feed(piece)] + scanner.finish())


def texts(name: str) -> st.SearchStrategy[str]:
    """Random text made of the dialect's own markup, whole calls, broken ones and floods of every opener."""
    if name in xml_family.PIECES:
        pieces = xml_family.PIECES[name] + xml_family.COMMON + xml_family.WHOLE[name]
    else:
        pieces = {**token_family.FRAGMENTS, **more_formats.FRAGMENTS}[name]
        render = getattr(DIALECTS[name], "render_call", None)
        pieces = pieces + ([render("add", {"a": 1}), render("tool_a", {})] if render else [])
    # Runs of white space longer than a lookahead's reach and than REWIND_LIMIT, where streaming and one-shot differ
    # in when an opener is judged.
    spaces = [" " * 70, "\n" * 300, *(opener + " " * 300 for opener in STEADY)]
    fragment = (st.sampled_from([*pieces, *STEADY, *spaces, "\n", " ", "\t"])
                | st.text(alphabet="ab <>/=\"'\n[({:|", max_size=4))
    return st.lists(fragment, max_size=30).map("".join)


@pytest.mark.parametrize("name", WITH_LOOKAHEAD)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_lookahead_never_changes_what_is_found(name: str, data: st.DataObject) -> None:
    text = data.draw(texts(name))
    found = parse(DIALECTS[name], text, TOOLS)
    assert run(permissive(name, TOOLS), [text]) == found
    assert source_of(found) == text
    points = data.draw(st.lists(st.integers(min_value=0), max_size=10))
    cuts = sorted({point % (len(text) + 1) for point in points})
    pieces = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert run(DIALECTS[name].scanner(TOOLS), pieces) == found


RENDERING = sorted(name for name, dialect in DIALECTS.items() if hasattr(dialect, "render_call"))


@pytest.mark.parametrize("name", sorted(PLAIN_HINTS))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_hint_found_at_its_first_character_is_the_regex_search(name: str, data: st.DataObject) -> None:
    """A block scanner tries its hint at each `<` (str.find) before it lets the regex search: same match, floods of
    `<` and openers (more than it tries one by one) included."""
    scanner = DIALECTS[name].scanner(TOOLS)
    assert isinstance(scanner, BlockScanner)
    text = data.draw(texts(name) | st.text(alphabet="<a", max_size=64).map(lambda flood: flood + "<tool_call>"))
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    found, expected = scanner._find_hint(text, start), scanner._hint.search(text, start)
    assert (found and (found.span(), found.group())) == (expected and (expected.span(), expected.group()))


@pytest.mark.parametrize("name", RENDERING)
def test_a_call_still_arriving_is_held_back_at_every_cut(name: str) -> None:
    """Whatever part of a call has arrived, none of it goes out as text: the opener's lookahead lets it through."""
    dialect: Any = DIALECTS[name]
    render = dialect.render_call
    prose = "Let me look.\n"
    text = prose + render("tool_a", {"a": "x y", "b": 2})
    for cut in range(len(text)):
        scanner = DIALECTS[name].scanner(TOOLS)
        out = merge_text(scanner.feed(text[:cut]))
        assert not any(isinstance(segment, Call) for segment in out)
        assert prose.startswith(source_of(out)), (cut, out)
    assert any(isinstance(segment, Call) for segment in parse(DIALECTS[name], text, TOOLS))


FLOODS = {**{f"{name} openers": opener for name, opener in OPENERS.items()},
          "openers interleaved": "".join(OPENERS.values()),
          "unclosed openers": "<tool_call><tools>{"}


@pytest.mark.parametrize("label", sorted(FLOODS))
def test_a_flood_of_openers_is_fast_through_the_chain_and_loses_nothing(label: str) -> None:
    text = FLOODS[label] * (200_000 // len(FLOODS[label]))
    started = time.process_time()
    scan = chain_scanner(TOOLS)
    segments = merge_text(scan.feed(text) + scan.finish())
    assert time.process_time() - started < 1.0  # the bench's target is 200 ms per MB; this is 200 KB, with margin
    assert source_of(segments) == text
    assert not any(isinstance(segment, Call) for segment in segments) or label == "json openers"


@pytest.mark.parametrize("label", sorted(FLOODS))
def test_a_flood_fed_one_character_at_a_time_matches_one_shot(label: str) -> None:
    text = FLOODS[label] * (600 // len(FLOODS[label]) + 1)
    scan = chain_scanner(TOOLS)
    one_shot = merge_text(scan.feed(text) + scan.finish())
    scan = chain_scanner(TOOLS)
    assert run(scan, list(text)) == one_shot
    assert one_shot == [Text(text)] or label == "json openers"


def width(pattern: str) -> int:
    """The most characters a pattern can match (its lookaheads count as none)."""
    return int(re._parser.parse(pattern).getwidth()[1])  # type: ignore[attr-defined]


def test_every_lookahead_refuses_within_the_rewind_limit() -> None:
    """Streaming can open a block that one-shot parsing skips, when the text that refutes the lookahead has not come
    yet. The block then fails where the lookahead did, and is read again from after its opener only if that is
    within REWIND_LIMIT: so every lookahead, with its opener, must be shorter."""
    spans = {
        **{opener: len(opener) + width(follow) for opener, follow in deepseek._FOLLOW.items()},
        harmony.START: len(harmony.START) + max(width(harmony._START_HEAD), width(harmony._RECIPIENT_AHEAD)),
        harmony.STRIPPED[0]: len(harmony.STRIPPED[0]) + width(harmony._STRIPPED_FOLLOW),
        mistral.OPENER: len(mistral.OPENER) + width(mistral._FOLLOW),
        llama3.OPENER: len(llama3.OPENER) + width(llama3._FOLLOW),
        "command_r, granite, phi4_mini": len("<|START_ACTION|>") + width(ahead(SPACE, OBJECT_LIST)),
        "pythonic": 1 + width(pythonic.call_ahead(("tool_a", "b" * 128))),
        gemma4.OPENER: len(gemma4.OPENER) + width(gemma4._FOLLOW),
        functionary.V31_OPENER: len(functionary.V31_OPENER) + width(functionary._V31_FOLLOW),
        functionary.V3_OPENER: len(functionary.V3_OPENER) + width(functionary._V3_FOLLOW),
        "olmo3": len("<function_calls>") + width(ahead(SPACE, wrapped_calls._CALL_AHEAD)),
        "lfm2, llama4": len("<|tool_call_start|>") + width(ahead(SPACE, wrapped_calls._BODY_AHEAD)),
    }
    assert max(spans.values()) <= REWIND_LIMIT, spans


def test_an_opener_refuted_after_a_long_run_of_space_is_read_again() -> None:
    text = "[TOOL_CALLS]" + " " * 300 + '[TOOL_CALLS]{"name": "add", "arguments": {}}'
    found = parse(DIALECTS["mistral"], text, TOOLS)
    assert [segment.name for segment in found if isinstance(segment, Call)] == ["add"]
    for cut in (5, 12, 100, 312, 313, 320):
        assert run(DIALECTS["mistral"].scanner(TOOLS), [text[:cut], text[cut:]]) == found
