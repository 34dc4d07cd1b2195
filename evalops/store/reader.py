"""Read-only access to the registry for the everyday read commands.

`gate list`, `incident list` and the like read a handful of rows; importing SQLAlchemy and
the table models would cost them ten times what the reading does. On a SQLite registry they
read through the standard library's `sqlite3`, with the same schema-revision check as every
other command (`alembic_version`, read directly); on PostgreSQL, or any database URL beyond
the plain `sqlite:///PATH`, through a SQLAlchemy connection (`ConnectionReader`: the SQL
compiled by SQLAlchemy, run on the driver beneath; no ORM). Queries are written once, in SQL
both engines read, with `:name` parameters.

Anything the fast path cannot vouch for (a missing file, a schema not at head, a file that is
not a database) is left to the usual way of opening the database (`Settings.read` in
evalops/cli/context.py), which raises the usual error with the usual message and exit code.
"""

from __future__ import annotations

import itertools
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
    """A SQLAlchemy connection (PostgreSQL, or a SQLite URL with options), in its
    transaction: the SQL is compiled once per text by SQLAlchemy's compiler for the
    connection's dialect (its parameter style and escapes), then run on the driver's own
    connection beneath it. No SQLAlchemy result is built per statement or per row: on
    PostgreSQL that was a third of `verify`'s CPU on a small registry."""

    def __init__(self, connection: Connection) -> None:
        self._conn = connection
        self.backend = connection.dialect.name

    def rows(self, sql: str, params: Params | None = None) -> list[dict[str, Any]]:
        statement, values = self._driver_form(sql, params)
        cursor = self._driver().cursor()
        try:
            cursor.execute(statement, values)
            names = [column[0] for column in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def each(self, sql: str, params: Params | None = None) -> Iterator[dict[str, Any]]:
        names: list[str] = []
        for row in self._stream(sql, params, names):
            yield dict(zip(names, row, strict=True))

    def tuples(self, sql: str, params: Params | None = None) -> Iterator[tuple[Any, ...]]:
        yield from self._stream(sql, params, [])

    def _driver(self) -> Any:
        driver = self._conn.connection.driver_connection
        assert driver is not None
        return driver

    def _driver_form(self, sql: str, params: Params | None) -> tuple[str, Any]:
        return driver_form(_compiled(self._conn.dialect, sql), dict(params or {}))

    def _stream(
        self, sql: str, params: Params | None, names: list[str]
    ) -> Iterator[tuple[Any, ...]]:
        """The rows a batch at a time: on PostgreSQL from a server-side cursor, so a million
        rows are never held (`names` is filled with the column names before the first row).
        The cursor is closed however the caller stops (a check returns at its first
        problem): psycopg warns of a server-side cursor left for the garbage collector."""
        statement, values = self._driver_form(sql, params)
        name = f"evalops_reader_{next(_CURSORS)}"
        return driver_stream(self._driver(), self.backend, statement, values, name, names)


#: Names of the server-side cursors the readers open: each stream its own, as several may
#: be open at once on one connection (a check reads another table between two rows).
_CURSORS = itertools.count(1)


def driver_stream(  # noqa: PLR0913 (a query, where it runs, and what to call its cursor)
    driver: Any,
    backend: str,
    sql: str,
    params: Any,
    cursor_name: str,
    names: list[str] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """The rows of `sql` (its `params`, None for none; both in the driver's own style) as
    the driver's plain tuples, `STREAM_BATCH` at a time, on the DB-API connection
    `driver` in its transaction: on PostgreSQL from a server-side cursor named
    `cursor_name`, so memory stays flat. `names`, when given, is filled with the column
    names before the first row. The cursor is closed however the caller stops."""
    if backend == "postgresql":
        cursor = driver.cursor(name=cursor_name)
        cursor.itersize = STREAM_BATCH
    else:
        cursor = driver.cursor()
    try:
        if params is None:
            cursor.execute(sql)
        else:
            cursor.execute(sql, params)
        if names is not None:
            names.extend(column[0] for column in cursor.description or ())
        while True:
            batch = cursor.fetchmany(STREAM_BATCH)
            yield from batch
            # A short batch is the last one (DB-API): no further round trip to learn it.
            if len(batch) < STREAM_BATCH:
                break
    finally:
        cursor.close()


def driver_form(compiled: Any, values: Mapping[str, Any]) -> tuple[str, Any]:
    """A statement SQLAlchemy compiled, and its parameter `values` by name, in the driver's
    own style: a tuple in the statement's order for a positional one (`sqlite3`'s `?`), the
    mapping for a named one (psycopg's `%(name)s`)."""
    if compiled.positional:
        return compiled.string, tuple(values[name] for name in compiled.positiontup or ())
    return compiled.string, values


_COMPILED: dict[tuple[str, str, str], Any] = {}


def _compiled(dialect: Any, sql: str) -> Any:
    """`text(sql)` compiled for `dialect`, once per process for each text: the readers run a
    few dozen distinct statements, over and over."""
    key = (dialect.name, dialect.paramstyle, sql)
    found = _COMPILED.get(key)
    if found is None:
        from sqlalchemy import text

        found = _COMPILED[key] = text(sql).compile(dialect=dialect)
    return found


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


def registry_present(reader: Reader, now: datetime) -> datetime:
    """The registry's present: `now`, or the newest event's moment when this clock is
    behind it. An event is recorded at no earlier than its predecessor's moment (audit
    time never runs backwards), so a read that sees every event stands at least there: a
    revocation another writer recorded at 12:00:05 is in force for a reader whose clock
    says 12:00:02."""
    head = reader.first("SELECT at FROM audit_event ORDER BY seq DESC LIMIT 1")
    return now if head is None else max(now, timestamp(head["at"]))


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
