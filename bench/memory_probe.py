"""A gunicorn configuration for bench/memory.py: toolproxy's own settings, plus a probe in each worker that
samples where its memory is (RSS, glibc's heap, what Python holds, the transform log's queue) and, each time the
worker's RSS reaches a new high, takes a census of the large strings and bytes alive at that moment (with
tracemalloc on: where each was made). The probe writes JSON to BENCH_MEMORY_DIR/<pid>.json when the worker stops.

    gunicorn -c bench/memory_probe.py app:app      (bench/memory.py starts it)
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import sys
import time
import tracemalloc
from typing import Any

import greenlet
from gevent import monkey

from toolproxy.server import gunicorn_settings, settings_or_exit

globals().update(gunicorn_settings(settings_or_exit()))

BIG = 32 * 1024  # a string or bytes of this many characters or more is counted in the census
SAMPLE_SECONDS = 0.05
CENSUS_STEP = 2 * 1024 * 1024  # a census when RSS passes the last one's by this much
MALLINFO = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO]


def mallinfo() -> dict[str, int]:
    """glibc's view of its heap: `arena` (bytes of the sbrk and thread arenas), `hblkhd` (mmapped chunks),
    `uordblks` (in use), `fordblks` (free but kept)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return {name: int(getattr(info, name)) for name in MALLINFO}


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def smaps() -> dict[str, int]:
    with open("/proc/self/smaps_rollup") as rollup:
        lines = [line.split() for line in rollup if line.endswith("kB\n")]
    return {fields[0].rstrip(":"): int(fields[1]) * 1024 for fields in lines}


def census() -> dict[str, Any]:
    """Every str, bytes and bytearray of BIG or more reachable from a gc-tracked object (frames of suspended
    greenlets, dicts, lists, queues), by size and by where it was allocated."""
    seen: dict[int, Any] = {}
    for holder in gc.get_objects():
        for item in gc.get_referents(holder):
            if type(item) in (str, bytes, bytearray) and len(item) >= BIG:
                seen[id(item)] = item
    by_place: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for item in seen.values():
        trace = tracemalloc.get_object_traceback(item) if tracemalloc.is_tracing() else None
        place = " <- ".join(f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}" for frame in
                            list(trace)[::-1][:4]) if trace else "(--trace: where)"
        key = f"{type(item).__name__} {place}"
        by_place[key] += sys.getsizeof(item)
        count[key] += 1
    everything = gc.get_objects()
    greenlets = [item for item in everything if isinstance(item, greenlet.greenlet)]
    kinds = collections.Counter(type(item).__qualname__ for item in everything)
    sizes: collections.Counter[str] = collections.Counter()
    for item in everything:
        sizes[type(item).__qualname__] += sys.getsizeof(item)
    return {"greenlets": len(greenlets), "stacks": sum(item._stack_saved for item in greenlets),
            "kinds": [(name, kinds[name], size) for name, size in sizes.most_common(20)],
            "objects": len(seen), "bytes": sum(by_place.values()),
            "by_place": [(key, count[key], size) for key, size in by_place.most_common(30)],
            **(traced_big() if tracemalloc.is_tracing() else {})}


def traced_big() -> dict[str, Any]:
    """Every live allocation tracemalloc holds, by line (the top 25), and those of BIG bytes or more by where they
    were made (reachable or not: a suspended greenlet's locals included)."""
    snapshot = tracemalloc.take_snapshot()
    by_line = [(str(stat.traceback[0]).rsplit("/", 2)[-1], stat.count, stat.size)
               for stat in snapshot.statistics("lineno")[:25]]
    places: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for trace in snapshot.traces:
        if trace.size >= BIG:
            key = " <- ".join(f"{frame.filename.rsplit('/', 2)[-1]}:{frame.lineno}" for frame in
                              list(trace.traceback)[::-1][:5])
            places[key] += trace.size
            counts[key] += 1
    return {"traced_by_line": by_line, "traced_big": [(key, counts[key], size) for key, size in
                                                      places.most_common(30)]}


class Probe:
    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.samples: list[dict[str, Any]] = []
        self.peak: dict[str, Any] = {}
        self.last_census = 0
        self.translog = worker.wsgi.extensions["toolproxy"].translog

    def sample(self) -> dict[str, Any]:
        info = mallinfo()
        log = self.translog
        queued = log._queue.qsize() if log._pid == os.getpid() else 0
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        return {"t": time.monotonic(), "rss": rss(), "heap_in_use": info["uordblks"], "heap_free": info["fordblks"],
                "arena": info["arena"], "mmapped": info["hblkhd"], "traced": traced, "queued_rows": queued,
                "queued_bytes": log._pending_bytes}

    def run(self) -> None:
        sleep = monkey.get_original("time", "sleep")
        trim_every = float(os.environ.get("BENCH_TRIM_EVERY") or 0)  # seconds between malloc_trim(0) calls
        trimmed = time.monotonic()
        while True:
            sleep(SAMPLE_SECONDS)
            if trim_every and time.monotonic() - trimmed >= trim_every:
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                trimmed = time.monotonic()
            current = self.sample()
            self.samples.append(current)
            if current["rss"] >= self.last_census + CENSUS_STEP:
                self.last_census = current["rss"]
                counted = {} if os.environ.get("BENCH_NO_CENSUS") else census()
                self.peak = {**current, "smaps": smaps(), "census": counted}

    def write(self) -> None:
        directory = os.environ.get("BENCH_MEMORY_DIR")
        if not directory:
            return
        with open(os.path.join(directory, f"{os.getpid()}.json"), "w") as out:
            json.dump({"samples": self.samples, "peak": self.peak, "idle": self.samples[0] if self.samples else {}},
                      out)


def post_worker_init(worker: Any) -> None:
    for name, number in (("BENCH_MMAP_THRESHOLD", -3), ("BENCH_TRIM_THRESHOLD", -1), ("BENCH_ARENA_MAX", -8)):
        if os.environ.get(name):  # glibc's mallopt(M_MMAP_THRESHOLD / M_TRIM_THRESHOLD / M_ARENA_MAX, value)
            ctypes.CDLL("libc.so.6").mallopt(number, int(os.environ[name]))
    if os.environ.get("BENCH_TRACEMALLOC"):
        tracemalloc.start(int(os.environ["BENCH_TRACEMALLOC"]))
    probe = Probe(worker)
    monkey.get_original("_thread", "start_new_thread")(probe.run, ())
    worker.memory_probe = probe


def worker_exit(server: Any, worker: Any) -> None:
    probe = getattr(worker, "memory_probe", None)
    if probe is not None:
        probe.write()
