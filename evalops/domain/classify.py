"""Primary classification of a trial (DESIGN.md section 6.2), as a pure function.

Every rule that applies adds a candidate class; the trial gets the highest by canonical
precedence and every other candidate becomes a secondary label. So a hard failure can
never hide behind a pass, and evalops, not the harness, decides what a trial is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalops.domain.calibration_validity import Validity
from evalops.domain.specs import EvalTaskSpec, GraderSet
from evalops.domain.trajectory import TrajectoryResult
from evalops.domain.trial_record import GraderResult, TrialRecord
from evalops.domain.vocabulary import CANONICAL_PRECEDENCE, TrialClass

RANK: dict[str, int] = {c: i for i, c in enumerate(CANONICAL_PRECEDENCE)}
FAILING_STATES = frozenset(CANONICAL_PRECEDENCE) - {"task_pass"}


@dataclass(frozen=True)
class Classification:
    primary: TrialClass
    secondary_labels: tuple[str, ...]
    score: float
    gating_score: float
    reasons: tuple[str, ...]
    """Why each candidate class applied, highest first."""
    review: tuple[tuple[str, str], ...] = ()
    """(grader id, why) pairs that belong in the human review queue."""

    @property
    def passed(self) -> bool:
        return self.primary == "task_pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "primary_classification": self.primary,
            "secondary_labels": list(self.secondary_labels),
            "score": self.score,
            "gating_score": self.gating_score,
            "reasons": list(self.reasons),
        }


@dataclass
class _Candidates:
    found: dict[str, list[str]] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    review: list[tuple[str, str]] = field(default_factory=list)

    def add(self, cls: str, why: str) -> None:
        self.found.setdefault(cls, []).append(why)

    def label(self, text: str) -> None:
        if text not in self.labels:
            self.labels.append(text)


def effective_effect_statuses(
    record: TrialRecord, reconciliations: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(effect_key, status) after reconciliation: a reconciled effect takes its new status."""
    return [
        (e.effect_key, reconciliations.get(e.effect_key, e.status)) for e in record.external_effects
    ]


def _effects(record: TrialRecord, reconciliations: Mapping[str, str], c: _Candidates) -> None:
    committed: dict[str, int] = {}
    for key, status in effective_effect_statuses(record, reconciliations):
        if status == "committed":
            committed[key] = committed.get(key, 0) + 1
        elif status in ("requested", "unknown"):
            c.add("ambiguous_external_effect", f"effect {key} is {status} and not reconciled")
    for key, count in committed.items():
        if count > 1:
            c.add("hard_constraint_fail", f"effect {key} was committed {count} times")


def _runtime(record: TrialRecord, c: _Candidates) -> None:
    status = record.runtime.status
    if status in ("infrastructure_error", "timeout"):
        c.add("infrastructure_invalid", f"runtime status {status}")
    elif status in ("agent_error", "runtime_error"):
        c.add(status, f"runtime status {status}")


def _results_by_grader(
    record: TrialRecord, reviews: Mapping[str, GraderResult]
) -> dict[str, GraderResult]:
    """The last result of each grader; a human review result stands in for its grader's."""
    out: dict[str, GraderResult] = {}
    for result in record.grader_results:
        out[result.grader_id] = result
    out.update(reviews)
    return out


def _graders(
    record: TrialRecord,
    graders: GraderSet,
    validity: Mapping[str, Validity],
    reviews: Mapping[str, GraderResult],
    c: _Candidates,
) -> None:
    for raw in record.grader_results:
        grader = graders.grader(raw.grader_id)
        if grader is None:
            c.add("grader_invalid", f"result from unknown grader {raw.grader_id}")
        elif grader.version != raw.grader_version:
            c.add(
                "grader_invalid",
                f"result from {grader.id} version {raw.grader_version}, the set has "
                f"version {grader.version}",
            )
        elif raw.state not in grader.produces:
            c.add(
                "grader_invalid",
                f"{grader.id} said {raw.state}, outside its produces {list(grader.produces)}",
            )
    results = _results_by_grader(record, reviews)
    runtime_ok = record.runtime.status == "ok"
    for grader in graders.graders:
        result = results.get(grader.id)
        human = grader.id in reviews
        if not grader.blocking:
            if result is not None:
                c.label(f"diagnostic:{grader.id}:{result.state}")
            continue
        if grader.type == "model" and not human:
            v = validity.get(grader.id)
            if v is None or v.state != "valid":
                state = v.state if v else "missing"
                c.add("grader_invalid", f"blocking model grader {grader.id} calibration {state}")
                c.label("uncalibrated_model_grader")
                if result is not None:
                    c.review.append((grader.id, f"calibration {state}"))
                continue
            if (
                result is not None
                and result.state in FAILING_STATES
                and result.state not in v.blockable_classes
            ):
                # Humans do not agree enough on this class: the model may not block it.
                c.label(f"unblockable_model_verdict:{grader.id}:{result.state}")
                c.review.append((grader.id, f"{result.state} is not blockable by the model"))
                continue
        if result is None:
            if runtime_ok:
                c.add("missing_required_evidence", f"blocking grader {grader.id} has no result")
            continue
        if result.state == "abstain":
            if grader.type == "model":
                c.review.append((grader.id, "abstained"))
            if runtime_ok:
                c.add("missing_required_evidence", f"blocking grader {grader.id} abstained")
            continue
        if result.state not in grader.produces or result.state not in FAILING_STATES:
            continue
        c.add(result.state, f"{'human review' if human else grader.id} said {result.state}")


