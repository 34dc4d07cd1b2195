"""`evalops promote` and `evalops retire`: suite membership under the SuitePolicy.

Both run in one serialized write transaction: the facts are read, the pure engine decides,
and either the membership row and its audit event are written, or the refusal (with its
checklist) is recorded in the audit chain and nothing in the lifecycle changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.authority import Scope
from evalops.domain.canonical import canonical_text
from evalops.domain.classify import Classification
from evalops.domain.specs import SuitePolicy
from evalops.domain.suite_policy import (
    Checklist,
    EntryFacts,
    LinkedIncident,
    Replacement,
    Requirement,
    evaluate_entry,
    evaluate_retirement,
    incident_subject_refusal,
)
from evalops.errors import InputError
from evalops.services import incidents as incident_service
from evalops.services.authority import UNSIGNED, Signing, authorize, record_refusal
from evalops.services.definitions import Definitions, StaleClassifications, rederive
from evalops.services.policies import suite_policy_for
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import write_session
from evalops.store.tables import Incident, Promotion, SuiteMembership, TaskRevision, Trial

INCIDENT_ID = re.compile(r"^INC-\d+$")
INVALID_RUNS = ("infrastructure_invalid", "grader_invalid")
RETIRE_REASONS = ("obsolete", "unsupported", "replaced")


@dataclass(frozen=True)
class PromotionResult:
    checklist: Checklist
    subject: str
    task_id: str | None
    suite_id: str
    outcome: str
    """`accepted`, `refused`, `noop` (already a member with this pin), `dry_run`, or
    `dry_run_noop` (a dry run for a task already a member with this pin)."""
    membership: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.checklist.accepted

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.checklist.as_dict(),
            "subject": self.subject,
            "task_id": self.task_id,
            "suite": self.suite_id,
            "outcome": self.outcome,
            "membership": self.membership,
        }


def _valid_trials(
    session: Session, task: TaskRevision, grader_set_digest: str
) -> tuple[dict[str, int], dict[str, int]]:
    """(valid trials per execution, trials not counted by class and cause), classified from
    current evidence (not the ingest-time class: a calibration or reconciliation recorded
    since may have changed it). The task's trials are read as columns in batches; only those
    whose evidence changed since ingest, and the invalid ones (for their cause), are loaded
    whole and re-derived, so memory stays flat however many builds ran the task."""
    defs = Definitions(session)
    stale = StaleClassifications(session, defs)
    counts: dict[str, int] = {}
    uncounted: dict[str, int] = {}
    columns = (
        Trial.id,
        Trial.trial_id,
        Trial.classification,
        Trial.execution_digest,
        Trial.ingest_batch_id,
    )
    rows: Any = session.exec(
        select(*columns)  # type: ignore[call-overload]
        .where(
            Trial.task_id == task.task_id,
            Trial.task_digest == task.task_digest,
            Trial.grader_set_digest == grader_set_digest,
        )
        .execution_options(yield_per=2_000)
    )
    for row_id, trial_id, stored, execution_digest, batch_id in rows:
        current = None
        if stored in INVALID_RUNS or stale.needed(trial_id, grader_set_digest, batch_id):
            trial = session.get(Trial, row_id)
            assert trial is not None
            current = rederive(defs, trial)
            session.expunge(trial)
        cls = current.primary if current else stored
        if cls not in INVALID_RUNS:
            counts[execution_digest] = counts.get(execution_digest, 0) + 1
            continue
        key = uncounted_key(cls, current)
        uncounted[key] = uncounted.get(key, 0) + 1
    return counts, uncounted


def uncounted_key(cls: str, current: Classification | None) -> str:
    """An invalid trial's class with its cause, so a refusal says why it did not count."""
    why = next(
        (r.removeprefix(f"{cls}: ") for r in (current.reasons if current else ())
         if r.startswith(f"{cls}: ")),
        None,
    )  # fmt: skip
    return f"{cls} ({why})" if why else cls


