"""A worker gives glibc's free heap back when it falls idle after big requests (toolproxy/server/heap.py), and only
then: gunicorn's request hooks, called as gunicorn calls them, against this process's real heap."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from toolproxy.server import heap

LIBRARY = ctypes.util.find_library("c")
C = ctypes.CDLL(LIBRARY) if LIBRARY else None
pytestmark = pytest.mark.skipif(C is None or not hasattr(C, "malloc_trim"), reason="glibc's heap only")
FRAGMENTED = 40 * 1024 * 1024  # what fragment_the_heap leaves free


def resident() -> int:
    """This process's resident anonymous memory, bytes (what a trim gives back shows here, not in malloc's own
    counts: the pages of a free block are handed back, the block stays free)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))


@pytest.fixture(autouse=True)
def _glibc_settings_restored() -> Iterator[None]:
    yield None
    assert C is not None
    C.mallopt(-1, 128 * 1024)  # glibc's defaults (the dynamic threshold stays off for the rest of this process)
    C.mallopt(-3, 128 * 1024)


def fragment_the_heap() -> None:
    """What a burst of answers leaves: blocks of answer size from the heap, freed, and kept by glibc."""
    assert C is not None
    C.mallopt(-1, 64 * 1024 * 1024)  # M_TRIM_THRESHOLD: free() itself gives nothing back in this test
    C.mallopt(-3, 64 * 1024 * 1024)  # M_MMAP_THRESHOLD: answer-sized blocks come from the heap, as in a worker
    blocks = [(bytes(200_000 + n), bytes(64 + n)) for n in range(200)]
    del blocks


def finish(moved: int) -> None:
    heap.request_finished(SimpleNamespace(), SimpleNamespace(), {"CONTENT_LENGTH": str(moved)},
                            SimpleNamespace(sent=0))


def test_a_worker_idle_after_big_requests_gives_the_free_heap_back() -> None:
    fragment_the_heap()
    before = resident()
    heap.request_started(None, None)
    heap.request_started(None, None)
    finish(heap.TRIM_AFTER_BYTES)
    assert resident() > before - FRAGMENTED / 4  # one request still in flight: nothing is done
    finish(0)
    assert resident() < before - FRAGMENTED / 2


def test_small_requests_leave_the_heap_alone() -> None:
    fragment_the_heap()
    before = resident()
    heap.request_started(None, None)
    finish(1000)
    assert resident() > before - FRAGMENTED / 4
