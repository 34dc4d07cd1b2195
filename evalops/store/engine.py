"""Engines and sessions for SQLite (embedded default) and PostgreSQL.

All writers are serialized so that the audit chain never forks: SQLite write transactions
start with `BEGIN IMMEDIATE`, PostgreSQL ones take a transaction-scoped advisory lock.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import Session, create_engine

from evalops.errors import BUSY_MESSAGE
from evalops.store.reader import driver_form, driver_stream

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


def ensure_parent(path: Path | None) -> None:
    """The directory of a SQLite database file, created if missing."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


SECRET_PARAMS = re.compile(
    r"(?i)^(password|passwd|pass|pwd|secret|token|access_token|api_key|apikey|sslpassword|"
    r"sslkey|auth|authorization|credentials?)$"
)


def redact(url: str) -> str:
    """The URL with every secret masked (password, and secret-looking query parameters),
    for messages; an unparseable URL is shown by its scheme only."""
    try:
        parsed = make_url(url)
    except Exception:  # any malformed URL: never echo it back
        scheme = url.split(":", 1)[0] if ":" in url else ""
        return f"{scheme[:20]}:<unparseable URL>" if scheme.isalnum() else "<unparseable URL>"
    query = {k: ("***" if SECRET_PARAMS.match(k) else v) for k, v in parsed.query.items()}
    if parsed.password is not None:
        parsed = parsed.set(password="***")
    rendered = parsed.set(query=query).render_as_string(hide_password=False)
    return rendered.replace("%2A%2A%2A", "***")


DEFAULT_LOCK_TIMEOUT = 600.0
_LOCK_TIMEOUT = "evalops_lock_timeout"
BUSY = BUSY_MESSAGE


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy's begin event issue BEGIN so that writers can ask for IMMEDIATE.
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    _write_ahead_log(cursor)
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _write_ahead_log(cursor: Any) -> None:
    """`PRAGMA journal_mode=WAL`, retried while the database is locked, until the lock
    timeout (the connection's busy timeout) has passed.

    Connections switching a new database file to WAL at the same moment each hold a shared
    lock and ask for an exclusive one: SQLite answers one of them "database is locked" at
    once, without calling the busy handler (waiting would be a deadlock), and lets the
    other through. Three connections opening one new registry together failed that way
    about 1 time in 30 (tests/store/test_fresh_schema.py); the one refused now retries
    once the other has switched the file."""
    import sqlite3

    (timeout_ms,) = cursor.execute("PRAGMA busy_timeout").fetchone()
    deadline = time.monotonic() + timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _sqlite_begin(conn: Connection) -> None:
    options = conn.get_execution_options()
    # The busy timeout bounds how long a writer waits for another writer's lock.
    timeout_ms = int(float(options.get(_LOCK_TIMEOUT, DEFAULT_LOCK_TIMEOUT)) * 1000)
    conn.exec_driver_sql(f"PRAGMA busy_timeout={timeout_ms}")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(_WRITE, False) else "BEGIN")


