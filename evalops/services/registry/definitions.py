"""Everything needed to (re-)derive a trial's classification from stored evidence.

Classification depends on more than the record: reconciliations, human review results and
the calibration state of model graders can change after ingest, so the gate, `trials show`
and the review queue always re-derive from current evidence with the same pure function.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlmodel import Session, col, select

from evalops.domain.calibration_validity import Validity, validity_digest
from evalops.domain.classify import Classification, classify
from evalops.domain.facts import StoredTaskHead
from evalops.domain.specs import EvalTaskSpec, GraderSet
from evalops.domain.trajectory import TrajectoryResult
from evalops.domain.trial_record import GraderResult, TrialRecord
from evalops.services.gate.input_parts import must_rederive
from evalops.store import queries
from evalops.store.tables import (
    AuditEvent,
    ExecutionProfileRow,
    IngestBatch,
    Reconciliation,
    ReviewResult,
    TaskRevision,
    Trial,
)


class RegisteredGraderSet(NamedTuple):
    """A grader set as registered: its validated spec, the raw grader objects as written
    (what digests and calibration configs are computed from) and its id."""

    spec: GraderSet
    graders: list[dict[str, Any]]
    grader_set_id: str


@dataclass
class Definitions:
    """Per-session caches of registered definitions, looked up by digest.

    `cutoff` (an audit seq) makes every read see the registry as it stood then: only rows
    whose event is at or before it count (`gate check --at`, `verify` rebuilding inputs).
    """

    session: Session
    cutoff: int | None = None
    pass_class_exempt: bool = False
    """Judge calibrations as evaluator 2 and earlier did (rebuilding their decisions'
    inputs): the pass class exempt from bounds like any other class."""
    _tasks: dict[str, list[TaskRevision]] = field(default_factory=dict)
    _all_tasks: dict[str, list[TaskRevision]] | None = None
    _specs: dict[int, EvalTaskSpec] = field(default_factory=dict)
    _task_specs: dict[tuple[str, str], EvalTaskSpec | None] = field(default_factory=dict)
    _heads: dict[int, StoredTaskHead] = field(default_factory=dict)
    _grader_sets: dict[str, RegisteredGraderSet | None] = field(default_factory=dict)
    _validity: dict[str, dict[str, Validity]] = field(default_factory=dict)
    _executions: dict[str, bool] = field(default_factory=dict)
    _appended: tuple[dict[str, list[Reconciliation]], dict[str, list[ReviewResult]]] | None = None
    refused_reviews: frozenset[int] = frozenset()
    """Audit seqs of reviews that count as no human evidence (`no_self_review`: the gate
    loaders set them); `appended` leaves them out."""

    def appended(self, trial_id: str) -> tuple[list[Reconciliation], list[ReviewResult]]:
        """A trial's reconciliations and human reviews, in order.

        Both tables hold rows only for the exceptional trials, so they are read whole, once
        per session, instead of twice per trial re-derived.
        """
        recon_by_trial, reviews_by_trial = self._appended_rows()
        counted = reviews_by_trial.get(trial_id, [])
        if self.refused_reviews:
            counted = [v for v in counted if v.audit_seq not in self.refused_reviews]
        return recon_by_trial.get(trial_id, []), counted

    def has_appended(self, trial_id: str) -> bool:
        """Has the trial any reconciliation or review row (counted or not)? Most have none,
        and `appended` need not be asked for them (tens of thousands per gate check)."""
        recon, reviews = self._appended_rows()
        return trial_id in recon or trial_id in reviews

    def _appended_rows(
        self,
    ) -> tuple[dict[str, list[Reconciliation]], dict[str, list[ReviewResult]]]:
        """Both tables by trial id, read whole once per session."""
        if self._appended is None:
            recon: dict[str, list[Reconciliation]] = {}
            for r in self.session.exec(
                select(Reconciliation)
                .where(queries.upto(Reconciliation.audit_seq, self.cutoff))
                .order_by(col(Reconciliation.id))
            ):
                recon.setdefault(r.trial_id, []).append(r)
            reviews: dict[str, list[ReviewResult]] = {}
            for v in self.session.exec(
                select(ReviewResult)
                .where(queries.upto(ReviewResult.audit_seq, self.cutoff))
                .order_by(col(ReviewResult.id))
            ):
                reviews.setdefault(v.trial_id, []).append(v)
            self._appended = (recon, reviews)
        return self._appended

    def task_rows(self, task_digest: str) -> list[TaskRevision]:
        if self._all_tasks is not None:
            return self._all_tasks.get(task_digest, [])
        if task_digest not in self._tasks:
            self._tasks[task_digest] = list(
                self.session.exec(
                    select(TaskRevision).where(
                        TaskRevision.task_digest == task_digest,
                        queries.upto(TaskRevision.audit_seq, self.cutoff),
                    )
                ).all()
            )
        return self._tasks[task_digest]

    def preload_tasks(self) -> list[TaskRevision]:
        """Read every task revision once (a gate over thousands of members needs them all);
        returns them in registration order."""
        rows = list(
            self.session.exec(
                select(TaskRevision)
                .where(queries.upto(TaskRevision.audit_seq, self.cutoff))
                .order_by(col(TaskRevision.id))
            ).all()
        )
        self._all_tasks = {}
        for row in rows:
            self._all_tasks.setdefault(row.task_digest, []).append(row)
        return rows

    def spec_of(self, row: TaskRevision) -> EvalTaskSpec:
        """A registered task revision's spec, parsed once per session."""
        assert row.id is not None
        if row.id not in self._specs:
            self._specs[row.id] = queries.task_spec(row)
        return self._specs[row.id]

    def head_of(self, row: TaskRevision) -> StoredTaskHead:
        """A registered task revision's labels and trial plan, read from its stored
        document without validating the whole spec (it was validated at `sync`)."""
        assert row.id is not None
        if row.id not in self._heads:
            self._heads[row.id] = StoredTaskHead.of(json.loads(row.document))
        return self._heads[row.id]

    def forget_specs(self) -> None:
        """Let go of the validated task specs (a 10,000-task suite's take about 50 MiB);
        any needed again is parsed again."""
        self._specs.clear()
        self._task_specs.clear()
        self._heads.clear()

    def task(self, task_id: str, task_digest: str) -> EvalTaskSpec | None:
        key = (task_id, task_digest)
        if key in self._task_specs:
            return self._task_specs[key]
        rows = [r for r in self.task_rows(task_digest) if r.task_id == task_id]
        spec = self.spec_of(rows[-1]) if rows else None
        self._task_specs[key] = spec
        return spec

    def grader_set(self, digest: str) -> RegisteredGraderSet | None:
        """The registered grader set of this digest, or None."""
        if digest not in self._grader_sets:
            row = queries.grader_set_by_digest(self.session, digest, self.cutoff)
            self._grader_sets[digest] = (
                RegisteredGraderSet(
                    queries.grader_set_spec(row),
                    json.loads(row.document)["graders"],
                    row.grader_set_id,
                )
                if row
                else None
            )
        return self._grader_sets[digest]

    def validity(self, digest: str) -> dict[str, Validity]:
        """Model graders' validity for the configs of exactly this (pinned) grader set."""
        if digest not in self._validity:
            found = self.grader_set(digest)
            self._validity[digest] = (
                queries.model_grader_validity(
                    self.session,
                    found.spec,
                    found.graders,
                    self.cutoff,
                    pass_class_exempt=self.pass_class_exempt,
                )
                if found
                else {}
            )
        return self._validity[digest]

    def execution_known(self, digest: str) -> bool:
        if digest not in self._executions:
            self._executions[digest] = (
                self.session.exec(
                    select(ExecutionProfileRow.id).where(
                        ExecutionProfileRow.execution_digest == digest,
                        queries.upto(ExecutionProfileRow.audit_seq, self.cutoff),
                    )
                ).first()
                is not None
            )
        return self._executions[digest]


