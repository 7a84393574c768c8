"""The values settings may take: one parser per kind, each raising ValueError with a message that says what to
write instead. Standard library only (gunicorn's master loads this before the workers monkey-patch)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from toolproxy.dialects.registry import DIALECT_NAMES

TOOL_MODES = ("native", "prompt")
# The servers toolproxy tells apart (upstream/backends.py); `generic` is any other OpenAI-compatible one.
BACKEND_KINDS = ("vllm", "sglang", "llamacpp", "llama-cpp-python", "ollama", "lmstudio", "mlx", "generic")


def closest(name: str, known: Sequence[str]) -> str:
    """"; did you mean `X`?" for the known name nearest to a mistyped one, or nothing."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean `{match[0]}`?" if match else ""


def _parse_url(value: Any) -> str:
    text = str(value).strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http(s) URL; expected something like http://127.0.0.1:8000/v1")
    return text


def _parse_database_url(value: Any) -> str:
    """A PostgreSQL URL (libpq's form); libpq checks the rest when it connects (observe/postgres_schema.py)."""
    text = str(value).strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # a port that is no number raises here
    except ValueError:
        raise ValueError(f"{without_password(text)!r} is not a URL; expected something like "
                         "postgresql://toolproxy:PASSWORD@db.example:5432/toolproxy") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"{without_password(text)!r} is not a postgresql:// URL; expected something like "
                         "postgresql://toolproxy:PASSWORD@db.example:5432/toolproxy (none: SQLite under the data "
                         "directory)")
    return text


def without_password(url: str) -> str:
    """The URL with its password, if any, replaced by `***` (for anything shown or logged)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "(a malformed URL)"
    if password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def password_of(url: str | None) -> str | None:
    """The URL's password as the server receives it (percent-decoded), or None."""
    try:
        password = urlsplit(url).password if url else None
    except ValueError:
        return None
    return unquote(password) if password else None


def _parse_instance(value: Any) -> str:
    text = str(value).strip()
    if not (0 < len(text) <= 100 and text.isprintable()):
        raise ValueError(f"{text!r} is not an instance name: 1 to 100 printable characters, such as the host name")
    return text


def _parse_keys(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    keys = tuple(str(item).strip() for item in items if str(item).strip())
    if not keys:
        raise ValueError("no key given; leave it unset for an open proxy")
    return keys


def _parse_directory(value: Any) -> str:
    """An absolute path (`~` expanded): the start-up banner and check-config show where data goes, and a worker's
    working directory can never change what it means."""
    text = str(value).strip()
    if not text:
        raise ValueError("no directory given; leave it unset for the per-user state directory")
    return os.path.abspath(os.path.expanduser(text))


def _parse_flag(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{value!r} is not a yes/no value; use 1 or 0")


def _parse_bind(value: Any) -> str:
    text = str(value).strip()
    if text.startswith("unix:"):
        return text
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8003)")
    return text


def _parse_count(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a whole number")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise ValueError(f"{number} must be at least 1")
    return number


def _small_number(most: int, what: str) -> Any:
    """A whole number from 0 to `most`; the message names what the number counts."""

    def parse(value: Any) -> int:
        if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value).strip()) > most:
            raise ValueError(f"{value!r} is not {what}")
        return int(str(value).strip())

    return parse


