"""`trials show` (one trial in full), and appending reconciliations of ambiguous external
effects. Listing trials, and the summary both commands start from, is
evalops/services/reads/trials.py (the one reading of a listed trial)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.authority import NO_SUITE, Scope
from evalops.domain.classify import AMBIGUOUS_EFFECT_STATUSES
from evalops.domain.timestamps import format_timestamp
from evalops.domain.trial_record import TrialRecord
from evalops.errors import InputError, RefusedError
from evalops.importers.provenance import source_of
from evalops.services.authority.acts import (
    UNSIGNED,
    Authorized,
    Signing,
    authorize,
    record_refusal,
)
from evalops.services.placeholders import refuse_placeholder
from evalops.services.reads.trials import trial_summary
from evalops.services.registry.definitions import (
    Definitions,
    rederive,
    stored_record,
)
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.reader import engine_reader
from evalops.store.tables import (
    IngestBatch,
    Reconciliation,
    ReviewResult,
    Trial,
)

RECONCILED_STATUSES = ("committed", "not_committed")


def _chain(session: Session, trial: Trial) -> list[str]:
    """The rerun chain through this trial: ancestors, itself, then descendants."""
    chain = [trial.trial_id]
    parent = trial.parent_trial_id
    while parent is not None:
        chain.insert(0, parent)
        row = session.exec(select(Trial).where(Trial.trial_id == parent)).first()
        parent = row.parent_trial_id if row else None
    frontier = [trial.trial_id]
    while frontier:
        kids = session.exec(
            select(Trial.trial_id).where(col(Trial.parent_trial_id).in_(frontier))
        ).all()
        chain.extend(kids)
        frontier = list(kids)
    return chain


def _load(session: Session, trial_id: str) -> Trial:
    """The trial of that id: its live row, else (every row voided) the newest one."""
    rows = session.exec(
        select(Trial).where(Trial.trial_id == trial_id).order_by(col(Trial.id).desc())
    ).all()
    if not rows:
        raise InputError(f"unknown trial {trial_id!r} (list them with `evalops trials list`)")
    live = session.exec(
        select(Trial)
        .where(Trial.trial_id == trial_id, ~queries.voided(None))
        .order_by(col(Trial.id).desc())
    ).first()
    return rows[0] if live is None else live


def _void_view(session: Session, trial: Trial) -> dict[str, Any] | None:
    """The void that left this trial row out, as `void list` shows it (None: live)."""
    from evalops.services.reads.voids import void_of_trial_row
    from evalops.store.reader import ConnectionReader

    assert trial.id is not None
    return void_of_trial_row(ConnectionReader(session.connection()), trial.id)


def _batch_files(session: Session, trial: Trial) -> list[str]:
    """The files the trial's ingest read (names the log of a trial imported before the
    import recorded its own file)."""
    batch = session.get(IngestBatch, trial.ingest_batch_id)
    return [str(f) for f in json.loads(batch.files)] if batch else []


def show_trial(engine: Engine, trial_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        trial = _load(session, trial_id)
        defs = Definitions(session)
        current = rederive(defs, trial)
        record = stored_record(trial)
        reconciliations = session.exec(
            select(Reconciliation)
            .where(Reconciliation.trial_id == trial_id)
            .order_by(col(Reconciliation.id))
        ).all()
        reviews = session.exec(
            select(ReviewResult)
            .where(ReviewResult.trial_id == trial_id)
            .order_by(col(ReviewResult.id))
        ).all()
        with engine_reader(engine) as reader:
            summary = trial_summary(reader, trial_id, row_id=trial.id)
        assert summary is not None  # `_load` found it, in the same committed database
        return {
            **summary,
            "void": _void_view(session, trial),
            "reasons": list(current.reasons) if current else [],
            "run_id": trial.run_id,
            "attempt_id": trial.attempt_id,
            "task_digest": trial.task_digest,
            "execution_digest": trial.execution_digest,
            "grader_set_digest": trial.grader_set_digest,
            "eval_case_digest": trial.eval_case_digest,
            "record_digest": trial.record_digest,
            "runtime": record.runtime.model_dump(mode="json"),
            "grader_results": [r.model_dump(mode="json") for r in record.grader_results],
            "external_effects": [e.model_dump(mode="json") for e in record.external_effects],
            "trajectory": json.loads(trial.trajectory) if trial.trajectory else None,
            "fixture_misses": record.fixture_misses,
            "usage": record.usage.model_dump(mode="json") if record.usage else None,
            "rerun_chain": _chain(session, trial),
            "rerun_reason": trial.rerun_reason,
            # What `trials void --batch` names: the ingest or import that stored it.
            "batch": trial.ingest_batch_id,
            "source": source_of(json.loads(trial.record), _batch_files(session, trial)),
            "reconciliations": [
                {
                    "effect_key": r.effect_key,
                    "status": r.status,
                    "evidence_uri": r.evidence_uri,
                    "at": format_timestamp(r.at),
                    "actor": r.actor,
                }
                for r in reconciliations
            ],
            "reviews": [
                {
                    "grader_id": r.grader_id,
                    "state": r.state,
                    "reason": r.reason,
                    "at": format_timestamp(r.at),
                    "actor": r.actor,
                }
                for r in reviews
            ],
        }


def _settleable(
    record: TrialRecord, effect_key: str, index: int | None, settled: dict[int, Reconciliation]
) -> tuple[int | None, str | None]:
    """(the effect position to settle, None) or (None, why it may not be settled)."""
    positions = [i for i, e in enumerate(record.external_effects) if e.effect_key == effect_key]
    if index is not None:
        if index not in positions:
            return None, (
                f"effect {index} is not {effect_key} (positions with that key: "
                f"{', '.join(map(str, positions))})"
            )
        positions = [index]
    open_positions = [
        i
        for i in positions
        if record.external_effects[i].status in AMBIGUOUS_EFFECT_STATUSES and i not in settled
    ]
    if len(open_positions) == 1:
        return open_positions[0], None
    if len(open_positions) > 1:
        return None, (
            f"{len(open_positions)} effects {effect_key} are awaiting reconciliation (positions "
            f"{', '.join(map(str, open_positions))}): name one with --index N"
        )
    reasons = []
    for i in positions:
        effect = record.external_effects[i]
        if i in settled:
            done = settled[i]
            reasons.append(
                f"effect {i} was already reconciled as {done.status} at "
                f"{format_timestamp(done.at)} by {done.actor}"
            )
        else:
            reasons.append(
                f"effect {i} was recorded {effect.status}: a fact of the run, never reconciled"
            )
    return None, "; ".join(reasons)


def _authorize_reconciliation(
    session: Session,
    trial: Trial,
    request: dict[str, Any],
    position: int,
    status_before: str,
    signing: Signing,
    now: datetime,
) -> Authorized:
    """The `trials.reconcile` act: what the reconciliation stores, bound to the trial's
    record (a voided id ingested again is another trial), judged by the authority in force."""
    suites = queries.suites_of_task(session, trial.task_id)
    body = {
        **request,
        "index": position,
        "from": status_before,
        "record_digest": trial.record_digest,
    }
    return authorize(
        session,
        kind="trials.reconcile",
        body=body,
        scope=Scope(suites=tuple(suites) if suites else (NO_SUITE,)),
        signing=signing,
        now=now,
    )


def reconcile(
    engine: Engine,
    trial_id: str,
    *,
    effect_key: str,
    status: str,
    evidence_uri: str,
    actor: str,
    now: datetime,
    index: int | None = None,
    signing: Signing = UNSIGNED,
) -> dict[str, Any]:
    """Settle one `requested` or `unknown` effect (docs/classification.md).

    An effect recorded `committed` or `not_committed` is a fact of the run, and a settled
    effect stays settled: both refusals are audited and exit 5, so the built-in "committed
    twice" hard failure can never be reconciled away. Under an authority a reconciliation
    is a signed act `trials.reconcile` by a risk owner of every suite the trial's task is a
    member of (an unscoped one for a task in none): it lifts an ambiguous effect's hold, which
    voiding the trial would need two of them for, so a claim alone may not.
    """
    if status not in RECONCILED_STATUSES:
        raise InputError(
            f"status {status!r} is not one of {', '.join(RECONCILED_STATUSES)}", field="--status"
        )
    if not evidence_uri.strip():
        raise InputError("a reconciliation needs evidence", field="--evidence")
    refuse_placeholder(
        "--effect",
        effect_key,
        f"the effect_key to settle (`evalops trials show {trial_id}` lists the trial's effects)",
    )
    refuse_placeholder("--evidence", evidence_uri, "the URI of the receipt or log that shows it")
    refusal: str | None = None
    refused: str | None = None
    with write_session(engine) as session:
        from evalops.services.ingest.voids import live_trial

        trial = live_trial(session, trial_id)  # a voided trial is settled by nothing
        trial_row = trial.id
        record = stored_record(trial)
        keys = {e.effect_key for e in record.external_effects}
        if effect_key not in keys:
            raise InputError(
                f"trial {trial_id} has no external effect {effect_key!r} "
                f"(it has: {', '.join(sorted(keys)) or 'none'})",
                field="--effect",
            )
        settled = {
            r.effect_index: r
            for r in session.exec(
                select(Reconciliation)
                .where(Reconciliation.trial_id == trial_id)
                .order_by(col(Reconciliation.id))
            )
            if r.effect_index is not None
        }
        position, refusal = _settleable(record, effect_key, index, settled)
        request = {
            "trial_id": trial_id,
            "effect_key": effect_key,
            "index": index,
            "to": status,
            "evidence_uri": evidence_uri,
        }
        authorized: Authorized | None = None
        if position is not None:
            authorized = _authorize_reconciliation(
                session, trial, request, position, record.external_effects[position].status,
                signing, now,
            )  # fmt: skip
            if authorized.refused:
                found = record_refusal(session, authorized, subject=trial_id, actor=actor, now=now)
                refused = f"trials.reconcile refused: [{found['rule']}] {found['message']}"
        if position is None:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.TRIALS_RECONCILE_REFUSED,
                subject=trial_id,
                payload={**request, "refusal": refusal},
            )
        elif refused is None:
            assert authorized is not None
            row = Reconciliation(
                trial_id=trial_id,
                effect_key=effect_key,
                effect_index=position,
                status=status,
                evidence_uri=evidence_uri,
                at=now,
                actor=actor,
                audit_seq=next_seq(session),
            )
            session.add(row)
            rows: list[Any] = [row]
            act_row = authorized.add_row(session, trial_id, row.audit_seq)
            if act_row is not None:
                rows.append(act_row)
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.TRIALS_RECONCILE,
                subject=trial_id,
                payload={
                    **request,
                    "index": position,
                    "from": record.external_effects[position].status,
                    **authorized.payload(),
                },
                rows=rows,
            )
    if refusal is not None:
        raise RefusedError(f"reconciliation of {effect_key} in {trial_id} refused: {refusal}")
    if refused is not None:
        raise RefusedError(refused)
    signers = (
        [s.as_dict() for s in authorized.judgement.signers]
        if authorized is not None and authorized.signed
        else []
    )
    # Read once committed, as `trials show` reads it: one summary of a trial, one query.
    with engine_reader(engine) as reader:
        summary = trial_summary(reader, trial_id, row_id=trial_row)
    assert summary is not None
    return {
        **summary,
        "reconciled": {
            "effect_key": effect_key,
            "index": position,
            "status": status,
            "signers": signers,
        },
    }