class SharedCompiledCache(MutableMapping[Any, Any]):
    """SQLAlchemy's cache of compiled statements, shared by every engine of the process
    whose dialect is configured alike (same dialect class, server version and settings).

    SQLAlchemy keeps compiled SQL per engine, keyed by the dialect object: a process that
    opens several engines one after another (the in-process runs of the demo and of the
    tests, each command opening its own) compiled every statement again for each. Here the
    dialect in the key is replaced by what its compiled SQL depends on: the dialect's
    class and its plain settings, read once it has connected (before any statement is
    compiled, SQLAlchemy initializes the dialect from the server: its version, its
    defaults). Dialects that differ in any of them share nothing.
    """

    def __init__(self, capacity: int) -> None:
        from sqlalchemy.util import LRUCache

        self._entries: LRUCache[Any, Any] = LRUCache(capacity)
        self._tokens: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _token(self, dialect: Any) -> tuple[Any, ...]:
        token = self._tokens.get(dialect)
        if token is None:
            plain = (str, int, float, bool, type(None), tuple)
            settings = sorted(
                (name, repr(value))
                for name, value in vars(dialect).items()
                if isinstance(value, plain)
            )
            token = (type(dialect), tuple(settings))
            with self._lock:
                self._tokens[dialect] = token
        return token

    def _key(self, key: Any) -> Any:
        # SQLAlchemy's key: (dialect, statement cache key, column keys, schema map, many).
        return (self._token(key[0]), *key[1:])

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries.get(self._key(key), default)

    def __getitem__(self, key: Any) -> Any:
        return self._entries[self._key(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._entries[self._key(key)] = value

    def __delitem__(self, key: Any) -> None:
        del self._entries[self._key(key)]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


# Every distinct statement evalops runs fits (a few hundred per dialect).
COMPILED_SQL = SharedCompiledCache(4000)


def make_engine(url: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> Engine:
    """An engine whose writers wait at most `lock_timeout` seconds for the writer lock."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": lock_timeout})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        _quiet_driver_warnings()
        # Every connection waits at most the lock timeout for a lock, a reader's too: a
        # migration or an administrator holding a table would otherwise hang `verify`.
        # Added to the URL's own `options` (a search_path, a provider's endpoint), which
        # connect_args would otherwise replace.
        given = make_url(url).query.get("options")
        own = given if isinstance(given, str) else " ".join(given or ())
        options = f"{own} -c lock_timeout={lock_timeout_ms(lock_timeout)}".strip()
        engine = create_engine(url, pool_pre_ping=True, connect_args={"options": options})
    return engine.execution_options(**{_LOCK_TIMEOUT: lock_timeout, "compiled_cache": COMPILED_SQL})


def lock_timeout_ms(seconds: float) -> int:
    """PostgreSQL's lock_timeout for `seconds`: at least 1 ms, since 0 there means no
    limit at all (`--lock-timeout 0` asks not to wait)."""
    return max(1, int(seconds * 1000))


def _quiet_driver_warnings() -> None:
    """psycopg logs what it ignores while closing a connection the server ended ("error
    ignored terminating <psycopg.Copy ...>"); with no handler configured, Python's last
    resort prints it to stderr beside the one-line error the fault already is
    (evalops/store/faults.py). A handler that drops it keeps stderr to that one line."""
    import logging

    driver = logging.getLogger("psycopg")
    if not driver.handlers:
        driver.addHandler(logging.NullHandler())


class WriterBusy(Exception):
    """Another writer held the lock for longer than the lock timeout."""


def _is_lock_timeout(exc: BaseException) -> bool:
    text_ = str(getattr(exc, "orig", exc)).lower()
    return (
        "database is locked" in text_
        or "lock timeout" in text_
        or "canceling statement due to lock timeout" in text_
        or type(getattr(exc, "orig", None)).__name__ == "LockNotAvailable"
    )


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One serialized write transaction: committed on success, rolled back on any error.

    The writer lock is taken first (BEGIN IMMEDIATE on SQLite, an advisory lock on
    PostgreSQL); waiting longer than the engine's lock timeout raises WriterBusy and
    changes nothing.
    """
    from sqlalchemy.exc import OperationalError

    timeout = float(engine.get_execution_options().get(_LOCK_TIMEOUT, DEFAULT_LOCK_TIMEOUT))
    writer = engine.execution_options(**{_WRITE: True})
    from evalops.store.interrupts import interrupts_held, note_committed

    try:
        with Session(writer, expire_on_commit=False) as session:
            transaction = session.begin()
            try:
                if engine.dialect.name == "postgresql":
                    session.execute(text(f"SET LOCAL lock_timeout = {lock_timeout_ms(timeout)}"))
                    session.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITER_LOCK_KEY}
                    )
                else:
                    session.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: wait for the lock now
                yield session
            except BaseException:
                if transaction.is_active:
                    transaction.rollback()
                raise
            if transaction.is_active:  # a caller may have rolled it back: nothing to commit
                # A Ctrl-C during the commit lands after it, once it is noted: "nothing was
                # stored" is then never said of a change that was.
                with interrupts_held():
                    transaction.commit()
                    note_committed()
    except OperationalError as exc:
        if _is_lock_timeout(exc):
            raise WriterBusy(BUSY) from None
        raise


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session


@contextmanager
def discarded_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction that is always rolled back (a what-if): sessions made on the
    yielded connection join it, so they see what was written in it, and nothing is kept.
    The writer lock is held throughout, as for `write_session`."""
    writer = engine.execution_options(**{_WRITE: True})
    with writer.connect() as conn:
        transaction = conn.begin()
        try:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITER_LOCK_KEY})
            yield conn
        finally:
            transaction.rollback()


@contextmanager
def snapshot_session(engine: Engine) -> Iterator[Session]:
    """One read-only transaction that sees one consistent snapshot throughout, so that
    rows a concurrent writer commits halfway through are never seen in part.

    PostgreSQL: REPEATABLE READ (READ COMMITTED, the default, takes a new snapshot per
    statement). SQLite: the session's one deferred transaction already reads one snapshot
    of the WAL from its first read on.
    """
    with Session(engine, expire_on_commit=False) as session:
        if engine.dialect.name == "postgresql":
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            session.execute(text("SET TRANSACTION READ ONLY"))
        yield session


def raw_rows(
    session: Session, sql: str, cursor_name: str, params: Any = None
) -> Iterator[tuple[Any, ...]]:
    """Stream the plain tuples of `sql` straight from the driver, in the session's
    transaction (its snapshot): on PostgreSQL a server-side cursor named `cursor_name`, so
    memory stays flat; no ORM type processing runs per row. `params` are in the driver's
    own style (`statement_rows` makes both)."""
    connection = session.connection()
    raw = connection.connection.driver_connection
    assert raw is not None
    return driver_stream(raw, connection.dialect.name, sql, params, cursor_name)


def statement_rows(session: Session, statement: Any, cursor_name: str) -> Iterator[tuple[Any, ...]]:
    """`raw_rows` of a Core select (one query, written once, for both engines): compiled for
    the session's dialect, its parameters handed to the driver as they are. Only for
    statements whose parameters and columns need no type processing (text, integers,
    floats; no timestamps): the driver's values are the rows' values, and a read of tens
    of thousands of rows skips SQLAlchemy's per-row work."""
    compiled = statement.compile(dialect=session.connection().dialect)
    sql, params = driver_form(compiled, compiled.construct_params())
    return raw_rows(session, sql, cursor_name, params)
