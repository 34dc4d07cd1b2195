"""Reads the services share: the current definition of each id, memberships, incidents."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from sqlalchemy import and_, true
from sqlmodel import Session, SQLModel, col, func, select

from evalops.domain import digests, labels
from evalops.domain.calibration_validity import StoredCalibration, Validity, calibration_validity
from evalops.domain.facts import TaskHeadFacts
from evalops.domain.registry_identity import registry_id as of_first_event
from evalops.domain.specs import EvalTaskSpec, Grader, GraderSet, SuiteDeclaration
from evalops.store.tables import (
    AuditEvent,
    Calibration,
    CalibrationInvalidation,
    ExecutionProfileRow,
    GraderConfig,
    GraderSetRow,
    Incident,
    IncidentEvent,
    PolicyRow,
    SuiteMembership,
    SuiteRow,
    SyncInForce,
    SyncRun,
    TaskRevision,
)

Row = TypeVar("Row", bound=SQLModel)


def _newest(session: Session, table: type[Row], *where: Any) -> Row | None:
    """The most recently registered row (highest id) matching `where`."""
    stmt = select(table).where(*where).order_by(col(table.id).desc()).limit(1)  # type: ignore[attr-defined]
    return session.exec(stmt).first()


def in_force_row(session: Session, kind: str, definition_id: str, cutoff: int | None = None) -> Any:
    """The registered row of `kind` `definition_id` in force (docs/digests.md), or None.

    "The newest registered" definition in the contract means this one: the latest sync
    says what its commit holds, so a revert puts an earlier definition back in force and a
    deleted file is in force no more.
    """
    run = latest_sync_run(session, cutoff)
    if run is None:
        return None
    forced = session.exec(
        select(SyncInForce).where(
            SyncInForce.sync_run_id == run.id,
            SyncInForce.kind == kind,
            SyncInForce.definition_id == definition_id,
        )
    ).first()
    if forced is None:
        return None
    table, id_column = DEFINITION_TABLES[kind]
    stmt = select(table).where(
        getattr(table, id_column) == definition_id,
        table.document_digest == forced.document_digest,  # type: ignore[attr-defined]
    )
    if table is PolicyRow:
        stmt = stmt.where(PolicyRow.kind == kind)
    return session.exec(stmt.order_by(col(table.id))).first()  # type: ignore[attr-defined]


def task_row(session: Session, task_id: str, cutoff: int | None = None) -> TaskRevision | None:
    """The task revision in force."""
    row: TaskRevision | None = in_force_row(session, "task", task_id, cutoff)
    return row


def newest_task_row(session: Session, task_id: str) -> TaskRevision | None:
    """The highest registered revision, newest labels (for history views)."""
    stmt = (
        select(TaskRevision)
        .where(TaskRevision.task_id == task_id)
        .order_by(col(TaskRevision.revision).desc(), col(TaskRevision.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def pinned_task_row(session: Session, member: Member) -> TaskRevision | None:
    """The task revision a suite member is pinned to (the revision its pin was set at,
    else the newest registered with its pinned digest): what the suite holds, whatever
    revision is in force now."""
    if member.added.task_revision_id is not None:
        row = session.get(TaskRevision, member.added.task_revision_id)
        if row is not None:
            return row
    found: TaskRevision | None = session.exec(
        select(TaskRevision)
        .where(
            TaskRevision.task_id == member.task_id, TaskRevision.task_digest == member.task_digest
        )
        .order_by(col(TaskRevision.id).desc())
        .limit(1)
    ).first()
    return found


def task_spec(row: TaskRevision) -> EvalTaskSpec:
    return EvalTaskSpec.model_validate(json.loads(row.document))


def grader_set_row(
    session: Session, grader_set_id: str, cutoff: int | None = None
) -> GraderSetRow | None:
    """The grader set in force with this id."""
    row: GraderSetRow | None = in_force_row(session, "grader_set", grader_set_id, cutoff)
    return row


def grader_set_by_digest(
    session: Session, grader_set_digest: str, cutoff: int | None = None
) -> GraderSetRow | None:
    return _newest(
        session,
        GraderSetRow,
        GraderSetRow.grader_set_digest == grader_set_digest,
        upto(GraderSetRow.audit_seq, cutoff),
    )


def grader_set_spec(row: GraderSetRow) -> GraderSet:
    return GraderSet.model_validate(json.loads(row.document))


def suite_row(session: Session, suite_id: str, cutoff: int | None = None) -> SuiteRow | None:
    """The suite declaration in force."""
    row: SuiteRow | None = in_force_row(session, "suite", suite_id, cutoff)
    return row


def suite_spec(row: SuiteRow) -> SuiteDeclaration:
    return SuiteDeclaration.model_validate(json.loads(row.document))


def effective_labels(
    session: Session, task_id: str, pinned_revision_id: int | None, cutoff: int | None = None
) -> tuple[str, list[str]]:
    """Risk and protects as the gate and waivers read them (docs/gate.md, "Risk labels ratchet").

    The strictest labels among the pinned revision and every later registered revision of
    the task: highest risk, union of `protects`. With no pin (not a member), every
    registered revision counts.
    """
    rows = session.exec(
        select(TaskRevision)
        .where(TaskRevision.task_id == task_id, upto(TaskRevision.audit_seq, cutoff))
        .order_by(col(TaskRevision.id))
    ).all()
    return strictest_labels(list(rows), pinned_revision_id)


def strictest_labels(
    rows: list[TaskRevision],
    pinned_revision_id: int | None,
    spec_of: Callable[[TaskRevision], TaskHeadFacts] = task_spec,
) -> tuple[str, list[str]]:
    """The ratchet over one task's registered rows (see `effective_labels`)."""
    return labels.strictest_labels(rows, pinned_revision_id, spec_of)


