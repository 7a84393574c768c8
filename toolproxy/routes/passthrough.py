"""Route 3, a stream without tools: the upstream's events go on as they arrive, cleaned, and the record keeps
their text as they go by. A front end that speaks the upstream's own protocol may send some of them on as they
came, undecoded (`Exchange.forward`, the chat front end's stencil); what it sends that way is recorded here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolproxy.routes.exchange import Exchange
from toolproxy.transform.turn import Item, Relayed, carries_content
from toolproxy.wire import jsonwire

LITERAL_BYTES = 16 * 1024  # text pieces gathered undecoded at most


class Passthrough:
    """Each upstream chunk cleaned and recorded: as a `Relayed` item, or for a front end's shortcut."""

    def __init__(self, exchange: Exchange, clean: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._exchange = exchange
        self.clean = clean
        self._text = StreamText(exchange.settings.log_field_chars)

    def items(self, chunk: dict[str, Any]) -> list[Item]:
        return [Relayed(self.take(chunk))]

    def take(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """A decoded chunk, cleaned and recorded (the first content in it marks the first byte)."""
        cleaned = self.clean(chunk)
        self._text.add(cleaned, self._exchange)
        if self._exchange.record.first_byte_ms is None and carries_content(Relayed(cleaned)):
            self._exchange.first_byte()
        return cleaned

    def take_literal(self, literal: bytes) -> None:
        """Content a front end sent on undecoded, still as its JSON string (never empty)."""
        self._text.add_literal(literal)
        self._exchange.first_byte()


class StreamText:
    """The text of a passthrough stream, kept for the transform log up to its field limit. Pieces that came as
    bytes stay JSON strings until the text is read or a few KiB have gathered: then one decode takes them all."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pieces: list[str] = []
        self._size = 0
        self._literals: list[bytes] = []
        self._pending = 0

    def add(self, chunk: dict[str, Any], exchange: Exchange) -> None:
        self._decode()
        for choice in chunk.get("choices") or []:
            self.add_piece((choice.get("delta") or {}).get("content") or "")
            if choice.get("finish_reason"):
                text = "".join(self._pieces)
                exchange.answered([text], {"choices": [{"message": {"content": text},
                                                        "finish_reason": choice["finish_reason"]}]})

    def add_piece(self, piece: str) -> None:
        if piece and self._size < self._limit:
            self._pieces.append(piece)
            self._size += len(piece)

    def add_literal(self, literal: bytes) -> None:
        """A piece still as its JSON string (a well-formed one: wire/stencil.py checked it)."""
        if self._size < self._limit:
            self._literals.append(literal)
            self._pending += len(literal)
            if self._pending >= LITERAL_BYTES:
                self._decode()

    def _decode(self) -> None:
        if self._literals:
            pieces = jsonwire.loads_fast(b"[" + b",".join(self._literals) + b"]")
            self._literals, self._pending = [], 0
            for piece in pieces:
                self.add_piece(piece)
