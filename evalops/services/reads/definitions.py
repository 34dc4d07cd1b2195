"""Registered definitions and a trial's current class, read through a `Reader` (plain SQL).

The read path's counterpart of evalops/services/registry/definitions.py (`Definitions`, `rederive`)
and of the calibration reads of evalops/store/queries.py (`config_validity`): the same rows,
read with SQL both engines run, and the stored documents read as views
(evalops/domain/facts.py) instead of the spec models, so `trials list` and `calibration
status` import neither SQLAlchemy nor pydantic on SQLite. The rules themselves
(`classify`, `calibration_validity`) are the same functions. tests/cli/test_read_paths.py
and tests/services/test_read_differential.py compare both readings on registries with
reviews, reconciliations, calibrations, invalidations and reruns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from evalops.domain.calibration_validity import StoredCalibration, Validity, calibration_validity
from evalops.domain.classify import Classification, classify
from evalops.domain.digests import grader_config_digest
from evalops.domain.facts import (
    GraderFacts,
    StoredGraderSet,
    StoredRecord,
    StoredResult,
    StoredTask,
)
from evalops.domain.trajectory import TrajectoryResult
from evalops.store.reader import Reader

#: The trial columns re-deriving and listing a trial read.
TRIAL_COLUMNS = (
    "id, trial_id, task_id, task_digest, grader_set_digest, execution_digest, trial_index, "
    "completed_at, record, trajectory, classification, secondary_labels, score, "
    "gating_score, parent_trial_id"
)


class GraderSetDocument(NamedTuple):
    """A registered grader set: its view and the raw grader objects as written (what
    grader config digests are computed from)."""

    spec: StoredGraderSet
    graders: list[dict[str, Any]]


def upto(cutoff: int | None) -> str:
    """`AND audit_seq <= :cutoff` when reading the registry as it stood at an audit seq
    (the query then passes `cutoff`), else nothing."""
    return "" if cutoff is None else " AND audit_seq <= :cutoff"


def calibration_of_config(
    reader: Reader, config_digest: str, cutoff: int | None = None
) -> StoredCalibration | None:
    """The newest calibration of exactly this grader config (`queries.calibration_of_config`)."""
    row = reader.first(
        "SELECT id, calibration_id, grader_config_digest, record FROM calibration "
        f"WHERE grader_config_digest = :config{upto(cutoff)} ORDER BY id DESC LIMIT 1",
        {"config": config_digest, "cutoff": cutoff},
    )
    if row is None:
        return None
    reason = reader.scalar(
        "SELECT reason FROM calibration_invalidation WHERE calibration_row_id = :id"
        f"{upto(cutoff)} ORDER BY id DESC LIMIT 1",
        {"id": row["id"], "cutoff": cutoff},
    )
    return StoredCalibration(
        calibration_id=row["calibration_id"],
        grader_config_digest=row["grader_config_digest"],
        metrics=json.loads(row["record"]),
        invalidated_reason=reason,
    )


def config_validity(
    reader: Reader,
    grader: GraderFacts,
    config_digest: str,
    cutoff: int | None = None,
    *,
    pass_class_exempt: bool = False,
) -> Validity:
    """Validity of one grader config from its own newest calibration only
    (`queries.config_validity`; `pass_class_exempt`: under the rule of evaluator 2 and
    earlier)."""
    record = calibration_of_config(reader, config_digest, cutoff)
    if record is None:
        others = [
            r["calibration_id"]
            for r in reader.rows(
                "SELECT calibration_id FROM calibration WHERE grader_id = :grader "
                f"AND grader_config_digest != :config{upto(cutoff)} ORDER BY id",
                {"grader": grader.id, "config": config_digest, "cutoff": cutoff},
            )
        ]
        reasons = [f"no calibration recorded for config {config_digest}"]
        if others:
            reasons.append(
                f"calibrations of other configs of {grader.id} ({', '.join(others)}) never "
                "count for this one"
            )
        return Validity("missing", tuple(reasons))
    return calibration_validity(grader, config_digest, record, pass_class_exempt=pass_class_exempt)


def grader_set_by_digest(
    reader: Reader, grader_set_digest: str, cutoff: int | None = None
) -> GraderSetDocument | None:
    """The newest registered grader set of this digest (`queries.grader_set_by_digest`)."""
    document = reader.scalar(
        f"SELECT document FROM grader_set WHERE grader_set_digest = :digest{upto(cutoff)} "
        "ORDER BY id DESC LIMIT 1",
        {"digest": grader_set_digest, "cutoff": cutoff},
    )
    if document is None:
        return None
    parsed = json.loads(document)
    return GraderSetDocument(StoredGraderSet.of(parsed), parsed["graders"])


def model_configs(found: GraderSetDocument) -> list[tuple[GraderFacts, str]]:
    """(grader, its config digest) of every model grader of a grader set, in order."""
    return [
        (grader, grader_config_digest(raw))
        for grader, raw in zip(found.spec.graders, found.graders, strict=True)
        if grader.type == "model"
    ]


def settled_effects(rows: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Effect position -> its reconciled status, the first settlement of each standing
    (`definitions.settled_effects`)."""
    out: dict[int, str] = {}
    for r in rows:
        if r["effect_index"] is not None and r["effect_index"] not in out:
            out[r["effect_index"]] = r["status"]
    return out


