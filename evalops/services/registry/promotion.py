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
from evalops.domain.authority import Scope, signatures_needed, who_may_sign
from evalops.domain.canonical import canonical_text
from evalops.domain.classify import Classification
from evalops.domain.free_text import has_visible_text
from evalops.domain.limits import MAX_FREE_TEXT_CHARS
from evalops.domain.reruns import RERUN_NOT_PERMITTED, TrialNode, resolve_reruns
from evalops.domain.retirement_reason import RETIRE_KINDS, RetirementReason
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
from evalops.services.authority.acts import (
    UNSIGNED,
    Authorized,
    Signing,
    authority_in_force,
    authorize,
    record_refusal,
)
from evalops.services.gate.policies import gate_policies_of_task, max_attempts, suite_policy_for
from evalops.services.placeholders import refuse_placeholder
from evalops.services.registry import incidents as incident_service
from evalops.services.registry.definitions import Definitions, StaleClassifications, rederive
from evalops.services.registry.unknown_ids import not_registered, unknown_incident
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import write_session
from evalops.store.queries import Member
from evalops.store.tables import (
    Incident,
    Promotion,
    SuiteMembership,
    SuiteRow,
    TaskRevision,
    Trial,
)

INCIDENT_ID = re.compile(r"^INC-\d+$")
INVALID_RUNS = ("infrastructure_invalid", "grader_invalid")


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
    signing: tuple[list[str], int] | None = None
    """Under an authority, for a dry run: who may sign the act the promotion needs (the
    principals whose role covers the suite and task; empty: nobody can) and how many of
    them must. None without one."""
    incident_promoted: bool = False
    """An incident promoted by this call whose task was already a member with this pin: the
    membership is unchanged, the incident moves to promoted (its task guards it). In a dry
    run: it would."""

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
            "incident_promoted": self.incident_promoted,
            "signers": None if self.signing is None else self.signing[0],
            "signatures_needed": None if self.signing is None else self.signing[1],
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
        Trial.parent_trial_id,
    )
    rows: Any = session.exec(
        select(*columns)  # type: ignore[call-overload]
        .where(
            Trial.task_id == task.task_id,
            Trial.task_digest == task.task_digest,
            Trial.grader_set_digest == grader_set_digest,
            ~queries.voided(None),  # a voided trial is evidence of nothing
        )
        .execution_options(yield_per=2_000)
    )
    # Each eval case's trials as rerun chains, so that a rerun counts exactly where the
    # gate lets it stand in (its policy's attempt limits, the first rerun of a trial only;
    # no policy governing the task: none), as `trials list` flags the others.
    nodes: dict[str, list[TrialNode]] = {}
    for row_id, trial_id, stored, execution_digest, batch_id, parent in rows:
        current = None
        if stored in INVALID_RUNS or stale.needed(trial_id, grader_set_digest, batch_id):
            trial = session.get(Trial, row_id)
            assert trial is not None
            current = rederive(defs, trial)
            session.expunge(trial)
        cls = current.primary if current else stored
        nodes.setdefault(execution_digest, []).append(TrialNode(trial_id, parent, cls))
        if cls in INVALID_RUNS:
            key = uncounted_key(cls, current)
            uncounted[key] = uncounted.get(key, 0) + 1
    try:
        governing = gate_policies_of_task(session, task.task_id)
    except InputError:  # its suite names no policy in force: none governs, none stands in
        governing = []
    limits = [max_attempts(p) for p in governing] or [{}]
    for execution_digest, chain in nodes.items():
        refused = frozenset().union(*(resolve_reruns(chain, lim).not_permitted for lim in limits))
        for node in chain:
            if node.classification in INVALID_RUNS:
                continue
            if node.trial_id in refused:
                key = f"{RERUN_NOT_PERMITTED} (a rerun the gate's rerun rules do not let stand in)"
                uncounted[key] = uncounted.get(key, 0) + 1
            else:
                counts[execution_digest] = counts.get(execution_digest, 0) + 1
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
    signing: Signing = UNSIGNED,
) -> PromotionResult:
    """Promote a task (or an incident's linked task) into a suite, in steps: the suite and
    its policy, the subject's task, the entry checklist, the pin (a no-op when already a
    member with it), the authority's judgement of the act (with an authority in force, a
    new member or a new pin is a risk owner's signed `suite.promote`), then the promotion,
    the membership and their audit event."""
    refuse_placeholder("the task", subject, "a task id, or an incident id (INC-<n>)")
    with write_session(engine) as session:
        suite, suite_policy = _suite_and_policy(session, suite_id)
        named = _subject(session, subject, suite_id)
        if named.task_id is None:
            checklist = _refusal_without_task(subject, suite_id, suite.kind)
            return _finish_refusal(
                session, checklist, subject, None, suite_id, actor, now, reason, dry_run
            )
        task_id = named.task_id
        task = queries.task_row(session, task_id)
        if task is None:
            raise InputError(not_registered(session, "task", task_id))
        facts = entry_facts(session, task)
        checklist = evaluate_entry(facts, queries.suite_spec(suite), suite_policy)
        if named.unconfirmed is not None:
            checklist = replace(
                checklist, requirements=(named.unconfirmed, *checklist.requirements)
            )
        if not checklist.accepted:
            return _finish_refusal(
                session, checklist, subject, task_id, suite_id, actor, now, reason, dry_run
            )
        pin = {
            "task_id": task_id,
            "task_digest": task.task_digest,
            "grader_set_digest": facts.grader_set_digest,
        }
        current, same_pin = _current_pin(session, suite_id, task, pin)
        if dry_run:
            outcome = "dry_run_noop" if same_pin else "dry_run"
            return PromotionResult(
                checklist,
                subject,
                task_id,
                suite_id,
                outcome,
                pin,
                signing=None if same_pin else _who_may_sign(session, suite_id, task_id),
                # What the real run would do to the incident (a dry run moves nothing).
                incident_promoted=same_pin and _incident_would_move(named),
            )
        if same_pin:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.PROMOTION_NOOP,
                subject=f"{suite_id}:{task_id}",
                payload={"subject": subject, **pin, "reason": "already a member with this pin"},
            )
            # The incident's task guards it already: the incident is promoted, else it would
            # stay "reproduced" for good and read as unguarded.
            moved = _promote_incident(named, task_id, suite_id, session, actor, now)
            return PromotionResult(
                checklist, subject, task_id, suite_id, "noop", pin, incident_promoted=moved
            )
        action = "repinned" if current is not None else "added"
        act = _Act(subject, suite_id, actor, now, reason)
        authorized = authorize(
            session,
            kind="suite.promote",
            body={"subject": subject, "suite_id": suite_id, **pin, "action": action,
                  "reason": reason},
            scope=Scope(suite=suite_id, task=task_id),
            signing=signing,
            now=now,
        )  # fmt: skip
        if authorized.refused:
            return _authority_refusal(
                session, authorized, replace(act, subject=task_id), "promotion", subject
            )
        _record_promotion(session, act, checklist, task, {**pin, "action": action}, authorized)
        _promote_incident(named, task_id, suite_id, session, actor, now)
        return PromotionResult(
            checklist, subject, task_id, suite_id, "accepted", {**pin, "action": action}
        )


