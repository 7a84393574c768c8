"""The README's one-line dialect examples are real: each is a call to `read` in its own dialect."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolproxy.dialects.registry import DIALECTS
from toolproxy.meaning.extraction import extract

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
# `\n` in an example stands for a line break (Functionary v3.2 puts one after the name).
EXAMPLES = {name: example.replace("\\n", "\n")
            for name, example in re.findall(r"^- `(\w+)` \([^\n]*?\): `(.+)`$", README, flags=re.M)}
TOOLS = {"read": {"type": "object", "properties": {"path": {"type": "string"}}},
         "list_dir": {"type": "object", "properties": {"path": {"type": "string"}}}}


def test_every_dialect_has_an_example_in_registry_order():
    assert list(EXAMPLES) == list(DIALECTS)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_parses_pinned_and_automatic(name):
    for dialects in ((name,), ()):
        extraction = extract(EXAMPLES[name], TOOLS, dialects)
        assert (extraction.calls[0].name, extraction.calls[0].arguments) == ("read", {"path": "a.py"})
        assert extraction.calls[0].dialect == name
        assert extraction.content() is None


def test_the_python_sdk_snippet_runs_as_written(serve, settings, capsys):
    """Copied from the README and run against the demo model, with only the address changed."""
    from tests.conftest import with_settings

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("**OpenAI SDK (Python)**"):]
    snippet = section[section.index("```python\n") + 10:section.index("\n```", section.index("```python"))]
    proxy = serve(with_settings(settings, upstream=None))
    exec(snippet.replace("http://127.0.0.1:8003", proxy.url), {})
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("call #0: read_file "))
    assert json.loads(line.removeprefix("call #0: read_file ")) == {"path": "README.md"}
