"""Server-sent events: encoding what the proxy sends, decoding what the upstream streams.

The decoder is incremental and linear: it only searches bytes it has not searched before, splits lines on
bytes (so a UTF-8 character cut between two network reads arrives whole, and U+2028/U+0085 never split a line),
and refuses an event larger than its limit instead of buffering without end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolproxy.wire import jsonwire

DONE = b"data: [DONE]\n\n"
BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


def encode_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + jsonwire.dumps(payload) + b"\n\n"


def encode_named(name: str, payload: dict[str, Any]) -> bytes:
    """An event with its type on an `event:` line too (the Responses and Messages protocols name each event)."""
    return b"event: " + name.encode("utf-8") + b"\ndata: " + jsonwire.dumps(payload) + b"\n\n"


def encode_comment(text: str) -> bytes:
    """A comment line: clients ignore it, but it keeps idle timeouts at bay and reveals a vanished client."""
    return b": " + text.encode("utf-8") + b"\n\n"


@dataclass(frozen=True, slots=True)
class Event:
    data: str
    event: str = "message"


class EventTooLarge(ValueError):
    pass


class EventDecoder:
    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer already known to hold no line end
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._skip_newline = False  # the last line ended in a bare \r that may be half of \r\n
        self._started = False  # the stream's first bytes, where a byte-order mark may stand, are behind us

    def feed(self, chunk: bytes) -> list[Event]:
        if not self._started:
            chunk = self.skip_bom(chunk)
            if not chunk:
                return []
        if self._skip_newline and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_newline = False
        self._buffer += chunk
        events: list[Event] = []
        position = 0
        while (match := _LINE_END.search(self._buffer, max(position, self._searched))) is not None:
            if match.group() == b"\r" and match.end() == len(self._buffer):
                self._skip_newline = True
            self._take_line(bytes(self._buffer[position : match.start()]), events)
            position = match.end()
            self._searched = 0
        del self._buffer[:position]
        self._searched = len(self._buffer)
        if len(self._buffer) + self._data_size > self._max:
            raise EventTooLarge(f"an upstream event exceeded {self._max} bytes")
        return events

    def skip_bom(self, chunk: bytes) -> bytes:
        """The stream's first bytes without its one leading U+FEFF, which is no part of the stream (the SSE
        standard); its bytes may come in pieces (held until it is known: b"" meanwhile). A reader that takes
        whole events without `feed` calls this on its first read."""
        if self._started:
            return chunk
        head = bytes(self._buffer) + chunk
        if len(head) < len(BOM) and BOM.startswith(head):
            self._buffer[:] = head
            return b""
        self._buffer.clear()
        self._started = True
        return head[len(BOM):] if head.startswith(BOM) else head

    def is_idle(self) -> bool:
        """Whether the next bytes start a new line of a new event (nothing half-read): a read that is one whole
        event then means just that event, and the caller may take it without feeding it through."""
        return self._started and not self._buffer and not self._data and not self._event and not self._skip_newline

    def finish(self) -> list[Event]:
        """End of stream: a last line without its newline still counts, an unterminated event is dispatched."""
        events: list[Event] = []
        if self._buffer:
            self._take_line(bytes(self._buffer), events)
            self._buffer.clear()
        self._take_line(b"", events)
        return events

    def _take_line(self, line: bytes, events: list[Event]) -> None:
        if not line:
            if self._data:
                events.append(Event("\n".join(self._data), self._event or "message"))
            self._data, self._data_size, self._event = [], 0, ""
            return
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            text = value.decode("utf-8", errors="replace")
            self._data.append(text)
            self._data_size += len(value)
        elif name == b"event":
            self._event = value.decode("utf-8", errors="replace")