def _who_may_sign(
    session: Session, suite_id: str, task_id: str, kind: str = "suite.promote"
) -> tuple[list[str], int] | None:
    """(the principals whose role covers the act `kind` for this task and suite, how many
    of them must sign it) under the authority in force (None without one): what a dry run
    or a refusal can say before the act is signed, since the authority judges only a
    signed act."""
    found = authority_in_force(session)
    if found is None:
        return None
    authority = found[0]
    return who_may_sign(authority, kind, Scope(suite=suite_id, task=task_id)), signatures_needed(
        authority, kind
    )


def signers_wanted(may: tuple[list[str], int]) -> str:
    """`alice`, `one of alice, bob`, `2 of alice, bob, carol`, or that nobody may."""
    who, needed = may
    if not who:
        return "nobody: no principal's role covers it; a policy owner must change the authority"
    if needed > 1:
        return f"{needed} of {', '.join(who)}"
    return who[0] if len(who) == 1 else f"one of {', '.join(who)}"


def _incident_would_move(named: _Subject) -> bool:
    return named.incident is not None and named.incident.state not in ("promoted", "closed")


def _promote_incident(
    named: _Subject, task_id: str, suite_id: str, session: Session, actor: str, now: datetime
) -> bool:
    """Move the incident `promote` was asked about to promoted (once): whether it moved."""
    if named.incident is None or not _incident_would_move(named):  # None: for the type
        return False
    incident_service.move(
        session,
        named.incident,
        action="promote",
        state="promoted",
        task_id=task_id,
        reason=f"promoted to {suite_id}",
        actor=actor,
        now=now,
    )
    return True


