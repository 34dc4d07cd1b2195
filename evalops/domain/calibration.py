"""Calibration metrics of a model grader against human labels (docs/promotion.md), pure.

Conventions for degenerate data (documented, never NaN):
- Human majority: the most frequent human label of an item; a tie means no majority and
  the item is left out of precision, recall and model-vs-majority kappa (`no_majority`).
- Kappa when chance agreement is 1 (every rating is one and the same class) is undefined:
  None, as with no rated items. Undefined agreement never meets a requirement
  (docs/promotion.md): a set where everyone says one class shows nothing about telling
  classes apart.
- Precision with no model predictions of a class, or recall with no majority items of it:
  None, with the uninformative interval [0.0, 1.0]; a lower bound of 0.0 never passes.
- An abstention is not a prediction (left out of precision) but counts as a miss in recall.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
ABSTAIN = "abstain"


@dataclass(frozen=True)
class LabelledItem:
    item_id: str
    split: str
    stratum: str
    human_labels: tuple[tuple[str, str], ...]
    """(annotator, label) pairs."""
    model_label: str


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion; [0, 1] when there are no trials."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _kappa(observed: float, expected: float) -> float | None:
    if expected >= 1.0 - 1e-12:
        return None  # one class only: chance explains everything, kappa is 0/0
    return (observed - expected) / (1 - expected)


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters over (label a, label b) pairs."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(1 for a, b in pairs if a == b) / n
    left = Counter(a for a, _ in pairs)
    right = Counter(b for _, b in pairs)
    expected = sum(left[c] * right[c] for c in left.keys() | right.keys()) / (n * n)
    return _kappa(observed, expected)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' kappa over items each rated by the same number (>= 2) of raters."""
    items = [r for r in ratings if r]
    if not items:
        return None
    m = len(items[0])
    if m < 2 or any(len(r) != m for r in items):
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings per item")
    n = len(items)
    totals: Counter[str] = Counter()
    agreement = 0.0
    for r in items:
        counts = Counter(r)
        totals.update(counts)
        agreement += (sum(c * c for c in counts.values()) - m) / (m * (m - 1))
    observed = agreement / n
    expected = sum((t / (n * m)) ** 2 for t in totals.values())
    return _kappa(observed, expected)


def majority(labels: Sequence[str]) -> str | None:
    counts = Counter(labels).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _binary(label: str, target: str) -> str:
    return "yes" if label == target else "no"


def human_agreement(items: Sequence[LabelledItem]) -> dict[str, Any]:
    """Cohen's kappa for 2 annotators, Fleiss' for 3 or more; overall and per class."""
    annotators = sorted({a for item in items for a, _ in item.human_labels})
    classes = sorted({label for item in items for _, label in item.human_labels})
    if len(annotators) <= 2:
        pairs = []
        for item in items:
            by = dict(item.human_labels)
            if len(annotators) == 2 and all(a in by for a in annotators):
                pairs.append((by[annotators[0]], by[annotators[1]]))
        return {
            "method": "cohen",
            "annotators": len(annotators),
            "items": len(pairs),
            "overall": cohen_kappa(pairs),
            "per_class": {
                c: cohen_kappa([(_binary(a, c), _binary(b, c)) for a, b in pairs]) for c in classes
            },
        }
    ratings = [[label for _, label in item.human_labels] for item in items]
    return {
        "method": "fleiss",
        "annotators": len(annotators),
        "items": len(ratings),
        "overall": fleiss_kappa(ratings),
        "per_class": {
            c: fleiss_kappa([[_binary(x, c) for x in r] for r in ratings]) for c in classes
        },
    }


def holdout_metrics(items: Sequence[LabelledItem]) -> dict[str, Any]:
    """Model vs human majority on the holdout: per-class precision/recall with Wilson
    intervals, kappa, confusion matrix and abstain rate."""
    scored = [(majority([lab for _, lab in i.human_labels]), i.model_label) for i in items]
    with_majority = [(h, m) for h, m in scored if h is not None]
    classes = sorted({h for h, _ in with_majority} | {m for _, m in scored if m != ABSTAIN})
    per_class: dict[str, Any] = {}
    for c in classes:
        support = sum(1 for h, _ in with_majority if h == c)
        predicted = sum(1 for _, m in with_majority if m == c)
        hits = sum(1 for h, m in with_majority if h == c and m == c)
        per_class[c] = {
            "precision": hits / predicted if predicted else None,
            "precision_ci": list(wilson_interval(hits, predicted)),
            "recall": hits / support if support else None,
            "recall_ci": list(wilson_interval(hits, support)),
            "support": support,
        }
    confusion: dict[str, dict[str, int]] = {}
    for h, m in with_majority:
        confusion.setdefault(h, {}).setdefault(m, 0)
        confusion[h][m] += 1
    decided = [(h, m) for h, m in with_majority if m != ABSTAIN]
    abstained = sum(1 for _, m in scored if m == ABSTAIN)
    return {
        "kappa_vs_majority": cohen_kappa(decided),
        "abstain_rate": abstained / len(scored) if scored else 0.0,
        "no_majority": len(scored) - len(with_majority),
        "per_class": per_class,
        "confusion": {h: dict(sorted(row.items())) for h, row in sorted(confusion.items())},
    }


def counts(items: Sequence[LabelledItem]) -> dict[str, Any]:
    per_class: dict[str, dict[str, int]] = {}
    for item in items:
        label = majority([lab for _, lab in item.human_labels]) or "no_majority"
        per_class.setdefault(label, {"calibration": 0, "holdout": 0})[item.split] += 1
    holdout = [i for i in items if i.split == "holdout"]
    return {
        "calibration": sum(1 for i in items if i.split == "calibration"),
        "holdout": len(holdout),
        # What the model is measured on: an item whose humans split evenly has no majority
        # to hold the model to, so it does not count toward min_holdout_items.
        "holdout_with_majority": sum(
            1 for i in holdout if majority([lab for _, lab in i.human_labels]) is not None
        ),
        "per_class": dict(sorted(per_class.items())),
    }


def calibration_metrics(items: Sequence[LabelledItem]) -> dict[str, Any]:
    """The `counts`, `human_agreement` and `holdout` blocks of a calibration record."""
    return {
        "counts": counts(items),
        "human_agreement": human_agreement(items),
        "holdout": holdout_metrics([i for i in items if i.split == "holdout"]),
    }


def item_json(item: LabelledItem) -> Mapping[str, Any]:
    """The canonical JSON object of an item, as the label-set digests hash it."""
    return {
        "item_id": item.item_id,
        "split": item.split,
        "stratum": item.stratum,
        "human_labels": [{"annotator": a, "label": lab} for a, lab in item.human_labels],
        "model_label": item.model_label,
    }
