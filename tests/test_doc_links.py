"""Every relative link between the documentation's pages resolves: the file exists, and an anchor names a heading
of the page it points to, spelled as GitHub spells heading anchors. Links inside code are not links."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.readme import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "deploy").glob("*.md")])
_FENCE = re.compile(r"^```.*?^```$", flags=re.M | re.S)
_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the target has no spaces (titles are not used on these pages).
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", flags=re.M)


def prose(text: str) -> str:
    return _CODE.sub("", _FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces to `-`, repeats numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    return [target for target in _LINK.findall(prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_the_pages_are_found_and_link_to_each_other():
    assert {"README.md", "clients.md", "formats.md", "configuration.md", "running.md", "fleet.md"} <= {
        page.name for page in PAGES}
    assert links(ROOT / "README.md"), "the landing page links to the topics"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


def test_anchors_are_spelled_as_github_spells_them():
    text = "# Live text with tools: `stream_strategy`\n## Why the proxy decodes the upstream's SSE itself\n" \
           "## llama.cpp\n## Cline, Roo Code, Kilo Code (editor extensions)\n## Notes\n## Notes\n"
    assert anchors(text) == {"live-text-with-tools-stream_strategy", "why-the-proxy-decodes-the-upstreams-sse-itself",
                             "llamacpp", "cline-roo-code-kilo-code-editor-extensions", "notes", "notes-1"}
