"""`statement_rows` (a Core select) and `ConnectionReader` (the readers' SQL text), run on
the driver, on both engines.

The gate's loaders read a build's trials and the task revisions this way (tens of thousands
of rows, no SQLAlchemy work per row). What it must give is what SQLAlchemy's own execution
of the same statement gives, row for row and value for value (text, integers, floats, an
EXISTS flag the loader reads as true or false), with its bound parameters (text and
integers, in each driver's style), past the driver's batch size, and while the session
runs other statements between rows (the loader reads a trial's record by its id there).
`ConnectionReader` (`verify` and the read commands on PostgreSQL) likewise: what
SQLAlchemy's execution of the same text gives, streams read one inside another, a stream
left early closing its server-side cursor, and streams of whole batches ending where their
rows do.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import cast

import pytest
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, insert, select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from evalops.store.engine import make_engine, statement_rows
from evalops.store.reader import STREAM_BATCH, ConnectionReader

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
COUNT = STREAM_BATCH + 500  # more than one batch of the driver's cursor


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
    assert len(got) > STREAM_BATCH
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


# The readers' SQL (evalops/store/reader.py): `:name` parameters, a literal "%" (which the
# PostgreSQL driver's own style must escape) and a cast.
READER_SQL = (
    "SELECT id, name, score FROM statement_rows_items "
    "WHERE seq <= :cutoff AND (name LIKE 'even%' OR CAST(id AS INTEGER) % 2 = 1) ORDER BY id"
)


def _by_sqlalchemy(engine: Engine, cutoff: int) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(READER_SQL), {"cutoff": cutoff})]


def test_the_connection_reader_gives_what_sqlalchemy_gives(engine: Engine) -> None:
    expected = _by_sqlalchemy(engine, 45)
    assert len(expected) > STREAM_BATCH
    with engine.connect() as conn, conn.begin():
        reader = ConnectionReader(conn)
        assert [tuple(r.values()) for r in reader.rows(READER_SQL, {"cutoff": 45})] == expected
        assert list(reader.tuples(READER_SQL, {"cutoff": 45})) == expected
        each = list(reader.each(READER_SQL, {"cutoff": 45}))
        assert [tuple(r.values()) for r in each] == expected
        assert set(each[0]) == {"id", "name", "score"}
        assert reader.first(READER_SQL, {"cutoff": -1}) is None


@pytest.mark.parametrize("extra", [0, 1, -1])
def test_a_stream_of_whole_batches_ends_where_its_rows_do(engine: Engine, extra: int) -> None:
    """A short batch ends the stream without another fetch; a stream of exactly two batches
    (and one row more or less) still gives every row."""
    wanted = 2 * STREAM_BATCH + extra
    sql = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :last) "
        "SELECT i FROM n ORDER BY i"
    )
    with engine.connect() as conn, conn.begin():
        got = [row[0] for row in ConnectionReader(conn).tuples(sql, {"last": wanted})]
    assert got == list(range(1, wanted + 1))


def test_streams_interleave_and_one_left_early_is_closed(engine: Engine) -> None:
    sql = "SELECT id, name FROM statement_rows_items WHERE seq <= :cutoff ORDER BY id"
    expected = _by_sqlalchemy(engine, 49)
    with engine.connect() as conn, conn.begin():
        reader = ConnectionReader(conn)
        outer = reader.each(sql, {"cutoff": 49})
        for _ in range(3):  # another stream read to its end between two rows of the first
            next(outer)
            assert len(list(reader.tuples(sql, {"cutoff": 49}))) == COUNT
        abandoned = cast("Generator[tuple[object, ...]]", reader.tuples(sql, {"cutoff": 49}))
        next(abandoned)
        abandoned.close()  # a check that returns at its first problem
        rest = [tuple(r.values()) for r in outer]
        assert len(rest) == COUNT - 3
        if engine.dialect.name == "postgresql":
            open_cursors = conn.exec_driver_sql("SELECT count(*) FROM pg_cursors").scalar()
            assert open_cursors == 0
    assert len(expected) == COUNT