class MembershipRow(Protocol):
    """A `suite_membership` row as `members` reads it: its columns, read-only (a plain row
    of a Core read, not an ORM object: a suite of 10,000 members is read for every gate)."""

    @property
    def id(self) -> int | None: ...
    @property
    def suite_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def task_digest(self) -> str: ...
    @property
    def grader_set_digest(self) -> str: ...
    @property
    def task_revision_id(self) -> int | None: ...
    @property
    def promotion_id(self) -> int | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def approved_by(self) -> str | None: ...
    @property
    def replaced_by(self) -> str | None: ...
    @property
    def at(self) -> datetime: ...
    @property
    def actor(self) -> str: ...
    @property
    def audit_seq(self) -> int: ...


_MEMBERSHIP_COLUMNS = (
    SuiteMembership.id,
    SuiteMembership.suite_id,
    SuiteMembership.task_id,
    SuiteMembership.action,
    SuiteMembership.task_digest,
    SuiteMembership.grader_set_digest,
    SuiteMembership.task_revision_id,
    SuiteMembership.promotion_id,
    SuiteMembership.reason,
    SuiteMembership.approved_by,
    SuiteMembership.replaced_by,
    SuiteMembership.at,
    SuiteMembership.actor,
    SuiteMembership.audit_seq,
)


class Member(NamedTuple):
    """A suite member's current pin, and how it got there. A named tuple, not a frozen
    dataclass: a suite of 10,000 tasks makes 10,000 of them per gate check, and a frozen
    dataclass's `__init__` sets each field through `object.__setattr__`."""

    suite_id: str
    task_id: str
    task_digest: str
    grader_set_digest: str
    added: MembershipRow
    """The row that set the current pin (added or repinned)."""
    removed: MembershipRow | None = None


def members(
    session: Session, suite_id: str, *, include_removed: bool = False, cutoff: int | None = None
) -> list[Member]:
    """Fold the append-only membership rows into each task's current state."""
    # Columns, not entities (no ORM object per row), read by Core on the session's
    # connection (the ORM's execution costs more per row than the rest of this function),
    # after flushing what a caller added first, as the session's own reads do.
    session.flush()
    rows: Any = session.connection().execute(
        select(*_MEMBERSHIP_COLUMNS)  # type: ignore[call-overload]
        .where(SuiteMembership.suite_id == suite_id, upto(SuiteMembership.audit_seq, cutoff))
        .order_by(col(SuiteMembership.id))
    )
    state: dict[str, Member] = {}
    for row in rows:
        if row.action == "retired":
            current = state.get(row.task_id)
            if current is not None:
                state[row.task_id] = Member(
                    suite_id,
                    row.task_id,
                    current.task_digest,
                    current.grader_set_digest,
                    current.added,
                    row,
                )
        else:
            state[row.task_id] = Member(
                suite_id, row.task_id, row.task_digest, row.grader_set_digest, row
            )
    out = sorted(state.values(), key=lambda m: m.task_id)
    return out if include_removed else [m for m in out if m.removed is None]


def suites_of_task(session: Session, task_id: str, cutoff: int | None = None) -> list[str]:
    """The suites `task_id` is a current member of (its last membership row there is not a
    retirement), sorted."""
    rows = session.exec(
        select(SuiteMembership.suite_id, SuiteMembership.action)
        .where(SuiteMembership.task_id == task_id, upto(SuiteMembership.audit_seq, cutoff))
        .order_by(col(SuiteMembership.id))
    ).all()
    last: dict[str, str] = dict(rows)
    return sorted(suite_id for suite_id, action in last.items() if action != "retired")