def _suite_and_policy(session: Session, suite_id: str) -> tuple[SuiteRow, SuitePolicy]:
    """The suite as registered and the suite policy that governs it."""
    suite = queries.suite_row(session, suite_id)
    if suite is None:
        raise InputError(not_registered(session, "suite", suite_id))
    return suite, SuitePolicy.model_validate(suite_policy_for(session, suite).document)


@dataclass(frozen=True)
class _Subject:
    """What `promote` was asked to promote: a task, or an incident and its last linked
    task (None: it has none) with the requirement an unconfirmed incident adds."""

    task_id: str | None
    incident: incident_service.IncidentView | None = None
    unconfirmed: Requirement | None = None


def _subject(session: Session, subject: str, suite_id: str) -> _Subject:
    if not INCIDENT_ID.match(subject):
        return _Subject(subject)
    incident_row = queries.incident(session, subject)
    if incident_row is None:
        raise InputError(unknown_incident(session, subject))
    incident_view = incident_service.view(session, incident_row)
    if not incident_view.tasks:
        return _Subject(None, incident_view)
    task_id = incident_view.tasks[-1]
    unconfirmed = incident_subject_refusal(
        LinkedIncident(subject, incident_view.state, incident_view.was_confirmed),
        task_id,
        suite_id,
    )
    return _Subject(task_id, incident_view, unconfirmed)


def _current_pin(
    session: Session, suite_id: str, task: TaskRevision, pin: dict[str, Any]
) -> tuple[Member | None, bool]:
    """The task's current membership of the suite, and whether `pin` is already its pin."""
    current = {m.task_id: m for m in queries.members(session, suite_id)}.get(pin["task_id"])
    pinned_revision = session.get(TaskRevision, current.added.task_revision_id) if current else None
    # A revision in force other than the pinned one, with the same digests (labels only,
    # whether its `revision` was bumped or not), is a repin too: promoting it is how a lower
    # risk label takes effect (docs/gate.md, risk labels ratchet), and how an estimation
    # suite counts a member's corrected stratum (docs/estimation.md).
    same_pin = (
        current is not None
        and (current.task_digest, current.grader_set_digest)
        == (pin["task_digest"], pin["grader_set_digest"])
        and pinned_revision is not None
        and pinned_revision.id == task.id
    )
    return current, same_pin


@dataclass(frozen=True)
class _Act:
    """Who promotes what into which suite, when and why (what the rows record)."""

    subject: str
    suite_id: str
    actor: str
    now: datetime
    reason: str | None


