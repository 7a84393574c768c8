"""Which of some literal markers a text holds, read at C speed: what lets a whole reply skip the dialects whose
openers it lacks (chain.py) and the reasoning markers it does not use (meaning/reasoning.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

# How many occurrences of a group's first character `markers_in` tries one by one before it searches for the group's
# markers whole: enough for the `<` of special tokens in most replies, and a bounded cost where that character abounds.
_WALK = 16
# Up to this length a text is searched for each marker in turn: grouping costs more than it saves there.
_SHORT = 512


def markers_in(text: str, markers: Iterable[str]) -> set[str]:
    """The markers that occur in `text`. One `in` per marker would read a long reply ~40 times; instead markers
    are grouped by their first character, whose occurrences str.find skips to at C speed, and each one is tried
    against the whole group with one startswith. Linear: at most _WALK tries per group, then one search per
    marker not yet found, from where the tries stopped. A short text is simply searched for each marker."""
    if len(text) <= _SHORT:
        return {marker for marker in markers if marker in text}
    found: set[str] = set()
    for first, group in _grouped(frozenset(markers)):
        found.update(_group_in(text, first, group))
    return found


@functools.lru_cache(maxsize=64)  # the markers of a chain change only with the tools' names
def _grouped(markers: frozenset[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups: dict[str, list[str]] = {}
    for marker in sorted(markers):
        if marker:
            groups.setdefault(marker[0], []).append(marker)
    return tuple((first, tuple(group)) for first, group in groups.items())


def _group_in(text: str, first: str, group: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    position = text.find(first)
    for _ in range(_WALK):
        if position < 0 or len(found) == len(group):
            return found
        if text.startswith(group, position):
            found.update(marker for marker in group if text.startswith(marker, position))
        position = text.find(first, position + 1)
    if position < 0:
        return found
    return found | {marker for marker in group if marker not in found and text.find(marker, position) >= 0}