def current_suite_digest(
    session: Session,
    suite: SuiteRow,
    cutoff: int | None = None,
    current: list[Member] | None = None,
) -> str:
    """The suite digest of the current pins (`current`: the members, when already read)."""
    if current is None:
        current = members(session, suite.suite_id, cutoff=cutoff)
    pins = [
        {
            "task_id": m.task_id,
            "task_digest": m.task_digest,
            "grader_set_digest": m.grader_set_digest,
        }
        for m in current
    ]
    return digests.suite_digest(suite.suite_id, suite.kind, pins)


def incident(session: Session, incident_id: str) -> Incident | None:
    return session.exec(select(Incident).where(Incident.incident_id == incident_id)).first()


def incident_events(session: Session, incident: Incident) -> list[IncidentEvent]:
    return list(
        session.exec(
            select(IncidentEvent)
            .where(IncidentEvent.incident_row_id == incident.id)
            .order_by(col(IncidentEvent.id))
        ).all()
    )


def upto(column: Any, cutoff: int | None) -> Any:
    """`column <= cutoff` (an audit seq), or always true when there is no cutoff."""
    return true() if cutoff is None else column <= cutoff


def voided(cutoff: int | None, trial_row: Any = None) -> Any:
    """Is the trial row (`Trial.id`, or `trial_row`) voided at or before `cutoff`? A void
    leaves a trial out from its event on; any read as of an earlier seq sees it as it was
    (docs/trials.md, "Voiding a mistaken record")."""
    from evalops.store.tables import Trial, VoidedTrial

    row = Trial.id if trial_row is None else trial_row
    return (
        select(VoidedTrial.id)
        .where(VoidedTrial.trial_row_id == row, upto(VoidedTrial.audit_seq, cutoff))
        .exists()
    )


