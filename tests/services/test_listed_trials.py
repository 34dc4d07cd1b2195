"""A stored decision's trials listed again (`ListedTrials`), as a report reads them.

The expectation is the contract's words done by hand in SQL: a task's trials are the rows
of the decision's execution digest, of the task's pinned revision and grader set, recorded
at or before the decision's cutoff and not voided by then, in row order. The listing reads
the build's rows once, as a stream ordered by task; these tests ask for the tasks in the
decision's order, reversed, twice over and with strangers in between, and every answer
must be the same rows. A void before a decision and one after it, and a trial ingested
after it, are in the registry when they ask.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

from tests.conftest import Cli

SUITE = "regression/core"
BUILD = "build-125"


def _decisions(db: Path) -> list[tuple[str, dict[str, Any]]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT gate_id, inputs FROM gate_decision ORDER BY number").fetchall()
    return [(gate_id, json.loads(text)) for gate_id, text in rows]


def _by_hand(db: Path, inputs: dict[str, Any], task: dict[str, Any]) -> list[str]:
    cutoff = int(inputs["request"]["cutoff"])
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT trial_id FROM trial WHERE execution_digest = ? AND task_id = ? "
            "AND task_digest = ? AND grader_set_digest = ? AND audit_seq <= ? "
            "AND id NOT IN (SELECT trial_row_id FROM voided_trial WHERE audit_seq <= ?) "
            "ORDER BY id",
            (
                inputs["execution_digest"],
                task["task_id"],
                task["task_digest"],
                task["grader_set_digest"],
                cutoff,
                cutoff,
            ),
        ).fetchall()
    return [r[0] for r in rows]


@contextmanager
def _trial_reads(engine: Any) -> Iterator[list[str]]:
    """The statements run that read the trial table."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if re.search(r"\bFROM trial\b", statement):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _registry_with_voids(demo: Path, cli: Cli) -> Path:
    """The demo, with a trial of BUILD voided and the build decided again, then another of
    its trials voided and one more ingested after that decision."""
    db = demo / ".evalops" / "registry.db"
    with sqlite3.connect(db) as con:
        first, second = (
            r[0]
            for r in con.execute(
                "SELECT trial_id FROM trial WHERE trial_id LIKE "
                "'trial-b125-support-refund-in-order-%' ORDER BY id LIMIT 2"
            )
        )
    done = cli("trials", "void", first, "--reason", "ingested twice", cwd=demo)
    assert done.code == 0, done.stderr
    done = cli("gate", "check", "--build", BUILD, "--suite", SUITE, cwd=demo)
    assert done.code in (0, 3, 4), done.stderr
    done = cli("trials", "void", second, "--reason", "wrong fixture", cwd=demo)
    assert done.code == 0, done.stderr
    later = demo / "later.jsonl"
    source = demo / "registry" / "trials" / "fix-b125.jsonl"
    record = next(
        r
        for r in map(json.loads, source.read_text(encoding="utf-8").splitlines())
        if r["trial_id"] == second
    )
    record.pop("primary_classification", None)
    record["trial_id"] = "trial-b125-after-the-decision"
    record["attempt_id"] = "attempt-after-the-decision"
    later.write_text(json.dumps(record) + "\n", encoding="utf-8")
    done = cli("trials", "ingest", later, cwd=demo)
    assert done.code == 0, done.stderr
    return db


def _listed(listed: Any, task: dict[str, Any]) -> list[str]:
    return [t["trial_id"] for t, row in listed(task) if row.trial_id == t["trial_id"]]


def test_every_order_of_asking_lists_the_rows_the_contract_names(demo: Path, cli: Cli) -> None:
    from evalops.services.gate.listed_trials import ListedTrials
    from evalops.store.engine import make_engine, read_session

    db = _registry_with_voids(demo, cli)
    decisions = _decisions(db)
    assert len(decisions) == 4
    engine = make_engine(f"sqlite:///{db}")
    try:
        for gate_id, inputs in decisions:
            tasks = list(inputs["tasks"])
            assert len(tasks) >= 3
            expected = {t["task_id"]: _by_hand(db, inputs, t) for t in tasks}
            assert sum(map(len, expected.values())) > 0, gate_id
            stranger = {**tasks[0], "task_id": "no-such-task"}
            orders = [
                tasks,
                list(reversed(tasks)),
                [tasks[1], tasks[1], tasks[0], stranger, tasks[2], tasks[0]],
            ]
            for order in orders:
                with read_session(engine) as session:
                    listed = ListedTrials(session, inputs, 2)
                    got = [(t["task_id"], _listed(listed, t)) for t in order]
                    listed.close()
                want = [(t["task_id"], expected.get(t["task_id"], [])) for t in order]
                assert got == want, (gate_id, [t["task_id"] for t in order])
    finally:
        engine.dispose()
    # The voids and the late trial are where the expectations differ between decisions.
    by_decision = {g: {t["task_id"]: _by_hand(db, i, t) for t in i["tasks"]} for g, i in decisions}
    refund = "support-refund-in-order"
    assert len(by_decision["GATE-3"][refund]) == len(by_decision["GATE-4"][refund]) + 1


