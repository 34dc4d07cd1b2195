"""Migrations: single head, upgrade, model matches DDL, up/down of every revision.

pytest-alembic's built-in tests are imported explicitly (its auto-collection breaks on
recent pytest) and run against SQLite and PostgreSQL through a parametrized engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_alembic.config import Config as PytestAlembicConfig
from pytest_alembic.tests import (
    test_model_definitions_match_ddl,
    test_single_head_revision,
    test_up_down_consistency,
    test_upgrade,
)
from sqlalchemy.engine import Engine

from evalops.resources import migrations_dir
from evalops.store.engine import make_engine
from evalops.store.schema import HEAD_REVISION

__all__ = [
    "test_model_definitions_match_ddl",
    "test_single_head_revision",
    "test_up_down_consistency",
    "test_upgrade",
]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def alembic_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'migrations.db'}")
    else:
        engine = make_engine(request.getfixturevalue("pg_url"))
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def alembic_config() -> PytestAlembicConfig:
    options: dict[str, Any] = {"script_location": str(migrations_dir())}
    return PytestAlembicConfig(config_options=options)


def test_head_constant_matches_alembic_head() -> None:
    """The CLI checks databases against HEAD_REVISION without importing Alembic."""
    from evalops.store.migrate import head_revision

    assert head_revision() == HEAD_REVISION
