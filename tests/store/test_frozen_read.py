"""A frozen read session (evalops/store/queries.py, `frozen_read`) looks the definitions in
force up once per cutoff, and gives what a plain session reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlmodel import Session

from evalops.store import queries
from evalops.store.engine import make_engine, read_session


@pytest.fixture
def statements(synced: Path) -> Iterator[tuple[Any, list[str]]]:
    """An engine on the synced registry, and the queries (SELECT) it has run so far."""
    engine = make_engine(f"sqlite:///{synced / '.evalops' / 'registry.db'}")
    ran: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.startswith("SELECT"):
            ran.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield engine, ran
    finally:
        engine.dispose()


def _reads(session: Session) -> list[Any]:
    rows = queries.in_force_rows(session, "task")
    run = queries.latest_sync_run(session)
    return [{k: v.id for k, v in rows.items()}, run.id if run else None]


def test_a_frozen_session_reads_what_a_plain_one_reads_querying_once(
    statements: tuple[Any, list[str]],
) -> None:
    engine, ran = statements
    with read_session(engine) as plain:
        expected = _reads(plain)
        plain_count = len(ran)
        assert _reads(plain) == expected
        assert len(ran) == 2 * plain_count  # a plain session queries every time
    assert expected[0] == {"mini-task": expected[0]["mini-task"]} and expected[1] is not None

    ran.clear()
    with read_session(engine) as frozen:
        queries.frozen_read(frozen)
        first = _reads(frozen)
        once = len(ran)
        rows = queries.in_force_rows(frozen, "task")
        rows.clear()  # a caller's changes to what it was given stay its own
        assert _reads(frozen) == first == expected
        assert len(ran) == once


def test_each_cutoff_is_looked_up_on_its_own(statements: tuple[Any, list[str]]) -> None:
    """The sync is recorded at some audit sequence: before it, nothing is in force."""
    engine, _ = statements
    with read_session(engine) as frozen:
        queries.frozen_read(frozen)
        run = queries.latest_sync_run(frozen)
        assert run is not None
        before = run.audit_seq - 1
        assert queries.latest_sync_run(frozen, before) is None
        assert queries.in_force_rows(frozen, "task", before) == {}
        assert queries.latest_sync_run(frozen, run.audit_seq) is run
        assert set(queries.in_force_rows(frozen, "task", run.audit_seq)) == {"mini-task"}
