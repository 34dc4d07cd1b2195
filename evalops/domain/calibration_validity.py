"""Is a model grader's calibration valid right now? (DESIGN.md section 8), as a pure function.

A calibration is valid when it was made for the grader's current configuration (a changed
prompt, model or rubric makes it stale), was not invalidated by hand, its holdout is large
enough, and every per-class lower bound and the human agreement meet the grader's
`calibration_requirements`. A class on which humans do not agree enough can never be
blocked by the model grader, whatever its metrics.

The pass class is never exempt: the model's pass verdict is what lets a trial pass, so a
pass class without holdout support, without enough human agreement, or below its bounds
makes the calibration `failing`. (Decisions of evaluator 2 and earlier exempted it like any
other class; `pass_class_exempt` keeps that rule for rebuilding their inputs.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from evalops.domain.humanize import measure, plural
from evalops.domain.specs import Grader

CalibrationState = Literal["valid", "stale", "failing", "missing"]
# Verdicts that fail nothing: a calibration must let the grader block at least one other.
NOT_FAILING = frozenset({"task_pass", "pass", "abstain"})
# The verdict that lets a trial pass: `task_pass` for an outcome grader, `pass` for others.
PASS_LABELS = ("task_pass", "pass")


@dataclass(frozen=True)
class Validity:
    state: CalibrationState
    reasons: tuple[str, ...] = ()
    blockable_classes: frozenset[str] = field(default_factory=frozenset)
    """Classes the grader may block on: humans agree enough and the bounds are met."""
    calibration_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reasons": list(self.reasons),
            "blockable_classes": sorted(self.blockable_classes),
            "calibration_id": self.calibration_id,
        }


@dataclass(frozen=True)
class StoredCalibration:
    """What validity needs of a stored calibration record."""

    calibration_id: str
    grader_config_digest: str
    metrics: Mapping[str, Any]
    """The record's `counts`, `human_agreement` and `holdout` blocks (calibration show)."""
    invalidated_reason: str | None = None


def _pass_class_problems(
    label: str,
    per_class: Mapping[str, Any],
    agreement: Mapping[str, Any],
    req: Any,
) -> list[str]:
    """Why the pass class cannot be believed: no holdout support or too little human
    agreement (its bounds are checked with every other class's)."""
    stats = per_class.get(label) or {}
    if not stats.get("support"):
        return [
            f"class {label} (the pass class): no holdout support, so its precision and recall "
            "are unknown; the model's pass verdicts cannot be believed"
        ]
    kappa = agreement.get(label)
    if kappa is None or float(kappa) < req.min_human_agreement:
        shown = measure(kappa, missing="undefined")
        return [
            f"class {label} (the pass class): human agreement {shown} is below "
            f"min_human_agreement {measure(req.min_human_agreement)}; the model's pass "
            "verdicts cannot be believed"
        ]
    return []


def _lower(ci: Any) -> float:
    if isinstance(ci, list | tuple) and ci:
        return float(ci[0])
    return 0.0


def pass_class(grader: Grader) -> str | None:
    """The label of `grader`'s pass verdict (None: it produces none)."""
    return next((label for label in PASS_LABELS if label in grader.produces), None)


def calibration_validity(
    grader: Grader,
    current_config_digest: str,
    record: StoredCalibration | None,
    *,
    pass_class_exempt: bool = False,
) -> Validity:
    """The state of `grader`'s newest calibration `record` (None: there is none)."""
    if record is None:
        return Validity("missing", ("no calibration recorded",))
    if record.grader_config_digest != current_config_digest:
        return Validity(
            "stale",
            (
                f"made for grader config {record.grader_config_digest}, the grader is now "
                f"{current_config_digest} (prompt, model or rubric changed)",
            ),
            calibration_id=record.calibration_id,
        )
    if record.invalidated_reason is not None:
        return Validity(
            "stale",
            (f"invalidated: {record.invalidated_reason}",),
            calibration_id=record.calibration_id,
        )
    req = grader.calibration_requirements
    if req is None:
        return Validity(
            "failing",
            ("the grader states no calibration_requirements",),
            calibration_id=record.calibration_id,
        )
    metrics = record.metrics
    reasons: list[str] = []
    holdout_n = int(metrics.get("counts", {}).get("holdout", 0))
    if holdout_n < req.min_holdout_items:
        reasons.append(f"holdout has {plural(holdout_n, 'item')}, needs {req.min_holdout_items}")
    agreement = metrics.get("human_agreement", {})
    overall = agreement.get("overall")
    if overall is None:
        reasons.append(
            "human agreement is undefined (the labels hold a single class): it never meets "
            "min_human_agreement"
        )
    elif float(overall) < req.min_human_agreement:
        reasons.append(
            f"human agreement {measure(overall)} is below min_human_agreement "
            f"{measure(req.min_human_agreement)}"
        )
    per_class_agreement: Mapping[str, Any] = agreement.get("per_class", {})
    blockable: set[str] = set()
    notes: list[str] = []
    per_class: Mapping[str, Any] = metrics.get("holdout", {}).get("per_class", {})
    passing = None if pass_class_exempt else pass_class(grader)
    if passing is not None:
        reasons.extend(_pass_class_problems(passing, per_class, per_class_agreement, req))
    for label, stats in sorted(per_class.items()):
        kappa = per_class_agreement.get(label)
        if label == passing and (
            not stats.get("support") or kappa is None or float(kappa) < req.min_human_agreement
        ):
            continue  # already a reason above: the pass class is never exempt
        if not stats.get("support"):
            # No human-majority item of this class in the holdout: no bounds to meet.
            notes.append(
                f"class {label}: no holdout support, so no bounds; the model grader may not "
                "block it"
            )
            continue
        if kappa is None or float(kappa) < req.min_human_agreement:
            # Not a failure of the calibration: the model simply may not block this class.
            shown = measure(kappa, missing="undefined")
            notes.append(
                f"class {label}: human agreement {shown} is below min_human_agreement "
                f"{measure(req.min_human_agreement)}; the model grader may not block it"
            )
            continue
        precision_lb = _lower(stats.get("precision_ci"))
        recall_lb = _lower(stats.get("recall_ci"))
        ok = True
        if precision_lb < req.min_precision_lower_bound:
            reasons.append(
                f"class {label}: precision lower bound {measure(precision_lb)} is below "
                f"{measure(req.min_precision_lower_bound)} (short by "
                f"{measure(req.min_precision_lower_bound - precision_lb)})"
            )
            ok = False
        if recall_lb < req.min_recall_lower_bound:
            reasons.append(
                f"class {label}: recall lower bound {measure(recall_lb)} is below "
                f"{measure(req.min_recall_lower_bound)} (short by "
                f"{measure(req.min_recall_lower_bound - recall_lb)})"
            )
            ok = False
        if ok:
            blockable.add(label)
    failing_classes = sorted(set(grader.produces) - NOT_FAILING)
    if failing_classes and not blockable & set(failing_classes):
        reasons.append(
            f"the grader could block none of its failing classes ({', '.join(failing_classes)}) "
            "under this calibration"
        )
    if reasons:
        return Validity(
            "failing",
            tuple(reasons + notes),
            frozenset(blockable),
            calibration_id=record.calibration_id,
        )
    return Validity(
        "valid", tuple(notes), frozenset(blockable), calibration_id=record.calibration_id
    )