def _evidence(record: TrialRecord, task: EvalTaskSpec, c: _Candidates) -> None:
    if record.runtime.status != "ok" or task.contract.required_artifacts is None:
        return
    present = {
        a.kind for a in (record.artifact_manifest.artifacts if record.artifact_manifest else [])
    }
    for kind in task.contract.required_artifacts.logical:
        if kind not in present:
            c.add("missing_required_evidence", f"required artifact {kind} is not in the manifest")


def _fixtures(record: TrialRecord, task: EvalTaskSpec, c: _Candidates) -> bool:
    """True when the trial failed closed on a fixture miss."""
    if record.fixture_misses <= 0:
        return False
    on_miss = task.fixtures.onMiss if task.fixtures else None
    if on_miss == "live":
        c.label("fixture_miss_live")
        return False
    c.add("task_fail", f"{record.fixture_misses} fixture misses with onMiss fail")
    return True


def _score(
    record: TrialRecord,
    task: EvalTaskSpec,
    graders: GraderSet,
    reviews: Mapping[str, GraderResult],
    primary: str,
    trajectory: TrajectoryResult | None,
    failed_closed: bool,
) -> tuple[float, float]:
    contract = task.contract
    if failed_closed:
        return 0.0, 0.0
    if contract.expected is not None and contract.expected.kind == "trajectory":
        score = 1.0 if trajectory is not None and trajectory.matched else 0.0
        return score, score
    results = _results_by_grader(record, reviews)
    source = contract.score_from or next(
        (g.id for g in graders.graders if g.blocking and g.layer == "outcome"), None
    )
    result = results.get(source) if source else None
    if result is not None and result.score is not None:
        score = float(result.score)
    else:
        score = 1.0 if primary == "task_pass" else 0.0
    unmatched = trajectory is not None and not trajectory.matched
    return score, 0.0 if unmatched else score


def classify(
    record: TrialRecord,
    task: EvalTaskSpec,
    graders: GraderSet,
    *,
    validity: Mapping[str, Validity],
    trajectory: TrajectoryResult | None,
    reconciliations: Mapping[str, str] | None = None,
    reviews: Mapping[str, GraderResult] | None = None,
) -> Classification:
    """Derive a trial's one primary class, its secondary labels, score and gating score.

    `trajectory` is the graded expectation (None when the task has none); `reconciliations`
    maps effect keys to their reconciled status; `reviews` maps grader ids to appended
    human results, which stand in for that grader's own result.
    """
    reconciliations = reconciliations or {}
    reviews = reviews or {}
    c = _Candidates()
    _effects(record, reconciliations, c)
    _runtime(record, c)
    _graders(record, graders, validity, reviews, c)
    _evidence(record, task, c)
    if trajectory is not None and not trajectory.matched:
        c.add("task_fail", "trajectory expectation unmatched")
    failed_closed = _fixtures(record, task, c)
    ordered = sorted(c.found, key=RANK.__getitem__)
    primary: TrialClass = ordered[0] if ordered else "task_pass"  # type: ignore[assignment]
    labels = list(ordered[1:])
    labels += [label for label in c.labels if label not in labels]
    labels += [label for label in record.secondary_labels if label not in labels]
    score, gating = _score(record, task, graders, reviews, primary, trajectory, failed_closed)
    reasons = tuple(f"{cls}: {why}" for cls in ordered for why in c.found[cls])
    return Classification(primary, tuple(labels), score, gating, reasons, tuple(c.review))