def _linked_incidents(session: Session, task_id: str) -> list[LinkedIncident]:
    out = []
    for row in session.exec(select(Incident).order_by(col(Incident.number))).all():
        v = incident_service.view(session, row)
        if task_id in v.tasks:
            out.append(LinkedIncident(row.incident_id, v.state, v.was_confirmed))
    return out


def entry_facts(session: Session, task: TaskRevision) -> EntryFacts:
    spec = queries.task_spec(task)
    gs_row = queries.grader_set_row(session, spec.grader_set)
    grader_set = queries.grader_set_spec(gs_row) if gs_row else None
    validity = (
        queries.model_grader_validity(
            session, grader_set, json.loads(gs_row.document)["graders"], None
        )
        if grader_set and gs_row
        else {}
    )
    valid, uncounted = (
        _valid_trials(session, task, gs_row.grader_set_digest) if gs_row else ({}, {})
    )
    return EntryFacts(
        task=spec,
        task_file=task.file_path,
        task_digest=task.task_digest,
        grader_set=grader_set,
        grader_set_digest=gs_row.grader_set_digest if gs_row else None,
        calibration_states={gid: v.state for gid, v in validity.items()},
        calibration_reasons={gid: v.reasons for gid, v in validity.items()},
        valid_trials_by_execution=valid,
        uncounted_trials=uncounted,
        incidents=_linked_incidents(session, task.task_id),
    )


def _refusal_without_task(subject: str, suite_id: str, kind: str) -> Checklist:
    return Checklist(
        suite_id,
        kind,
        "",
        (
            Requirement(
                "linked_task",
                False,
                f"incident {subject} has no linked task that reproduces it",
                f"write a task that reproduces it, sync it, and run "
                f"`evalops incident link {subject} --task TASK`",
            ),
        ),
    )