def review_results(
    rows: Sequence[Mapping[str, Any]], graders: StoredGraderSet
) -> dict[str, StoredResult]:
    """Grader id -> the first human review result, as a grader result
    (`definitions.review_results`)."""
    out: dict[str, StoredResult] = {}
    for r in rows:
        if r["grader_id"] in out:
            continue
        grader = graders.grader(r["grader_id"])
        out[r["grader_id"]] = StoredResult(
            r["grader_id"], grader.version if grader else 1, r["state"]
        )
    return out


class StoredDefinitions:
    """Registered definitions looked up by digest, each read once per command
    (`definitions.Definitions`): the registry as it stands, or with `cutoff` (an audit seq)
    as it stood then; `pass_class_exempt` judges calibrations as evaluator 2 and earlier
    did."""

    def __init__(
        self, reader: Reader, cutoff: int | None = None, *, pass_class_exempt: bool = False
    ) -> None:
        self.reader = reader
        self.cutoff = cutoff
        self.pass_class_exempt = pass_class_exempt
        self._tasks: dict[tuple[str, str], StoredTask | None] = {}
        self._grader_sets: dict[str, GraderSetDocument | None] = {}
        self._validity: dict[str, dict[str, Validity]] = {}
        self._appended: (
            tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]] | None
        ) = None
        # Audit seqs of reviews that count as no human evidence (`no_self_review`: the
        # gate loaders set them); `appended` leaves them out.
        self.refused_reviews: frozenset[int] = frozenset()

    def task(self, task_id: str, task_digest: str) -> StoredTask | None:
        key = (task_id, task_digest)
        if key not in self._tasks:
            document = self.reader.scalar(
                "SELECT document FROM task_revision WHERE task_digest = :digest "
                f"AND task_id = :task{upto(self.cutoff)} ORDER BY id DESC LIMIT 1",
                {"digest": task_digest, "task": task_id, "cutoff": self.cutoff},
            )
            self._tasks[key] = None if document is None else StoredTask.of(json.loads(document))
        return self._tasks[key]

    def grader_set(self, digest: str) -> GraderSetDocument | None:
        if digest not in self._grader_sets:
            self._grader_sets[digest] = grader_set_by_digest(self.reader, digest, self.cutoff)
        return self._grader_sets[digest]

    def validity(self, digest: str) -> dict[str, Validity]:
        """Model graders' validity for the configs of exactly this (pinned) grader set."""
        if digest not in self._validity:
            found = self.grader_set(digest)
            self._validity[digest] = (
                {
                    grader.id: config_validity(
                        self.reader,
                        grader,
                        config,
                        self.cutoff,
                        pass_class_exempt=self.pass_class_exempt,
                    )
                    for grader, config in model_configs(found)
                }
                if found
                else {}
            )
        return self._validity[digest]

    def appended(self, trial_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A trial's reconciliations and human reviews, in order (both tables are read
        whole, once: they hold rows only for the exceptional trials)."""
        if self._appended is None:
            recon: dict[str, list[dict[str, Any]]] = {}
            only = {"cutoff": self.cutoff}
            where = "" if self.cutoff is None else " WHERE audit_seq <= :cutoff"
            for r in self.reader.rows(
                f"SELECT trial_id, effect_index, status FROM reconciliation{where} ORDER BY id",
                only,
            ):
                recon.setdefault(r["trial_id"], []).append(r)
            reviews: dict[str, list[dict[str, Any]]] = {}
            for v in self.reader.rows(
                "SELECT trial_id, grader_id, state, audit_seq FROM review_result"
                f"{where} ORDER BY id",
                only,
            ):
                reviews.setdefault(v["trial_id"], []).append(v)
            self._appended = (recon, reviews)
        counted = self._appended[1].get(trial_id, [])
        if self.refused_reviews:
            counted = [v for v in counted if int(v["audit_seq"]) not in self.refused_reviews]
        return self._appended[0].get(trial_id, []), counted


def rederive(defs: StoredDefinitions, trial: Mapping[str, Any]) -> Classification | None:
    """A stored trial's class from current evidence (None if its definitions vanished):
    `definitions.rederive` over a row of TRIAL_COLUMNS."""
    task = defs.task(trial["task_id"], trial["task_digest"])
    found = defs.grader_set(trial["grader_set_digest"])
    if task is None or found is None:
        return None
    reconciliations, reviews = defs.appended(trial["trial_id"])
    trajectory = trial["trajectory"]
    return classify(
        StoredRecord.of(json.loads(trial["record"])),
        task,
        found.spec,
        validity=defs.validity(trial["grader_set_digest"]),
        trajectory=TrajectoryResult.from_block(json.loads(trajectory)) if trajectory else None,
        reconciliations=settled_effects(reconciliations),
        reviews=review_results(reviews, found.spec),
    )
