"""One `TransformRecord` per request, filled stage by stage, and the redaction every stored string goes
through: what a record may hold and what it must never hold."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolproxy.wire.ids import random_id

REDACTED = "[redacted]"
# (word that must be there, pattern): bounded quantifiers and a final greedy class, so linear; the pattern runs
# only when its word is in the text, because a regex scan costs far more than `in`.
_SECRET_PATTERNS = (
    ("authorization", re.compile(
        r"""(?i)(authorization["']?\s{0,8}[:=]\s{0,8}["']?\s{0,8}(?:bearer\s{1,8}|basic\s{1,8})?)[^\s"',;]+""")),
    ("bearer", re.compile(r"\b(Bearer\s{1,8})[A-Za-z0-9._~+/=-]{12,}")),
    ("key", re.compile(r"""(?i)(api[_-]?key["']?\s{0,8}[:=]\s{0,8}["']?)[^\s"',;&{}\[\]]+""")),
)
SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?key|authorization)$")  # api_key, x-api-key, OPENAI_API_KEY


@dataclass(slots=True)
class TransformRecord:
    """One per request, filled stage by stage."""

    request_id: str  # "req_" + 16 random letters/digits, set at creation
    started: float  # time.time()
    client: str = ""  # User-Agent
    address: str = ""  # client IP
    model: str = ""
    upstream: str = ""  # scheme://host:port only, never a path with credentials, never a key
    route: str = ""  # tools_stream, tools, stream, plain, vtc, vtc_stream, vtc_bridge, loop_guard, error
    mode: str = ""  # native or prompt (+ " vtc")
    route_reason: str = ""  # why native tool_calls or VTC (XML in content) was chosen
    status: int | str = 0  # HTTP status, or "client_disconnected"
    dialects: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)  # name, arguments, raw_arguments, dialect, valid
    issues: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # loop guard / access policy actions
    repairs: int = 0
    finish_reason: str | None = None
    upstream_ms: float = 0.0
    overhead_ms: float = 0.0
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
    tools: Any = None  # the request's tools (as sent)
    raw_text: str = ""  # the model's text as the upstream returned it
    # What the client received as one text, where it is not its content and calls (`client_calls`); None: it is
    # those, composed when a page asks (observe/composed.py), never written out on the request path.
    client_text: str | None = None
    worker: int = 0  # os.getpid() of the worker that served it
    error_code: str | None = None  # ProxyError.code when the request failed; labels the upstream-error metric
    client_content: str | None = None  # the content alone, for the downloadable test case
    client_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments) of the calls it got
    client_request_id: str = ""  # the X-Request-Id the client (or a reverse proxy in front) sent, if any
    denied: list[str] = field(default_factory=list)  # the dialect of each call the access policy refused
    strategy: str = ""  # a stream with tools: "buffered" or "incremental"
    first_byte_ms: float | None = None  # a stream: from the request to the first content or call sent
    protocol: str = "chat"  # the client's wire protocol (its front end's name): chat, messages, responses
    backend: str = ""  # the upstream's kind and version, as known when the request went (upstream/backends.py)
    attempts: list[list[Any]] = field(default_factory=list)  # [dialect, outcome, repaired] per call attempted

    def has_issues(self) -> bool:
        return bool(self.issues) or any(call.get("valid") is False for call in self.calls)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Clipped(str):
    """The beginning of a longer text (`length` characters): all of it a row reads (observe/kept.py)."""

    length: int

    def __new__(cls, text: str, length: int) -> Clipped:
        clipped = super().__new__(cls, text)
        clipped.length = length
        return clipped


@dataclass(frozen=True, slots=True)
class Span:
    """Where a call's source is in its record's model text, within what the record keeps (observe/kept.py)."""

    start: int
    end: int


def full_length(text: str) -> int:
    """The length of the text a record was given, where it keeps only its beginning."""
    return text.length if isinstance(text, Clipped) else len(text)


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (of 4 characters or more) and anything shaped like a credential replaced."""
    return redact_with(text, _usable(tuple(secrets)))


@functools.lru_cache(maxsize=8)
def _usable(secrets: tuple[str, ...]) -> tuple[str, ...]:
    # The log line redacts each of its fields with the same secrets: sorting them once is enough.
    return usable_secrets(secrets)


def truncate(text: str, limit: int) -> str:
    """The first `limit` characters, and how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters cut]"


# A secret cut by the limit is still found whole within this margin past it.
REDACT_MARGIN = 4096


def redact_and_cut(text: str, secrets: tuple[str, ...], limit: int) -> str:
    """Made valid text (`valid_text`), redacted, then cut to `limit`. Only the kept part (and the margin) is made
    valid and redacted: doing all of a 256 KB answer, which three fields of a record hold, cost more than the rest
    of the request. `valid_text` maps one character to one, so cutting first changes nothing."""
    return redact_and_cut_noting(text, secrets, limit)[0]


def redact_and_cut_noting(text: str, secrets: tuple[str, ...], limit: int) -> tuple[str, bool]:
    """`redact_and_cut`, and whether redaction changed the text or might change it written beside other text
    (a credential word in it): a cut, or a lone surrogate made valid, aside."""
    length = full_length(text)
    head = valid_text(text if length <= limit else text[: limit + REDACT_MARGIN])
    redacted = redact_with(head, secrets)
    touched = redacted is not head or has_credential_word(head)
    if length <= limit:
        return redacted, touched
    return f"{redacted[:limit]}\n[… {length - limit} more characters cut]", touched


# Lower-cased, the words without which no credential pattern above (nor SECRET_KEY) can match.
CREDENTIAL_WORDS = ("authorization", "bearer", "api_key", "api-key", "apikey")
# The only non-ASCII letters that str.lower() or a case-blind regex turn into ASCII ones (U+0130, U+0131, U+017F and
# the Kelvin sign): with one in the text, a credential word can hide from a search of the lower-cased text.
FOLDING = "\u0130\u0131\u017f\u212a"


def has_credential_word(text: str) -> bool:
    """Whether a credential pattern could match `text` or the text written next to it."""
    lowered = text.lower()
    return any(word in lowered for word in CREDENTIAL_WORDS) or (
        not text.isascii() and any(char in text for char in FOLDING))


def usable_secrets(secrets: Sequence[str]) -> tuple[str, ...]:
    # Longest first, so a key that contains a shorter key is still replaced whole. Shorter ones would redact
    # ordinary words.
    return tuple(sorted({secret for secret in secrets if len(secret) >= 4}, key=len, reverse=True))


def redact_with(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if secrets and "\\" in text and _may_hold_escaped(text, secrets):
        for secret in secrets:
            text = _escaped(secret).sub(REDACTED, text)
    if len(text) < 8:  # shorter than any credential the patterns look for
        return text
    lowered = text.lower()
    for word, pattern in _SECRET_PATTERNS:
        if word in lowered:
            text = pattern.sub(lambda match: match.group(1) + REDACTED, text)
    return text


def _may_hold_escaped(text: str, secrets: tuple[str, ...]) -> bool:
    """Whether an `_escaped` pattern could match: a secret may be written with JSON escapes (`sk\\u002d...`) in
    raw model text or arguments. Without a `\\u` or `\\/` in the text, only a plain secret could, and those are
    replaced already unless a replacement made one; a backslash alone (model text is full of `\\n` and `\\"`) does
    not cost a regex scan of the whole text per secret."""
    return "\\u" in text or "\\/" in text or any(secret in text for secret in secrets)


def valid_text(text: str) -> str:
    """`text` with each lone surrogate (legal in a JSON escape, not encodable as UTF-8) replaced by U+FFFD, so
    no page, download or SQLite column ever meets one."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


@functools.lru_cache(maxsize=64)
def _escaped(secret: str) -> re.Pattern[str]:
    """The secret with any of its characters written as a JSON escape (`\\u0073`, `\\/`). One alternative of fixed
    text per character, none a prefix of another: no backtracking, linear in the text."""
    def forms(char: str) -> str:
        code = f"{ord(char):04x}"
        hex_digits = "".join(f"[{digit}{digit.upper()}]" if digit.isalpha() else digit for digit in code)
        extra = "|\\\\/" if char == "/" else ""
        return f"(?:{re.escape(char)}|\\\\u{hex_digits}{extra})"

    return re.compile("".join(forms(char) for char in secret))


def new_request_id() -> str:
    """The id of a request's record: sent back as `X-Request-Id`, shown by the dashboard, in the log line."""
    return "req_" + random_id(16)


def new_record(client: str, address: str, request_bytes: int, request_id: str | None = None,
               client_request_id: str = "", protocol: str = "chat") -> TransformRecord:
    return TransformRecord(request_id or new_request_id(), time.time(), client=client, address=address,
                           request_bytes=request_bytes, worker=os.getpid(), client_request_id=client_request_id,
                           protocol=protocol)


def fill_answer(record: TransformRecord, answer: dict[str, Any] | None) -> None:
    """What the client received, as the dashboard shows it: the content, and the calls (the answer's own strings,
    not copies, so that nothing of a 256 KB answer is written out again on the request path)."""
    if not answer or not answer.get("choices"):
        return
    message = answer["choices"][0].get("message") or {}
    record.finish_reason = answer["choices"][0].get("finish_reason")
    record.client_content = message.get("content")
    record.client_calls = [(call["function"]["name"], call["function"]["arguments"])
                           for call in message.get("tool_calls") or []]
    record.client_text = None  # and `response_bytes` is counted where the record is stored, off the request path
