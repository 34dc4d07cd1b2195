"""The registry database: one table per concept of ARCHITECTURE.md.

Every row is append-only. Documents and payloads are stored as canonical JSON text so that
`verify` can re-hash exactly what was registered. Each change row points at the audit event
(`audit_seq`) that recorded it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from evalops.store.types import UTCDateTime

SQLModel.metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _ts() -> datetime:
    return Field(sa_type=UTCDateTime, nullable=False)  # type: ignore[no-any-return]


def _big() -> int:
    # Integers from user files reach 2^53-1 (docs/formats.md): 64-bit on every engine.
    return Field(sa_type=BigInteger, nullable=False)  # type: ignore[no-any-return]


def _text() -> str:
    return Field(sa_type=Text, nullable=False)  # type: ignore[no-any-return]


def _audit_fk() -> int:
    # Deferred: a change's rows are flushed first, then the event that digests them.
    return Field(  # type: ignore[no-any-return]
        sa_column_args=[
            ForeignKey("audit_event.seq", deferrable=True, initially="DEFERRED"),
        ],
        index=True,
    )


class AuditEvent(SQLModel, table=True):
    """One change, hash-linked to the previous one (docs/verify.md)."""

    __tablename__ = "audit_event"

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    at: datetime = _ts()
    actor: str
    kind: str = Field(index=True)
    subject: str = Field(index=True)
    payload_digest: str
    payload: str = _text()
    prev_hash: str
    hash: str = Field(unique=True)


class SyncRun(SQLModel, table=True):
    """One `evalops sync` that registered something, with the registry's git provenance."""

    __tablename__ = "sync_run"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _ts()
    actor: str
    registry_path: str
    git_commit: str | None = None
    git_dirty: bool
    git_branch: str | None = None
    git_remote: str | None = None
    audit_seq: int = _audit_fk()


class SyncInForce(SQLModel, table=True):
    """One definition a sync's commit holds: in force until the next sync (docs/digests.md)."""

    __tablename__ = "sync_in_force"
    __table_args__ = (UniqueConstraint("sync_run_id", "kind", "definition_id"),)

    id: int | None = Field(default=None, primary_key=True)
    sync_run_id: int = Field(foreign_key="sync_run.id", index=True)
    kind: str
    definition_id: str
    document_digest: str
    audit_seq: int = _audit_fk()


class _Registered(SQLModel):
    """Columns every registered definition carries."""

    document_digest: str
    document: str = _text()
    file_path: str
    sync_run_id: int = Field(foreign_key="sync_run.id", index=True)


