"""The data directory (`TOOLPROXY_DATA_DIR`: the transform log, the metrics files, the instance lock): its default,
a per-user state directory rather than `./data` of wherever the command runs, and whether it can be used, said in
one sentence that names the setting. Standard library only (gunicorn's master loads this)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping

VARIABLE = "TOOLPROXY_DATA_DIR"


def default_data_dir(environ: Mapping[str, str]) -> str:
    """`$XDG_STATE_HOME/toolproxy`, or `~/.local/state/toolproxy` (the XDG base directory specification's state
    directory: data that outlives a restart but is no user document). A relative XDG_STATE_HOME is invalid by that
    specification and ignored."""
    state = environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "toolproxy")


def data_dir_problem(path: str) -> str | None:
    """Why `path` cannot hold toolproxy's data, or None. Tried, not inferred from permission bits (which root,
    ACLs and read-only mounts make lie): a file made and removed in it, or, while it is missing, a directory made
    and removed where it would be created. Leaves nothing behind (check-config)."""
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return _sentence(path, f"{existing} is not a directory")
    try:
        if existing == os.path.abspath(path):
            fd, name = tempfile.mkstemp(prefix=".toolproxy-check-", dir=existing)
            os.close(fd)
            os.unlink(name)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".toolproxy-check-", dir=existing))
    except OSError as error:
        return _sentence(path, f"{existing}: {error.strerror or error}")
    return None


def prepare_data_dir(path: str) -> str | None:
    """Create `path` if it is missing; why it cannot be, or None."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        return data_dir_problem(path) or _sentence(path, error.strerror or str(error))
    return data_dir_problem(path)


def unusable(path: str, error: OSError) -> str:
    """The sentence for a write into the data directory that failed."""
    return _sentence(path, error.strerror or str(error))


def _sentence(path: str, reason: str) -> str:
    return (f"{VARIABLE}={path} cannot hold toolproxy's data ({reason}): set {VARIABLE}, or the serve flag "
            "--data-dir, to a directory this user may write.")
