"""Engines and sessions for SQLite (embedded default) and PostgreSQL.

All writers are serialized so that the audit chain never forks: SQLite write transactions
start with `BEGIN IMMEDIATE`, PostgreSQL ones take a transaction-scoped advisory lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import Session, create_engine

DEFAULT_URL = "sqlite:///.evalops/registry.db"
# The advisory lock that serializes every writer of one PostgreSQL registry.
WRITER_LOCK_KEY = 0x6576616C6F7073  # "evalops"
_WRITE = "evalops_write"


def normalize_url(url: str) -> str:
    """`postgresql://` means psycopg 3, the driver evalops ships with."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for other backends or in-memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy's begin event issue BEGIN so that writers can ask for IMMEDIATE.
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_pre_ping=True)


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One serialized write transaction: committed on success, rolled back on any error."""
    writer = engine.execution_options(**{_WRITE: True})
    with Session(writer, expire_on_commit=False) as session, session.begin():
        if engine.dialect.name == "postgresql":
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITER_LOCK_KEY})
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session
