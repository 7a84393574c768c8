"""How many wrong keys the dashboard's login takes (issue 24: 300 guesses in 0.8 s were all answered).

A few failures from one address are free; past them each failure makes that address wait twice as long as the
one before (1 s, 2 s, 4 s, ... up to five minutes), and an attempt made while it waits is refused unheard. The same
holds for all addresses together, with more failures free, so that guessing from many addresses slows down too.
An address that stops failing for a quarter of an hour starts afresh, and a right key clears its count.

The counts live in each worker's memory: with W workers an address gets at most W times the free failures before
it waits, and a restart forgets them. Neither changes the growth: a key guessed at one try a few minutes apiece.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

FREE_PER_ADDRESS = 5
FREE_IN_TOTAL = 50
FIRST_WAIT = 1.0
LONGEST_WAIT = 300.0
FORGET_AFTER = 900.0
MAX_ADDRESSES = 10_000  # the oldest are forgotten first: many addresses cannot grow a worker's memory


@dataclass(slots=True)
class _Tally:
    failures: int = 0
    last: float = 0.0  # when the last failure came
    until: float = 0.0  # attempts before this are refused

    def fail(self, now: float, free: int) -> float:
        if now - self.last > FORGET_AFTER:
            self.failures = 0
        self.failures += 1
        self.last = now
        beyond = self.failures - free
        wait = 0.0 if beyond <= 0 else min(FIRST_WAIT * 2 ** min(beyond - 1, 32), LONGEST_WAIT)
        self.until = now + wait
        return wait


class LoginAttempts:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._total = _Tally()
        self._by_address: OrderedDict[str, _Tally] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, address: str) -> float:
        """Seconds before `address` may try a key again; 0 when it may now."""
        now = self._clock()
        with self._lock:
            tally = self._by_address.get(address)
            until = max(self._total.until, tally.until if tally else 0.0)
        return max(0.0, until - now)

    def failed(self, address: str) -> float:
        """Count a wrong key from `address`; the wait that now holds for it."""
        now = self._clock()
        with self._lock:
            tally = self._by_address.pop(address, None) or _Tally()
            self._by_address[address] = tally  # the most recent last, so the oldest go first
            while len(self._by_address) > MAX_ADDRESSES:
                self._by_address.popitem(last=False)
            return max(tally.fail(now, FREE_PER_ADDRESS), self._total.fail(now, FREE_IN_TOTAL))

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._by_address.pop(address, None)
