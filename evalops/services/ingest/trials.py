"""Reading trials, and appending reconciliations of ambiguous external effects."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import and_, false, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds
from evalops.domain.classify import AMBIGUOUS_EFFECT_STATUSES, counted_gating_score
from evalops.domain.reruns import RERUN_NOT_PERMITTED, TrialNode, resolve_reruns
from evalops.domain.trial_record import TrialRecord
from evalops.domain.vocabulary import CANONICAL_PRECEDENCE, format_timestamp
from evalops.errors import InputError, RefusedError
from evalops.importers.provenance import source_of
from evalops.services.gate.policies import gate_policies_of_task, max_attempts
from evalops.services.placeholders import refuse_placeholder
from evalops.services.reads.trials import count_cap
from evalops.services.registry.definitions import (
    Definitions,
    rederive,
    stored_record,
)
from evalops.services.registry.unknown_ids import not_registered
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.tables import (
    ExecutionProfileRow,
    IngestBatch,
    Reconciliation,
    ReviewResult,
    Trial,
)

RECONCILED_STATUSES = ("committed", "not_committed")


def _builds(session: Session) -> dict[str, str]:
    rows = session.exec(select(ExecutionProfileRow)).all()
    return {r.execution_digest: r.system_build for r in rows}


class _Reruns:
    """Which reruns may not stand in, per eval case, under the gate policies the gate
    applies to the task's suites (`policies.gate_policies_of_task`): a rerun that any of
    them would not count is flagged."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.cache: dict[tuple[str, str, str], frozenset[str]] = {}
        self.limits: dict[str, list[dict[str, int]]] = {}

    def _limits(self, task_id: str) -> list[dict[str, int]]:
        if task_id not in self.limits:
            self.limits[task_id] = [
                max_attempts(p) for p in gate_policies_of_task(self.session, task_id)
            ] or [{}]
        return self.limits[task_id]

    def not_permitted(self, defs: Definitions, trial: Trial) -> bool:
        if trial.parent_trial_id is None:
            return False
        key = (trial.task_digest, trial.grader_set_digest, trial.execution_digest)
        if key not in self.cache:
            group = self.session.exec(
                select(Trial).where(
                    Trial.task_digest == key[0],
                    Trial.grader_set_digest == key[1],
                    Trial.execution_digest == key[2],
                )
            ).all()
            nodes = []
            for t in group:
                current = rederive(defs, t)
                cls = current.primary if current else t.classification
                nodes.append(TrialNode(t.trial_id, t.parent_trial_id, cls))
            self.cache[key] = frozenset().union(
                *(
                    resolve_reruns(nodes, limits).not_permitted
                    for limits in self._limits(trial.task_id)
                )
            )
        return trial.trial_id in self.cache[key]


def _summary(
    defs: Definitions, trial: Trial, builds: dict[str, str], reruns: _Reruns | None = None
) -> dict[str, Any]:
    current = rederive(defs, trial)
    labels = list(current.secondary_labels) if current else json.loads(trial.secondary_labels)
    if reruns is not None and reruns.not_permitted(defs, trial):
        labels.append(RERUN_NOT_PERMITTED)
    return {
        "trial_id": trial.trial_id,
        "task_id": trial.task_id,
        "build": builds.get(trial.execution_digest),
        "trial_index": trial.trial_index,
        "classification": current.primary if current else trial.classification,
        "classification_at_ingest": trial.classification,
        "secondary_labels": labels,
        "score": current.score if current else trial.score,
        "gating_score": counted_gating_score(
            current.primary if current else trial.classification,
            current.gating_score if current else trial.gating_score,
        ),
        "scored": current.scored if current else True,
        "parent_trial_id": trial.parent_trial_id,
        "completed_at": format_timestamp(trial.completed_at),
    }


def list_trials(
    engine: Engine,
    *,
    task: str | None = None,
    build: str | None = None,
    cls: str | None = None,
    suite: str | None = None,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The first `limit` matching trials (every one for None), oldest first, and how many
    match in all, read through the ORM.

    `trials list` reads through evalops/services/reads/trials.py (plain SQL, no ORM or spec
    models); this reading, built from the same summary and rerun rules as `trials show`, is
    what tests/services/test_read_differential.py holds that one to.

    Without `cls` the limit and the count are SQL (`LIMIT`, `COUNT`), the count stopping
    past `read_trials.count_cap(limit)`: listing 50 trials costs the same at 10k and at 1M
    stored trials. A trial's current class is re-derived
    from current evidence, so `cls` re-derives every trial the other filters leave.
    `suite` keeps the trials of the suite's current members at their pinned task and grader
    set digests (the trials the gate counts).
    """
    if cls is not None and cls not in CANONICAL_PRECEDENCE:
        raise InputError(
            f"unknown class {cls!r}; one of: {', '.join(CANONICAL_PRECEDENCE)}", field="--class"
        )
    with read_session(engine) as session:
        builds = _builds(session)
        where: list[Any] = []
        if task:
            where.append(Trial.task_id == task)
        if build:
            digests_for_build = [d for d, b in builds.items() if b == build]
            where.append(col(Trial.execution_digest).in_(digests_for_build))
        if suite:
            if queries.suite_row(session, suite) is None:
                raise InputError(not_registered(session, "suite", suite), field="--suite")
            pins = [
                and_(
                    col(Trial.task_digest) == m.task_digest,
                    col(Trial.grader_set_digest) == m.grader_set_digest,
                )
                for m in queries.members(session, suite)
            ]
            where.append(or_(false(), *pins))
        defs = Definitions(session)
        reruns = _Reruns(session)
        stmt = select(Trial).where(*where).order_by(col(Trial.id))
        if cls is None:
            if limit is None:
                rows = [_summary(defs, t, builds, reruns) for t in session.exec(stmt)]
                return rows, len(rows)
            matching = select(Trial.id).where(*where).limit(count_cap(limit) + 1)
            total = session.exec(select(func.count()).select_from(matching.subquery())).one()
            stmt = stmt.limit(limit)
            return [_summary(defs, t, builds, reruns) for t in session.exec(stmt)], total
        out: list[dict[str, Any]] = []
        total = 0
        for trial in session.exec(stmt):
            current = rederive(defs, trial)
            if (current.primary if current else trial.classification) != cls:
                continue
            total += 1
            if limit is None or len(out) < limit:
                out.append(_summary(defs, trial, builds, reruns))
        return out, total


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
    trial = session.exec(select(Trial).where(Trial.trial_id == trial_id)).first()
    if trial is None:
        raise InputError(f"unknown trial {trial_id!r} (list them with `evalops trials list`)")
    return trial


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
        return {
            **_summary(defs, trial, _builds(session), _Reruns(session)),
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
) -> dict[str, Any]:
    """Settle one `requested` or `unknown` effect (docs/classification.md).

    An effect recorded `committed` or `not_committed` is a fact of the run, and a settled
    effect stays settled: both refusals are audited and exit 5, so the built-in "committed
    twice" hard failure can never be reconciled away.
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
    with write_session(engine) as session:
        trial = _load(session, trial_id)
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
        if position is None:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.TRIALS_RECONCILE_REFUSED,
                subject=trial_id,
                payload={**request, "refusal": refusal},
            )
        else:
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
                },
                rows=[row],
            )
            summary = _summary(Definitions(session), trial, _builds(session))
    if refusal is not None:
        raise RefusedError(f"reconciliation of {effect_key} in {trial_id} refused: {refusal}")
    return {
        **summary,
        "reconciled": {"effect_key": effect_key, "index": position, "status": status},
    }
