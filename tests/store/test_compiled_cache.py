"""Compiled SQL shared by the engines of one process (evalops/store/engine.py,
`SharedCompiledCache`): an engine opened after another on a dialect configured alike uses
the statements the first compiled, reads its own database through them, and a dialect
configured otherwise compiles its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select
from sqlalchemy.engine import Engine

from evalops.store.engine import COMPILED_SQL, make_engine

METADATA = MetaData()
ITEMS = Table(
    "items", METADATA, Column("id", Integer, primary_key=True), Column("name", String(50))
)
# A statement no other test compiles, so that the first engine of this module compiles it.
QUERY = (
    select(ITEMS.c.name).where(ITEMS.c.id >= 2, ITEMS.c.name != "cache-test").order_by(ITEMS.c.id)
)


def _filled(engine: Engine, names: list[str]) -> Engine:
    METADATA.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(ITEMS), [{"id": i, "name": n} for i, n in enumerate(names, 1)])
    return engine


def _run(engine: Engine) -> tuple[list[str], object]:
    """The names the query reads, and the compiled statement it ran."""
    with engine.connect() as conn:
        result = conn.execute(QUERY)
        return [row[0] for row in result], result.context.compiled


def test_a_second_engine_runs_what_the_first_compiled_on_its_own_rows(tmp_path: Path) -> None:
    first = _filled(make_engine(f"sqlite:///{tmp_path / 'a.db'}"), ["a1", "a2", "a3"])
    second = _filled(make_engine(f"sqlite:///{tmp_path / 'b.db'}"), ["b1", "b2"])
    try:
        names_a, compiled_a = _run(first)
        names_b, compiled_b = _run(second)
    finally:
        first.dispose()
        second.dispose()
    assert first.dialect is not second.dialect
    assert compiled_b is compiled_a  # compiled once, for both engines
    assert names_a == ["a2", "a3"]
    assert names_b == ["b2"]


def test_a_dialect_configured_otherwise_compiles_its_own(tmp_path: Path) -> None:
    """The `named` parameter style spells bound values `:name`, the default `?`: SQL
    compiled for one and run by the other fails, so a shared entry would be seen."""
    plain = _filled(make_engine(f"sqlite:///{tmp_path / 'a.db'}"), ["a1", "a2"])
    named = create_engine(f"sqlite:///{tmp_path / 'b.db'}", paramstyle="named")
    named = _filled(named.execution_options(compiled_cache=COMPILED_SQL), ["b1", "b2", "b3"])
    try:
        names_plain, compiled_plain = _run(plain)
        names_named, compiled_named = _run(named)
    finally:
        plain.dispose()
        named.dispose()
    assert compiled_named is not compiled_plain
    assert ":id_1" in str(compiled_named)
    assert "?" in str(compiled_plain)
    assert (names_plain, names_named) == (["a2"], ["b2", "b3"])


@pytest.mark.postgres
def test_postgresql_and_sqlite_each_compile_their_own(tmp_path: Path, pg_url: str) -> None:
    lite = _filled(make_engine(f"sqlite:///{tmp_path / 'a.db'}"), ["a1", "a2"])
    pg = _filled(make_engine(pg_url), ["p1", "p2", "p3"])
    try:
        names_lite, compiled_lite = _run(lite)
        names_pg, compiled_pg = _run(pg)
    finally:
        lite.dispose()
        pg.dispose()
    assert compiled_pg is not compiled_lite
    assert "%(id_1)s" in str(compiled_pg)
    assert (names_lite, names_pg) == (["a2"], ["p2", "p3"])