class TaskRevision(_Registered, table=True):
    """A task file as registered; `(task_id, revision)` always has one `task_digest`."""

    __tablename__ = "task_revision"
    __table_args__ = (UniqueConstraint("task_id", "revision", "document_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    task_id: str = Field(index=True)
    revision: int = _big()
    task_digest: str = Field(index=True)
    grader_set_id: str
    risk: str
    audit_seq: int = _audit_fk()


class ExecutionProfileRow(_Registered, table=True):
    """An execution profile as registered."""

    __tablename__ = "execution_profile"
    __table_args__ = (UniqueConstraint("execution_id", "document_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    execution_id: str = Field(index=True)
    system_build: str = Field(index=True)
    execution_digest: str = Field(index=True)
    audit_seq: int = _audit_fk()


class GraderSetRow(_Registered, table=True):
    """A grader set as registered; `(grader_set_id, version)` always has one digest."""

    __tablename__ = "grader_set"
    __table_args__ = (UniqueConstraint("grader_set_id", "version", "document_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    grader_set_id: str = Field(index=True)
    version: int = _big()
    grader_set_digest: str = Field(index=True)
    audit_seq: int = _audit_fk()


class GraderConfig(SQLModel, table=True):
    """One grader of a registered grader set, with its `grader_config_digest`."""

    __tablename__ = "grader_config"
    __table_args__ = (UniqueConstraint("grader_set_row_id", "grader_id"),)

    id: int | None = Field(default=None, primary_key=True)
    grader_set_row_id: int = Field(foreign_key="grader_set.id", index=True)
    grader_id: str = Field(index=True)
    grader_version: int = _big()
    grader_config_digest: str = Field(index=True)
    layer: str
    type: str
    blocking: bool
    audit_seq: int = _audit_fk()


class SuiteRow(_Registered, table=True):
    """A suite declaration as registered."""

    __tablename__ = "suite"
    __table_args__ = (UniqueConstraint("suite_id", "document_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    suite_id: str = Field(index=True)
    kind: str
    audit_seq: int = _audit_fk()


class PolicyRow(_Registered, table=True):
    """A suite or gate policy as registered."""

    __tablename__ = "policy"
    __table_args__ = (UniqueConstraint("kind", "policy_id", "document_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str
    policy_id: str = Field(index=True)
    policy_digest: str = Field(index=True)
    audit_seq: int = _audit_fk()


class Promotion(SQLModel, table=True):
    """A promotion attempt, accepted or refused, with its requirement checklist."""

    __tablename__ = "promotion"

    id: int | None = Field(default=None, primary_key=True)
    subject: str
    task_id: str | None = Field(default=None, index=True)
    suite_id: str = Field(index=True)
    accepted: bool
    requirements: str = _text()
    reason: str | None = None
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class SuiteMembership(SQLModel, table=True):
    """A membership change: `added`, `repinned` or `retired` (never updated in place)."""

    __tablename__ = "suite_membership"
    __table_args__ = (Index("ix_suite_membership_suite_task", "suite_id", "task_id"),)

    id: int | None = Field(default=None, primary_key=True)
    suite_id: str
    task_id: str
    action: str
    task_digest: str
    grader_set_digest: str
    task_revision_id: int | None = Field(default=None, foreign_key="task_revision.id")
    promotion_id: int | None = Field(default=None, foreign_key="promotion.id")
    reason: str | None = None
    approved_by: str | None = None
    replaced_by: str | None = None
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class Incident(SQLModel, table=True):
    """A real failure, possibly not yet reproducible."""

    __tablename__ = "incident"

    id: int | None = Field(default=None, primary_key=True)
    number: int = Field(unique=True)
    incident_id: str = Field(unique=True)
    title: str
    severity: str
    observed_at: datetime = _ts()
    trace_uri: str
    description: str | None = None
    opened_at: datetime = _ts()
    opened_by: str
    audit_seq: int = _audit_fk()


class IncidentEvent(SQLModel, table=True):
    """A state move or task link of an incident."""

    __tablename__ = "incident_event"

    id: int | None = Field(default=None, primary_key=True)
    incident_row_id: int = Field(foreign_key="incident.id", index=True)
    action: str
    state: str
    task_id: str | None = None
    reason: str | None = None
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class IngestBatch(SQLModel, table=True):
    """One `trials ingest` invocation that stored something.

    Its id is allocated under the writer lock before its trials are inserted; the row and
    its audit event (which commits to every trial's digests) are written last.
    """

    __tablename__ = "ingest_batch"

    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    files: str = _text()
    ingested: int
    skipped_identical: int
    rejected: int
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class Trial(SQLModel, table=True):
    """One execution of one eval case, as ingested (content-free: no tool arguments)."""

    __tablename__ = "trial"
    __table_args__ = (
        Index("ix_trial_eval_case", "task_digest", "grader_set_digest", "execution_digest"),
        # Ingest: is (run, eval case, trial_index) of an original taken? (docs/formats.md)
        Index("ix_trial_run_case_index", "run_id", "eval_case_digest", "trial_index"),
        # The gate reads one build's trials and counts those it ignores, per task.
        Index("ix_trial_execution_task", "execution_digest", "task_id"),
        # A trial id is taken once per content: a voided trial's id may be ingested again
        # with new content (both rows kept), never the same content twice. Ingest refuses
        # a second live row of one id (docs/trials.md, "Voiding a mistaken record").
        UniqueConstraint("trial_id", "record_digest"),
    )

    id: int | None = Field(default=None, primary_key=True)
    trial_id: str = Field(index=True)
    run_id: str | None = None
    attempt_id: str | None = None
    task_id: str = Field(index=True)
    task_digest: str
    execution_digest: str
    grader_set_digest: str
    eval_case_digest: str
    trial_index: int = _big()
    started_at: datetime = _ts()
    completed_at: datetime = _ts()
    record_digest: str
    """Digest of the record as ingested, tool calls included (docs/digests.md)."""
    record: str = _text()
    """The record as stored: canonical JSON without `tool_calls` (content-free)."""
    stored_digest: str
    """Digest of `record`, so `verify` can re-hash what is stored."""
    classification: str = Field(index=True)
    """The classification derived at ingest; the gate re-derives it from current evidence."""
    secondary_labels: str = _text()
    score: float
    gating_score: float
    trajectory: str | None = Field(default=None, sa_type=Text)
    """The RFC 0244 trajectory block (counts only), when the task expects a trajectory."""
    efficiency: str = _text()
    """toolCallCount, modelCallCount, inputTokens, outputTokens of this trial (counts only)."""
    parent_trial_id: str | None = Field(default=None, index=True)
    """The trial this one re-runs (by id: a voided id may be taken again, so no foreign
    key; ingest checks the parent is a live trial)."""
    rerun_reason: str | None = None
    ingest_batch_id: int = Field(
        sa_column_args=[ForeignKey("ingest_batch.id", deferrable=True, initially="DEFERRED")],
        index=True,
    )
    audit_seq: int = _audit_fk()
    """The ingest event that recorded the trial (its batch's)."""


class Reconciliation(SQLModel, table=True):
    """What really happened to an ambiguous external effect."""

    __tablename__ = "reconciliation"

    id: int | None = Field(default=None, primary_key=True)
    trial_id: str = Field(index=True)
    """The live trial of that id when it was appended (checked by the service)."""
    effect_key: str
    effect_index: int | None = None
    """Position of the settled effect in the record's `external_effects`."""
    status: str
    evidence_uri: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class ReviewResult(SQLModel, table=True):
    """A human grader result appended from the review queue."""

    __tablename__ = "review_result"

    id: int | None = Field(default=None, primary_key=True)
    trial_id: str = Field(index=True)
    """The live trial of that id when it was appended (checked by the service)."""
    grader_id: str
    state: str
    reason: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class TrialVoid(SQLModel, table=True):
    """A void (`VOID-n`): trials ingested by mistake, left out from its audit event on.

    Nothing is deleted or edited: the trials stay, and every read as of a point before the
    void (`--at`, a replay, `verify`) sees them as they were."""

    __tablename__ = "trial_void"

    id: int | None = Field(default=None, primary_key=True)
    number: int = Field(unique=True)
    void_id: str = Field(unique=True)
    reason: str
    batch: int | None = None
    """The ingest batch named by `--batch`, when the trials were chosen so."""
    trial_count: int
    hard_count: int
    """How many of them were `hard_constraint_fail` or `ambiguous_external_effect`."""
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class VoidedTrial(SQLModel, table=True):
    """One trial row a void leaves out (a row, not an id: the id may be ingested again)."""

    __tablename__ = "voided_trial"

    id: int | None = Field(default=None, primary_key=True)
    void_row_id: int = Field(foreign_key="trial_void.id", index=True)
    trial_row_id: int = Field(foreign_key="trial.id", unique=True)
    trial_id: str = Field(index=True)
    classification: str
    """The trial's class when it was voided (the hard-failure rule reads it)."""
    audit_seq: int = _audit_fk()


class Calibration(SQLModel, table=True):
    """How well a model grader agrees with human labels, for one grader config."""

    __tablename__ = "calibration"

    id: int | None = Field(default=None, primary_key=True)
    calibration_id: str = Field(unique=True)
    grader_id: str = Field(index=True)
    grader_version: int = _big()
    grader_config_digest: str = Field(index=True)
    label_set_digest: str
    calibration_split_digest: str
    holdout_split_digest: str
    annotation_guide_version: str | None = None
    sampling_frame: str | None = None
    annotator_count: int
    record: str = _text()
    record_digest: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class CalibrationInvalidation(SQLModel, table=True):
    """A calibration withdrawn by hand (e.g. label distribution shift)."""

    __tablename__ = "calibration_invalidation"

    id: int | None = Field(default=None, primary_key=True)
    calibration_row_id: int = Field(foreign_key="calibration.id", index=True)
    reason: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class Waiver(SQLModel, table=True):
    """Owner-signed, build-scoped, expiring acceptance of a non-critical failure."""

    __tablename__ = "waiver"

    id: int | None = Field(default=None, primary_key=True)
    number: int = Field(unique=True)
    waiver_id: str = Field(unique=True)
    task_id: str = Field(index=True)
    suite_id: str
    build: str = Field(index=True)
    states: str = _text()
    owner: str
    reason: str
    granted_at: datetime = _ts()
    expires_at: datetime = _ts()
    granted_by: str
    audit_seq: int = _audit_fk()


class WaiverRevocation(SQLModel, table=True):
    """A waiver revoked from `revoked_at` on."""

    __tablename__ = "waiver_revocation"

    id: int | None = Field(default=None, primary_key=True)
    waiver_row_id: int = Field(foreign_key="waiver.id", index=True)
    revoked_at: datetime = _ts()
    reason: str
    actor: str
    audit_seq: int = _audit_fk()


class GateDecision(SQLModel, table=True):
    """A release-gate decision with every input, replayable byte for byte."""

    __tablename__ = "gate_decision"

    id: int | None = Field(default=None, primary_key=True)
    number: int = Field(unique=True)
    gate_id: str = Field(unique=True)
    build: str = Field(index=True)
    suite_id: str = Field(index=True)
    execution_digest: str
    suite_digest: str
    policy_digest: str
    sync_run_id: int | None = Field(default=None, foreign_key="sync_run.id")
    """The sync whose definitions were in force when the decision was made."""
    evaluated_at: datetime = _ts()
    decision: str
    inputs: str = _text()
    inputs_digest: str
    result: str = _text()
    result_digest: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class Estimate(SQLModel, table=True):
    """An estimate of an estimation suite's rates with every input, replayable byte for byte
    (docs/estimation.md). Never a gate decision, and never read by one."""

    __tablename__ = "estimate"

    id: int | None = Field(default=None, primary_key=True)
    number: int = Field(unique=True)
    estimate_id: str = Field(unique=True)
    suite_id: str = Field(index=True)
    build: str = Field(index=True)
    baseline: str | None = None
    suite_digest: str
    execution_digest: str
    evaluated_at: datetime = _ts()
    inputs: str = _text()
    inputs_digest: str
    result: str = _text()
    result_digest: str
    at: datetime = _ts()
    actor: str
    audit_seq: int = _audit_fk()


class SignedAct(SQLModel, table=True):
    """An act signed under an authority: the exact bytes signed, the signatures, who signed.

    Written in the same transaction and under the same audit event as the row it authorizes
    (a waiver, a revocation, ...), so that event's row digests cover it.
    """

    __tablename__ = "signed_act"

    id: int | None = Field(default=None, primary_key=True)
    act_id: str = Field(unique=True)
    kind: str = Field(index=True)
    subject: str = Field(index=True)
    act: str = _text()
    signatures: str = _text()
    signers: str = _text()
    scope: str = _text()
    authority_digest: str
    audit_seq: int = _audit_fk()