def _parse_names(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def _parse_patterns(value: Any) -> tuple[str, ...]:
    """Regular expressions, one per list item (in the environment: separated by newlines)."""
    items = value if isinstance(value, list) else str(value).split("\n")
    patterns = tuple(str(item) for item in items if str(item).strip())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {error}") from None
    return patterns


def _parse_patterns_or_none(value: Any) -> tuple[str, ...]:
    """An empty list is allowed: it switches detection off."""
    if value == [] or str(value).strip() in ("", "none", "[]"):
        return ()
    return tuple(item.lower() for item in _parse_names(value))


def _parse_seconds(value: Any) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a number of seconds") from None
    if not number > 0:
        raise ValueError(f"{number} must be more than 0 seconds")
    return number


def _parse_tool_mode(value: Any) -> str:
    text = str(value).strip()
    if text not in TOOL_MODES:
        raise ValueError(f"{text!r} is not a tool mode; choose one of {', '.join(TOOL_MODES)}")
    return text


MAX_TEMPLATE_CHARS = 256 * 1024  # a chat template, set per model or served by an upstream (template_sandbox.py)


def _parse_template(value: Any) -> str:
    """A chat template: the text itself (it holds `{{`, `{%` or a line break), or the path of a file holding it,
    read here, once, so that nothing reads a file while requests are served."""
    text = str(value)
    if "{{" in text or "{%" in text or "\n" in text:
        return _within_template_limit(text, "the template")
    path = os.path.expanduser(text.strip())
    try:
        with open(path, "rb") as file:
            data = file.read(4 * MAX_TEMPLATE_CHARS + 1)  # four bytes at most per character in UTF-8
    except OSError as error:
        raise ValueError(f"cannot read the chat template {path!r}: {error.strerror}") from None
    try:
        return _within_template_limit(data.decode("utf-8"), repr(path))
    except UnicodeDecodeError:
        raise ValueError(f"the chat template {path!r} is not UTF-8 text") from None


def _within_template_limit(text: str, label: str) -> str:
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ValueError(f"{label} is longer than {MAX_TEMPLATE_CHARS // 1024} Ki characters")
    return text


def _choice(*allowed: str) -> Any:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def _parse_dialects(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    unknown = [name for name in names if name not in DIALECT_NAMES]
    if unknown:
        raise ValueError(f"unknown dialect {', '.join(map(repr, unknown))}; known: {', '.join(DIALECT_NAMES)}")
    return names


def _parse_aliases(value: Any) -> tuple[tuple[str, str], ...]:
    """Glob -> model pairs, first match wins: a YAML mapping, or `GLOB=MODEL` pairs separated by commas."""
    items = list(value.items()) if isinstance(value, dict) else \
        [item.partition("=")[::2] for item in str(value).split(",") if item.strip()]
    aliases = tuple((str(pattern).strip(), str(target).strip()) for pattern, target in items)
    for pattern, target in aliases:
        if not pattern or not target:
            raise ValueError(f"{pattern or target!r} lacks its other half: write GLOB=MODEL, such as "
                             "claude-*=qwen3-coder")
    return aliases


PARSERS = {
    "url": _parse_url,
    "database_url": _parse_database_url,
    "instance": _parse_instance,
    "text": lambda value: str(value),
    "directory": _parse_directory,
    "keys": _parse_keys,
    "flag": _parse_flag,
    "bind": _parse_bind,
    "count": _parse_count,
    "seconds": _parse_seconds,
    "tool_mode": _parse_tool_mode,
    "dialects": _parse_dialects,
    "unknown_tools": _choice("text", "pass"),
    "invalid_arguments": _choice("pass", "text"),
    "reasoning": _choice("move", "keep", "drop"),
    "rounds": _small_number(3, "a number of repair rounds from 0 to 3 (1 is recommended)"),
    "newlines": _small_number(3, "a number of line breaks before the XML from 0 to 3 (2 by default)"),
    "log_format": _choice("text", "json"),
    "otel": _choice("auto", "on", "off"),
    "log_level": lambda value: _choice("DEBUG", "INFO", "WARNING", "ERROR")(str(value).strip().upper()),
    "names": _parse_names,
    "id_style": _choice("openai", "mistral"),
    "stream_strategy": _choice("buffered", "incremental"),
    "reasoning_switch": _choice("none", "reasoning_effort", "enable_thinking", "thinking"),
    "backend": _choice("auto", *BACKEND_KINDS),
    "constrain": _choice("auto", "off"),
    "patterns": _parse_patterns,
    "patterns_or_none": _parse_patterns_or_none,
    "template": _parse_template,
    "aliases": _parse_aliases,
}
