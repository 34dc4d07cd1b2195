"""`evalops verify`: what the database holds is exactly what its audit chain recorded.

Checks, streaming (memory does not grow with the number of trials):
0. the storage itself: SQLite's integrity check, and the unique keys the rules rely on
   present and valid (storage_checks.py);
1. the chain: contiguous seqs, every hash re-computed, every payload re-hashed;
2. every row of lifecycle state, both directions: each event's rows exist and re-hash to the
   count and digest its payload recorded, and every row belongs to an event that recorded
   it (so an edited, deleted, inserted or re-pointed row is found);
3. every stored definition re-hashes to its identity digest, and every trial record to its
   stored digest;
4. every stored gate decision replays byte for byte, matches its event, and its inputs
   still match the registry rows they were loaded from; every stored estimate recomputes
   byte for byte from its inputs and matches its event;
5. every signed act re-verifies against the authority in force at its event (on a large
   registry, in worker processes running alongside the other checks);
6. optionally, anchors kept outside the database (`--anchor SEQ:HASH`, `--anchors FILE`):
   the chain must still hold each, which no rewrite of the tail can fake.

Every check reads plain SQL through a `Reader` (checks 1-3 and 6:
evalops/services/verify/reads.py; 4: decision_checks.py; 5: act_checks.py): on a SQLite file
`sqlite3` itself, so `verify` imports no SQLAlchemy there; elsewhere the same SQL through a
SQLAlchemy connection in one REPEATABLE READ snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalops.errors import DamagedDatabase, VerificationError
from evalops.services.verify.act_checks import ActPool, registry_id_of, signed_acts_check
from evalops.services.verify.anchors import Anchor
from evalops.services.verify.decision_checks import verify_decisions
from evalops.services.verify.estimate_checks import verify_estimates
from evalops.services.verify.reads import (
    anchor_problem,
    carried_forward,
    check_chain,
    check_definitions,
    check_rows,
    check_trials,
    rows_fully_covered_from,
)
from evalops.services.verify.separation_checks import separation_problem
from evalops.services.verify.storage_checks import storage_problem
from evalops.store.faults import RECOVERY
from evalops.store.reader import Reader

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


@dataclass
class VerifyReport:
    events: int
    rows: int
    definitions: int
    trials: int = 0
    decisions: int = 0
    estimates: int = 0
    legacy_decisions: int = 0
    anchors: list[dict[str, Any]] = field(default_factory=list)
    head: dict[str, Any] | None = None
    carried_forward: list[dict[str, Any]] = field(default_factory=list)
    registry_id: str | None = None

    @property
    def covered_from(self) -> int:
        return rows_fully_covered_from(self.carried_forward)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "registry_id": self.registry_id,
            "events": self.events,
            "rows": self.rows,
            "definitions": self.definitions,
            "trials": self.trials,
            "decisions": self.decisions,
            "estimates": self.estimates,
            "anchors": self.anchors,
            "audit_head": self.head,
            "rows_fully_covered_from": self.covered_from,
            "carried_forward": self.carried_forward,
        }


def verify_database(
    engine: Engine,
    anchors: list[Anchor] | None = None,
    on_stage: Callable[[str], None] | None = None,
    act_pool: ActPool | None = None,
) -> VerifyReport:
    """`verify_reader` over an engine, in one snapshot."""
    with snapshot_reader(engine) as reader:
        return verify_reader(reader, anchors, on_stage, act_pool)


@contextmanager
def snapshot_reader(engine: Engine) -> Iterator[Reader]:
    """One read-only transaction that sees one consistent snapshot throughout
    (`store.engine.snapshot_session`), as a `Reader`."""
    from evalops.store.engine import snapshot_session
    from evalops.store.reader import ConnectionReader

    with snapshot_session(engine) as session:
        yield ConnectionReader(session.connection())


def verify_reader(
    reader: Reader,
    anchors: list[Anchor] | None = None,
    on_stage: Callable[[str], None] | None = None,
    act_pool: ActPool | None = None,
) -> VerifyReport:
    """Raise VerificationError naming the first bad item; else say what was checked.

    `reader` is one snapshot of the database (a writer committing meanwhile must not make
    the rows read by one check disagree with the events read by another). `on_stage` hears
    the name of each stage as it starts (a progress display). `act_pool` says how the
    signatures of signed acts are checked (default: on the other CPUs when there are enough
    acts); the first problem reported is the same either way.
    """

    try:
        return _verify(reader, anchors, on_stage, act_pool)
    except Exception as exc:
        problem = unreadable_problem(exc)
        if problem is None:
            raise
        raise VerificationError(problem) from None


def unreadable_problem(exc: BaseException) -> str | None:
    """What a database error met halfway through says about the database, when it says it
    no longer holds what evalops wrote (a table or column gone, text that is not UTF-8, a
    damaged page); None for any other error (a lost connection is no tampering). The same
    through `sqlite3` and through SQLAlchemy, which wraps the driver's error; on PostgreSQL
    a table or column gone."""
    import sqlite3
    import sys

    orig = getattr(exc, "orig", None) or exc
    message = str(orig).splitlines()[0] if str(orig) else type(orig).__name__
    gone = f"the database no longer holds what evalops wrote: {message[:300]}"
    psycopg_errors = sys.modules.get("psycopg.errors")
    if psycopg_errors is not None and isinstance(
        orig, (psycopg_errors.UndefinedTable, psycopg_errors.UndefinedColumn)
    ):
        return gone
    if not isinstance(orig, sqlite3.DatabaseError):
        return None
    tampered = (
        "no such table",
        "no such column",
        "could not decode",
        "malformed",
        "not a database",
    )
    if type(orig) is sqlite3.DatabaseError or any(m in message.lower() for m in tampered):
        return gone
    return None


def _verify(
    reader: Reader,
    anchors: list[Anchor] | None,
    on_stage: Callable[[str], None] | None,
    act_pool: ActPool | None,
) -> VerifyReport:
    def stage(name: str) -> None:
        if on_stage is not None:
            on_stage(name)

    # The storage first: every later check reads tables by full scan, which a damaged
    # index page or a unique index gone would pass.
    stage("storage")
    problem = storage_problem(reader)
    if problem is not None:
        raise DamagedDatabase(
            f"the database is damaged: {problem}; restore it from a backup, then re-run the "
            f"ingests and syncs made since ({RECOVERY})"
        )
    # The signed acts are read first, so that worker processes check their signatures while
    # this one goes through the other stages; their verdict is taken where the stage always
    # stood.
    with signed_acts_check(reader, act_pool) as acts:
        stage("audit chain")
        events, head = check_chain(reader)
        checked_anchors = []
        for anchor in anchors or []:
            problem = anchor_problem(reader, anchor)
            if problem is not None:
                raise VerificationError(problem)
            checked_anchors.append(anchor.as_dict())
        # Self-consistency of each row first (it names the row), then every row against
        # the event that recorded it, then the signed acts, then the decisions.
        stage("definitions")
        definitions = check_definitions(reader)
        stage("trials")
        trials = check_trials(reader)
        stage("rows")
        rows = check_rows(reader)
        if not acts.pooled:
            stage("signed acts")
            acts.finish()
        stage("separation of duties")
        problem = separation_problem(reader)
        if problem is not None:
            if acts.pooled:
                acts.finish()  # a bad act comes first, as inline
            raise VerificationError(problem)
        stage("gate decisions")
        try:
            decisions = verify_decisions(reader)
        except Exception:
            if acts.pooled:
                acts.finish()  # a bad act comes before a bad decision, as inline
            raise
        if acts.pooled:
            stage("signed acts")
            acts.finish()
        stage("estimates")
        estimates = verify_estimates(reader)
        carried = carried_forward(reader)
    return VerifyReport(
        events,
        rows,
        definitions,
        trials,
        decisions,
        estimates=estimates,
        anchors=checked_anchors,
        head=head,
        carried_forward=carried,
        registry_id=registry_id_of(reader),
    )
