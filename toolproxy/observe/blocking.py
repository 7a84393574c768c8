"""How long a worker's event loop ran without letting another greenlet run: the rule is that no single request
holds it for more than 100 ms. Measured on the loop thread's own CPU clock: a thread samples, every few
milliseconds, how much CPU the loop thread has used since its last greenlet switch. A wall-clock monitor (gevent's
`max_blocking_time`) also fires when a loaded machine deschedules the whole process, which no code can help; CPU
time advances only while the loop itself computes. On with `TOOLPROXY_DEBUG_ROUTES` (tests, benchmarks)."""

from __future__ import annotations

import time
from typing import Any

import greenlet
from gevent import monkey

SAMPLE_SECONDS = 0.005


class LoopWatch:
    """The worst stretch of loop CPU time between two greenlet switches, since the last `take`."""

    def __init__(self) -> None:
        self._clock = time.pthread_getcpuclockid(monkey.get_original("_thread", "get_ident")())
        self._since_switch = time.clock_gettime(self._clock)
        self._worst = 0.0
        self._previous = greenlet.settrace(self._switched)
        start = monkey.get_original("_thread", "start_new_thread")
        start(self._sample, ())  # a real thread, whatever gevent patched: it must run while the loop is stuck

    def take(self) -> float:
        """The worst stretch in milliseconds since the last call, and start again."""
        worst, self._worst = self._worst, 0.0
        return worst * 1000

    def _switched(self, event: str, args: Any) -> None:
        self._since_switch = time.thread_time()  # runs on the loop thread: its CPU clock
        if self._previous is not None:
            self._previous(event, args)

    def _sample(self) -> None:
        sleep = monkey.get_original("time", "sleep")
        while True:
            sleep(SAMPLE_SECONDS)
            stretch = time.clock_gettime(self._clock) - self._since_switch
            if stretch > self._worst:
                self._worst = stretch
