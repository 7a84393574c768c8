"""At start-up, before binding: can the transform log's PostgreSQL URL (`TOOLPROXY_LOG_URL`) be used? A wrong URL
or password ends the start with one sentence that names the setting (the password masked); a database that does not
answer now is a warning (records wait for it). Where it answers, its schema is created or upgraded here, once for the
instance, before any worker writes.

The check runs in a child process: gunicorn's master must never import psycopg, which picks its way of waiting on
the network when first imported, and would pick the blocking one before the workers' gevent patch."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time

CHECK_SECONDS = 60  # connecting (5 s) and waiting for another instance's upgrade under the advisory lock


def check_log_url(url: str) -> tuple[str | None, str | None]:
    """(problem, warning) as observe.postgres_schema.check says them, from a child process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave, running nothing of the parent's on the way out
        os.close(read_end)
        try:
            from toolproxy.observe.postgres_schema import check

            result = check(url)
        except BaseException as error:  # whatever it is, the parent must hear of it
            result = (f"TOOLPROXY_LOG_URL could not be checked: {type(error).__name__}", None)
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    answer = b""
    try:
        answer = _read_all(read_end, time.monotonic() + CHECK_SECONDS)
    finally:
        os.close(read_end)
        _reap(pid, finished=bool(answer))
    if not answer:
        return None, "TOOLPROXY_LOG_URL: the database check did not finish; records wait for the database"
    problem, warning = json.loads(answer)
    return problem, warning


def _read_all(fd: int, deadline: float) -> bytes:
    chunks = []
    while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _reap(pid: int, finished: bool) -> None:
    """Wait for the child: it exits right after its answer, or is ended when it gave none in time."""
    with contextlib.suppress(ChildProcessError):
        if not finished:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
