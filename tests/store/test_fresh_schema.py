"""A database created at head from the models (`evalops init` on an empty database,
`evalops/store/fresh.py`) is the database the migrations build, on SQLite and PostgreSQL.

Each database is described from the server's own catalog, independently of the models:
SQLite's PRAGMAs (table_xinfo, index_list, index_xinfo, foreign_key_list) and
`sqlite_master` (every table, index, view and trigger with its CREATE text, normalized only
for quoting, spacing and the order of table constraints); PostgreSQL's pg_catalog (columns
by attnum with type, nullability, default, identity; every constraint with its definition,
deferrability included; index, trigger, view, sequence, type and function definitions);
on both, SQLAlchemy's inspector (columns, primary key order, indexes, unique, foreign-key
and check constraints), a few database settings, the rows of every table (none: a seed row
a migration wrote would show) and those of `alembic_version`.

Planted differences (an index dropped, made unique or partial, a column reordered, retyped,
made nullable or given a default, a foreign key's deferral or ON DELETE changed, a CHECK
constraint, a view or a row added, another revision stamped) show that the description
notices each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    CheckConstraint,
    DefaultClause,
    Index,
    Integer,
    MetaData,
    inspect,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

import evalops.store.tables  # noqa: F401  (registers every table on the metadata)
from evalops.store import fresh, migrate
from evalops.store.engine import make_engine
from evalops.store.schema import HEAD_REVISION

Snapshot = dict[str, Any]

# --------------------------------------------------------------------------- SQLite


def _split_top_level(body: str) -> list[str]:
    """The comma-separated elements of a CREATE TABLE body, commas inside () kept."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in body:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [" ".join(p.split()) for p in parts if p.strip()]


def _unquote(sql: str) -> str:
    return re.sub(r'"(\w+)"', r"\1", sql)


CONSTRAINT_START = ("CONSTRAINT ", "PRIMARY KEY", "UNIQUE", "FOREIGN KEY", "CHECK")


def _sqlite_create_table(sql: str) -> dict[str, Any]:
    """A CREATE TABLE statement as its head, its column definitions in order and its
    table constraints as a set (the migrations' batch mode writes them in another order)."""
    sql = _unquote(sql)
    head, _, rest = sql.partition("(")
    body, _, tail = rest.rpartition(")")
    elements = _split_top_level(body)
    columns = [e for e in elements if not e.upper().startswith(CONSTRAINT_START)]
    constraints = sorted(e for e in elements if e.upper().startswith(CONSTRAINT_START))
    return {
        "head": " ".join(head.split()),
        "columns": columns,
        "constraints": constraints,
        "tail": " ".join(tail.split()),
    }


def _rows(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]


def sqlite_snapshot(conn: Connection) -> Snapshot:
    objects: dict[str, Any] = {}
    for kind, name, table, sql in _rows(
        conn, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    ):
        if sql is None:
            described: Any = None  # an automatic index: described by index_list below
        elif kind == "table":
            described = _sqlite_create_table(sql)
        else:
            described = " ".join(_unquote(sql).split())
        objects[f"{kind} {name}"] = {"on": table, "sql": described}
    tables: dict[str, Any] = {}
    for (name,) in _rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table'"):
        indexes = {}
        for _, index, unique, origin, partial in _rows(conn, f"PRAGMA index_list('{name}')"):
            # An automatic index is named by its position among the table's constraints,
            # which batch mode reorders: keyed by what it indexes instead.
            keys = _rows(conn, f"PRAGMA index_xinfo('{index}')")
            key = index
            if index.startswith("sqlite_autoindex_"):
                key = "auto " + ",".join(str(k[2]) for k in keys if k[5])
            indexes[key] = {"unique": unique, "origin": origin, "partial": partial, "keys": keys}
        foreign: dict[int, list[tuple[Any, ...]]] = {}
        for fk_id, *rest in _rows(conn, f"PRAGMA foreign_key_list('{name}')"):
            foreign.setdefault(fk_id, []).append(tuple(rest))
        tables[name] = {
            "columns": _rows(conn, f"PRAGMA table_xinfo('{name}')"),
            "indexes": indexes,
            "foreign_keys": sorted(sorted(v) for v in foreign.values()),
        }
    settings = {
        p: _rows(conn, f"PRAGMA {p}")
        for p in ("user_version", "application_id", "encoding", "auto_vacuum", "page_size")
    }
    return {"objects": objects, "tables": tables, "settings": settings}