def promote(
    engine: Engine,
    subject: str,
    suite_id: str,
    *,
    actor: str,
    now: datetime,
    reason: str | None = None,
    dry_run: bool = False,
) -> PromotionResult:
    with write_session(engine) as session:
        suite = queries.suite_row(session, suite_id)
        if suite is None:
            raise InputError(f"suite {suite_id!r} is not registered (run `evalops sync`)")
        suite_policy = SuitePolicy.model_validate(suite_policy_for(session, suite).document)
        incident_view = None
        if INCIDENT_ID.match(subject):
            incident_row = queries.incident(session, subject)
            if incident_row is None:
                raise InputError(f"unknown incident {subject!r}")
            incident_view = incident_service.view(session, incident_row)
            if not incident_view.tasks:
                checklist = _refusal_without_task(subject, suite_id, suite.kind)
                return _finish_refusal(
                    session, checklist, subject, None, suite_id, actor, now, reason, dry_run
                )
            task_id = incident_view.tasks[-1]
            unconfirmed = incident_subject_refusal(
                LinkedIncident(subject, incident_view.state, incident_view.was_confirmed),
                task_id,
                suite_id,
            )
        else:
            task_id = subject
            unconfirmed = None
        task = queries.task_row(session, task_id)
        if task is None:
            raise InputError(f"task {task_id!r} is not registered (run `evalops sync`)")
        facts = entry_facts(session, task)
        checklist = evaluate_entry(facts, queries.suite_spec(suite), suite_policy)
        if unconfirmed is not None:
            checklist = replace(checklist, requirements=(unconfirmed, *checklist.requirements))
        if not checklist.accepted:
            return _finish_refusal(
                session, checklist, subject, task_id, suite_id, actor, now, reason, dry_run
            )
        pin = {
            "task_id": task_id,
            "task_digest": task.task_digest,
            "grader_set_digest": facts.grader_set_digest,
        }
        current = {m.task_id: m for m in queries.members(session, suite_id)}.get(task_id)
        pinned_revision = (
            session.get(TaskRevision, current.added.task_revision_id) if current else None
        )
        # A new revision with the same digests (labels only) is a repin too: promoting it is
        # how a lower risk label takes effect (docs/gate.md, risk labels ratchet).
        same_pin = (
            current is not None
            and (current.task_digest, current.grader_set_digest)
            == (pin["task_digest"], pin["grader_set_digest"])
            and pinned_revision is not None
            and pinned_revision.revision == task.revision
        )
        if dry_run:
            outcome = "dry_run_noop" if same_pin else "dry_run"
            return PromotionResult(checklist, subject, task_id, suite_id, outcome, pin)
        if same_pin:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.PROMOTION_NOOP,
                subject=f"{suite_id}:{task_id}",
                payload={"subject": subject, **pin, "reason": "already a member with this pin"},
            )
            return PromotionResult(checklist, subject, task_id, suite_id, "noop", pin)
        action = "repinned" if current is not None else "added"
        seq = next_seq(session)
        promotion = Promotion(
            subject=subject,
            task_id=task_id,
            suite_id=suite_id,
            accepted=True,
            requirements=canonical_text(checklist.as_dict()["requirements"]),
            reason=reason,
            at=now,
            actor=actor,
            audit_seq=seq,
        )
        session.add(promotion)
        session.flush()
        membership = SuiteMembership(
            suite_id=suite_id,
            task_id=task_id,
            action=action,
            task_digest=task.task_digest,
            grader_set_digest=str(facts.grader_set_digest),
            task_revision_id=task.id,
            promotion_id=promotion.id,
            reason=reason,
            at=now,
            actor=actor,
            audit_seq=seq,
        )
        session.add(membership)
        append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.PROMOTION_ACCEPTED,
            subject=f"{suite_id}:{task_id}",
            payload={
                "subject": subject,
                "action": action,
                **pin,
                "requirements": checklist.as_dict()["requirements"],
                "reason": reason,
            },
            rows=[promotion, membership],
        )
        if incident_view is not None and incident_view.state not in ("promoted", "closed"):
            incident_service.move(
                session,
                incident_view,
                action="promote",
                state="promoted",
                task_id=task_id,
                reason=f"promoted to {suite_id}",
                actor=actor,
                now=now,
            )
        return PromotionResult(
            checklist, subject, task_id, suite_id, "accepted", {**pin, "action": action}
        )


def _finish_refusal(
    session: Session,
    checklist: Checklist,
    subject: str,
    task_id: str | None,
    suite_id: str,
    actor: str,
    now: datetime,
    reason: str | None,
    dry_run: bool,
) -> PromotionResult:
    if dry_run:
        return PromotionResult(checklist, subject, task_id, suite_id, "dry_run")
    requirements = checklist.as_dict()["requirements"]
    refusal = Promotion(
        subject=subject,
        task_id=task_id,
        suite_id=suite_id,
        accepted=False,
        requirements=canonical_text(requirements),
        reason=reason,
        at=now,
        actor=actor,
        audit_seq=next_seq(session),
    )
    session.add(refusal)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.PROMOTION_REFUSED,
        subject=f"{suite_id}:{task_id or subject}",
        payload={"subject": subject, "task_id": task_id, "requirements": requirements},
        rows=[refusal],
    )
    return PromotionResult(checklist, subject, task_id, suite_id, "refused")


