"""toolproxy's SSE decoder against sseclient-py on the same bytes, read the way a socket delivers them.

Two streams: a long stream of ordinary chat chunks (what a passthrough relays), and one large event (a tool
call's arguments, or a hostile upstream) in 1 KiB reads, at n and 4n, with the 4n/n time ratio that shows linear
(about 4) or quadratic (about 16) behaviour. sseclient-py has no size limit: it buffers whatever it is sent.

    .venv/bin/python bench/sse.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import sseclient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolproxy.wire.sse import EventDecoder

MiB = 1 << 20
READ = 4096


def chat_stream(events: int) -> bytes:
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "token "}, "finish_reason": None}]}
    return (b"data: " + json.dumps(chunk).encode() + b"\n\n") * events + b"data: [DONE]\n\n"


def big_event(size: int) -> bytes:
    return b"data: " + b"x" * size + b"\n\n"


def reads(raw: bytes, size: int) -> Iterator[bytes]:
    return (raw[start:start + size] for start in range(0, len(raw), size))


def ours(raw: bytes, size: int) -> int:
    decoder = EventDecoder(64 * MiB)
    count = sum(len(decoder.feed(piece)) for piece in reads(raw, size))
    return count + len(decoder.finish())


def theirs(raw: bytes, size: int) -> int:
    return sum(1 for _ in sseclient.SSEClient(reads(raw, size)).events())


def timed(decode: Callable[[bytes, int], int], raw: bytes, size: int) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        count = decode(raw, size)
        best = min(best, time.perf_counter() - started)
    return best, count


def main() -> None:
    print(f"{'stream':<34}{'toolproxy ms':>14}{'sseclient-py ms':>17}")
    for label, raw, size in (
        ("chat chunks, 100k events (17 MB)", chat_stream(100_000), READ),
        ("one 1 MiB event, 1 KiB reads", big_event(MiB), 1024),
        ("one 4 MiB event, 1 KiB reads", big_event(4 * MiB), 1024),
        ("one 16 MiB event, 1 KiB reads", big_event(16 * MiB), 1024),
    ):
        (mine, mine_count), (other, other_count) = timed(ours, raw, size), timed(theirs, raw, size)
        assert mine_count == other_count, (label, mine_count, other_count)
        print(f"{label:<34}{mine * 1000:>14.1f}{other * 1000:>17.1f}")
    ratio = [timed(decode, big_event(4 * MiB), 1024)[0] / timed(decode, big_event(MiB), 1024)[0]
             for decode in (ours, theirs)]
    print(f"{'4 MiB / 1 MiB time ratio':<34}{ratio[0]:>14.1f}{ratio[1]:>17.1f}")


if __name__ == "__main__":
    main()
