"""Reads the services share: the current definition of each id, memberships, incidents."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlmodel import Session, SQLModel, col, select

from evalops.domain import digests
from evalops.domain.calibration_validity import StoredCalibration, Validity, calibration_validity
from evalops.domain.specs import EvalTaskSpec, Grader, GraderSet, SuiteDeclaration, SuitePolicy
from evalops.store.tables import (
    Calibration,
    CalibrationInvalidation,
    GraderConfig,
    GraderSetRow,
    Incident,
    IncidentEvent,
    PolicyRow,
    SuiteMembership,
    SuiteRow,
    TaskRevision,
)

Row = TypeVar("Row", bound=SQLModel)


def _newest(session: Session, table: type[Row], *where: Any) -> Row | None:
    """The most recently registered row (highest id) matching `where`."""
    stmt = select(table).where(*where).order_by(col(table.id).desc()).limit(1)  # type: ignore[attr-defined]
    return session.exec(stmt).first()


def task_row(session: Session, task_id: str) -> TaskRevision | None:
    """The current revision of a task: the highest revision, newest labels."""
    stmt = (
        select(TaskRevision)
        .where(TaskRevision.task_id == task_id)
        .order_by(col(TaskRevision.revision).desc(), col(TaskRevision.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def task_spec(row: TaskRevision) -> EvalTaskSpec:
    return EvalTaskSpec.model_validate(json.loads(row.document))


def grader_set_row(session: Session, grader_set_id: str) -> GraderSetRow | None:
    stmt = (
        select(GraderSetRow)
        .where(GraderSetRow.grader_set_id == grader_set_id)
        .order_by(col(GraderSetRow.version).desc(), col(GraderSetRow.id).desc())
        .limit(1)
    )
    return session.exec(stmt).first()


def grader_set_by_digest(session: Session, grader_set_digest: str) -> GraderSetRow | None:
    return _newest(session, GraderSetRow, GraderSetRow.grader_set_digest == grader_set_digest)


def grader_set_spec(row: GraderSetRow) -> GraderSet:
    return GraderSet.model_validate(json.loads(row.document))


def suite_row(session: Session, suite_id: str) -> SuiteRow | None:
    return _newest(session, SuiteRow, SuiteRow.suite_id == suite_id)


def suite_spec(row: SuiteRow) -> SuiteDeclaration:
    return SuiteDeclaration.model_validate(json.loads(row.document))


def suite_policy_row(session: Session) -> PolicyRow | None:
    return _newest(session, PolicyRow, PolicyRow.kind == "suite_policy")


def suite_policy_spec(row: PolicyRow) -> SuitePolicy:
    return SuitePolicy.model_validate(json.loads(row.document))


@dataclass(frozen=True)
class Member:
    """A suite member's current pin, and how it got there."""

    suite_id: str
    task_id: str
    task_digest: str
    grader_set_digest: str
    added: SuiteMembership
    """The row that set the current pin (added or repinned)."""
    removed: SuiteMembership | None = None


def members(session: Session, suite_id: str, *, include_removed: bool = False) -> list[Member]:
    """Fold the append-only membership rows into each task's current state."""
    rows = session.exec(
        select(SuiteMembership)
        .where(SuiteMembership.suite_id == suite_id)
        .order_by(col(SuiteMembership.id))
    ).all()
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


def current_suite_digest(session: Session, suite: SuiteRow) -> str:
    pins = [
        {
            "task_id": m.task_id,
            "task_digest": m.task_digest,
            "grader_set_digest": m.grader_set_digest,
        }
        for m in members(session, suite.suite_id)
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


def calibration_for(session: Session, grader_id: str) -> StoredCalibration | None:
    """The newest calibration recorded for a grader id (stale if its config changed since)."""
    row = session.exec(
        select(Calibration)
        .where(Calibration.grader_id == grader_id)
        .order_by(col(Calibration.id).desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    invalidation = session.exec(
        select(CalibrationInvalidation)
        .where(CalibrationInvalidation.calibration_row_id == row.id)
        .order_by(col(CalibrationInvalidation.id).desc())
    ).first()
    return StoredCalibration(
        calibration_id=row.calibration_id,
        grader_config_digest=row.grader_config_digest,
        metrics=json.loads(row.record),
        invalidated_reason=invalidation.reason if invalidation else None,
    )


def current_grader(session: Session, grader_id: str) -> tuple[Grader, str] | None:
    """The newest registered config of a grader id: its spec and `grader_config_digest`.

    Calibration staleness is judged against this, not against an old grader set a trial
    pinned: a judge whose prompt, model or rubric changed no longer has its calibration.
    """
    row = session.exec(
        select(GraderConfig)
        .where(GraderConfig.grader_id == grader_id)
        .order_by(col(GraderConfig.id).desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    set_row = session.get(GraderSetRow, row.grader_set_row_id)
    assert set_row is not None
    grader = grader_set_spec(set_row).grader(grader_id)
    assert grader is not None
    return grader, row.grader_config_digest


def grader_validity(session: Session, grader_id: str) -> Validity:
    current = current_grader(session, grader_id)
    if current is None:
        return Validity("missing", (f"grader {grader_id} is not registered",))
    grader, config_digest = current
    return calibration_validity(grader, config_digest, calibration_for(session, grader_id))


def model_grader_validity(session: Session, grader_set: GraderSet) -> dict[str, Validity]:
    """Validity of every model grader of a grader set, by grader id."""
    return {g.id: grader_validity(session, g.id) for g in grader_set.graders if g.type == "model"}
