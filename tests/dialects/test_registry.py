"""The registry is the one place call markup is declared: each dialect's `markup`, gathered into `CALL_MARKERS`
(leftover check), `WRAPPERS` (recovery) and `CLOSERS` (prompt defusing). These tests hold every derivation to what
the dialects really write, so a declaration cannot drift from its parser."""

from __future__ import annotations

from typing import Any

import pytest

from toolproxy.dialects import registry
from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning import extraction, recovery
from toolproxy.transform.markup import defuse

TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}}}}
RENDERING = sorted(name for name, dialect in DIALECTS.items() if hasattr(dialect, "render_call"))


def rendered(name: str, tool: str = "read") -> str:
    dialect: Any = DIALECTS[name]
    return str(dialect.render_call(tool, {"path": "a.py"}))


@pytest.mark.parametrize("name", RENDERING)
def test_a_rendered_call_holds_a_declared_opener_and_a_pruning_marker(name: str) -> None:
    """What the dialect writes begins with markup it declares, and holds a marker `markers()` names (else a whole
    reply would skip the dialect that holds its call)."""
    text = rendered(name)
    openers = DIALECTS[name].markup.openers
    assert not openers or any(opener in text for opener in openers), (name, openers, text)
    markers = DIALECTS[name].markers(TOOLS)
    assert markers is None or any(marker in text for marker in markers), (name, markers, text)


@pytest.mark.parametrize("name", RENDERING)
def test_a_refused_call_is_reported_as_leftover_markup(name: str) -> None:
    """A call to an undeclared tool stays text; where the dialect declares openers, the derived CALL_MARKERS
    make the leftover check report it."""
    result = extraction.extract(rendered(name, "format_disk"), TOOLS, (name,))
    assert not result.calls
    leftover = any("markup left as text" in issue for issue in result.failures)
    assert leftover == bool(DIALECTS[name].markup.openers), (name, result.issues)


@pytest.mark.parametrize("name", RENDERING)
def test_declared_wrappers_and_closers_are_what_the_dialect_writes(name: str) -> None:
    text = rendered(name)
    markup = DIALECTS[name].markup
    assert not markup.wrappers or any(opener in text and closer in text for opener, closer in markup.wrappers), name
    assert all(closer not in markup.openers for closer in markup.closers)


def test_the_gathered_tuples_are_the_union_of_the_declarations() -> None:
    declared = [dialect.markup for dialect in DIALECTS.values()]
    assert set(registry.CALL_MARKERS) == {marker for markup in declared for marker in markup.openers}
    assert set(registry.CLOSERS) == {marker for markup in declared for marker in markup.closers}
    assert set(registry.WRAPPERS) == {pair for markup in declared for pair in markup.wrappers}
    assert extraction.CALL_MARKERS is registry.CALL_MARKERS
    assert set(registry.WRAPPERS) <= set(recovery.WRAPPERS)


@pytest.mark.parametrize("marker", sorted({*registry.CALL_MARKERS, *registry.CLOSERS}))
def test_every_declared_marker_is_defused_in_prompts(marker: str) -> None:
    """Markup a file or web page forges inside a tool result never parses as a call in prompt mode."""
    if marker[0] in "<[":
        assert defuse(f"x {marker} y") != f"x {marker} y"