def _batches(count: int, batch: int) -> int:
    return -(-count // batch)


def test_a_decision_s_trials_are_read_in_one_stream_not_a_read_per_task(
    demo: Path, cli: Cli
) -> None:
    """In order: the tasks' places, the stream of ids, and the decision's whole rows a batch
    at a time across tasks. Against the order: the last task from the stream, each other read
    alone (its ids, then its rows a batch at a time); the rows passed are never read whole."""
    from evalops.services.gate.listed_trials import ListedTrials
    from evalops.store.engine import make_engine, read_session

    db = _registry_with_voids(demo, cli)
    engine = make_engine(f"sqlite:///{db}")
    batch = 2
    try:
        for gate_id, inputs in _decisions(db):
            tasks = list(inputs["tasks"])
            counts = [len(_by_hand(db, inputs, t)) for t in tasks]
            with read_session(engine) as session, _trial_reads(engine) as reads:
                listed = ListedTrials(session, inputs, batch)
                for task in tasks:
                    _listed(listed, task)
                listed.close()
            assert len(reads) == 2 + _batches(sum(counts), batch), (gate_id, reads)
            with read_session(engine) as session, _trial_reads(engine) as reads:
                listed = ListedTrials(session, inputs, batch)
                for task in reversed(tasks):
                    _listed(listed, task)
                listed.close()
            alone = sum(1 + _batches(n, batch) for n in counts[:-1])
            assert len(reads) == 2 + _batches(counts[-1], batch) + alone, (gate_id, reads)
    finally:
        engine.dispose()


def test_a_task_half_read_is_read_alone_when_asked_again_and_the_stream_goes_on(
    demo: Path,
) -> None:
    from evalops.services.gate.listed_trials import ListedTrials
    from evalops.store.engine import make_engine, read_session

    db = demo / ".evalops" / "registry.db"
    engine = make_engine(f"sqlite:///{db}")
    try:
        for _gate_id, inputs in _decisions(db):
            tasks = list(inputs["tasks"])
            want = [_by_hand(db, inputs, t) for t in tasks]
            assert len(want[1]) >= 2
            with read_session(engine) as session:
                listed = ListedTrials(session, inputs, 500)
                first = listed(tasks[1])
                next(first)  # its other rows wait, read ahead
                first.close()
                assert _listed(listed, tasks[1]) == want[1]
                assert _listed(listed, tasks[2]) == want[2]
                assert _listed(listed, tasks[0]) == want[0]
                listed.close()
    finally:
        engine.dispose()


def _grown(db: Path, inputs: dict[str, Any], task: dict[str, Any], more: int) -> None:
    """`more` copies of one of the task's trials, under new ids, in the decision's build."""
    with sqlite3.connect(db) as con:
        columns = [r[1] for r in con.execute("PRAGMA table_info(trial)") if r[1] != "id"]
        renamed = {
            "trial_id": "'copy-' || n",
            "attempt_id": "'copy-attempt-' || n",
            "parent_trial_id": "NULL",
        }
        picked = ", ".join(renamed.get(c, c) for c in columns)
        con.execute(
            "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < ?) "
            f"INSERT INTO trial ({', '.join(columns)}) SELECT {picked} FROM k, "
            "(SELECT * FROM trial WHERE execution_digest = ? AND task_id = ? AND task_digest = ? "
            "AND grader_set_digest = ? AND audit_seq <= ? AND parent_trial_id IS NULL "
            "ORDER BY id LIMIT 1)",
            (
                more,
                inputs["execution_digest"],
                task["task_id"],
                task["task_digest"],
                task["grader_set_digest"],
                inputs["request"]["cutoff"],
            ),
        )


def test_no_more_than_a_batch_of_rows_is_held_in_order_or_out_of_it(demo: Path) -> None:
    """A task asked for against the stream's order (on PostgreSQL with a collation unlike
    Python's order, that can be every task) is read alone, and holds no more rows than the
    stream does."""
    import gc

    from evalops.services.gate.listed_trials import ListedTrials
    from evalops.store.engine import make_engine, read_session
    from evalops.store.tables import Trial

    db = demo / ".evalops" / "registry.db"
    (gate_id, inputs), *_ = _decisions(db)
    tasks = list(inputs["tasks"])
    big = tasks[1]
    _grown(db, inputs, big, 3000)
    batch = 100

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, Trial))

    engine = make_engine(f"sqlite:///{db}")
    try:
        for order in ([big], [tasks[2], big]):
            with read_session(engine) as session:
                listed = ListedTrials(session, inputs, batch)
                for task in order[:-1]:
                    list(listed(task))
                trials = listed(order[-1])
                listed_ids = [next(trials)[0]["trial_id"]]
                held = alive()
                listed_ids += [t["trial_id"] for t, _ in trials]
                listed.close()
            assert listed_ids == _by_hand(db, inputs, big), gate_id
            assert len(listed_ids) > 3000
            assert held <= batch + 1, (order, held)
    finally:
        engine.dispose()
