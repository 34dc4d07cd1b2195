"""Alembic environment for evalops: SQLModel metadata, batch mode on SQLite."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import evalops.store.tables  # noqa: F401  (registers every table on the metadata)
from evalops.store.engine import make_engine
from evalops.store.types import UTCDateTime

config = context.config
target_metadata = SQLModel.metadata


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    # Migrations name plain SQL types only: UTCDateTime is DateTime(timezone=True) in DDL.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _run(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # Batch migrations rebuild tables; SQLite must not enforce foreign keys meanwhile
        # (the PRAGMA works only outside a transaction, hence the DBAPI connection).
        raw = connection.connection.driver_connection
        if raw is not None and not raw.in_transaction:
            raw.execute("PRAGMA foreign_keys=OFF")
    try:
        _configure_and_run(connection)
    finally:
        if sqlite:
            raw = connection.connection.driver_connection
            if raw is not None and not raw.in_transaction:
                raw.execute("PRAGMA foreign_keys=ON")


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_item=_render_item,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # pytest-alembic injects a connection; evalops passes its own engine (with pragmas).
    connectable = config.attributes.get("connection")
    if isinstance(connectable, Connection):
        _run(connectable)
        return
    engine = connectable or config.attributes.get("engine")
    if engine is None:
        engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as conn:
        _run(conn)


if context.is_offline_mode():
    raise SystemExit("evalops migrations run online only")
run_migrations_online()