# ----------------------------------------------------------------------- PostgreSQL

PG_QUERIES = {
    "relations": """
        SELECT c.relname, c.relkind, c.relpersistence, c.relhasrules, c.relrowsecurity
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() ORDER BY 1""",
    "columns": """
        SELECT c.relname, a.attname,
               row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum) AS position,
               format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
               a.attcollation::regcollation::text
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = current_schema() AND a.attnum > 0 AND NOT a.attisdropped
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
        ORDER BY 1, 3""",
    "constraints": """
        SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid),
               k.condeferrable, k.condeferred, k.convalidated
        FROM pg_constraint k
        JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = current_schema() ORDER BY 1, 2""",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND NOT t.tgisinternal ORDER BY 1, 2""",
    "views": """
        SELECT viewname, definition FROM pg_views
        WHERE schemaname = current_schema() ORDER BY 1""",
    "sequences": """
        SELECT s.sequencename, s.data_type::text, s.start_value, s.min_value, s.max_value,
               s.increment_by, s.cycle, s.cache_size,
               (SELECT c.relname || '.' || a.attname FROM pg_depend d
                JOIN pg_class c ON c.oid = d.refobjid
                JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                WHERE d.objid = (quote_ident(s.schemaname) || '.' ||
                                 quote_ident(s.sequencename))::regclass
                  AND d.deptype IN ('a', 'i')) AS owned_by
        FROM pg_sequences s WHERE s.schemaname = current_schema() ORDER BY 1""",
    "types": """
        SELECT t.typname, t.typtype,
               (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                FROM pg_enum e WHERE e.enumtypid = t.oid)
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = current_schema() ORDER BY 1""",
    "functions": """
        SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() ORDER BY 1""",
}


def postgresql_snapshot(conn: Connection) -> Snapshot:
    return {name: _rows(conn, sql) for name, sql in PG_QUERIES.items()}


# --------------------------------------------------------------------------- both


def inspector_snapshot(conn: Connection) -> Snapshot:
    """What SQLAlchemy reflects of each table (the view Alembic's autogenerate works on)."""
    inspector = inspect(conn)

    def by_name(items: list[dict[str, Any]]) -> list[str]:
        return sorted(repr(sorted(i.items())) for i in items)

    tables = {}
    for name in inspector.get_table_names():
        columns = [
            {k: (repr(v) if k == "type" else v) for k, v in c.items()}
            for c in inspector.get_columns(name)
        ]
        tables[name] = {
            "columns": columns,
            "primary_key": inspector.get_pk_constraint(name),
            "indexes": by_name(inspector.get_indexes(name)),  # type: ignore[arg-type]
            "unique": by_name(inspector.get_unique_constraints(name)),  # type: ignore[arg-type]
            "foreign_keys": by_name(inspector.get_foreign_keys(name)),  # type: ignore[arg-type]
            "checks": by_name(inspector.get_check_constraints(name)),  # type: ignore[arg-type]
        }
    return {"tables": tables, "views": sorted(inspector.get_view_names())}


def snapshot(engine: Engine) -> Snapshot:
    with engine.connect() as conn:
        describe = sqlite_snapshot if conn.dialect.name == "sqlite" else postgresql_snapshot
        catalog = describe(conn)
        version = (
            _rows(conn, "SELECT version_num FROM alembic_version")
            if inspect(conn).has_table("alembic_version")
            else None
        )
        rows = {
            table: sorted(map(repr, _rows(conn, f'SELECT * FROM "{table}"')))
            for table in inspect(conn).get_table_names()
            if table != "alembic_version"
        }
        return {
            "catalog": catalog,
            "inspector": inspector_snapshot(conn),
            "rows": rows,
            "version": version,
        }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every place where two descriptions differ, by path."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = [f"{path}/{k}: only in the first" for k in a.keys() - b.keys()]
        found += [f"{path}/{k}: only in the second" for k in b.keys() - a.keys()]
        for key in sorted(a.keys() & b.keys()):
            found += differences(a[key], b[key], f"{path}/{key}")
        return found
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


# ------------------------------------------------------------------------ databases


@dataclass
class Backend:
    name: str
    empty: Callable[[], Engine]  # a new empty database (PostgreSQL: the one, emptied)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    engines: list[Engine] = []
    if request.param == "sqlite":
        count = iter(range(1000))

        def empty() -> Engine:
            engines.append(make_engine(f"sqlite:///{tmp_path / f'db{next(count)}.db'}"))
            return engines[-1]

    else:
        url = request.getfixturevalue("pg_url")

        def empty() -> Engine:
            for engine in engines:
                engine.dispose()
            engines.append(make_engine(url))
            with engines[-1].begin() as conn:
                conn.exec_driver_sql("DROP SCHEMA public CASCADE")
                conn.exec_driver_sql("CREATE SCHEMA public")
            return engines[-1]

    try:
        yield Backend(request.param, empty)
    finally:
        for engine in engines:
            engine.dispose()


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def migrated(backend: Backend, revision: str = "head") -> Snapshot:
    engine = backend.empty()
    migrate.upgrade(_url(engine), engine, revision)
    return snapshot(engine)


def created(
    backend: Backend,
    metadata: MetaData | None = None,
    order: dict[str, tuple[str, ...]] | None = None,
    after: str | None = None,
) -> tuple[Engine, Snapshot]:
    """A database created at head by `create_at_head`, or, given a planted metadata or
    column order, by the same steps with the plant (then `after` runs, if given)."""
    engine = backend.empty()
    if metadata is None and order is None:
        assert fresh.create_at_head(engine) is True
    else:
        with engine.begin() as conn:
            fresh.create_schema(
                conn,
                metadata if metadata is not None else SQLModel.metadata,
                order if order is not None else fresh.MIGRATED_COLUMN_ORDER,
            )
            fresh.stamp(conn, HEAD_REVISION)
    if after is not None:
        with engine.begin() as conn:
            conn.exec_driver_sql(after)
    return engine, snapshot(engine)


def _check_described(shot: Snapshot) -> None:
    """The description covers what it claims: every table, index and foreign key of the
    models, and the deferred foreign keys, are in it (so an equality is not vacuous)."""
    tables = shot["inspector"]["tables"]
    assert set(tables) == {*SQLModel.metadata.tables, "alembic_version"}
    indexes = {str(i.name) for t in SQLModel.metadata.tables.values() for i in t.indexes}
    described = "".join(str(t["indexes"]) for t in tables.values())
    assert all(f"'{name}'" in described for name in indexes)
    assert sum(len(t["foreign_keys"]) for t in tables.values()) == sum(
        len(t.foreign_keys) for t in SQLModel.metadata.tables.values()
    )
    assert "DEFERRABLE INITIALLY DEFERRED" in repr(shot["catalog"])
    assert shot["version"] == [(HEAD_REVISION,)]


# ---------------------------------------------------------------------------- tests


def test_created_at_head_is_what_the_migrations_build_and_downgrades_alike(
    backend: Backend,
) -> None:
    """Head created from the models equals head migrated; migrating it down step by step
    passes through the very schemas the upgrade passed through, down to base."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.alembic_config("sqlite://"))
    revisions = [r.revision for r in reversed(list(scripts.walk_revisions()))]
    assert revisions[-1] == HEAD_REVISION
    engine = backend.empty()
    upgraded: dict[str, Snapshot] = {}
    for revision in revisions:
        migrate.upgrade(_url(engine), engine, revision)
        upgraded[revision] = snapshot(engine)
    _check_described(upgraded[HEAD_REVISION])

    fresh_engine, fresh = created(backend)
    assert differences(upgraded[HEAD_REVISION], fresh) == []
    assert upgraded[HEAD_REVISION] == fresh

    for down_to in [*reversed(revisions[:-1]), "base"]:
        migrate.downgrade(_url(fresh_engine), fresh_engine, down_to)
        went = snapshot(fresh_engine)
        if down_to == "base":
            assert went["version"] == []
            assert set(went["inspector"]["tables"]) == {"alembic_version"}
        else:
            assert differences(upgraded[down_to], went) == [], down_to
    migrate.upgrade(_url(fresh_engine), fresh_engine, "head")
    assert differences(upgraded[HEAD_REVISION], snapshot(fresh_engine)) == []


def test_create_at_head_leaves_a_database_that_is_not_empty_alone(backend: Backend) -> None:
    engine = backend.empty()
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (x TEXT)")
    before = snapshot(engine)
    assert fresh.create_at_head(engine) is False
    assert snapshot(engine) == before
    engine, _ = created(backend)
    at_head = snapshot(engine)
    assert fresh.create_at_head(engine) is False
    assert snapshot(engine) == at_head


def test_of_two_concurrent_creations_one_creates_and_the_other_finds_it_done(
    backend: Backend,
) -> None:
    import threading

    engine = backend.empty()
    other = make_engine(_url(engine))
    start = threading.Barrier(2)
    answers: list[bool] = []

    def create(on: Engine) -> None:
        start.wait()
        answers.append(fresh.create_at_head(on))

    try:
        threads = [threading.Thread(target=create, args=(e,)) for e in (engine, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        other.dispose()
    assert sorted(answers) == [False, True]
    assert snapshot(engine) == created(backend)[1]


def test_a_connection_to_a_new_file_waits_for_a_writer_before_switching_it_to_wal(
    tmp_path: Path,
) -> None:
    """A new (rollback-journal) file whose write lock another connection holds: switching
    it to WAL needs an exclusive lock, and SQLite refuses at once, without waiting for the
    busy timeout (it would be a deadlock where both sides hold a shared lock). evalops's
    connection waits for the lock instead, as a writer does: two or three processes
    opening one new registry together failed this way (about 1 time in 30)."""
    import sqlite3
    import threading

    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE other_writer (x TEXT)")
    released = threading.Timer(0.3, holder.execute, ("COMMIT",))
    released.start()
    engine = make_engine(f"sqlite:///{path}", lock_timeout=60)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        released.join()
        holder.close()
        engine.dispose()


def test_a_connection_gives_up_switching_to_wal_after_the_lock_timeout(tmp_path: Path) -> None:
    """The wait is bounded by the lock timeout, then SQLite's "database is locked"."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE other_writer (x TEXT)")
    engine = make_engine(f"sqlite:///{path}", lock_timeout=0.2)
    try:
        with pytest.raises(OperationalError, match="database is locked"), engine.connect():
            pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        engine.dispose()


def _copy() -> MetaData:
    copy = MetaData(naming_convention=SQLModel.metadata.naming_convention)
    for table in SQLModel.metadata.sorted_tables:
        table.to_metadata(copy)
    return copy


def _drop_index(name: str) -> Callable[[MetaData], None]:
    def plant(metadata: MetaData) -> None:
        for table in metadata.tables.values():
            table.indexes -= {i for i in table.indexes if i.name == name}

    return plant


def _replace_index(name: str, **kw: Any) -> Callable[[MetaData], None]:
    def plant(metadata: MetaData) -> None:
        for table in metadata.tables.values():
            for index in [i for i in table.indexes if i.name == name]:
                table.indexes.discard(index)
                Index(name, *index.expressions, _table=table, **kw)

    return plant


def _column(table: str, column: str, **changes: Any) -> Callable[[MetaData], None]:
    def plant(metadata: MetaData) -> None:
        for attribute, value in changes.items():
            setattr(metadata.tables[table].c[column], attribute, value)

    return plant


def _foreign_key(table: str, **changes: Any) -> Callable[[MetaData], None]:
    def plant(metadata: MetaData) -> None:
        for constraint in metadata.tables[table].foreign_key_constraints:
            for attribute, value in changes.items():
                setattr(constraint, attribute, value)
                for element in constraint.elements:
                    setattr(element, attribute, value)

    return plant


def _check(metadata: MetaData) -> None:
    metadata.tables["waiver"].append_constraint(
        CheckConstraint("number > 0", name="ck_waiver_number_positive")
    )


PLANTS: dict[str, dict[str, Any]] = {
    "index dropped": {"metadata": _drop_index("ix_trial_execution_task"),
                      "says": "ix_trial_execution_task"},
    "index made unique": {"metadata": _replace_index("ix_audit_event_kind", unique=True),
                          "says": "ix_audit_event_kind"},
    "index made partial": {
        "metadata": _replace_index("ix_trial_execution_task",
                                   sqlite_where=text("task_id IS NOT NULL"),
                                   postgresql_where=text("task_id IS NOT NULL")),
        "says": "ix_trial_execution_task"},
    "column order": {"order": {k: v for k, v in fresh.MIGRATED_COLUMN_ORDER.items()
                               if k != "gate_decision"},
                     "says": "gate_decision"},
    "column type": {"metadata": _column("calibration", "grader_version", type=Integer()),
                    "says": "calibration"},
    "column nullable": {"metadata": _column("sync_run", "git_dirty", nullable=True),
                        "says": "sync_run"},
    "server default": {"metadata": _column("waiver", "owner",
                                           server_default=DefaultClause(text("'nobody'"))),
                       "says": "nobody"},
    "foreign key not deferred": {"metadata": _foreign_key("signed_act", deferrable=None,
                                                          initially=None),
                                 "says": "signed_act"},
    "foreign key on delete": {"metadata": _foreign_key("waiver_revocation",
                                                       ondelete="CASCADE"),
                              "says": "CASCADE"},
    "check constraint": {"metadata": _check, "says": "number > 0"},
    "view": {"after": "CREATE VIEW planted_view AS SELECT 1 AS x", "says": "planted_view"},
    "revision": {"after": "UPDATE alembic_version SET version_num = '0002'", "says": "0002"},
    "row": {"after": "INSERT INTO audit_event VALUES (1, '2026-01-01 00:00:00', 'a', 'k', "
                     "'s', 'd', '{}', '', 'planted-hash')",
            "says": "planted-hash"},
}  # fmt: skip


_REFERENCE: dict[str, Snapshot] = {}
"""The unplanted created schema per backend, described once (it depends only on the models;
creating it again for each plant doubled the PostgreSQL DDL these tests wait on)."""


@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_difference_is_noticed(backend: Backend, plant: str) -> None:
    """Against the unplanted created schema (the test above shows it equals the migrated
    one), a copy of the models with one thing changed differs, and says where."""
    if backend.name not in _REFERENCE:
        _REFERENCE[backend.name] = created(backend)[1]
    reference = _REFERENCE[backend.name]
    how = PLANTS[plant]
    metadata = None
    if "metadata" in how:
        metadata = _copy()
        how["metadata"](metadata)
    elif "order" not in how:
        metadata = _copy()  # unchanged: the plant is the statement run after
    _, planted = created(backend, metadata, how.get("order"), how.get("after"))
    found = differences(reference, planted)
    assert found, plant
    assert any(how["says"] in line for line in found), found
