"""One suite over every registered dialect: round trip through its own renderer, any chunking equal to one-shot,
nothing lost, and linear time on adversarial input (a smoke check; bench/parse.py gives the figures)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolproxy.dialects.base import merge_text, parse, source_of
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import accept

RENDERING = sorted(name for name, dialect in DIALECTS.items() if hasattr(dialect, "render_call"))
KEYS = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
# Plain text values: no markup characters and no surrounding line breaks (XML dialects trim one of those).
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<>&\r\n\x85\u2028\u2029"),
               max_size=20).filter(lambda text: text == text.strip() or not text.strip())
VALUES = st.one_of(TEXT, st.integers(-10**6, 10**6), st.booleans(), st.lists(TEXT.filter(bool), max_size=3),
                   st.dictionaries(KEYS, TEXT.filter(bool), max_size=2))


def schema_for(arguments: dict[str, Any]) -> dict[str, Any]:
    def kind(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"type": "boolean"}
        if isinstance(value, int):
            return {"type": "integer"}
        if isinstance(value, list):
            return {"type": "array", "items": {"type": "string"}}
        if isinstance(value, dict):
            return {"type": "object", "properties": {key: {"type": "string"} for key in value}}
        return {"type": "string"}

    return {"type": "object", "properties": {key: kind(value) for key, value in arguments.items()}}


@pytest.mark.parametrize("name", RENDERING)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=st.dictionaries(KEYS, VALUES, max_size=4), prose=TEXT.filter(lambda text: text[:1] not in "[{"))
def test_round_trip(name, arguments, prose):
    dialect = DIALECTS[name]
    tools = {"tool_a": schema_for(arguments)}
    text = f"{prose}\n\n" + dialect.render_call("tool_a", arguments)  # type: ignore[attr-defined]
    extraction = accept(parse(dialect, text, tools), tools)
    assert [(call.name, call.arguments) for call in extraction.calls] == [("tool_a", arguments)]
    assert extraction.content() == (prose.strip() or None)


@pytest.mark.parametrize("name", RENDERING)
@settings(max_examples=100, deadline=None)
@given(arguments=st.dictionaries(KEYS, VALUES, max_size=3), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_chunking_never_changes_the_result(name, arguments, cuts):
    dialect = DIALECTS[name]
    tools = {"tool_a": schema_for(arguments)}
    text = "Before. " + dialect.render_call("tool_a", arguments) + " after <tool"  # type: ignore[attr-defined]
    points = sorted({cut % (len(text) + 1) for cut in cuts})
    scanner = dialect.scanner(tools)
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    chunked = merge_text([segment for piece in pieces for segment in scanner.feed(piece)] + scanner.finish())
    assert chunked == parse(dialect, text, tools)
    assert source_of(chunked) == text


@pytest.mark.timeout(120)  # a deadline, not a speed claim: a super-linear scan would not finish; bench/ measures speed
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_adversarial_input_stays_linear(name):
    dialect = DIALECTS[name]
    tools = {"tool_a": {"type": "object"}}
    samples = ["<tool_call>" * 20_000, "[" * 200_000, "{" * 200_000, "<tool_a>" * 20_000,
               "<tools>{" + "x" * 1_000_000, '{"name": "tool_a", "arguments": {' + "[" * 100_000]
    for sample in samples:
        segments = parse(dialect, sample, tools)
        assert source_of(segments) == sample