SHARED_KEY = "evalops.shared_definitions"


def session_definitions(session: Session) -> Definitions:
    """The Definitions a long read shares across many decisions (`share_definitions`), else
    a fresh one. Sharing is opt-in: only a read session whose rows cannot change under it
    (the registry site renders every stored decision in one snapshot) may reuse lookups."""
    shared = session.info.get(SHARED_KEY)
    return shared if isinstance(shared, Definitions) else Definitions(session)


def share_definitions(session: Session) -> Definitions:
    """Make every report built in this read session share one Definitions (and one cache
    of task revisions), so that N decisions over the same tasks look each one up once."""
    queries.frozen_read(session)
    defs = Definitions(session)
    defs.preload_tasks()
    session.info[SHARED_KEY] = defs
    return defs


class StaleClassifications:
    """Which trials' stored classifications must be re-derived: those with a
    reconciliation or a review, or whose pinned grader set's calibration state differs from
    the one they were classified under (recorded per ingest batch). Every other trial's
    stored classification is what re-deriving would give (same record, definitions,
    trajectory and validity)."""

    def __init__(self, session: Session, defs: Definitions) -> None:
        self.session = session
        self.defs = defs
        self.batches: dict[int, dict[str, str] | None] = {}
        self.current: dict[str, str] = {}
        # A trial with nothing appended is judged by its batch and grader set alone.
        self._plain: dict[tuple[int, str], bool] = {}

    def _batch(self, batch_id: int) -> dict[str, str] | None:
        if batch_id not in self.batches:
            row = self.session.exec(
                select(AuditEvent.payload)
                .join(IngestBatch, col(IngestBatch.audit_seq) == col(AuditEvent.seq))
                .where(IngestBatch.id == batch_id)
            ).first()
            self.batches[batch_id] = json.loads(row).get("validity") if row else None
        return self.batches[batch_id]

    def _current(self, grader_set_digest: str) -> str:
        if grader_set_digest not in self.current:
            validity = self.defs.validity(grader_set_digest)
            self.current[grader_set_digest] = validity_digest(validity)
        return self.current[grader_set_digest]

    def needed(self, trial_id: str, grader_set_digest: str, batch_id: int) -> bool:
        if self.defs.has_appended(trial_id):
            reconciliations, reviews = self.defs.appended(trial_id)
            if reconciliations or reviews:
                return must_rederive(
                    True, None, grader_set_digest, lambda: self._current(grader_set_digest)
                )
        key = (batch_id, grader_set_digest)
        found = self._plain.get(key)
        if found is None:
            found = self._plain[key] = must_rederive(
                False,
                self._batch(batch_id),
                grader_set_digest,
                lambda: self._current(grader_set_digest),
            )
        return found