def _record_promotion(
    session: Session,
    act: _Act,
    checklist: Checklist,
    task: TaskRevision,
    pin: dict[str, Any],
    authorized: Authorized,
) -> None:
    """The accepted promotion, the membership row it adds (`pin["action"]`: added or
    repinned), the signed act's row if any, and their one audit event."""
    task_id, action = pin["task_id"], pin["action"]
    seq = next_seq(session)
    promotion = Promotion(
        subject=act.subject,
        task_id=task_id,
        suite_id=act.suite_id,
        accepted=True,
        requirements=canonical_text(checklist.as_dict()["requirements"]),
        reason=act.reason,
        at=act.now,
        actor=act.actor,
        audit_seq=seq,
    )
    session.add(promotion)
    session.flush()
    membership = SuiteMembership(
        suite_id=act.suite_id,
        task_id=task_id,
        action=action,
        task_digest=task.task_digest,
        grader_set_digest=str(pin["grader_set_digest"]),
        task_revision_id=task.id,
        promotion_id=promotion.id,
        reason=act.reason,
        at=act.now,
        actor=act.actor,
        audit_seq=seq,
    )
    session.add(membership)
    act_row = authorized.add_row(session, f"{act.suite_id}:{task_id}", seq)
    append_event(
        session,
        at=act.now,
        actor=act.actor,
        kind=audit_kinds.PROMOTION_ACCEPTED,
        subject=f"{act.suite_id}:{task_id}",
        payload={
            "subject": act.subject,
            "action": action,
            "task_id": task_id,
            "task_digest": pin["task_digest"],
            "grader_set_digest": pin["grader_set_digest"],
            "requirements": checklist.as_dict()["requirements"],
            "reason": act.reason,
            **authorized.payload(),
        },
        rows=[promotion, membership] if act_row is None else [promotion, membership, act_row],
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
    dry_run: bool = False,
    kind: str | None = None,
) -> PromotionResult:
    """Retire a member when the suite policy's removal rules are met. With an authority in
    force the retirement is a risk owner's signed act, and its signers are the approval.
    `dry_run`: the policy's checklist only, nothing written (the authority judges the
    signed act when it is given for real).

    In steps: the suite and its policy, the member, the authority's judgement of the act,
    the replacement, the retirement checklist, then the retirement row and its event (or
    the refusal's event)."""
    why = retirement_reason(kind, reason)
    with write_session(engine) as session:
        _, suite_policy = _suite_and_policy(session, suite_id)
        current = {m.task_id: m for m in queries.members(session, suite_id)}
        member = current.get(task_id)
        if member is None:
            raise InputError(f"task {task_id!r} is not a member of {suite_id}")
        # The revision the suite holds, not the one in force: a newer revision never
        # entered the suite, and the file may have left the tracked branch since.
        task = queries.pinned_task_row(session, member)
        if task is None:
            raise InputError(
                f"suite member {task_id} pins task_digest {member.task_digest}, which is not "
                "registered: the database was changed outside evalops (run `evalops verify`)"
            )
        spec = queries.task_spec(task)
        act = _Act(task_id, suite_id, actor, now, why.stored())
        if dry_run:
            return _retirement_checklist(
                session, spec, member, current, suite_policy, act, why, approved_by, replaced_by
            )
        authorized = authorize(
            session,
            kind="retire",
            body={
                "task_id": task_id,
                "suite_id": suite_id,
                **why.act_fields(),
                "replaced_by": replaced_by,
            },
            scope=Scope(suite=suite_id, task=task_id),
            signing=signing,
            now=now,
        )
        if authorized.refused:
            return _authority_refusal(session, authorized, act, "retirement", task_id)
        if authorized.signed and approved_by is None:
            approved_by = ", ".join(s.principal for s in authorized.judgement.signers)
        gs_row = queries.grader_set_by_digest(session, member.grader_set_digest)
        grader_set = queries.grader_set_spec(gs_row) if gs_row else None
        replacement, extra = _replacement(session, current, replaced_by, suite_id, task_id)
        base = evaluate_retirement(
            task=spec,
            grader_set=grader_set,
            reason=why.text or "",
            kind=why.kind,
            approved_by=approved_by,
            replacement=replacement,
            policy=suite_policy,
        )
        checklist = Checklist(suite_id, "retirement", task_id, (*base.requirements, *extra))
        payload = {
            **why.as_dict(),
            "approved_by": approved_by,
            "replaced_by": replaced_by,
            "requirements": checklist.as_dict()["requirements"],
        }
        if not checklist.accepted:
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.RETIREMENT_REFUSED,
                subject=f"{suite_id}:{task_id}",
                payload=payload,
            )
            return PromotionResult(checklist, task_id, task_id, suite_id, "refused")
        _record_retirement(session, act, member, payload, authorized)
        return PromotionResult(checklist, task_id, task_id, suite_id, "accepted")


def retirement_reason(kind: str | None, reason: str) -> RetirementReason:
    """`--kind` and `--reason` as a retirement's kind and text. Without `--kind` the reason
    must be one of the kinds (the form `retire` had before `--kind`): it is both."""
    kinds = ", ".join(RETIRE_KINDS)
    if kind is None:
        if reason not in RETIRE_KINDS:
            raise InputError(
                f"reason {reason!r} needs --kind ({kinds}); without --kind the reason must be"
                f" one of {kinds}",
                field="--reason",
            )
        return RetirementReason(reason, reason)
    if kind not in RETIRE_KINDS:
        raise InputError(f"kind {kind!r} is not one of {kinds}", field="--kind")
    if not has_visible_text(reason):
        raise InputError("a retirement needs a reason with a visible character", field="--reason")
    if len(reason) > MAX_FREE_TEXT_CHARS:
        raise InputError(
            f"--reason is {len(reason)} characters, at most {MAX_FREE_TEXT_CHARS}", field="--reason"
        )
    return RetirementReason(kind, reason)


