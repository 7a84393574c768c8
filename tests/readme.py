"""The README's code blocks as data, so tests run what a user copies: a block is found by the bold title of its
recipe (`**OpenCode and Kilo CLI**`) and its language; the n-th such block under that title when asked."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
PLACEHOLDER_URL = "http://127.0.0.1:8003/v1"


def code_block(title: str, language: str, index: int = 0) -> str:
    """The `index`-th ```language block between the recipe titled `title` and the next bold title."""
    start = README.index(f"**{title}**")
    following = re.search(r"^\*\*", README[start + 2:], flags=re.M)
    section = README[start: start + 2 + following.start()] if following else README[start:]
    blocks = re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", section, flags=re.M | re.S)
    return str(blocks[index])