def calibration_of_config(
    session: Session, config_digest: str, cutoff: int | None = None
) -> StoredCalibration | None:
    """The newest calibration recorded for exactly this grader config (docs/promotion.md).

    A calibration of any other config of the same grader, newer or looser, never counts.
    """
    row = session.exec(
        select(Calibration)
        .where(
            Calibration.grader_config_digest == config_digest,
            upto(Calibration.audit_seq, cutoff),
        )
        .order_by(col(Calibration.id).desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    invalidation = session.exec(
        select(CalibrationInvalidation)
        .where(
            CalibrationInvalidation.calibration_row_id == row.id,
            upto(CalibrationInvalidation.audit_seq, cutoff),
        )
        .order_by(col(CalibrationInvalidation.id).desc())
    ).first()
    return StoredCalibration(
        calibration_id=row.calibration_id,
        grader_config_digest=row.grader_config_digest,
        metrics=json.loads(row.record),
        invalidated_reason=invalidation.reason if invalidation else None,
    )


def config_validity(
    session: Session,
    grader: Grader,
    config_digest: str,
    cutoff: int | None = None,
    *,
    pass_class_exempt: bool = False,
) -> Validity:
    """Validity of one grader config, from its own newest calibration only
    (`pass_class_exempt`: under the rule of evaluator 2 and earlier)."""
    record = calibration_of_config(session, config_digest, cutoff)
    if record is None:
        others = session.exec(
            select(Calibration.calibration_id)
            .where(
                Calibration.grader_id == grader.id,
                Calibration.grader_config_digest != config_digest,
                upto(Calibration.audit_seq, cutoff),
            )
            .order_by(col(Calibration.id))
        ).all()
        reasons = [f"no calibration recorded for config {config_digest}"]
        if others:
            reasons.append(
                f"calibrations of other configs of {grader.id} ({', '.join(others)}) never "
                "count for this one"
            )
        return Validity("missing", tuple(reasons))
    return calibration_validity(grader, config_digest, record, pass_class_exempt=pass_class_exempt)


def model_grader_validity(
    session: Session,
    grader_set: GraderSet,
    raw_graders: list[dict[str, Any]],
    cutoff: int | None,
    *,
    pass_class_exempt: bool = False,
) -> dict[str, Validity]:
    """Validity of every model grader of a (pinned) grader set, for that set's configs."""
    out: dict[str, Validity] = {}
    for grader, raw in zip(grader_set.graders, raw_graders, strict=True):
        if grader.type == "model":
            config = digests.grader_config_digest(raw)
            out[grader.id] = config_validity(
                session, grader, config, cutoff, pass_class_exempt=pass_class_exempt
            )
    return out


def newest_grader_config(session: Session, grader_id: str) -> tuple[Grader, str] | None:
    """The grader config in force: from the in-force grader set holding this grader id,
    else the newest registered one. `calibration record` calibrates it by default."""
    # Several sets in force may hold the grader, configured differently: the newest
    # registered set's config is the newest config.
    for row in sorted(in_force_rows(session, "grader_set").values(), key=lambda r: -r.id):
        spec = grader_set_spec(row)
        grader = spec.grader(grader_id)
        if grader is not None:
            raw = json.loads(row.document)["graders"][spec.graders.index(grader)]
            return grader, digests.grader_config_digest(raw)
    config = session.exec(
        select(GraderConfig)
        .where(GraderConfig.grader_id == grader_id)
        .order_by(col(GraderConfig.id).desc())
        .limit(1)
    ).first()
    if config is None:
        return None
    set_row = session.get(GraderSetRow, config.grader_set_row_id)
    assert set_row is not None
    grader = grader_set_spec(set_row).grader(grader_id)
    assert grader is not None
    return grader, config.grader_config_digest


def grader_config(session: Session, config_digest: str) -> tuple[Grader, str] | None:
    """A registered grader config by digest (for `calibration record --config`)."""
    config = session.exec(
        select(GraderConfig).where(GraderConfig.grader_config_digest == config_digest).limit(1)
    ).first()
    if config is None:
        return None
    set_row = session.get(GraderSetRow, config.grader_set_row_id)
    assert set_row is not None
    grader = grader_set_spec(set_row).grader(config.grader_id)
    assert grader is not None
    return grader, config.grader_config_digest


# ------------------------------------------------------------- definitions in force (4)

DEFINITION_TABLES: dict[str, tuple[type[SQLModel], str]] = {
    "task": (TaskRevision, "task_id"),
    "execution_profile": (ExecutionProfileRow, "execution_id"),
    "grader_set": (GraderSetRow, "grader_set_id"),
    "suite": (SuiteRow, "suite_id"),
    "suite_policy": (PolicyRow, "policy_id"),
    "gate_policy": (PolicyRow, "policy_id"),
    "authority": (PolicyRow, "policy_id"),
}


FROZEN_READ = "evalops.frozen_read"
"""`session.info` key of a read session whose rows cannot change under it (`frozen_read`)."""


def frozen_read(session: Session) -> None:
    """Mark a read-only session over rows nothing writes while it lasts (a report of every
    stored decision in one snapshot, the replay of every decision of a database): the
    definitions in force as of each cutoff are then looked up once, not once per use (a
    decision's inputs read them four to six times). Never for a session that writes."""
    session.info[FROZEN_READ] = {}


def _frozen_memo(session: Session) -> dict[Any, Any] | None:
    memo = session.info.get(FROZEN_READ)
    return memo if isinstance(memo, dict) else None


def latest_sync_run(session: Session, cutoff: int | None = None) -> SyncRun | None:
    """The sync whose commit's definitions are in force (as of `cutoff`): the latest one
    that recorded what is in force (not one off the tracked line, which records nothing)."""
    memo = _frozen_memo(session)
    key = ("latest_sync_run", cutoff)
    if memo is not None and key in memo:
        found: SyncRun | None = memo[key]
        return found
    recorded = select(SyncInForce.id).where(SyncInForce.sync_run_id == SyncRun.id).exists()
    run = session.exec(
        select(SyncRun)
        .where(upto(SyncRun.audit_seq, cutoff), recorded)
        .order_by(col(SyncRun.id).desc())
        .limit(1)
    ).first()
    if memo is not None:
        memo[key] = run
    return run


def clean_synced_commits(session: Session, cutoff: int | None = None) -> list[str]:
    """The commit of every clean sync that changed what is in force (as of `cutoff`),
    newest first: commits whose history was vetted (docs/authority.md)."""
    recorded = select(SyncInForce.id).where(SyncInForce.sync_run_id == SyncRun.id).exists()
    rows = session.exec(
        select(SyncRun.git_commit)
        .where(
            upto(SyncRun.audit_seq, cutoff),
            recorded,
            col(SyncRun.git_dirty).is_(False),
            col(SyncRun.git_commit).is_not(None),
        )
        .order_by(col(SyncRun.id).desc())
    ).all()
    return [str(c) for c in dict.fromkeys(rows) if c]


def in_force(session: Session, cutoff: int | None = None) -> dict[tuple[str, str], str]:
    """(kind, id) -> document_digest of every definition in force (docs/digests.md)."""
    run = latest_sync_run(session, cutoff)
    if run is None:
        return {}
    rows = session.exec(select(SyncInForce).where(SyncInForce.sync_run_id == run.id)).all()
    return {(r.kind, r.definition_id): r.document_digest for r in rows}


def in_force_ids(session: Session, kind: str, cutoff: int | None = None) -> list[str]:
    """The ids of every definition of `kind` in force, sorted (what an error names)."""
    run = latest_sync_run(session, cutoff)
    if run is None:
        return []
    return sorted(
        session.exec(
            select(SyncInForce.definition_id).where(
                SyncInForce.sync_run_id == run.id, SyncInForce.kind == kind
            )
        )
    )


def is_registered(session: Session, kind: str, ident: str, cutoff: int | None = None) -> bool:
    """Whether any sync registered a definition of `kind` with this id (in force or not:
    a branch's sync registers without putting in force)."""
    table, id_column = DEFINITION_TABLES[kind]
    stmt = select(table).where(
        getattr(table, id_column) == ident,
        upto(table.audit_seq, cutoff),  # type: ignore[attr-defined]
    )
    if table is PolicyRow:
        stmt = stmt.where(PolicyRow.kind == kind)
    return session.exec(stmt.limit(1)).first() is not None


def last_in_force_run(session: Session, kind: str, ident: str) -> int | None:
    """The last sync run that had a definition of `kind` with this id in force (None:
    never in force)."""
    found = session.exec(
        select(func.max(SyncInForce.sync_run_id)).where(
            SyncInForce.kind == kind, SyncInForce.definition_id == ident
        )
    ).one()
    return None if found is None else int(found)


def in_force_rows_of(session: Session, kind: str, ids: list[str]) -> dict[str, Any]:
    """id -> the registered row in force of each of `ids` (as `in_force_rows`, in two
    queries however large the registry: an import names a few of thousands of tasks)."""
    run = latest_sync_run(session, None)
    if run is None or not ids:
        return {}
    table, id_column = DEFINITION_TABLES[kind]
    digests = {
        r.definition_id: r.document_digest
        for r in session.exec(
            select(SyncInForce).where(
                SyncInForce.sync_run_id == run.id,
                SyncInForce.kind == kind,
                col(SyncInForce.definition_id).in_(ids),
            )
        )
    }
    stmt = select(table).where(col(getattr(table, id_column)).in_(list(digests)))
    if table is PolicyRow:
        stmt = stmt.where(PolicyRow.kind == kind)
    out: dict[str, Any] = {}
    for row in session.exec(stmt.order_by(col(table.id))):  # type: ignore[attr-defined]
        definition_id = getattr(row, id_column)
        if definition_id not in out and row.document_digest == digests[definition_id]:  # type: ignore[attr-defined]
            out[definition_id] = row
    return out


def in_force_rows(session: Session, kind: str, cutoff: int | None = None) -> dict[str, Any]:
    """id -> the registered row of every definition of `kind` in force (the first row
    registered with the digest in force), in id order.

    Two queries whatever the registry's size (the sync, then its definitions joined to
    their rows): a gate check and every replay read each kind in force, and a query per
    definition made that the largest cost of building gate inputs."""
    memo = _frozen_memo(session)
    key = ("in_force_rows", kind, cutoff)
    if memo is not None and key in memo:
        return dict(memo[key])
    run = latest_sync_run(session, cutoff)
    if run is None:
        return {}
    table, id_column = DEFINITION_TABLES[kind]
    definition_id = getattr(table, id_column)
    stmt = select(table).join(
        SyncInForce,
        and_(
            col(SyncInForce.sync_run_id) == run.id,
            col(SyncInForce.kind) == kind,
            col(SyncInForce.definition_id) == definition_id,
            col(SyncInForce.document_digest) == table.document_digest,  # type: ignore[attr-defined]
        ),
    )
    if table is PolicyRow:
        stmt = stmt.where(PolicyRow.kind == kind)
    out: dict[str, Any] = {}
    for row in session.exec(stmt.order_by(col(table.id))):  # type: ignore[attr-defined]
        out.setdefault(getattr(row, id_column), row)
    rows = dict(sorted(out.items()))
    if memo is not None:
        memo[key] = dict(rows)
    return rows


def registry_id(session: Session) -> str | None:
    """This database's registry id (evalops/domain/registry_identity.py), from its first
    audit event (None before any event)."""

    first = session.exec(select(AuditEvent).order_by(col(AuditEvent.seq))).first()
    if first is None:
        return None
    return of_first_event(json.loads(first.payload), first.hash)