def settled_effects(rows: Sequence[Reconciliation]) -> dict[int, str]:
    """Effect position -> its reconciled status (the first settlement of each stands)."""
    out: dict[int, str] = {}
    for r in rows:
        if r.effect_index is not None and r.effect_index not in out:
            out[r.effect_index] = r.status
    return out


def review_results(rows: Sequence[ReviewResult], graders: GraderSet) -> dict[str, GraderResult]:
    """Grader id -> the first human review result, as a grader result.

    `review resolve` accepts only a queued pair, so a pair has at most one review; should a
    second row appear, the first stands (a later row can never change a decided review).
    """
    out: dict[str, GraderResult] = {}
    for r in rows:
        if r.grader_id in out:
            continue
        grader = graders.grader(r.grader_id)
        out[r.grader_id] = GraderResult(
            grader_id=r.grader_id,
            grader_version=grader.version if grader else 1,
            state=r.state,  # type: ignore[arg-type]
            evidence=["human_review"],
            reason=r.reason,
        )
    return out


def stored_record(trial: Trial, parsed: Mapping[str, Any] | None = None) -> TrialRecord:
    """The trial's stored record; `parsed` is its JSON already parsed by the caller."""
    return TrialRecord.model_validate(parsed if parsed is not None else json.loads(trial.record))


def trajectory_of(trial: Trial) -> TrajectoryResult | None:
    return TrajectoryResult.from_block(json.loads(trial.trajectory)) if trial.trajectory else None


def rederive(
    defs: Definitions, trial: Trial, record: Mapping[str, Any] | None = None
) -> Classification | None:
    """The trial's classification from current evidence (None if its definitions vanished);
    `record` is the trial's stored record when the caller parsed it already."""
    task = defs.task(trial.task_id, trial.task_digest)
    found = defs.grader_set(trial.grader_set_digest)
    if task is None or found is None:
        return None
    graders = found.spec
    reconciliations, reviews = defs.appended(trial.trial_id)
    return classify(
        stored_record(trial, record),
        task,
        graders,
        validity=defs.validity(trial.grader_set_digest),
        trajectory=trajectory_of(trial),
        reconciliations=settled_effects(reconciliations),
        reviews=review_results(reviews, graders),
    )
