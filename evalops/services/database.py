"""Opening the registry database, refusing one that is missing or not at head."""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from evalops.errors import InputError, VerificationError
from evalops.store.engine import make_engine, redact, sqlite_path
from evalops.store.schema import HEAD_REVISION


def stored_revision(engine: Engine) -> str | None:
    """The database's Alembic revision, read without importing Alembic."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def open_database(url: str) -> Engine:
    """An engine on a registry database that exists and is migrated to head (else exit 6)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise VerificationError(
            f"no registry database at {path}: run `evalops init` first "
            f"(database at revision none, evalops needs {HEAD_REVISION})"
        )
    engine = make_engine(url)
    try:
        current = stored_revision(engine)
    except OperationalError as exc:
        engine.dispose()
        raise InputError(f"cannot open database {redact(url)}: {exc.orig}") from None
    if current != HEAD_REVISION:
        engine.dispose()
        raise VerificationError(
            f"database {redact(url)} is at revision {current or 'none'}, evalops needs "
            f"{HEAD_REVISION}: run `evalops db upgrade`"
        )
    return engine
