"""Alembic, driven through its API with the migrations shipped in the package."""

from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable

from evalops.resources import migrations_dir
from evalops.store.engine import normalize_url, write_session


def alembic_config(url: str, engine: Engine | None = None) -> Config:
    cfg = Config(stdout=io.StringIO())  # keep stdout for the CLI's own data
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads: {heads}")
    return str(heads[0])


def upgrade(url: str, engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(url, engine), revision)


# The column order the migrations leave a table in, where the models declare another: 0001
# followed the models of its day, and a column a later migration adds to an existing table
# comes last. A database created at head uses this order, so that it is the database the
# migrations build, down to the order `SELECT *` returns (tests/store/test_fresh_schema.py).
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


def create_schema(
    connection: Connection,
    metadata: MetaData,
    column_order: dict[str, tuple[str, ...]] = MIGRATED_COLUMN_ORDER,
) -> None:
    """Every table and index of `metadata`, as `metadata.create_all` would create them but
    with the columns of the tables in `column_order` in that order."""
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


def create_at_head(url: str, engine: Engine) -> bool:
    """On an empty database, create the head schema from the models and stamp it at head,
    in one transaction, instead of running every migration (docs/verify.md, "The
    database"). False, and nothing done, when the database holds anything: the migrations
    are for that."""
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
        scripts = ScriptDirectory.from_config(alembic_config(url))
        MigrationContext.configure(connection=connection).stamp(scripts, "head")
    return True


def downgrade(url: str, engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(url, engine), revision)


def check(url: str, engine: Engine) -> None:
    """Raise if the models and the migrated schema differ (autogenerate would emit ops)."""
    command.check(alembic_config(url, engine))


def ensure_parent(path: Path | None) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
