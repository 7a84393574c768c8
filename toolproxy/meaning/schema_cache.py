"""Checked tool schemas, kept by their JSON: agents send the same tools on every request, so each distinct schema
is checked and its validator built once. Bounded by count and by the bytes of the JSON kept, newest kept."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int


class Kept(Generic[T]):
    """A least-recently-used map from a schema's JSON to what checking it made (functools.lru_cache keys on the
    arguments alone, so it could not check the client's own schema before copying it from the key). Large
    answers are judged in pool threads: every step is one dict operation, and a race costs a rebuild at most."""

    def __init__(self, entries: int, key_bytes: int) -> None:
        self._entries, self._key_bytes = entries, key_bytes
        self._kept: OrderedDict[str | bytes, T] = OrderedDict()
        self._bytes = self._hits = self._misses = 0

    def get(self, key: str | bytes, build: Callable[[], T]) -> T:
        """What `build` made for this key, made now when it is not kept (and kept, if it fits)."""
        found = self._kept.get(key)
        if found is not None:
            self._hits += 1
            with contextlib.suppress(KeyError):  # another thread (a large answer's, routes/offload.py) dropped it
                self._kept.move_to_end(key)
            return found
        self._misses += 1
        made = build()
        if len(key) <= self._key_bytes // 16:  # one schema never takes more than a sixteenth of the budget
            self._keep(key, made)
        return made

    def _keep(self, key: str | bytes, made: T) -> None:
        self._kept[key] = made
        self._bytes += len(key)
        while self._kept and (len(self._kept) > self._entries or self._bytes > self._key_bytes):
            try:
                old, _ = self._kept.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                return
            self._bytes -= len(old)

    def cache_clear(self) -> None:
        self._kept.clear()
        self._bytes = self._hits = self._misses = 0

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, len(self._kept))
