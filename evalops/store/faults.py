"""Storage faults named by their cause, on SQLite and PostgreSQL alike.

A full disk, a lost connection, a file held by another process, a damaged file or a
read-only directory is not a bug in evalops: each becomes an error that names the database
(its URL masked), the cause, what to do, and that nothing was stored (a failed transaction
is rolled back whole), with the exit code docs/cli.md gives it: busy and storage failures 1,
an unusable database 2, a damaged one 6. Driver messages are reduced to their first line:
no SQL text, no bind parameters, no link into another project's documentation.

Imports no SQLAlchemy (a SQLite `verify` runs on `sqlite3` alone): a SQLAlchemy error is
recognised by its `orig` (the driver's error it wraps), a psycopg one by its module and
SQLSTATE.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from evalops.errors import (
    BUSY_MESSAGE,
    BusyError,
    DamagedDatabase,
    DatabaseUnavailable,
    EvalopsError,
    NewerSchema,
    StorageFault,
)

NOTHING_STORED = "nothing was stored"
NOTHING_CHANGED = "nothing changed"
RECOVERY = "docs/troubleshooting.md"

_PLAIN_SQLITE = re.compile(r"^sqlite:///[^?#@%]*$")


def masked(url: str) -> str:
    """The URL with its secrets masked (`store.engine.redact`); a plain SQLite file URL,
    which holds none, without loading SQLAlchemy."""
    if _PLAIN_SQLITE.match(url):
        return url
    from evalops.store.engine import redact

    return redact(url)


def storage_fault(exc: BaseException, url: str, *, opening: bool = False) -> EvalopsError | None:
    """The error people can act on for a storage fault met while using the database at
    `url`; None when `exc` is no storage fault (a bug stays an internal error). `opening`:
    the first connection failed, which is no lost connection (an unreachable server is
    said so by the caller)."""
    for error in _causes(exc):
        fault = _sqlite_fault(error, url) if isinstance(error, sqlite3.Error) else None
        if fault is None and type(error).__module__.startswith("psycopg"):
            fault = _postgres_fault(error, url, opening=opening)
        if fault is not None:
            return fault
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, the driver error a SQLAlchemy error wraps, and what it was raised from or
    while handling (a rollback that fails after a lost connection hides the first error)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        error = todo.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        for linked in (getattr(error, "orig", None), error.__cause__, error.__context__):
            if isinstance(linked, BaseException):
                todo.append(linked)


def first_line(error: BaseException, limit: int = 200) -> str:
    """The driver's own words, first line only (SQL and parameters follow on later lines
    in SQLAlchemy's rendering; the driver's first line never holds them)."""
    text = str(error).strip()
    line = text.splitlines()[0].strip() if text else type(error).__name__
    return line[:limit]


# --- SQLite --------------------------------------------------------------------------


def _sqlite_fault(error: sqlite3.Error, url: str) -> EvalopsError | None:
    name = str(getattr(error, "sqlite_errorname", "") or "")
    text = first_line(error)
    lowered = text.lower()
    db = masked(url)
    if name == "SQLITE_NOTADB" or "file is not a database" in lowered:
        # A file that never was a SQLite database is the wrong file named (exit 2, said by
        # the caller); one that was is damaged.
        return damaged(db, f"SQLite: {text}") if _was_sqlite(url) else None
    if name.startswith("SQLITE_CORRUPT") or "malformed" in lowered:
        return damaged(db, f"SQLite: {text}")
    if lowered.startswith(("no such table:", "no such column:")) and _of_the_schema(text):
        return damaged(db, f"SQLite: {text}; a table or column of its schema is missing")
    if name == "SQLITE_FULL" or "database or disk is full" in lowered:
        return StorageFault(
            f"cannot write to database {db}: the disk is full (SQLite: {text}); free disk "
            "space (an ingest needs about three times its input's size while it runs) and run "
            f"the command again; {NOTHING_STORED}",
            field="--db",
        )
    if name.startswith("SQLITE_IOERR") or "disk i/o error" in lowered:
        return StorageFault(
            f"database {db}: the disk failed a read or write (SQLite: {text}): the disk is "
            "full, a file-size limit (ulimit -f) was reached or the device failed; free "
            "space or raise the limit and run the command again; " + NOTHING_STORED,
            field="--db",
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in lowered:
        return BusyError(
            f"{BUSY_MESSAGE} (database {db} stayed locked by another process, a writer or a "
            "backup holding it exclusively, beyond --lock-timeout); run the command again "
            f"once it is released; {NOTHING_STORED}",
            field="--db",
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")) or (
        "readonly database" in lowered or "unable to open database file" in lowered
    ):
        return _cannot_open(db, url, text)
    return None


def _cannot_open(db: str, url: str, text: str) -> DatabaseUnavailable:
    path = _sqlite_file(url)
    if path is not None and path.exists():
        directory = path.parent
        if not os.access(directory, os.W_OK):
            return DatabaseUnavailable(
                f"cannot use database {db}: its directory {directory} is read-only, and "
                f"SQLite needs to create {path.name}-wal and {path.name}-shm beside the file; "
                "copy the database to a writable directory (or make this one writable) and "
                f"run the command again; {NOTHING_STORED}",
                field="--db",
            )
        if not os.access(path, os.W_OK):
            return DatabaseUnavailable(
                f"cannot write database {db}: the file is read-only; make it writable (or "
                f"work on a writable copy) and run the command again; {NOTHING_STORED}",
                field="--db",
            )
    return DatabaseUnavailable(
        f"cannot open database {db} (SQLite: {text}); check that the file and its directory "
        f"exist and are readable and writable; {NOTHING_STORED}",
        field="--db",
    )


def _was_sqlite(url: str) -> bool:
    """The file starts as every SQLite database does."""
    path = _sqlite_file(url)
    try:
        with path.open("rb") if path is not None else open(os.devnull, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _sqlite_file(url: str) -> Path | None:
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def _of_the_schema(text: str) -> bool:
    """Whether the table or column the driver says is missing is one of evalops's schema:
    then the database lost it (a file edited by hand: damaged); else the statement named
    something no schema has, which is a bug in evalops, and stays an internal error."""
    lowered = text.lower()
    for prefix in ("no such table:", "no such column:"):
        if lowered.startswith(prefix):
            name = text[len(prefix) :].strip()
            break
    else:  # PostgreSQL: relation "x" does not exist; column x.y / "y" does not exist
        found = re.search(r'(?:relation|column) "?([\w.]+)"? does not exist', text)
        if found is None:
            return False
        name = found.group(1)
    last = name.replace('"', "").split(".")[-1]
    # Imported here: only this error path needs the models (a SQLite verify runs on
    # sqlite3 alone otherwise).
    from sqlmodel import SQLModel

    import evalops.store.tables  # noqa: F401  (the models, registered on the metadata)

    tables = SQLModel.metadata.tables.values()
    return any(t.name == last for t in tables) or any(last in t.columns for t in tables)


def damaged(db: str, cause: str) -> DamagedDatabase:
    """The error for a damaged database (exit 6): restore a backup, re-run what came after."""
    return DamagedDatabase(
        f"database {db} is damaged ({cause}): restore it from a backup, then re-run the "
        f"ingests and syncs made since (each is all-or-nothing and idempotent; {RECOVERY}); "
        + NOTHING_STORED,
        field="--db",
    )


# --- PostgreSQL ----------------------------------------------------------------------

#: SQLSTATEs of a connection the server ended or lost: class 08 (connection exception),
#: admin_shutdown (pg_terminate_backend, a fast shutdown), crash_shutdown, cannot_connect_now.
_LOST = ("57P01", "57P02", "57P03", "57P04")


def _postgres_fault(error: BaseException, url: str, *, opening: bool) -> EvalopsError | None:
    sqlstate = str(getattr(error, "sqlstate", None) or "")
    text = first_line(error)
    db = masked(url)
    lost = sqlstate in _LOST or sqlstate.startswith("08")
    if not lost and not sqlstate:
        # A client-side OperationalError (no SQLSTATE): the connection broke or closed.
        lost = type(error).__name__ in ("OperationalError", "InterfaceError")
    if lost and opening:
        return None
    if lost:
        return DatabaseUnavailable(
            f"lost the connection to database {db} (PostgreSQL: {text}): the server ended "
            "it (a restart, a failover, an administrator); the transaction was rolled back "
            f"and {NOTHING_STORED}: run the command again once the server is back",
            field="--db",
        )
    if sqlstate.startswith("53") or sqlstate == "58030":
        return StorageFault(
            f"database {db}: the server could not write (PostgreSQL: {text}): free disk "
            f"space or resources on the server and run the command again; {NOTHING_STORED}",
            field="--db",
        )
    if sqlstate == "55P03":  # lock_not_available: a lock held beyond --lock-timeout
        return BusyError(
            f"{BUSY_MESSAGE} (database {db}: another session held a lock beyond "
            f"--lock-timeout; PostgreSQL: {text}); run the command again once it is "
            f"released; {NOTHING_STORED}",
            field="--db",
        )
    if sqlstate in ("XX001", "XX002"):
        return damaged(db, f"PostgreSQL: {text}")
    if sqlstate in ("42P01", "42703") and _of_the_schema(text):  # undefined table, column
        return damaged(db, f"PostgreSQL: {text}; a table or column of its schema is missing")
    if sqlstate == "25006":
        return DatabaseUnavailable(
            f"cannot write database {db}: the server is read-only (a standby?) "
            f"(PostgreSQL: {text}); use the primary's URL; {NOTHING_STORED}",
            field="--db",
        )
    return None


# --- Schema revisions ----------------------------------------------------------------


def newer_schema(db: str, revision: str, head: str) -> NewerSchema:
    """A database migrated by a newer evalops, or stamped with a revision of no evalops
    migration (another project's Alembic): no command of this one changes it (exit 2)."""
    if not revision.isdigit():
        return NewerSchema(
            f"database {db} is at revision {revision!r}, which no evalops migration has "
            f"(evalops numbers its revisions, head {head}): another project's database, or "
            f"one stamped by hand; give evalops a database of its own; {NOTHING_CHANGED}",
            field="--db",
        )
    return NewerSchema(
        f"database {db} is at {revision}, newer than this evalops (head {head}): use a newer "
        f"evalops; {NOTHING_CHANGED}",
        field="--db",
    )