def retire(
    engine: Engine,
    task_id: str,
    suite_id: str,
    *,
    reason: str,
    approved_by: str | None,
    replaced_by: str | None,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
) -> PromotionResult:
    """Retire a member when the suite policy's removal rules are met. With an authority in
    force the retirement is a risk owner's signed act, and its signers are the approval."""
    if reason not in RETIRE_REASONS:
        raise InputError(
            f"reason {reason!r} is not one of {', '.join(RETIRE_REASONS)}", field="--reason"
        )
    with write_session(engine) as session:
        suite = queries.suite_row(session, suite_id)
        if suite is None:
            raise InputError(f"suite {suite_id!r} is not registered (run `evalops sync`)")
        suite_policy = SuitePolicy.model_validate(suite_policy_for(session, suite).document)
        current = {m.task_id: m for m in queries.members(session, suite_id)}
        member = current.get(task_id)
        if member is None:
            raise InputError(f"task {task_id!r} is not a member of {suite_id}")
        task = queries.task_row(session, task_id)
        assert task is not None
        spec = queries.task_spec(task)
        authorized = authorize(
            session,
            kind="retire",
            body={
                "task_id": task_id,
                "suite_id": suite_id,
                "reason": reason,
                "replaced_by": replaced_by,
            },
            scope=Scope(suite=suite_id, task=task_id),
            signing=signing,
            now=now,
        )
        if authorized.refused:
            refusal = record_refusal(
                session, authorized, subject=f"{suite_id}:{task_id}", actor=actor, now=now
            )
            fix = "sign it: --sign-with KEY, or --print-act then --act FILE --signature FILE"
            refused = Requirement("authority", False, refusal["message"], fix)
            checklist = Checklist(suite_id, "retirement", task_id, (refused,))
            return PromotionResult(checklist, task_id, task_id, suite_id, "refused")
        if authorized.signed and approved_by is None:
            approved_by = ", ".join(s.principal for s in authorized.judgement.signers)
        gs_row = queries.grader_set_by_digest(session, member.grader_set_digest)
        grader_set = queries.grader_set_spec(gs_row) if gs_row else None
        replacement = None
        extra: list[Requirement] = []
        if replaced_by is not None:
            new_task = queries.task_row(session, replaced_by)
            if new_task is None:
                raise InputError(f"replacement task {replaced_by!r} is not registered")
            new_spec = queries.task_spec(new_task)
            new_member = current.get(replaced_by)
            new_gs = (
                queries.grader_set_by_digest(session, new_member.grader_set_digest)
                if new_member
                else queries.grader_set_row(session, new_spec.grader_set)
            )
            replacement = Replacement(new_spec, queries.grader_set_spec(new_gs) if new_gs else None)
            extra.append(
                Requirement(
                    "replacement_member", True, f"{replaced_by} is a member of {suite_id}", None
                )
                if new_member
                else Requirement(
                    "replacement_member",
                    False,
                    f"{replaced_by} is not a member of {suite_id}",
                    f"promote it first: `evalops promote {replaced_by} --to {suite_id}`",
                )
            )
        base = evaluate_retirement(
            task=spec,
            grader_set=grader_set,
            reason=reason,
            approved_by=approved_by,
            replacement=replacement,
            policy=suite_policy,
        )
        checklist = Checklist(suite_id, "retirement", task_id, (*base.requirements, *extra))
        payload = {
            "reason": reason,
            "approved_by": approved_by,
            "replaced_by": replaced_by,
            "requirements": checklist.as_dict()["requirements"],
        }
        kind = (
            audit_kinds.RETIREMENT_ACCEPTED
            if checklist.accepted
            else audit_kinds.RETIREMENT_REFUSED
        )
        if not checklist.accepted:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=kind,
                subject=f"{suite_id}:{task_id}",
                payload=payload,
            )
            return PromotionResult(checklist, task_id, task_id, suite_id, "refused")
        retirement = SuiteMembership(
            suite_id=suite_id,
            task_id=task_id,
            action="retired",
            task_digest=member.task_digest,
            grader_set_digest=member.grader_set_digest,
            task_revision_id=member.added.task_revision_id,
            reason=reason,
            approved_by=approved_by,
            replaced_by=replaced_by,
            at=now,
            actor=actor,
            audit_seq=next_seq(session),
        )
        session.add(retirement)
        act_row = authorized.add_row(session, f"{suite_id}:{task_id}", retirement.audit_seq)
        append_event(
            session,
            at=now,
            actor=actor,
            kind=kind,
            subject=f"{suite_id}:{task_id}",
            payload={**payload, **authorized.payload()},
            rows=[retirement] if act_row is None else [retirement, act_row],
        )
        return PromotionResult(checklist, task_id, task_id, suite_id, "accepted")
