"""A stream builds a dialect's scanner only once one of its markers comes (chain.LazyStage): every piece fed must
give exactly what the chain with every scanner built gives, for every golden case and real-world reply (the whole
chain fed one character at a time, every chain in random pieces), and for random text made of markers and their
pieces."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import Dialect, ToolIndex, merge_text
from toolproxy.dialects.chain import ChainScanner, held_end
from toolproxy.dialects.registry import AUTO_ORDER, DIALECTS

GOLDEN = Path(__file__).parent.parent / "golden"
# The dialects' golden cases and the real-world corpus; never a held-out set (tests/golden/heldout*), which must
# stay unseen by everything that is tuned.
CASES = sorted(path for path in GOLDEN.glob("*/*.json")
               if path.parent.name in DIALECTS or path.parent.name == "realworld")
TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}}},
         "bash": {"type": "object", "properties": {"command": {"type": "string"}}}}
LAZY = [dialect for dialect in DIALECTS.values() if dialect.holds_only_markers]


def load(path: Path) -> tuple[str, dict[str, Any]]:
    expected = json.loads(path.read_text(encoding="utf-8"))
    tools = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in expected["tools"]}
    return path.with_suffix(".txt").read_text(encoding="utf-8"), tools


def assert_same_per_piece(dialects: list[Dialect], pieces: list[str], tools: ToolIndex) -> None:
    lazy, eager = ChainScanner(dialects, tools), ChainScanner(dialects, tools, lazy=False)
    for index, piece in enumerate(pieces):
        assert merge_text(lazy.feed(piece)) == merge_text(eager.feed(piece)), (index, pieces[: index + 1])
    assert merge_text(lazy.finish()) == merge_text(eager.finish())


def chains() -> list[list[Dialect]]:
    return [[DIALECTS[name] for name in AUTO_ORDER], *([dialect] for dialect in LAZY)]


def random_pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces, position = [], 0
    while position < len(text):
        size = rng.choice((1, 2, 3, 5, 8, 13, 40))
        pieces.append(text[position : position + size])
        position += size
    return pieces


@pytest.mark.parametrize("path", CASES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_lazy_chain_gives_what_the_built_chain_gives_per_piece(path):
    """The whole chain one character at a time (each dialect's lazy stage is in it, so every split of every marker
    is met there), and every chain in random pieces."""
    text, tools = load(path)
    assert_same_per_piece(chains()[0], list(text), tools)
    for dialects in chains():
        for seed in range(3):
            assert_same_per_piece(dialects, random_pieces(text, seed), tools)


MARKERS = sorted({marker for dialect in DIALECTS.values() for marker in dialect.markers(TOOLS) or ()})
PIECES = [*MARKERS, *(marker[: len(marker) // 2] for marker in MARKERS), *(marker[1:] for marker in MARKERS),
          '{"name": "read", "arguments": {"path": "a"}}', "read(path='a')", "\n", " ", "<", ">", "[", "]", "}",
          "x", "re", "é", "call:bash{command:ls}", "</tool_call>", "<|call|>", "<|", "<<", "[[", ">>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.lists(st.integers(min_value=0), max_size=12))
def test_lazy_chain_on_marker_soup(text, points):
    cuts = sorted({point % (len(text) + 1) for point in points})
    pieces = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    for dialects in chains():
        assert_same_per_piece(dialects, pieces, TOOLS)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="<|tool_cal>[{x", max_size=20), st.sampled_from(MARKERS))
def test_held_end_is_the_longest_beginning_of_a_marker(text, marker):
    if marker in text:
        return
    longest = max((size for size in range(1, min(len(text), len(marker) - 1) + 1)
                   if marker.startswith(text[-size:])), default=0)
    assert held_end(text, [marker]) == longest
