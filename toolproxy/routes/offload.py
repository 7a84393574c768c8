"""Work on a large answer runs in a thread of gevent's pool instead of on the worker's event loop: extracting the
calls from an 8 MB reply took 1.6 s, and every other request on the worker waited for it. Python code in a thread
lets the loop run every few milliseconds (the interpreter's switch interval), so the worker's other requests go
on while it works; a small answer is worked on in place, where a thread's hand-over would cost more than it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gevent
import gevent.monkey

T = TypeVar("T")
OFF_LOOP_CHARS = 256 * 1024  # about 50 ms of extraction at its slowest (bench-parse: under 200 ms per MB)


def off_loop(work: Callable[[], T], size: int) -> T:
    """`work()`, in a pool thread when `size` (characters of model text it reads) is large."""
    if size < OFF_LOOP_CHARS:
        return work()
    result: T = gevent.get_hub().threadpool.apply(work)
    return result


def off_the_loop(work: Callable[[], T]) -> T:
    """`work()` where it holds up no other request, whatever its size (a chat template's derivation is ~10-100 ms
    of Python however short the template): in gevent's pool where threads are greenlets on the worker's loop
    (gunicorn's gevent worker patches them), in place in a real thread (a threaded server, the tests)."""
    if not gevent.monkey.is_module_patched("threading"):
        return work()
    result: T = gevent.get_hub().threadpool.apply(work)
    return result


def text_size(completion: dict[str, Any]) -> int:
    """The characters of model text an upstream completion holds (content, reasoning, native call arguments)."""
    size = 0
    for choice in completion.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict):
            size += sum(len(value) for key in ("content", "reasoning_content")
                        if isinstance(value := message.get(key), str))
            size += sum(len(str(call)) for call in message.get("tool_calls") or [])
    return size
