"""Is a model grader's calibration valid right now? (docs/promotion.md), as a pure function.

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
from typing import TYPE_CHECKING, Any, Literal

from evalops.domain.humanize import measure, plural

if TYPE_CHECKING:  # `calibration status` judges calibrations without importing pydantic
    from evalops.domain.facts import GraderFacts, RequirementFacts

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


def pass_class(grader: GraderFacts) -> str | None:
    """The label of `grader`'s pass verdict (None: it produces none)."""
    return next((label for label in PASS_LABELS if label in grader.produces), None)


def calibration_validity(
    grader: GraderFacts,
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
    short = _short_holdout(metrics, req.min_holdout_items)
    if short:
        reasons.append(short)
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


def _meets(value: Any, required: float) -> bool | None:
    return None if value is None else float(value) >= required


def _class_row(
    label: str, stats: Mapping[str, Any], kappa: Any, req: RequirementFacts | None
) -> dict[str, Any]:
    """One class of the holdout: precision and recall with their Wilson intervals beside
    the lower bounds the grader requires, and the humans' own agreement on the class."""
    precision_ci = stats.get("precision_ci")
    recall_ci = stats.get("recall_ci")
    row: dict[str, Any] = {
        "class": label,
        "support": stats.get("support", 0),
        "precision": stats.get("precision"),
        "precision_ci": precision_ci,
        "recall": stats.get("recall"),
        "recall_ci": recall_ci,
        "human_kappa": kappa,
    }
    if req is not None:
        supported = bool(stats.get("support"))
        row["meets_precision"] = _meets(_lower(precision_ci), req.min_precision_lower_bound)
        row["meets_recall"] = _meets(_lower(recall_ci), req.min_recall_lower_bound)
        row["meets_human_agreement"] = _meets(kappa, req.min_human_agreement)
        if not supported:
            row["meets_precision"] = row["meets_recall"] = None
    return row


def _short_holdout(metrics: Mapping[str, Any], needed: int) -> str | None:
    """Why the holdout is too small to measure the model on, or None."""
    usable = usable_holdout(metrics)
    if usable >= needed:
        return None
    tied = int((metrics.get("counts") or {}).get("holdout", 0)) - usable
    beside = f" with a human majority ({tied} more without one)" if tied else ""
    return f"holdout has {plural(usable, 'item')}{beside}, needs {needed}"


def usable_holdout(metrics: Mapping[str, Any]) -> int:
    """The holdout items the model is measured on: those with a human majority. A record
    made before that count was kept counted every holdout item, and is judged as it was."""
    counts = metrics.get("counts") or {}
    return int(counts.get("holdout_with_majority", counts.get("holdout", 0)))


def measured_against_required(
    requirements: RequirementFacts | None, metrics: Mapping[str, Any]
) -> dict[str, Any]:
    """What a calibration record measured beside what the grader requires: holdout size,
    human agreement (overall and per class), the model's kappa against the human majority,
    per-class precision and recall with Wilson 95% bounds, and the confusion matrix (human
    majority by row, model verdict by column). Numbers are the record's own."""
    agreement = metrics.get("human_agreement") or {}
    holdout = metrics.get("holdout") or {}
    per_class_kappa: Mapping[str, Any] = agreement.get("per_class") or {}
    required = None
    if requirements is not None:
        required = {
            "min_holdout_items": requirements.min_holdout_items,
            "min_precision_lower_bound": requirements.min_precision_lower_bound,
            "min_recall_lower_bound": requirements.min_recall_lower_bound,
            "min_human_agreement": requirements.min_human_agreement,
        }
    holdout_n = usable_holdout(metrics)
    return {
        "required": required,
        "holdout_items": holdout_n,
        "meets_holdout": None
        if requirements is None
        else holdout_n >= requirements.min_holdout_items,
        "human_agreement": {
            "method": agreement.get("method"),
            "annotators": agreement.get("annotators"),
            "overall": agreement.get("overall"),
            "meets": None
            if requirements is None
            else _meets(agreement.get("overall"), requirements.min_human_agreement),
        },
        "kappa_vs_majority": holdout.get("kappa_vs_majority"),
        "abstain_rate": holdout.get("abstain_rate"),
        "no_majority": holdout.get("no_majority"),
        "classes": [
            _class_row(label, stats, per_class_kappa.get(label), requirements)
            for label, stats in sorted((holdout.get("per_class") or {}).items())
        ],
        "confusion": _confusion(holdout.get("confusion") or {}),
    }


def _confusion(matrix: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The confusion matrix as rows over one shared, sorted list of model verdicts."""
    columns = sorted({m for row in matrix.values() for m in row})
    return {
        "columns": columns,
        "rows": [
            {"human": human, "counts": [int(row.get(m, 0)) for m in columns]}
            for human, row in sorted(matrix.items())
        ],
    }


def validity_digest(validity: Mapping[str, Validity]) -> str:
    """What a classification depended on of its grader set's calibrations, as one digest
    (recorded per ingest batch, compared by the gate to know what to re-derive)."""
    from evalops.domain.canonical import digest

    return digest({gid: v.as_dict() for gid, v in sorted(validity.items())})


#: No more than this many extra holdout items are ever suggested (beyond: "cannot").
MAX_MORE_ITEMS = 100_000


def wilson_lower_at(rate: float, n: int, z: float = 1.959963984540054) -> float:
    """The Wilson score lower bound of `n` items observed at proportion `rate` (a rate, not
    a count: at a fixed rate it grows with n, so "how many items" has one answer)."""
    denom = 1 + z * z / n
    centre = (rate + z * z / (2 * n)) / denom
    half = z * (rate * (1 - rate) / n + z * z / (4 * n * n)) ** 0.5 / denom
    return max(0.0, float(centre - half))


def _more_items(rate: float, n: int, bound: float) -> int | None:
    """The fewest extra items that, at the observed `rate`, lift the Wilson lower bound of
    `n` items to `bound` (None: the rate itself is not above the bound, no number will)."""
    if rate <= bound or wilson_lower_at(rate, n + MAX_MORE_ITEMS) < bound:
        return None
    low, high = 0, MAX_MORE_ITEMS
    while low < high:  # the bound grows with n at a fixed rate
        mid = (low + high) // 2
        if wilson_lower_at(rate, n + mid) >= bound:
            high = mid
        else:
            low = mid + 1
    return low


def holdout_shortfalls(grader: GraderFacts, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """For each class whose precision or recall lower bound is short of the grader's
    requirement: how many more holdout items of that class, at the observed precision or
    recall, would meet it (`more_items` None: not at this rate, the model must agree more)."""
    req = grader.calibration_requirements
    if req is None:
        return []
    out: list[dict[str, Any]] = []
    per_class: Mapping[str, Any] = metrics.get("holdout", {}).get("per_class", {})
    for label, stats in sorted(per_class.items()):
        support = int(stats.get("support") or 0)
        recall, precision = stats.get("recall"), stats.get("precision")
        if not support or recall is None:
            continue
        hits = round(float(recall) * support)
        predicted = round(hits / float(precision)) if precision else 0
        for metric, rate, n, bound in (
            ("precision", precision, predicted, req.min_precision_lower_bound),
            ("recall", recall, support, req.min_recall_lower_bound),
        ):
            if rate is None or not n or _lower(stats.get(f"{metric}_ci")) >= bound:
                continue
            out.append(
                {
                    "class": label,
                    "metric": metric,
                    "observed": float(rate),
                    "lower_bound": _lower(stats.get(f"{metric}_ci")),
                    "required": float(bound),
                    "items": n,
                    "more_items": _more_items(float(rate), n, float(bound)),
                }
            )
    return out


def shortfall_line(s: Mapping[str, Any]) -> str:
    """A shortfall in words, with what to do about it."""
    head = (
        f"class {s['class']}: {s['metric']} lower bound {measure(s['lower_bound'])} of "
        f"{s['items']} items is below {measure(s['required'])}"
    )
    if s["more_items"] is None:
        return (
            f"{head}; at the observed {s['metric']} {measure(s['observed'])} no number of "
            "items meets it: the model must agree with the humans more often"
        )
    return (
        f"{head}; about {s['more_items']} more holdout items of class {s['class']} at the "
        f"observed {s['metric']} {measure(s['observed'])} would meet it"
    )


BLOCKABLE_MEANING = (
    "a blockable class is one the model grader's verdict may decide alone (humans agree on "
    "it and the holdout bounds are met); its verdicts of other classes wait for a human in "
    "the review queue"
)