def _retirement_checklist(
    session: Session,
    spec: Any,
    member: Member,
    current: dict[str, Member],
    suite_policy: Any,
    act: _Act,
    why: RetirementReason,
    approved_by: str | None,
    replaced_by: str | None,
) -> PromotionResult:
    """What `retire --dry-run` shows: the checklist the retirement would be judged by."""
    gs_row = queries.grader_set_by_digest(session, member.grader_set_digest)
    grader_set = queries.grader_set_spec(gs_row) if gs_row else None
    replacement, extra = _replacement(session, current, replaced_by, act.suite_id, act.subject)
    base = evaluate_retirement(
        task=spec,
        grader_set=grader_set,
        reason=why.text or "",
        kind=why.kind,
        approved_by=approved_by,
        replacement=replacement,
        policy=suite_policy,
    )
    checklist = Checklist(act.suite_id, "retirement", act.subject, (*base.requirements, *extra))
    return PromotionResult(checklist, act.subject, act.subject, act.suite_id, "dry_run")


def _authority_refusal(
    session: Session, authorized: Authorized, act: _Act, what: str, subject: str
) -> PromotionResult:
    """A retirement or promotion the authority in force refused: the refusal is recorded,
    nothing else."""
    task_id, suite_id = act.subject, act.suite_id
    refusal = record_refusal(
        session, authorized, subject=f"{suite_id}:{task_id}", actor=act.actor, now=act.now
    )
    kind = "suite.promote" if what == "promotion" else "retire"
    may = _who_may_sign(session, suite_id, task_id, kind) or ([], 1)
    fix = (
        f"a new act signed by {signers_wanted(may)} (--sign-with KEY, or --print-act then "
        "--act FILE --signature FILE)"
    )
    refused = Requirement("authority", False, refusal["message"], fix)
    checklist = Checklist(suite_id, what, task_id, (refused,))
    return PromotionResult(checklist, subject, task_id, suite_id, "refused")


def _replacement(
    session: Session,
    current: dict[str, Member],
    replaced_by: str | None,
    suite_id: str,
    retired: str,
) -> tuple[Replacement | None, list[Requirement]]:
    """The replacing task (its spec and grader set) and the requirement that it is already
    a member of the suite; nothing when the retirement names no replacement."""
    if replaced_by is None:
        return None, []
    new_member = current.get(replaced_by)
    # A member covers what its pinned revision states; a newer revision of it, never
    # promoted, is not in the suite and covers nothing there.
    new_task = (
        queries.pinned_task_row(session, new_member)
        if new_member
        else queries.task_row(session, replaced_by)
    )
    if new_task is None:
        raise InputError("replacement " + not_registered(session, "task", replaced_by))
    new_spec = queries.task_spec(new_task)
    new_gs = (
        queries.grader_set_by_digest(session, new_member.grader_set_digest)
        if new_member
        else queries.grader_set_row(session, new_spec.grader_set)
    )
    replacement = Replacement(new_spec, queries.grader_set_spec(new_gs) if new_gs else None)
    if replaced_by == retired:
        # Retired, it would leave the suite with nothing covering what it covered.
        return replacement, [
            Requirement(
                "replacement_member",
                False,
                f"{replaced_by} cannot replace itself: retired, it leaves the suite",
                "name the member that takes over its coverage with --replaced-by",
            )
        ]
    member_requirement = (
        Requirement("replacement_member", True, f"{replaced_by} is a member of {suite_id}", None)
        if new_member
        else Requirement(
            "replacement_member",
            False,
            f"{replaced_by} is not a member of {suite_id}",
            f"promote it first: `evalops promote {replaced_by} --to {suite_id}`",
        )
    )
    return replacement, [member_requirement]


def _record_retirement(
    session: Session,
    act: _Act,
    member: Member,
    payload: dict[str, Any],
    authorized: Authorized,
) -> None:
    """The retirement row (the member's pin, retired), the signed act's row if any, and
    their one audit event."""
    task_id, suite_id = act.subject, act.suite_id
    retirement = SuiteMembership(
        suite_id=suite_id,
        task_id=task_id,
        action="retired",
        task_digest=member.task_digest,
        grader_set_digest=member.grader_set_digest,
        task_revision_id=member.added.task_revision_id,
        reason=act.reason,
        approved_by=payload["approved_by"],
        replaced_by=payload["replaced_by"],
        at=act.now,
        actor=act.actor,
        audit_seq=next_seq(session),
    )
    session.add(retirement)
    act_row = authorized.add_row(session, f"{suite_id}:{task_id}", retirement.audit_seq)
    append_event(
        session,
        at=act.now,
        actor=act.actor,
        kind=audit_kinds.RETIREMENT_ACCEPTED,
        subject=f"{suite_id}:{task_id}",
        payload={**payload, **authorized.payload()},
        rows=[retirement] if act_row is None else [retirement, act_row],
    )
