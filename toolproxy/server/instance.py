"""What one running instance owns in its data directory: a lock that keeps a second instance out, and a metrics
directory of its own for prometheus-client's multiprocess files.

The lock is a POSIX record lock (`fcntl.lockf`) on `<data_dir>/toolproxy.lock`, held by gunicorn's master for its
life: the kernel drops it when the master ends, however it ends, so a crash leaves nothing to clean by hand, and
forked workers do not inherit it. Two instances on one directory would share one transform log and wipe or mix
each other's counters: the second is refused before it binds its port, so a failed start touches nothing.

Standard library only: this runs in the master, before the workers monkey-patch.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
from dataclasses import dataclass

from toolproxy.config.datadir import prepare_data_dir, unusable

LOCK_FILE = "toolproxy.lock"
METRICS_DIR = "metrics"


class InstanceProblem(Exception):
    """Why this instance may not use its data directory, in one sentence for the operator."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The data directory as this instance holds it. `lock_fd` is None only for gunicorn's binary upgrade (USR2):
    the new master shares the directory with the old one, which holds the lock until it exits."""

    data_dir: str
    lock_fd: int | None

    @property
    def metrics_parent(self) -> str:
        return os.path.join(self.data_dir, METRICS_DIR)


def claim(data_dir: str, listening: str, upgrading_from: int = 0) -> Claim:
    """Take the data directory for this process (gunicorn's master), or raise InstanceProblem: it cannot be
    written, or another live toolproxy holds it. `listening` goes into the lock file, for the other's message."""
    problem = prepare_data_dir(data_dir)
    if problem:
        raise InstanceProblem(problem)
    path = os.path.join(data_dir, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise InstanceProblem(unusable(data_dir, error)) from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = _holder(fd)
        os.close(fd)
        if error.errno not in (errno.EAGAIN, errno.EACCES):
            raise InstanceProblem(unusable(data_dir, error)) from None
        if upgrading_from and holder.startswith(f"pid {upgrading_from},"):
            return Claim(data_dir, None)
        raise InstanceProblem(f"the data directory {data_dir} is in use by another toolproxy "
                              f"({holder or 'pid unknown'}): stop that one, or give this one its own "
                              "TOOLPROXY_DATA_DIR (--data-dir).") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, listening on {listening}\n".encode(), 0)
    return Claim(data_dir, fd)


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 500, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def fresh_metrics_dir(held: Claim, keep: tuple[int, ...] = ()) -> str:
    """This master's own, empty metrics directory, `<data_dir>/metrics/<pid>`; what earlier runs left there goes
    (their counts must not linger), except the directories of the masters in `keep` (an old master during a
    binary upgrade). Called once the port is bound: a start that fails to bind removes nothing."""
    parent = held.metrics_parent
    own = str(os.getpid())
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        entries = []
    for name in set(entries) - {own, *map(str, keep)}:
        _remove(os.path.join(parent, name))
    directory = os.path.join(parent, own)
    _remove(directory)  # a pid reused from an earlier run
    os.makedirs(directory)
    return directory


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
