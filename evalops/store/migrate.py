"""Alembic, driven through its API with the migrations shipped in the package."""

from __future__ import annotations

import io

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from evalops.resources import migrations_dir
from evalops.store.engine import normalize_url


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


def downgrade(url: str, engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(url, engine), revision)


def check(url: str, engine: Engine) -> None:
    """Raise if the models and the migrated schema differ (autogenerate would emit ops)."""
    command.check(alembic_config(url, engine))
