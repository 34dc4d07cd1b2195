"""Calibration measured against required, in the audit report (docs/verify.md).

The demo's valid calibration of `reply-quality` (CAL-2) was recorded from
registry/calibration/reply-quality.jsonl. Every number the report shows is recomputed here
from that file with independent implementations: scikit-learn's precision, recall, Cohen's
kappa and confusion matrix, statsmodels' Wilson interval (`proportion_confint(method=
"wilson")`), and the thresholds read from the grader's YAML.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_score, recall_score
from statsmodels.stats.proportion import proportion_confint

from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY

LABELS = EXAMPLE_REGISTRY / "calibration" / "reply-quality.jsonl"
TOL = 1e-9


def human_majority(labels: list[str]) -> str | None:
    """The label more annotators gave than any other (None on a tie)."""
    ranked = Counter(labels).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def holdout() -> tuple[list[str], list[str], int]:
    """(human majority, model label) of the holdout items that have a majority, and the
    holdout size."""
    items = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    held = [i for i in items if i["split"] == "holdout"]
    truth, predicted = [], []
    for item in held:
        label = human_majority([h["label"] for h in item["human_labels"]])
        if label is not None:
            truth.append(label)
            predicted.append(item["model_label"])
    return truth, predicted, len(held)


def requirements() -> dict[str, Any]:
    graders = yaml.safe_load((EXAMPLE_REGISTRY / "graders" / "support-graders.yaml").read_text())
    (judge,) = [g for g in graders["graders"] if g["id"] == "reply-quality"]
    required: dict[str, Any] = judge["calibration_requirements"]
    return required


@pytest.fixture
def measured(demo: Path, cli: Cli) -> dict[str, Any]:
    out = cli("report", "audit", "--gate", "GATE-1", "--format", "json", cwd=demo)
    assert out.code == 0, out.stderr
    (row,) = [c for c in json.loads(out.stdout)["calibration"] if c["grader_id"] == "reply-quality"]
    assert row["calibration_id"] == "CAL-2" and row["state"] == "valid"
    found: dict[str, Any] = row["measured"]
    return found


def test_per_class_precision_and_recall_with_wilson_bounds(measured: dict[str, Any]) -> None:
    truth, predicted, _ = holdout()
    classes = sorted(set(truth))
    assert [c["class"] for c in measured["classes"]] == classes
    for row in measured["classes"]:
        label = row["class"]
        hits = sum(1 for t, p in zip(truth, predicted, strict=True) if t == label == p)
        made = predicted.count(label)
        support = truth.count(label)
        assert row["support"] == support
        (precision,) = precision_score(truth, predicted, labels=[label], average=None)
        (recall,) = recall_score(truth, predicted, labels=[label], average=None)
        assert row["precision"] == pytest.approx(precision, abs=TOL)
        assert row["recall"] == pytest.approx(recall, abs=TOL)
        assert row["precision_ci"] == pytest.approx(
            list(proportion_confint(hits, made, method="wilson")), abs=TOL
        )
        assert row["recall_ci"] == pytest.approx(
            list(proportion_confint(hits, support, method="wilson")), abs=TOL
        )
        req = requirements()
        assert row["meets_precision"] is (
            row["precision_ci"][0] >= req["min_precision_lower_bound"]
        )
        assert row["meets_recall"] is (row["recall_ci"][0] >= req["min_recall_lower_bound"])


def test_kappa_holdout_size_and_thresholds(measured: dict[str, Any]) -> None:
    truth, predicted, size = holdout()
    decided = [(t, p) for t, p in zip(truth, predicted, strict=True) if p != "abstain"]
    kappa = cohen_kappa_score([t for t, _ in decided], [p for _, p in decided])
    assert measured["kappa_vs_majority"] == pytest.approx(kappa, abs=TOL)
    # The model is measured on the items with a human majority: those count, ties do not.
    assert measured["holdout_items"] == len(truth) < size
    assert measured["required"] == requirements()
    assert measured["meets_holdout"] is (len(truth) >= requirements()["min_holdout_items"])
    assert measured["no_majority"] == size - len(truth)


def test_confusion_matrix(measured: dict[str, Any]) -> None:
    truth, predicted, _ = holdout()
    columns = sorted(set(predicted))
    rows = sorted(set(truth))
    labels = sorted(set(columns) | set(rows))
    matrix = confusion_matrix(truth, predicted, labels=labels)
    expected = [
        {"human": h, "counts": [int(matrix[labels.index(h)][labels.index(m)]) for m in columns]}
        for h in rows
    ]
    assert measured["confusion"] == {"columns": columns, "rows": expected}


def test_html_and_markdown_show_the_bounds_beside_the_thresholds(demo: Path, cli: Cli) -> None:
    req = requirements()
    html = cli("report", "audit", "--gate", "GATE-1", "--format", "html", cwd=demo).stdout
    assert "measured against required" in html
    assert f"lower bound needs {req['min_precision_lower_bound']:.3f}" in html
    md = cli("report", "audit", "--gate", "GATE-1", "--format", "md", cwd=demo).stdout
    assert "| class | n | precision [95% Wilson] | recall [95% Wilson] | human kappa |" in md
    assert f"(needs {req['min_holdout_items']})" in md
