"""A request to one of the upstream's other endpoints and its answer (routes/forward.py passes them on)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ForwardCall:
    """A request to one of the upstream's other endpoints (`/v1/embeddings`, ...), passed on as it came."""

    method: str
    url: str
    body: bytes
    content_type: str
    api_key: str | None = field(default=None, repr=False)
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class Forwarded:
    """Its answer: a whole body (read within the size limit), or a stream's reads (`chunks`, closed by `close`)."""

    content_type: str
    body: bytes = b""
    chunks: Iterator[bytes] | None = None
    close: Callable[[], None] = lambda: None
