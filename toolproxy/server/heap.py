"""The worker's C heap after big requests: glibc keeps what Python frees, so a burst of 256 KB answers left a worker
~40 MiB larger for good. gunicorn's request hooks count the bytes each request moved, and when a worker falls idle
after moving TRIM_AFTER_BYTES or more, malloc_trim(0) gives the free pages back.

What was measured (bench/memory.py, docs/performance.md#memory), on the 256 KB `write` reply at 64 clients: a
worker's peak is live answers plus free heap glibc keeps (10 to 40 MiB a worker); what stays after the load is
almost all free heap. Trimming takes that back (the tree a second after 8 s of that load: 148-154 MiB instead of
~205-210) and costs nothing under load, where a worker is never idle. A fixed mmap threshold (every block over
128 KiB its own mapping, given back at free) took a worker's peak from ~100 to 69 MiB but cost 3 to 4 ms of CPU per
256 KB request, every such block faulted in afresh: not taken. Neither a 512 KiB threshold (-10 MiB at the peak,
within the noise of the CPU) nor MALLOC_ARENA_MAX (a worker has two threads) was worth a setting. Elsewhere than
glibc (musl, macOS) there is no malloc_trim, and nothing is done. The standard library only: gunicorn's master
imports this with the server.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

TRIM_AFTER_BYTES = 16 * 1024 * 1024  # moved since the last trim: a few big answers, or hundreds of small ones


class _Heap:
    """One worker's count of requests in flight and of the bytes they moved since its heap was last trimmed."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.moved = 0
        self._trim: Any = None  # malloc_trim, looked up in the worker (never in the master)
        self._looked_up = False

    def trim(self) -> None:
        if not self._looked_up:
            self._looked_up = True
            library = ctypes.util.find_library("c")
            self._trim = getattr(ctypes.CDLL(library), "malloc_trim", None) if library else None
        if self._trim is not None:
            self._trim(0)


_HEAP = _Heap()


def request_started(worker: Any, request: Any) -> None:
    _HEAP.in_flight += 1


def request_finished(worker: Any, request: Any, environ: dict[str, Any], response: Any) -> None:
    """gunicorn's post_request: the request is answered and its response closed (its record stored)."""
    _HEAP.in_flight = max(0, _HEAP.in_flight - 1)
    _HEAP.moved += _number(environ.get("CONTENT_LENGTH")) + _number(getattr(response, "sent", 0))
    if _HEAP.in_flight == 0 and _HEAP.moved >= TRIM_AFTER_BYTES:
        _HEAP.moved = 0
        _HEAP.trim()


def _number(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0
