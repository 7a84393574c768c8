"""A real PostgreSQL server for the tests, from Debian's `postgresql` package (`make test` installs it, as it does
Chromium): `initdb` in a temporary directory, listening on a free loopback port and a socket in that directory,
stopped and removed at the end. PostgreSQL refuses to run as root: where the tests run as root, the server runs as
the `postgres` user the package creates (setpriv), which then owns the temporary directory.

No skip when the package is missing: CI must fail rather than pass untested."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import free_port

# The role the proxy connects as, and its password: a test of a wrong password changes it.
USER, PASSWORD, DATABASE = "toolproxy", "pg-secret-Q7x9", "toolproxy"
SUPERUSER = "postgres"
# A throwaway server: durability costs time, and every test's database is made afresh.
FAST = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "shared_buffers=32MB", "max_connections=200",
        "listen_addresses=127.0.0.1", "log_min_messages=fatal")


def binaries() -> Path:
    """The newest installed server's bin directory (Debian keeps one per major version, none on PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(path.split("/")[4]))
    assert found, "Debian's postgresql package is required: `make test` (or `make postgresql`) installs it"
    return Path(found[-1]).parent


class PostgresServer:
    def __init__(self) -> None:
        self.bin = binaries()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="toolproxy-pg-"))
        self.data = self.root / "data"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            owner = pwd.getpwnam(SUPERUSER)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        password_file = self.root / "superuser-password"
        password_file.write_text(PASSWORD)
        if self._as_root:
            os.chown(password_file, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth-local=trust",
                  "--auth-host=scram-sha-256", f"--pwfile={password_file}", "-E", "UTF8", "--locale=C.UTF-8")
        self.start()
        self.sql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")

    def url(self, database: str = DATABASE, password: str = PASSWORD, user: str = USER) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = " ".join(f"-c {option}" for option in (*FAST, f"port={self.port}",
                                                            f"unix_socket_directories={self.root}"))
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data))

    def is_running(self) -> bool:
        return subprocess.run(self._command("pg_ctl", "status", "-D", str(self.data)),
                              capture_output=True).returncode == 0

    def sql(self, statement: str, database: str = "postgres") -> str:
        """One statement as the superuser over the socket; its output, tab-separated, no header."""
        done = subprocess.run(self._command("psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                                            "-h", str(self.root), "-p", str(self.port), "-U", SUPERUSER,
                                            "-d", database, "-c", statement),
                              capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"psql failed: {done.stderr}")
        return done.stdout.strip()

    def fresh_database(self, name: str = DATABASE) -> str:
        """An empty database the proxy's role owns (dropped first if a test left one), and its URL."""
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.sql(f"CREATE DATABASE {name} OWNER {USER}")
        return self.url(name)

    def close(self) -> None:
        if self.is_running():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(self._command(program, *args), capture_output=True, text=True, timeout=120)
        if done.returncode:
            log = self.root / "server.log"
            raise RuntimeError(f"{program} failed: {done.stdout}{done.stderr}"
                               f"{log.read_text() if log.exists() else ''}")

    def _command(self, program: str, *args: str) -> list[str]:
        path = str(self.bin / program)
        if not self._as_root:
            return [path, *args]
        return ["setpriv", f"--reuid={SUPERUSER}", f"--regid={SUPERUSER}", "--init-groups", "--", path, *args]


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.1):  # type: ignore[no-untyped-def]
    """Poll until `predicate()` is truthy; its value, or AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s")
        time.sleep(interval)
