"""The PostgreSQL store's schema, created and upgraded by the proxy itself: numbered migrations applied in order,
each once, under an advisory lock, so that any number of instances may start at once against one database (the
first takes the lock and upgrades; the others wait, then find nothing left to do). A migration only ever adds, so an
instance of an older release keeps working on a schema a newer one upgraded while a fleet rolls over.

Also here: whether a database URL can be used, said in one sentence that names the setting, the password masked
(`check`: gunicorn's master at start-up, in a child process of its own, and `toolproxy check-config`)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from toolproxy.config.values import password_of, without_password

logger = logging.getLogger("toolproxy.observe.translog")

VARIABLE = "TOOLPROXY_LOG_URL"
TABLE = "toolproxy_records"
# pg_advisory_xact_lock's key: any fixed number no other application on the database uses ("toolproxy" in ASCII).
LOCK_KEY = 0x746F6F6C70726F78
CONNECT_SECONDS = 5
# Version n is MIGRATIONS[n - 1]. Append only: a released migration is never edited.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (f"""CREATE TABLE {TABLE} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        instance text NOT NULL,          -- TOOLPROXY_INSTANCE of the instance that served the request
        request_id text NOT NULL, started double precision NOT NULL, model text NOT NULL, client text NOT NULL,
        route text NOT NULL, protocol text NOT NULL,
        status text NOT NULL,            -- an HTTP status, or a word such as client_disconnected
        http_status integer,             -- the status where it is a number, for counting errors
        has_issues boolean NOT NULL, worker integer NOT NULL, overhead_ms double precision NOT NULL,
        repairs integer NOT NULL, issue_count integer NOT NULL,
        failed boolean NOT NULL,         -- row.is_failed: what the failed-call shares count
        first_byte_ms double precision,
        dialects text[] NOT NULL,
        summary text NOT NULL,           -- JSON: what the record list shows, so listing never parses a record
        record text NOT NULL             -- JSON: the whole record, redacted and truncated (stored.py)
    )""",
     f"CREATE INDEX {TABLE}_request_id ON {TABLE} (request_id)",
     f"CREATE INDEX {TABLE}_started ON {TABLE} (started)",
     f"CREATE INDEX {TABLE}_instance ON {TABLE} (instance, id)"),
)
VERSION = len(MIGRATIONS)
# Said by the server (or the resolver) about the URL itself, not about whether the database is up now: refused at
# start-up. Anything else (refused connection, timeout, shutting down, too many clients) may pass: rows wait for it.
_WRONG_SETTING = ("authentication failed", "does not exist", "pg_hba.conf", "permission denied",
                  "failed to resolve host", "could not translate host name", "invalid", "no password supplied")


def upgrade(connection: psycopg.Connection[Any]) -> int:
    """Bring the schema to VERSION (idempotent, safe concurrently); the version found before."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        connection.execute("CREATE TABLE IF NOT EXISTS toolproxy_schema (version integer NOT NULL)")
        row = connection.execute("SELECT max(version) FROM toolproxy_schema").fetchone()
        found = int(row[0]) if row and row[0] is not None else 0
        for version in range(found + 1, VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                connection.execute(statement)  # fixed text, no value in it
            logger.info("transform log: PostgreSQL schema upgraded to version %d", version)
        if found < VERSION:
            connection.execute("DELETE FROM toolproxy_schema")
            connection.execute("INSERT INTO toolproxy_schema (version) VALUES (%s)", (VERSION,))
        elif found > VERSION:
            logger.info("transform log: PostgreSQL schema version %d is newer than this release's %d (a newer "
                        "instance upgraded it; its migrations only add)", found, VERSION)
    return found


def is_wrong_setting(error: Exception) -> bool:
    """Whether a failure to connect says the URL is wrong rather than that the database is unreachable now."""
    if isinstance(error, psycopg.ProgrammingError):  # libpq refused the URL itself (an unknown parameter)
        return True
    text = str(error).lower()
    return any(words in text for words in _WRONG_SETTING)


def sentence(url: str, reason: str) -> str:
    """One sentence for the operator: the setting, its URL without the password, why."""
    shown = without_password(url)
    return f"{VARIABLE}={shown}: {hide_password(reason, url)}"


def hide_password(text: str, url: str) -> str:
    """`text` with the URL's password (should a message quote it) replaced."""
    password = password_of(url)
    return text.replace(password, "***") if password else text


def check(url: str, *, create: bool = True) -> tuple[str | None, str | None]:
    """(problem, warning): the URL cannot work (a bad URL or password, no such database), or the database does not
    answer now (rows will wait for it). Creates or upgrades the schema when it connects, unless `create` is off
    (`check-config` only looks)."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_SECONDS, autocommit=True,
                             application_name="toolproxy check") as connection:
            if create:
                upgrade(connection)
            else:
                connection.execute("SELECT 1")
    except psycopg.Error as error:
        reason = " ".join(str(error).split())
        if is_wrong_setting(error):
            return sentence(url, f"cannot be used: {reason}"), None
        return None, sentence(url, f"does not answer now ({reason}); records wait for it in each worker's "
                                   "queue and are written once it does")
    return None, None
