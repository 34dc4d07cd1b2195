"""An empty database created at head from the models, instead of through every migration.

`evalops init` on a database with nothing in it creates the tables and indexes of the
models and stamps `alembic_version` at head, in one transaction (docs/verify.md, "The
database"); Alembic's batch mode on SQLite reflects every table it alters, which made
that most of the cost of `init`. The result is the schema the migrations build, down to
the column order: `tests/store/test_fresh_schema.py` compares the two on SQLite and
PostgreSQL (ARCHITECTURE.md, "Add a migration"). Any other database is left to the
migrations (`evalops/store/migrate.py`). Alembic itself is not imported here.
"""

from __future__ import annotations

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable

from evalops.store.engine import write_session
from evalops.store.schema import HEAD_REVISION

# The column order the migrations leave a table in, where the models declare another: 0001
# followed the models of its day, and a column a later migration adds to an existing table
# comes last. A database created at head uses this order, so that it is the database the
# migrations build, down to the order `SELECT *` returns.
MIGRATED_COLUMN_ORDER: dict[str, tuple[str, ...]] = {
    **{
        table: ("document_digest", "document", "file_path", "sync_run_id", "audit_seq", *rest)
        for table, rest in (
            ("execution_profile", ("id", "execution_id", "system_build", "execution_digest")),
            ("grader_set", ("id", "grader_set_id", "version", "grader_set_digest")),
            ("policy", ("id", "kind", "policy_id", "policy_digest")),
            ("suite", ("id", "suite_id", "kind")),
            (
                "task_revision",
                ("id", "task_id", "revision", "task_digest", "grader_set_id", "risk"),
            ),
        )
    },
    "gate_decision": (
        "id", "number", "gate_id", "build", "suite_id", "execution_digest", "suite_digest",
        "policy_digest", "evaluated_at", "decision", "inputs", "inputs_digest", "result",
        "result_digest", "at", "actor", "audit_seq", "sync_run_id",
    ),
    "reconciliation": (
        "id", "trial_id", "effect_key", "status", "evidence_uri", "at", "actor", "audit_seq",
        "effect_index",
    ),
}  # fmt: skip


def version_table() -> Table:
    """`alembic_version` as Alembic defines it (`DefaultImpl.version_table_impl`), so that
    Alembic reads and moves the stamp as if it had written it."""
    return Table(
        "alembic_version",
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
    )


def create_schema(
    connection: Connection,
    metadata: MetaData,
    column_order: dict[str, tuple[str, ...]] = MIGRATED_COLUMN_ORDER,
) -> None:
    """Every table and index of `metadata`, as `metadata.create_all` creates them, but with
    the columns of the tables in `column_order` in that order."""
    for table in metadata.sorted_tables:
        ddl = CreateTable(table)
        order = column_order.get(table.name)
        if order is not None:
            if sorted(order) != sorted(c.name for c in table.columns):
                raise RuntimeError(f"the column order of {table.name} names other columns")
            ddl.columns.sort(key=lambda c: order.index(c.element.name))
        connection.execute(ddl)
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            connection.execute(CreateIndex(index))


def stamp(connection: Connection, revision: str) -> None:
    versions = version_table()
    connection.execute(CreateTable(versions))
    connection.execute(versions.insert().values(version_num=revision))


def is_empty(connection: Connection) -> bool:
    """Nothing at all where the migrations would create the schema: no table (not even
    `alembic_version`), view, index, trigger or sequence; on PostgreSQL, no relation or type
    in any schema of the search path (and there is one to create the tables in)."""
    if connection.dialect.name == "sqlite":
        return connection.execute(text("SELECT count(*) FROM sqlite_master")).scalar() == 0
    found = connection.execute(
        text(
            "SELECT current_schema() IS NULL"
            " OR EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            "            WHERE n.nspname = ANY (current_schemas(false)))"
            " OR EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
            "            WHERE n.nspname = ANY (current_schemas(false)))"
        )
    ).scalar()
    return not found


def create_at_head(engine: Engine) -> bool:
    """On an empty database, create the head schema from the models and stamp it at head,
    in one transaction. False, and nothing done, when the database holds anything."""
    from sqlmodel import SQLModel

    import evalops.store.tables  # noqa: F401  (registers every table on the metadata)

    # A plain read first: `init` on a registry in use never waits for its writer lock.
    with engine.connect() as connection:
        if not is_empty(connection):
            return False
    with write_session(engine) as session:
        connection = session.connection()
        if not is_empty(connection):
            return False  # another init created it meanwhile (it held the writer lock)
        create_schema(connection, SQLModel.metadata)
        stamp(connection, HEAD_REVISION)
    return True
