"""The start-up banner: one block in the log that says what this instance is: its version, the URL it serves, the
dashboard's, each upstream and whether it answers, whether keys are required, where data goes.

The upstreams are asked (`GET <upstream>/models`) all at once in a forked child with one deadline, so a dead one,
a hanging name lookup included (which no socket timeout bounds), delays the first workers by `PROBE_SECONDS` at
most. The child may import `ssl` for an https upstream: the master itself must not, before its workers
monkey-patch.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from toolproxy.config.settings import Settings
from toolproxy.config.values import without_password
from toolproxy.version import version

PROBE_SECONDS = 2.0
STATUS_LINE_BYTES = 1024
AGENT_SUFFIX = "(start-up check)"  # after toolproxy/<version> in the User-Agent: a test upstream knows it by this


def banner(settings: Settings, urls: Sequence[str]) -> str:
    """The block, for the URLs this instance listens on (after binding: the real port, not a 0)."""
    base = urls[0] if urls else "(no listener)"
    workers = f"{settings.workers} worker{'s' if settings.workers > 1 else ''}"
    lines = [f"toolproxy {version()} serving {base}/v1 ({workers})"]
    lines += [f"  also listening on {url}" for url in urls[1:]]
    lines += [f"  dashboard  {base}/dashboard/", f"  metrics    {base}/metrics"]
    lines += [f"  upstream   {line}" for line in upstream_lines(settings)]
    lines.append(f"  API keys   {_keys(settings)}")
    lines.append(f"  data       {settings.data_dir} (transform log, metrics)")
    return "\n".join(lines)


def upstream_lines(settings: Settings) -> list[str]:
    """One line per distinct upstream: its URL (no password), which models go there, whether it answers."""
    routes: dict[str, tuple[list[str], str | None]] = {}
    if settings.upstream:
        every = "every other model" if settings.models else "every model"
        routes[settings.upstream] = ([every], settings.upstream_api_key)
    for rule in settings.models:
        url = rule.overrides.get("upstream")
        if url:
            key = rule.overrides.get("upstream_api_key", settings.upstream_api_key)
            routes.setdefault(url, ([], key))[0].append(f"models {rule.match!r}")
    if not routes:
        return ["none: the built-in demo model answers (set TOOLPROXY_UPSTREAM or --upstream)"]
    answers = ask_all([(url, key) for url, (_, key) in routes.items()], PROBE_SECONDS)
    return [f"{without_password(url)} ({', '.join(models)}): {answer}"
            for (url, (models, _)), answer in zip(routes.items(), answers, strict=True)]


def ask_all(upstreams: list[tuple[str, str | None]], seconds: float) -> list[str]:
    """Whether each (url, key) answers, asked in parallel by a forked child, within `seconds` in all."""
    late = f"does not answer (nothing within {seconds:.1f} s)"
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child ends in os._exit, before coverage could save)
        os.close(reader)
        try:
            os.write(writer, json.dumps(_ask_in_threads(upstreams, seconds, late)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    try:
        answers = json.loads(_read_until(reader, time.monotonic() + seconds + 0.5) or b"null")
    except ValueError:
        answers = None
    finally:
        os.close(reader)
        with contextlib.suppress(OSError):  # ended already, or reaped by gunicorn's SIGCHLD handling
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
    return answers if isinstance(answers, list) and len(answers) == len(upstreams) else [late] * len(upstreams)


def _ask_in_threads(upstreams: list[tuple[str, str | None]], seconds: float, late: str) -> list[str]:
    answers = [late] * len(upstreams)

    def ask(index: int, url: str, key: str | None) -> None:
        answers[index] = probe(url, key, seconds)

    threads = [threading.Thread(target=ask, args=(index, url, key), daemon=True)
               for index, (url, key) in enumerate(upstreams)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return list(answers)


def _read_until(fd: int, deadline: float) -> bytes:
    received = b""
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        received += chunk
    return received


def listener_urls(addresses: Sequence[object]) -> list[str]:
    """The base URL of each bound socket's address: the real port (a bind to port 0 included), and this host's
    name for a wildcard address, which no client can call."""
    urls = []
    for address in addresses:
        if not isinstance(address, tuple):
            urls.append(f"unix:{address}")
            continue
        host, port = str(address[0]), int(address[1])
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        urls.append(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
    return urls


def _keys(settings: Settings) -> str:
    if settings.api_keys:
        count = len(settings.api_keys)
        return f"required ({count} key{'s' if count > 1 else ''})"
    if settings.allow_open:
        return "not required (TOOLPROXY_ALLOW_OPEN=1: anyone who reaches the port may use the upstream)"
    return "not required (loopback only)"


def probe(url: str, key: str | None, seconds: float) -> str:
    """Whether the upstream at `url` answers, in a few words; never longer than `seconds` once its name is looked
    up (in the child: the lookup is bounded by the parent's deadline)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    deadline = time.monotonic() + seconds
    head = (f"GET {parts.path}/models HTTP/1.1\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
            f"User-Agent: toolproxy/{version()} {AGENT_SUFFIX}\r\nConnection: close\r\n")
    if key and key.isprintable():  # the upstream's own key, as every request to it carries
        head += f"Authorization: Bearer {key}\r\n"
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=seconds) as connection:
            if parts.scheme != "https":
                return _status(connection, f"{head}\r\n", deadline)
            import ssl  # only ever in the forked child (see the module's docstring)

            with ssl.create_default_context().wrap_socket(connection, server_hostname=parts.hostname) as secure:
                return _status(secure, f"{head}\r\n", deadline)
    except TimeoutError:
        return f"does not answer (nothing within {seconds:.1f} s)"
    except OSError as error:  # ssl's errors are OSErrors too
        return f"does not answer ({error.strerror or error})"


def _status(connection: socket.socket, head: str, deadline: float) -> str:
    connection.sendall(head.encode("utf-8"))
    received = b""
    while b"\r\n" not in received and len(received) < STATUS_LINE_BYTES:
        connection.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = connection.recv(STATUS_LINE_BYTES)
        if not chunk:
            break
        received += chunk
    words = received.split(b"\r\n", 1)[0].split()
    if len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
        return "answers, but not with HTTP"
    status = int(words[1])
    if status in (401, 403):
        return f"answers, but refuses GET /models with {status}: check TOOLPROXY_UPSTREAM_API_KEY"
    return f"answers (GET /models: {status})"
