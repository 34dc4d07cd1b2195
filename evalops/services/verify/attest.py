"""`export attestation`: a decision is certified only when it verifies.

A signature vouches for whatever it signs, so before building the statement the decision is
checked the way `verify` checks it, narrowed to this one decision: the audit chain links and
re-hashes, the stored decision replays byte for byte from its stored inputs, its row still
says what its audit event recorded (digests, decision, and the event's row digest), its
inputs still match the registry rows they were loaded from, and every anchor the caller
kept outside the database is still held by the chain. Any failure is exit 6 and nothing is
written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError, VerificationError
from evalops.report.document import ReportDocument
from evalops.services.gate.check import decision_event_mismatch, rebuilt_inputs_problem
from evalops.services.registry.unknown_ids import unknown_decision
from evalops.services.reports.audit import stored_document
from evalops.services.verify.anchors import Anchor
from evalops.services.verify.decision_checks import replay_row
from evalops.services.verify.reads import anchor_problem, chain_problem, event_rows_problem
from evalops.store.engine import read_session
from evalops.store.reader import ConnectionReader
from evalops.store.tables import AuditEvent, GateDecision


def _problems(session: Session, row: GateDecision, anchors: Iterable[Anchor]) -> Iterable[str]:
    """Each check in turn, cheapest first; the caller stops at the first problem."""
    reader = ConnectionReader(session.connection())  # verify's own checks, in this session
    yield from filter(None, [chain_problem(reader)])
    for anchor in anchors:
        yield from filter(None, [anchor_problem(reader, anchor)])
    outcome = replay_row(row)
    if not outcome["identical"]:
        yield "it does not replay: " + "; ".join(outcome["problems"] or ["differs"])
    yield from filter(None, [decision_event_mismatch(session, row)])
    yield from filter(None, [event_rows_problem(reader, row.audit_seq)])
    yield from filter(None, [rebuilt_inputs_problem(session, row)])


def certified_document(
    engine: Engine, gate_id: str, anchors: Iterable[Anchor] = (), *, now: datetime
) -> ReportDocument:
    """The report document of a stored decision that verifies; VerificationError otherwise."""
    with read_session(engine) as session:
        row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).first()
        if row is None:
            raise InputError(unknown_decision(session, gate_id), field="--gate")
        problem = next(iter(_problems(session, row, list(anchors))), None)
        if problem is not None:
            raise VerificationError(
                f"gate decision {gate_id} is not attested: {problem} (run `evalops verify`)"
            )
        _refuse_backdated(session, row)
        return stored_document(session, row, now=now)


def _refuse_backdated(session: Session, row: GateDecision) -> None:
    """A decision made with `gate check --at T` reads the registry as it stood at T, before
    what was recorded since (a revocation, a void): it verifies, but a release job that
    relies on an attestation alone would take it for the registry's decision. Only a
    decision evaluated at the moment it was recorded is attested."""
    # A live check sees the chain up to the event before its own: its cutoff. A check
    # `--at` a moment after which nothing was recorded sees the same, and is attested.
    cutoff = json.loads(row.inputs).get("request", {}).get("cutoff")
    if not isinstance(cutoff, int) or cutoff >= row.audit_seq - 1:
        return  # decisions stored before the cutoff was recorded are as they were
    event = session.get(AuditEvent, row.audit_seq)
    recorded = format_timestamp(event.at) if event is not None else "later"
    raise InputError(
        f"gate decision {row.gate_id} was evaluated as of {format_timestamp(row.evaluated_at)} "
        f"(`gate check --at`), before what was recorded up to its own recording ({recorded}, "
        f"audit events {cutoff + 1} to {row.audit_seq - 1}): it does not say how the "
        "registry stood when it was made, and is not attested; check again without --at and "
        "attest that decision",
        field="--gate",
    )
