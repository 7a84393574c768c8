"""The documentation's code blocks as data, so tests run what a user copies. The README is the landing page and
each topic has its page under docs/; a recipe is found by its title (a heading, `## OpenCode and Kilo CLI`, or a
bold lead, `**OpenCode and Kilo CLI**`) on whichever page holds it, and a block by its language: the n-th such
block under that title when asked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
         for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
README = PAGES["README.md"]
PLACEHOLDER_URL = "http://127.0.0.1:8003/v1"
# A line that starts a recipe or ends the one before it: a heading, or a paragraph led by a bold title.
_TITLE_LINE = re.compile(r"^(?:#{1,6} |\*\*)", flags=re.M)


def page(name: str) -> str:
    """One page's text by its path from the repository root (`docs/formats.md`)."""
    return PAGES[name]


def recipe(title: str) -> str:
    """The text from the recipe's title to the next title, on the one page that has it."""
    pattern = re.compile(rf"^(?:#{{1,6}} {re.escape(title)}$|\*\*{re.escape(title)}\*\*)", flags=re.M)
    found = [(name, match) for name, text in PAGES.items() for match in pattern.finditer(text)]
    assert len(found) == 1, f"recipe {title!r}: {len(found)} titles, in {[name for name, _ in found]}"
    name, match = found[0]
    text = PAGES[name]
    following = _TITLE_LINE.search(text, match.end())
    return text[match.start(): following.start() if following else len(text)]


def code_block(title: str, language: str, index: int = 0) -> str:
    """The `index`-th ```language block of the recipe titled `title`."""
    blocks = re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", recipe(title), flags=re.M | re.S)
    return str(blocks[index])
