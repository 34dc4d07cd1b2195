"""The human review queue: abstentions and verdicts a model grader may not block on.

`review list` lists the (trial, grader) pairs whose classification waits for a person, as
re-deriving every trial from current evidence would; `review resolve` appends a human
result for exactly such a pair, after which the trial is re-classified. Nothing is
overwritten, and a review never replaces a deterministic grader's result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.authority import Scope
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError, RefusedError
from evalops.services.authority.acts import (
    INGEST_ACTS,
    UNSIGNED,
    Signing,
    authorize,
    record_refusal,
    separation_refusal,
    signers_of,
)
from evalops.services.ingest.trials import show_trial
from evalops.services.placeholders import refuse_placeholder
from evalops.services.registry.definitions import Definitions, StaleClassifications, rederive
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.tables import GraderSetRow, ReviewResult, Trial

AWAITING = '"awaiting_review"'
"""The label classify gives a trial with a queued pair, as it appears in stored labels."""


def reviewable_grader_sets(session: Session, defs: Definitions) -> list[str]:
    """Digests of registered grader sets with a blocking model or human grader."""
    digests = session.exec(select(GraderSetRow.grader_set_digest).distinct()).all()
    out = []
    for digest in digests:
        found = defs.grader_set(digest)
        if found and any(g.blocking and g.type in ("model", "human") for g in found.spec.graders):
            out.append(digest)
    return sorted(out)


_REVIEW_COLUMNS = (
    Trial.id,
    Trial.trial_id,
    Trial.grader_set_digest,
    Trial.ingest_batch_id,
    Trial.secondary_labels,
)


def review_queue(engine: Engine) -> list[dict[str, Any]]:
    with read_session(engine) as session:
        defs = Definitions(session)
        stale = StaleClassifications(session, defs)
        out = []
        # Only a blocking model or human grader ever queues a trial (classify._queued), so
        # trials of other grader sets are never read. Of the rest, a trial whose evidence is
        # unchanged since ingest (StaleClassifications) queues only if ingest labelled it
        # `awaiting_review`: only those, and the stale ones, are loaded and re-derived. The
        # rest stream past as a few columns in batches: flat memory, no record parsed.
        reviewable = reviewable_grader_sets(session, defs)
        if not reviewable:
            return []
        rows: Any = session.exec(
            select(*_REVIEW_COLUMNS)  # type: ignore[call-overload]
            .where(col(Trial.grader_set_digest).in_(reviewable), ~queries.voided(None))
            .order_by(col(Trial.id))
            .execution_options(yield_per=2_000)
        )
        for row_id, trial_id, grader_set_digest, batch_id, labels in rows:
            if AWAITING not in labels and not stale.needed(trial_id, grader_set_digest, batch_id):
                continue
            trial = session.get(Trial, row_id)
            assert trial is not None
            current = rederive(defs, trial)
            session.expunge(trial)
            if current is None:
                continue
            ingest_signers = _ingest_signers(session, trial.audit_seq) if current.review else []
            for grader_id, why in current.review:
                out.append(
                    {
                        "trial_id": trial.trial_id,
                        "task_id": trial.task_id,
                        "grader_id": grader_id,
                        "why": why,
                        "classification": current.primary,
                        "ingest_signers": ingest_signers,
                    }
                )
        return out


def _ingest_signers(session: Session, audit_seq: int) -> list[dict[str, str]]:
    """Who signed the ingest (or import) that brought a trial: under `no_self_review`
    they may not review it (docs/authority.md)."""
    for kind in INGEST_ACTS:
        found = signers_of(session, kind, audit_seq)
        if found:
            return found
    return []


def resolved_reviews(engine: Engine) -> list[dict[str, Any]]:
    """Every human verdict recorded, oldest first, with its signers ([]: unsigned)."""
    with read_session(engine) as session:
        rows = session.exec(
            select(ReviewResult, Trial.task_id)
            .join(Trial, col(Trial.trial_id) == col(ReviewResult.trial_id))
            .order_by(col(ReviewResult.id))
        ).all()
        return [
            {
                "trial_id": r.trial_id,
                "task_id": task_id,
                "grader_id": r.grader_id,
                "state": r.state,
                "reason": r.reason,
                "at": format_timestamp(r.at),
                "actor": r.actor,
                "signers": signers_of(session, "review.resolve", r.audit_seq),
            }
            for r, task_id in rows
        ]


def resolve(
    engine: Engine,
    trial_id: str,
    *,
    grader_id: str,
    state: str,
    reason: str,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
) -> dict[str, Any]:
    """Append a human verdict for a queued (trial, grader) pair (docs/promotion.md).

    With an authority in force the verdict is a reviewer's signed act (docs/authority.md).

    The review queue is the only door for a human verdict: a pair that is not queued (a
    deterministic grader's result, a pair already resolved, a calibrated verdict the model
    may block) or a state outside the grader's `produces` is refused, audited, exit 5.
    """
    if not reason.strip():
        raise InputError("a review resolution needs a reason", field="--reason")
    refuse_placeholder("--grader", grader_id, "the grader whose result awaits review")
    refuse_placeholder("--state", state, "the human verdict (a state the grader produces)")
    refuse_placeholder("--reason", reason, "why, for the record")
    refusal: str | None = None
    with write_session(engine) as session:
        if session.exec(select(Trial.id).where(Trial.trial_id == trial_id)).first() is None:
            raise InputError(f"unknown trial {trial_id!r} (list them with `evalops review list`)")
        from evalops.services.ingest.voids import live_trial

        trial = live_trial(session, trial_id)  # a voided trial awaits no review
        defs = Definitions(session)
        found = defs.grader_set(trial.grader_set_digest)
        assert found is not None
        grader = found.spec.grader(grader_id)
        if grader is None:
            raise InputError(
                f"grader {grader_id!r} is not in the trial's grader set {found.grader_set_id}",
                field="--grader",
            )
        before = rederive(defs, trial)
        queued = dict(before.review) if before else {}
        refusal = _refusal(defs, trial_id, grader, queued, state)
        request = {
            "trial_id": trial_id,
            "grader_id": grader_id,
            "state": state,
            "reason": reason,
            "classification_before": before.primary if before else None,
        }
        authorized = None
        if refusal is None:
            authorized = authorize(
                session,
                kind="review.resolve",
                body={k: request[k] for k in ("trial_id", "grader_id", "state", "reason")},
                scope=Scope(task=trial.task_id),
                signing=signing,
                now=now,
            )
            separation_refusal(session, authorized, "no_self_review", ingest_seqs=[trial.audit_seq])
            if authorized.refused:
                refusal = record_refusal(
                    session, authorized, subject=trial_id, actor=actor, now=now
                )["message"]
        else:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.REVIEW_REFUSED,
                subject=trial_id,
                payload={**request, "refusal": refusal},
            )
        if refusal is None and authorized is not None:
            row = ReviewResult(
                trial_id=trial_id,
                grader_id=grader_id,
                state=state,
                reason=reason,
                at=now,
                actor=actor,
                audit_seq=next_seq(session),
            )
            session.add(row)
            act_row = authorized.add_row(session, trial_id, row.audit_seq)
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.REVIEW_RESOLVE,
                subject=trial_id,
                payload={
                    **request,
                    "queued_because": queued[grader_id],
                    **authorized.payload(),
                },
                rows=[row] if act_row is None else [row, act_row],
            )
    if refusal is not None:
        raise RefusedError(f"review refused: {refusal}")
    return show_trial(engine, trial_id)


def _refusal(
    defs: Definitions, trial_id: str, grader: Any, queued: dict[str, Any], state: str
) -> str | None:
    """Why a person's verdict on (trial, grader) is not taken, or None."""
    grader_id = grader.id
    decided = [s for s in grader.produces if s != "abstain"]
    if grader_id not in queued:
        refusal = (
            f"({trial_id}, {grader_id}) is not in the review queue: a human verdict is "
            "taken only for a blocking model grader's abstention or unblockable verdict, "
            "or a blocking human grader without a result"
        )
        if grader.type == "deterministic":
            return refusal + f"; {grader_id} is deterministic and its result stands"
        done = [v for v in defs.appended(trial_id)[1] if v.grader_id == grader_id]
        if done:
            refusal += (
                f"; {done[-1].actor} resolved it as {done[-1].state} at "
                f"{format_timestamp(done[-1].at)}, and a verdict stands as every row does "
                "(`evalops review list --resolved`)"
            )
        return refusal
    if state == "abstain":
        return (
            f"a person's verdict is never abstain: give one of {', '.join(decided)} "
            f"({grader_id}'s verdicts)"
        )
    if state not in decided:
        return f"state {state!r} is not one {grader_id} produces ({', '.join(decided)})"
    return None
