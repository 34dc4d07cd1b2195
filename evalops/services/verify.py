"""`evalops verify`: what the database holds is exactly what its audit chain recorded.

Checks, streaming (memory does not grow with the number of trials):
1. the chain: contiguous seqs, every hash re-computed, every payload re-hashed;
2. every row of lifecycle state, both directions: each event's rows exist and re-hash to the
   count and digest its payload recorded, and every row belongs to an event that recorded
   it (so an edited, deleted, inserted or re-pointed row is found);
3. every stored definition re-hashes to its identity digest, and every trial record to its
   stored digest;
4. every stored gate decision replays byte for byte, matches its event, and its inputs
   still match the registry rows they were loaded from;
5. every signed act re-verifies against the authority in force at its event (on a large
   registry, in worker processes running alongside the other checks);
6. optionally, anchors kept outside the database (`--anchor SEQ:HASH`, `--anchors FILE`):
   the chain must still hold each, which no rewrite of the tail can fake.

Checks 1-3 and 6 are evalops/services/verify_reads.py: plain SQL through a `Reader`, here
the snapshot session's own connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from evalops.errors import VerificationError
from evalops.services.anchors import Anchor
from evalops.services.authority import ActPool, signed_acts_check
from evalops.services.gate import verify_decisions
from evalops.services.verify_reads import (
    anchor_problem,
    carried_forward,
    check_chain,
    check_definitions,
    check_rows,
    check_trials,
    rows_fully_covered_from,
)
from evalops.store.engine import snapshot_session
from evalops.store.reader import ConnectionReader


@dataclass
class VerifyReport:
    events: int
    rows: int
    definitions: int
    trials: int = 0
    decisions: int = 0
    legacy_decisions: int = 0
    anchors: list[dict[str, Any]] = field(default_factory=list)
    head: dict[str, Any] | None = None
    carried_forward: list[dict[str, Any]] = field(default_factory=list)

    @property
    def covered_from(self) -> int:
        return rows_fully_covered_from(self.carried_forward)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "events": self.events,
            "rows": self.rows,
            "definitions": self.definitions,
            "trials": self.trials,
            "decisions": self.decisions,
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
    """Raise VerificationError naming the first bad item; else say what was checked.

    `on_stage` hears the name of each stage as it starts (a progress display). `act_pool`
    says how the signatures of signed acts are checked (default: on the other CPUs when
    there are enough acts); the first problem reported is the same either way.
    """

    def stage(name: str) -> None:
        if on_stage is not None:
            on_stage(name)

    # One snapshot for every check: a writer committing meanwhile must not make the rows
    # read by one check disagree with the events read by another. The signed acts are read
    # first, so that worker processes check their signatures while this one goes through
    # the other stages; their verdict is taken where the stage always stood.
    with snapshot_session(engine) as session, signed_acts_check(session, act_pool) as acts:
        # The checks of evalops/services/verify_reads.py, in the session's transaction.
        reader = ConnectionReader(session.connection())
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
        stage("gate decisions")
        try:
            decisions = verify_decisions(session)
        except Exception:
            if acts.pooled:
                acts.finish()  # a bad act comes before a bad decision, as inline
            raise
        if acts.pooled:
            stage("signed acts")
            acts.finish()
        carried = carried_forward(reader)
    return VerifyReport(
        events,
        rows,
        definitions,
        trials,
        decisions,
        anchors=checked_anchors,
        head=head,
        carried_forward=carried,
    )
