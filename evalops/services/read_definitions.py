"""Registered definitions and a trial's current class, read through a `Reader` (plain SQL).

The read path's counterpart of evalops/services/definitions.py (`Definitions`, `rederive`)
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


def calibration_of_config(reader: Reader, config_digest: str) -> StoredCalibration | None:
    """The newest calibration of exactly this grader config (`queries.calibration_of_config`)."""
    row = reader.first(
        "SELECT id, calibration_id, grader_config_digest, record FROM calibration "
        "WHERE grader_config_digest = :config ORDER BY id DESC LIMIT 1",
        {"config": config_digest},
    )
    if row is None:
        return None
    reason = reader.scalar(
        "SELECT reason FROM calibration_invalidation WHERE calibration_row_id = :id "
        "ORDER BY id DESC LIMIT 1",
        {"id": row["id"]},
    )
    return StoredCalibration(
        calibration_id=row["calibration_id"],
        grader_config_digest=row["grader_config_digest"],
        metrics=json.loads(row["record"]),
        invalidated_reason=reason,
    )


def config_validity(reader: Reader, grader: GraderFacts, config_digest: str) -> Validity:
    """Validity of one grader config from its own newest calibration only
    (`queries.config_validity`)."""
    record = calibration_of_config(reader, config_digest)
    if record is None:
        others = [
            r["calibration_id"]
            for r in reader.rows(
                "SELECT calibration_id FROM calibration WHERE grader_id = :grader "
                "AND grader_config_digest != :config ORDER BY id",
                {"grader": grader.id, "config": config_digest},
            )
        ]
        reasons = [f"no calibration recorded for config {config_digest}"]
        if others:
            reasons.append(
                f"calibrations of other configs of {grader.id} ({', '.join(others)}) never "
                "count for this one"
            )
        return Validity("missing", tuple(reasons))
    return calibration_validity(grader, config_digest, record)


def grader_set_by_digest(reader: Reader, grader_set_digest: str) -> GraderSetDocument | None:
    """The newest registered grader set of this digest (`queries.grader_set_by_digest`)."""
    document = reader.scalar(
        "SELECT document FROM grader_set WHERE grader_set_digest = :digest "
        "ORDER BY id DESC LIMIT 1",
        {"digest": grader_set_digest},
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
    (`definitions.Definitions` without a cutoff: the registry as it stands)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._tasks: dict[tuple[str, str], StoredTask | None] = {}
        self._grader_sets: dict[str, GraderSetDocument | None] = {}
        self._validity: dict[str, dict[str, Validity]] = {}
        self._appended: (
            tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]] | None
        ) = None

    def task(self, task_id: str, task_digest: str) -> StoredTask | None:
        key = (task_id, task_digest)
        if key not in self._tasks:
            document = self.reader.scalar(
                "SELECT document FROM task_revision WHERE task_digest = :digest "
                "AND task_id = :task ORDER BY id DESC LIMIT 1",
                {"digest": task_digest, "task": task_id},
            )
            self._tasks[key] = None if document is None else StoredTask.of(json.loads(document))
        return self._tasks[key]

    def grader_set(self, digest: str) -> GraderSetDocument | None:
        if digest not in self._grader_sets:
            self._grader_sets[digest] = grader_set_by_digest(self.reader, digest)
        return self._grader_sets[digest]

    def validity(self, digest: str) -> dict[str, Validity]:
        """Model graders' validity for the configs of exactly this (pinned) grader set."""
        if digest not in self._validity:
            found = self.grader_set(digest)
            self._validity[digest] = (
                {
                    grader.id: config_validity(self.reader, grader, config)
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
            for r in self.reader.rows(
                "SELECT trial_id, effect_index, status FROM reconciliation ORDER BY id"
            ):
                recon.setdefault(r["trial_id"], []).append(r)
            reviews: dict[str, list[dict[str, Any]]] = {}
            for v in self.reader.rows(
                "SELECT trial_id, grader_id, state FROM review_result ORDER BY id"
            ):
                reviews.setdefault(v["trial_id"], []).append(v)
            self._appended = (recon, reviews)
        return self._appended[0].get(trial_id, []), self._appended[1].get(trial_id, [])


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
