"""`queries.members`: the append-only membership rows folded into each task's current pin.

Expected values come from the rows themselves, folded by hand here (the last `added` or
`repinned` row of a task is its pin; a later `retired` row removes it), not from the
function. Rows a caller added to the session and has not flushed are seen, as the ORM's
own reads would see them: `members` reads by Core, so it flushes first.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import select

from evalops.store import queries
from evalops.store.engine import make_engine, write_session
from evalops.store.tables import SuiteMembership

SUITE = "regression/core"


def _by_hand(db: Path) -> dict[str, tuple[str, str, int | None]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT task_id, action, task_digest, grader_set_digest, task_revision_id "
            "FROM suite_membership WHERE suite_id = ? ORDER BY id",
            (SUITE,),
        ).fetchall()
    finally:
        con.close()
    pins: dict[str, tuple[str, str, int | None]] = {}
    for task_id, action, task_digest, grader_set_digest, revision_id in rows:
        if action == "retired":
            pins.pop(task_id, None)
        else:
            pins[task_id] = (task_digest, grader_set_digest, revision_id)
    return pins


def test_members_are_the_rows_folded_and_unflushed_rows_count(demo: Path) -> None:
    db = demo / ".evalops" / "registry.db"
    expected = _by_hand(db)
    assert len(expected) >= 2
    engine = make_engine(f"sqlite:///{db}")
    try:
        with write_session(engine) as session:
            got = queries.members(session, SUITE)
            assert [m.task_id for m in got] == sorted(expected)
            assert {
                m.task_id: (m.task_digest, m.grader_set_digest, m.added.task_revision_id)
                for m in got
            } == expected
            assert all(m.removed is None and m.suite_id == SUITE for m in got)
            # A retirement added to the session, not yet flushed, removes its task.
            gone = got[0]
            last = session.exec(
                select(SuiteMembership).where(SuiteMembership.suite_id == SUITE)
            ).all()[-1]
            session.add(
                SuiteMembership(
                    suite_id=SUITE,
                    task_id=gone.task_id,
                    action="retired",
                    task_digest=gone.task_digest,
                    grader_set_digest=gone.grader_set_digest,
                    at=datetime.now(UTC),
                    actor="tester@example.com",
                    audit_seq=last.audit_seq,
                )
            )
            after = queries.members(session, SUITE, include_removed=True)
            removed = {m.task_id: m.removed for m in after}
            retirement = removed[gone.task_id]
            assert retirement is not None and retirement.action == "retired"
            assert [m.task_id for m in queries.members(session, SUITE)] == sorted(
                t for t in expected if t != gone.task_id
            )
            session.rollback()
    finally:
        engine.dispose()
