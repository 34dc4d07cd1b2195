"""Read-only access to the registry for the everyday read commands.

`gate list`, `incident list` and the like read a handful of rows; importing SQLAlchemy and
the table models would cost them ten times what the reading does. On a SQLite registry they
read through the standard library's `sqlite3`, with the same schema-revision check as every
other command (`alembic_version`, read directly); on PostgreSQL, or any database URL beyond
the plain `sqlite:///PATH`, through a SQLAlchemy connection (Core `text()`, no ORM). Queries
are written once, in SQL both engines read, with `:name` parameters.

Anything the fast path cannot vouch for (a missing file, a schema not at head, a file that is
not a database) is left to the usual way of opening the database (`Settings.read` in
evalops/cli/context.py), which raises the usual error with the usual message and exit code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalops.store.schema import HEAD_REVISION

if TYPE_CHECKING:
    import sqlite3

    from sqlalchemy.engine import Connection, Engine

#: A SQLite URL the fast path opens itself: a plain file path, no query, no driver name.
_PLAIN_SQLITE = re.compile(r"^sqlite:///(?P<path>[^?#%]+)$")

Params = Mapping[str, Any]
STREAM_BATCH = 2000


class Reader:
    """Rows of plain SQL as dicts, in one read transaction (one snapshot on both engines)."""

    backend = "sqlite"

    def rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def each(self, sql: str, params: Params | None = None) -> Iterator[dict[str, Any]]:
        """The rows one at a time (a reader that can stream them does not hold them all)."""
        yield from self.rows(sql, params)

    def tuples(self, sql: str, params: Params | None = None) -> Iterator[tuple[Any, ...]]:
        """The rows as plain tuples, streamed (a million rows are never held, and no dict is
        built per row): for checks that read every row of a table."""
        for row in self.each(sql, params):
            yield tuple(row.values())

    def first(self, sql: str, params: Params | None = None) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def scalar(self, sql: str, params: Params | None = None) -> Any:
        row = self.first(sql, params)
        return None if row is None else next(iter(row.values()))


class SqliteReader(Reader):
    """`sqlite3` itself, inside one deferred transaction (one snapshot of the WAL)."""

    backend = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        import sqlite3

        self._conn = connection
        self._conn.row_factory = sqlite3.Row

    def rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        cursor = self._conn.execute(sql, dict(params or {}))
        return [dict(row) for row in cursor.fetchall()]

    def each(self, sql: str, params: Params | None = None) -> Iterator[dict[str, Any]]:
        for row in self._conn.execute(sql, dict(params or {})):
            yield dict(row)

    def tuples(self, sql: str, params: Params | None = None) -> Iterator[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        cursor.row_factory = None  # plain tuples: no Row object per row
        try:
            yield from cursor.execute(sql, dict(params or {}))
        finally:
            cursor.close()

    def close(self) -> None:
        self._conn.rollback()
        self._conn.close()


class ConnectionReader(Reader):
    """A SQLAlchemy connection (PostgreSQL, or a SQLite URL with options), Core only."""

    def __init__(self, connection: Connection) -> None:
        self._conn = connection
        self.backend = connection.dialect.name

    def rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        from sqlalchemy import text

        result = self._conn.execute(text(sql), dict(params or {}))
        return [dict(row) for row in result.mappings()]

    def each(self, sql: str, params: Params | None = None) -> Iterator[dict[str, Any]]:
        result = self._stream(sql, params)
        try:
            for row in result.mappings():
                yield dict(row)
        finally:
            result.close()

    def tuples(self, sql: str, params: Params | None = None) -> Iterator[tuple[Any, ...]]:
        # Closed however the caller stops (a check returns at its first problem): psycopg
        # warns of a server-side cursor left open for the garbage collector.
        result = self._stream(sql, params)
        try:
            for row in result:
                yield tuple(row)
        finally:
            result.close()  # a stream left early (a check that failed) frees its cursor

    def _stream(self, sql: str, params: Params | None) -> Any:
        """A server-side cursor on PostgreSQL, read a batch at a time. The options go with
        this statement only: `Connection.execution_options` would change the connection in
        place, and an ORM session reading through it afterwards would stream every query."""
        from sqlalchemy import text

        options = {"stream_results": True, "yield_per": STREAM_BATCH}
        return self._conn.execute(text(sql), dict(params or {}), execution_options=options)


def has_table(reader: Reader, name: str) -> bool:
    """Does the database `reader` reads hold table `name`? (A database at an older schema,
    being checked before its upgrade, lacks the newer tables.)"""
    if getattr(reader, "backend", "sqlite") == "postgresql":
        sql = (
            "SELECT count(*) FROM information_schema.tables WHERE table_name = :name "
            "AND table_schema = current_schema()"
        )
    else:
        sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = :name"
    return bool(reader.scalar(sql, {"name": name}))


def timestamp(value: Any) -> datetime:
    """A stored timestamp as an aware UTC datetime, as the tables' `UTCDateTime` gives it:
    SQLite holds UTC as naive text (`2026-12-01 10:00:00.000000`), PostgreSQL an aware
    value."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"not a stored timestamp: {value!r}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _sqlite_file(url: str) -> Path | None:
    match = _PLAIN_SQLITE.match(url)
    if match is None or match.group("path") == ":memory:":
        return None
    return Path(match.group("path"))


def _at_head(conn: sqlite3.Connection) -> bool:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if has_table is None:
        return False
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row is not None and row[0] == HEAD_REVISION


def open_sqlite(url: str, *, lock_timeout: float) -> SqliteReader | None:
    """A reader on the plain SQLite file `url` names, when it exists and is at head; None
    when anything is off (the caller then opens the database the usual way, which says
    what is wrong)."""
    path = _sqlite_file(url)
    if path is None or not path.is_file():
        return None
    # Imported once a file is there: `validate` without a database never needs it (start-up).
    import sqlite3

    conn = sqlite3.connect(path, timeout=lock_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(lock_timeout * 1000)}")
        conn.execute("BEGIN")
        if _at_head(conn):
            return SqliteReader(conn)
    except sqlite3.Error:
        pass
    conn.close()
    return None


@contextmanager
def engine_reader(engine: Engine) -> Iterator[Reader]:
    """A reader on an engine already opened and checked, in one read-only transaction."""
    with engine.connect() as plain:
        # PostgreSQL: one snapshot for the whole read (READ COMMITTED takes one a statement).
        conn = (
            plain.execution_options(isolation_level="REPEATABLE READ")
            if plain.dialect.name == "postgresql"
            else plain
        )
        with conn.begin():
            yield ConnectionReader(conn)
