"""`evalops sync`: register a registry snapshot's definitions with git provenance.

All-or-nothing: every conflict is found before anything is written, and the whole sync is
one serialized transaction. A definition already registered with the same document changes
nothing; a new one gets a row and one audit event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from evalops.domain import digests
from evalops.domain.canonical import canonical_text
from evalops.domain.specs import EvalTaskSpec, ExecutionProfile, GraderSet, SuiteDeclaration
from evalops.errors import InputError, InputErrors
from evalops.registry.definitions import Definition
from evalops.registry.provenance import GitProvenance
from evalops.registry.snapshot import Snapshot
from evalops.store.audit import append_event
from evalops.store.engine import write_session
from evalops.store.tables import (
    ExecutionProfileRow,
    GraderConfig,
    GraderSetRow,
    PolicyRow,
    SuiteRow,
    SyncRun,
    TaskRevision,
)

# Registration order: what others refer to first.
KIND_ORDER = ("grader_set", "task", "execution_profile", "suite", "suite_policy", "gate_policy")


@dataclass
class SyncResult:
    registered: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    provenance: GitProvenance | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "registered": self.registered,
            "unchanged": self.unchanged,
            "git": self.provenance.as_dict() if self.provenance else None,
        }


def _subject(d: Definition) -> str:
    rev = f"@{d.revision}" if d.revision is not None else ""
    return f"{d.kind}:{d.id}{rev}"


def _existing(session: Session, d: Definition) -> list[Any]:
    """Rows registered under `d`'s natural key (id and revision/version where it has one)."""
    stmt: Any
    if isinstance(d.spec, EvalTaskSpec):
        stmt = select(TaskRevision).where(
            TaskRevision.task_id == d.id, TaskRevision.revision == d.spec.revision
        )
    elif isinstance(d.spec, GraderSet):
        stmt = select(GraderSetRow).where(
            GraderSetRow.grader_set_id == d.id, GraderSetRow.version == d.spec.version
        )
    elif isinstance(d.spec, ExecutionProfile):
        stmt = select(ExecutionProfileRow).where(ExecutionProfileRow.execution_id == d.id)
    elif isinstance(d.spec, SuiteDeclaration):
        stmt = select(SuiteRow).where(SuiteRow.suite_id == d.id)
    else:
        stmt = select(PolicyRow).where(PolicyRow.kind == d.kind, PolicyRow.policy_id == d.id)
    return list(session.exec(stmt).all())


def _conflict(d: Definition, rows: list[Any]) -> InputError | None:
    """A revision/version registered with another identity digest, or a suite changing kind."""
    line = d.lines.get(("revision",), d.lines.get(("version",), 1))
    if isinstance(d.spec, EvalTaskSpec):
        for row in rows:
            if row.task_digest != d.digest:
                return InputError(
                    f"task {d.id} revision {d.spec.revision} is registered with task_digest "
                    f"{row.task_digest}, this file has {d.digest}: bump revision",
                    d.file,
                    line,
                    "revision",
                )
    if isinstance(d.spec, GraderSet):
        for row in rows:
            if row.grader_set_digest != d.digest:
                return InputError(
                    f"grader set {d.id} version {d.spec.version} is registered with "
                    f"grader_set_digest {row.grader_set_digest}, this file has {d.digest}: "
                    "bump version",
                    d.file,
                    line,
                    "version",
                )
    if isinstance(d.spec, SuiteDeclaration) and rows:
        latest = max(rows, key=lambda r: r.id)
        if latest.kind != d.spec.kind:
            return InputError(
                f"suite {d.id} is registered as kind {latest.kind}; a suite never changes "
                "kind (declare a new suite)",
                d.file,
                d.lines.get(("kind",), 1),
                "kind",
            )
    return None


def _row_for(d: Definition, common: dict[str, Any]) -> SQLModel:
    spec = d.spec
    if isinstance(spec, EvalTaskSpec):
        return TaskRevision(
            task_id=d.id,
            revision=spec.revision,
            task_digest=d.digest,
            grader_set_id=spec.grader_set,
            risk=spec.meta.risk,
            **common,
        )
    if isinstance(spec, GraderSet):
        return GraderSetRow(
            grader_set_id=d.id, version=spec.version, grader_set_digest=d.digest, **common
        )
    if isinstance(spec, ExecutionProfile):
        return ExecutionProfileRow(
            execution_id=d.id,
            system_build=spec.system_build,
            execution_digest=d.digest,
            **common,
        )
    if isinstance(spec, SuiteDeclaration):
        return SuiteRow(suite_id=d.id, kind=spec.kind, **common)
    return PolicyRow(kind=d.kind, policy_id=d.id, policy_digest=d.digest, **common)


def _grader_configs(d: Definition, grader_set_row_id: int) -> list[GraderConfig]:
    assert isinstance(d.spec, GraderSet)
    return [
        GraderConfig(
            grader_set_row_id=grader_set_row_id,
            grader_id=g.id,
            grader_version=g.version,
            grader_config_digest=digests.grader_config_digest(raw),
            layer=g.layer,
            type=g.type,
            blocking=g.blocking,
        )
        for g, raw in zip(d.spec.graders, d.value["graders"], strict=True)
    ]


def sync_registry(
    engine: Engine,
    snapshot: Snapshot,
    provenance: GitProvenance,
    *,
    registry_path: str,
    actor: str,
    now: datetime,
) -> SyncResult:
    """Register every new definition of `snapshot`; raise InputErrors on any conflict."""
    ordered = sorted(
        snapshot.definitions, key=lambda d: (KIND_ORDER.index(d.kind), d.id, d.revision or 0)
    )
    result = SyncResult(provenance=provenance)
    with write_session(engine) as session:
        new: list[Definition] = []
        conflicts: list[InputError] = []
        for d in ordered:
            rows = _existing(session, d)
            problem = _conflict(d, rows)
            if problem is not None:
                conflicts.append(problem)
            elif any(r.document_digest == d.document_digest for r in rows):
                result.unchanged += 1
            else:
                new.append(d)
        if conflicts:
            raise InputErrors.of(conflicts)
        if not new:
            return result
        run = SyncRun(
            at=now,
            actor=actor,
            registry_path=registry_path,
            git_commit=provenance.commit,
            git_dirty=provenance.dirty,
            git_branch=provenance.branch,
            git_remote=provenance.remote,
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        for d in new:
            entry: dict[str, Any] = {
                **d.digest_row(),
                "document_digest": d.document_digest,
                **provenance.as_dict(),
            }
            event = append_event(
                session,
                at=now,
                actor=actor,
                kind=f"sync.{d.kind}",
                subject=_subject(d),
                payload=entry,
            )
            row = _row_for(
                d,
                {
                    "document_digest": d.document_digest,
                    "document": canonical_text(d.value),
                    "file_path": d.file,
                    "sync_run_id": run.id,
                    "audit_seq": event.seq,
                },
            )
            session.add(row)
            if isinstance(row, GraderSetRow):
                session.flush()
                assert row.id is not None
                session.add_all(_grader_configs(d, row.id))
            result.registered.append(entry)
    return result


def latest_task_revisions(session: Session) -> list[TaskRevision]:
    """The newest registered row of every task id (highest revision, then newest labels)."""
    rows = session.exec(
        select(TaskRevision).order_by(
            col(TaskRevision.task_id), col(TaskRevision.revision), col(TaskRevision.id)
        )
    ).all()
    latest: dict[str, TaskRevision] = {}
    for row in rows:
        latest[row.task_id] = row
    return list(latest.values())
