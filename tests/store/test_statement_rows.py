"""`statement_rows`: a Core select run on the driver, on both engines.

The gate's loaders read a build's trials and the task revisions this way (tens of thousands
of rows, no SQLAlchemy work per row). What it must give is what SQLAlchemy's own execution
of the same statement gives, row for row and value for value (text, integers, floats, an
EXISTS flag the loader reads as true or false), with its bound parameters (text and
integers, in each driver's style), past the driver's batch size, and while the session
runs other statements between rows (the loader reads a trial's record by its id there).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from evalops.store.engine import RAW_BATCH, make_engine, statement_rows

METADATA = MetaData()
ITEMS = Table(
    "statement_rows_items",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("name", String(50)),
    Column("score", Float),
    Column("seq", Integer),
)
MARKS = Table(
    "statement_rows_marks",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("item_id", Integer),
    Column("seq", Integer),
)
COUNT = RAW_BATCH + 500  # more than one batch of the driver's cursor


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    url = (
        f"sqlite:///{tmp_path / 'rows.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    made = make_engine(url)
    METADATA.create_all(made)
    with made.begin() as conn:
        conn.execute(
            insert(ITEMS),
            [
                {
                    "id": i,
                    "name": "odd" if i % 2 else f"even-{i}",
                    "score": i / 7 if i % 3 else float(i),
                    "seq": i % 50,
                }
                for i in range(1, COUNT + 1)
            ],
        )
        conn.execute(
            insert(MARKS),
            [{"id": i, "item_id": i * 3, "seq": i % 40} for i in range(1, COUNT // 3)],
        )
    try:
        yield made
    finally:
        made.dispose()


def _statement(cutoff: int) -> object:
    marked = (
        select(MARKS.c.id)
        .where(MARKS.c.item_id == ITEMS.c.id, MARKS.c.seq <= cutoff)
        .exists()
        .label("marked")
    )
    return (
        select(ITEMS.c.id, ITEMS.c.name, ITEMS.c.score, marked)
        .where(ITEMS.c.name != "even-4", ITEMS.c.seq <= cutoff)
        .order_by(ITEMS.c.id)
    )


def test_the_driver_gives_what_sqlalchemy_gives(engine: Engine) -> None:
    statement = _statement(45)
    with Session(engine) as session:
        expected = [tuple(row) for row in session.connection().execute(statement)]  # type: ignore[call-overload]
        got = list(statement_rows(session, statement, "test_rows"))
    assert len(got) > RAW_BATCH
    assert [row[:3] for row in got] == [row[:3] for row in expected]
    assert [bool(row[3]) for row in got] == [bool(row[3]) for row in expected]
    assert any(row[3] for row in got) and not all(row[3] for row in got)
    for row in got:
        assert type(row[0]) is int and type(row[1]) is str and type(row[2]) is float


def test_other_statements_run_between_its_rows(engine: Engine) -> None:
    statement = _statement(49)
    with Session(engine) as session:
        seen = 0
        for row in statement_rows(session, statement, "test_rows_between"):
            if row[0] % 500 == 1:
                name = session.connection().execute(
                    select(ITEMS.c.name).where(ITEMS.c.id == row[0])
                )
                assert name.scalar_one() == row[1]
            seen += 1
    assert seen == COUNT - 1  # every item but even-4
