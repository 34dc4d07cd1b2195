"""The human review queue: abstentions and verdicts a model grader may not block on.

`review list` re-derives every trial and lists the (trial, grader) pairs whose
classification waits for a person; `review resolve` appends a human result, after which the
trial is re-classified from all its results. Nothing is overwritten.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from evalops.errors import InputError
from evalops.services.evidence import Definitions, rederive
from evalops.services.trials import show_trial
from evalops.store.audit import append_event
from evalops.store.engine import read_session, write_session
from evalops.store.tables import ReviewResult, Trial


def review_queue(engine: Engine) -> list[dict[str, Any]]:
    with read_session(engine) as session:
        defs = Definitions(session)
        out = []
        for trial in session.exec(select(Trial).order_by(col(Trial.id))):
            current = rederive(defs, trial)
            if current is None:
                continue
            for grader_id, why in current.review:
                out.append(
                    {
                        "trial_id": trial.trial_id,
                        "task_id": trial.task_id,
                        "grader_id": grader_id,
                        "why": why,
                        "classification": current.primary,
                    }
                )
        return out


def resolve(
    engine: Engine,
    trial_id: str,
    *,
    grader_id: str,
    state: str,
    reason: str,
    actor: str,
    now: datetime,
) -> dict[str, Any]:
    if not reason.strip():
        raise InputError("a review resolution needs a reason", field="--reason")
    with write_session(engine) as session:
        trial = session.exec(select(Trial).where(Trial.trial_id == trial_id)).first()
        if trial is None:
            raise InputError(f"unknown trial {trial_id!r}", field="TRIAL")
        defs = Definitions(session)
        found = defs.grader_set(trial.grader_set_digest)
        assert found is not None
        grader = found[0].grader(grader_id)
        if grader is None:
            raise InputError(
                f"grader {grader_id!r} is not in the trial's grader set {found[2]}",
                field="--grader",
            )
        decided = [s for s in grader.produces if s != "abstain"]
        if state not in decided:
            raise InputError(
                f"state {state!r} is not one {grader_id} produces ({', '.join(decided)})",
                field="--state",
            )
        before = rederive(defs, trial)
        event = append_event(
            session,
            at=now,
            actor=actor,
            kind="review.resolve",
            subject=trial_id,
            payload={
                "trial_id": trial_id,
                "grader_id": grader_id,
                "state": state,
                "reason": reason,
                "classification_before": before.primary if before else None,
            },
        )
        session.add(
            ReviewResult(
                trial_id=trial_id,
                grader_id=grader_id,
                state=state,
                reason=reason,
                at=now,
                actor=actor,
                audit_seq=event.seq,
            )
        )
    return show_trial(engine, trial_id)
