"""Calibration metrics and validity (docs/formats.md and docs/promotion.md): pure, no database.

Every metric is checked twice: against tables computed by hand here, and against an
independent implementation (scikit-learn's `cohen_kappa_score`, `precision_score` and
`recall_score`; statsmodels' `fleiss_kappa`, `cohens_kappa` and `proportion_confint(method=
"wilson")`), on fixed tables and on random ones (Hypothesis). Where the reference itself is
undefined (NaN: every rating is one and the same class), evalops must give the value its
module docstring documents instead, and no calibration record may ever hold a NaN or an
infinity.

`calibration_validity` is checked on crafted metrics: a holdout below `min_holdout_items`,
a Wilson lower bound below its minimum, or a class on which humans do not agree enough
each make the calibration not valid for exactly what they should.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, precision_score, recall_score
from statsmodels.stats.inter_rater import aggregate_raters, cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from evalops.domain.calibration import (
    ABSTAIN,
    LabelledItem,
    calibration_metrics,
    cohen_kappa,
    fleiss_kappa,
    holdout_metrics,
    human_agreement,
    majority,
    wilson_interval,
)
from evalops.domain.calibration_validity import (
    StoredCalibration,
    Validity,
    calibration_validity,
)
from evalops.domain.specs import Grader

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_LABELS = REPO_ROOT / "registry" / "calibration"

P, F, M = "task_pass", "task_fail", "missing_required_evidence"
ANNOTATORS = ("annotator-a", "annotator-b", "annotator-c", "annotator-d", "annotator-e")
TOL = 1e-9

CAL_REQ = {
    "min_holdout_items": 50,
    "min_precision_lower_bound": 0.8,
    "min_recall_lower_bound": 0.8,
    "min_human_agreement": 0.6,
}
JUDGE: dict[str, Any] = {
    "id": "judge",
    "version": 1,
    "layer": "outcome",
    "type": "model",
    "produces": [P, F, M, ABSTAIN],
    "blocking": True,
    "model": {
        "provider": "example",
        "name": "judge-1",
        "prompt_hash": "sha256:" + "1" * 64,
        "rubric_version": 1,
    },
    "calibration_requirements": CAL_REQ,
}
CONFIG = "sha256:" + "c" * 64


# ----------------------------------------------------------------------------- helpers


@contextmanager
def quiet() -> Iterator[None]:
    """Reference implementations warn (0/0) on degenerate tables; pytest makes that an error."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def item(
    n: int, labels: Sequence[str], model: str, split: str = "holdout", stratum: str = "s"
) -> LabelledItem:
    return LabelledItem(
        item_id=f"item-{n:04d}",
        split=split,
        stratum=stratum,
        human_labels=tuple(zip(ANNOTATORS, labels, strict=False)),
        model_label=model,
    )


def items_from(rows: Sequence[tuple[int, Sequence[str], str]], split: str = "holdout") -> list:
    """(count, human labels, model label) rows -> numbered items."""
    out: list[LabelledItem] = []
    for count, labels, model in rows:
        for _ in range(count):
            out.append(item(len(out) + 1, labels, model, split))
    return out


def no_nan(value: Any) -> None:
    """JSON with no NaN/Infinity, and every number in it finite."""
    json.dumps(value, allow_nan=False)

    def walk(v: Any) -> None:
        if isinstance(v, float):
            assert math.isfinite(v), value
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)

    walk(value)


def ref_cohen_sklearn(pairs: Sequence[tuple[str, str]]) -> float:
    with quiet():
        return float(cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs]))


def ref_cohen_statsmodels(pairs: Sequence[tuple[str, str]]) -> float:
    labels = sorted({x for pair in pairs for x in pair})
    index = {c: i for i, c in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for a, b in pairs:
        table[index[a], index[b]] += 1
    with quiet():
        return float(cohens_kappa(table).kappa)


def ref_fleiss(ratings: Sequence[Sequence[str]]) -> float:
    labels = sorted({x for r in ratings for x in r})
    index = {c: i for i, c in enumerate(labels)}
    data = np.array([[index[x] for x in r] for r in ratings])
    table, _ = aggregate_raters(data, n_cat=len(labels))
    with quiet():
        return float(sm_fleiss_kappa(table, method="fleiss"))


def ref_wilson(successes: int, trials: int) -> tuple[float, float]:
    low, high = proportion_confint(successes, trials, alpha=0.05, method="wilson")
    return float(low), float(high)


def documented_degenerate_kappa(observed_agreement: float) -> None:
    """Module docstring and docs/promotion.md: chance agreement 1 (a single class) -> undefined.

    The references say NaN there; evalops says None, which never meets a requirement.
    """
    assert observed_agreement == 1  # chance agreement 1 forces observed agreement 1


def assert_close(actual: float | None, expected: float, what: str = "") -> None:
    assert actual is not None, what
    assert actual == pytest.approx(expected, abs=TOL), what


# --------------------------------------------------------------------- Wilson interval


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        # by hand: x = 0 -> [0, z^2 / (n + z^2)]; x = n -> [n / (n + z^2), 1]
        (0, 10, (0.0, 3.841458820694124 / 13.841458820694124)),
        (10, 10, (10 / 13.841458820694124, 1.0)),
        # p = 1/2, n = 100: centre 1/2, half z*sqrt(1/400 + z^2/40000)/(1 + z^2/100)
        (50, 100, (0.4038315303659956, 0.5961684696340044)),
        (54, 56, (0.8788121981950989, 0.9901505748517636)),
    ],
)
def test_wilson_interval_hand_computed(
    successes: int, trials: int, expected: tuple[float, float]
) -> None:
    low, high = wilson_interval(successes, trials)
    assert low == pytest.approx(expected[0], abs=1e-12)
    assert high == pytest.approx(expected[1], abs=1e-12)


def test_wilson_interval_matches_statsmodels_on_a_grid() -> None:
    for trials in [*range(1, 41), 57, 100, 250, 1000]:
        for successes in range(trials + 1):
            low, high = wilson_interval(successes, trials)
            ref_low, ref_high = ref_wilson(successes, trials)
            assert low == pytest.approx(ref_low, abs=1e-12), (successes, trials)
            assert high == pytest.approx(ref_high, abs=1e-12), (successes, trials)
            p = successes / trials
            assert 0.0 <= low <= p + 1e-12
            assert p - 1e-12 <= high <= 1.0


def test_wilson_interval_with_no_trials_is_the_documented_uninformative_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_matches_statsmodels_hypothesis(case: tuple[int, int]) -> None:
    successes, trials = case
    low, high = wilson_interval(successes, trials)
    ref_low, ref_high = ref_wilson(successes, trials)
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)


# ------------------------------------------------------------------------ Cohen's kappa


def _pairs(table: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    return [pair for pair, n in table.items() for _ in range(n)]


COHEN_TABLES = {
    # Wikipedia: po = 35/50, pe = .5*.6 + .5*.4 = .5 -> kappa 0.4
    "yes-no-50": (_pairs({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15}), 0.4),
    # po = 0, pe = .5 -> kappa -1
    "always-disagree": (_pairs({("y", "n"): 5, ("n", "y"): 5}), -1.0),
    # perfect agreement over two classes -> 1
    "perfect": (_pairs({("y", "y"): 3, ("n", "n"): 4}), 1.0),
    # three classes: po = 7/10; a: x4 y3 z3, b: x3 y4 z3; pe = (12+12+9)/100 -> 37/67
    "three-classes": (
        _pairs(
            {
                ("x", "x"): 3,
                ("x", "y"): 1,
                ("y", "y"): 2,
                ("y", "z"): 1,
                ("z", "z"): 2,
                ("z", "y"): 1,
            }
        ),
        float((Fraction(7, 10) - Fraction(33, 100)) / (1 - Fraction(33, 100))),
    ),
    # po = 0 and pe = 0 (no shared label at all) -> 0
    "disjoint-labels": ([("x", "y")], 0.0),
}


@pytest.mark.parametrize("name", sorted(COHEN_TABLES))
def test_cohen_kappa_hand_computed_and_references(name: str) -> None:
    pairs, expected = COHEN_TABLES[name]
    kappa = cohen_kappa(pairs)
    assert_close(kappa, expected, name)
    assert_close(kappa, ref_cohen_sklearn(pairs), f"{name} vs sklearn")
    if len({x for p in pairs for x in p}) > 1:
        assert_close(kappa, ref_cohen_statsmodels(pairs), f"{name} vs statsmodels")


def test_cohen_kappa_degenerate_cases_are_documented_values() -> None:
    assert cohen_kappa([]) is None
    # Every rating one and the same class: chance agreement 1; references say NaN.
    one_class = [("y", "y")] * 7
    assert math.isnan(ref_cohen_sklearn(one_class))
    assert cohen_kappa(one_class) is None
    assert cohen_kappa([("y", "y")]) is None


LABELS = st.sampled_from(["a", "b", "c", "d"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(LABELS, LABELS), min_size=1, max_size=30))
def test_cohen_kappa_matches_sklearn_and_statsmodels(pairs: list[tuple[str, str]]) -> None:
    kappa = cohen_kappa(pairs)
    reference = ref_cohen_sklearn(pairs)
    if math.isnan(reference):
        observed = sum(1 for a, b in pairs if a == b) / len(pairs)
        assert kappa == documented_degenerate_kappa(observed)
        return
    assert kappa is not None
    assert math.isfinite(kappa)
    assert -1.0 - TOL <= kappa <= 1.0 + TOL
    assert kappa == pytest.approx(reference, abs=TOL)
    assert kappa == pytest.approx(ref_cohen_statsmodels(pairs), abs=TOL)


# ------------------------------------------------------------------------ Fleiss' kappa

# Wikipedia's worked example: 10 subjects, 14 raters, 5 categories; kappa = 0.210.
WIKIPEDIA_FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def _ratings(count_rows: Sequence[Sequence[int]]) -> list[list[str]]:
    return [[f"c{j}" for j, n in enumerate(row) for _ in range(n)] for row in count_rows]


def _fleiss_by_hand(ratings: Sequence[Sequence[str]]) -> Fraction:
    """Fleiss (1971) in exact fractions."""
    n, m = len(ratings), len(ratings[0])
    p_bar = (
        sum(Fraction(sum(c * c for c in Counter(r).values()) - m, m * (m - 1)) for r in ratings) / n
    )
    totals = Counter(x for r in ratings for x in r)
    p_e = sum(Fraction(t, n * m) ** 2 for t in totals.values())
    return (p_bar - p_e) / (1 - p_e)


def test_fleiss_kappa_small_table_by_hand() -> None:
    # P_i = 1, 1/3, 1 -> P = 7/9; p_a = 5/9, p_b = 4/9 -> Pe = 41/81; kappa = 22/40
    ratings = [["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"]]
    assert_close(fleiss_kappa(ratings), 0.55)
    assert_close(fleiss_kappa(ratings), ref_fleiss(ratings), "vs statsmodels")


def test_fleiss_kappa_wikipedia_example() -> None:
    ratings = _ratings(WIKIPEDIA_FLEISS)
    kappa = fleiss_kappa(ratings)
    assert kappa is not None
    assert round(kappa, 3) == 0.210
    assert_close(kappa, float(_fleiss_by_hand(ratings)), "exact fractions")
    table = np.array(WIKIPEDIA_FLEISS)
    assert_close(kappa, float(sm_fleiss_kappa(table, method="fleiss")), "vs statsmodels")


def test_fleiss_kappa_degenerate_cases_are_documented_values() -> None:
    assert fleiss_kappa([]) is None
    one_class = [["y", "y", "y"]] * 4
    assert math.isnan(ref_fleiss(one_class))
    assert fleiss_kappa(one_class) is None
    with pytest.raises(ValueError):
        fleiss_kappa([["a", "b"], ["a", "b", "a"]])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda m: st.lists(st.lists(LABELS, min_size=m, max_size=m), min_size=1, max_size=15)
    )
)
def test_fleiss_kappa_matches_statsmodels(ratings: list[list[str]]) -> None:
    kappa = fleiss_kappa(ratings)
    reference = ref_fleiss(ratings)
    if math.isnan(reference):
        m = len(ratings[0])
        observed = sum(
            (sum(c * c for c in Counter(r).values()) - m) / (m * (m - 1)) for r in ratings
        ) / len(ratings)
        assert kappa == documented_degenerate_kappa(observed)
        return
    assert kappa is not None
    assert math.isfinite(kappa)
    assert kappa <= 1.0 + TOL
    assert kappa == pytest.approx(reference, abs=TOL)
    assert kappa == pytest.approx(float(_fleiss_by_hand(ratings)), abs=TOL)


# ------------------------------------------------------------------------------ majority


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([P, P], P),
        ([P, F], None),
        ([P, F, F], F),
        ([P, F, M], None),
        ([P, P, F, F, M], None),
        ([M], M),
        ([], None),
    ],
)
def test_majority_and_its_tie_convention(labels: list[str], expected: str | None) -> None:
    assert majority(labels) == expected


# ------------------------------------------------------------------------ human agreement


def test_human_agreement_two_annotators_is_cohen_overall_and_per_class() -> None:
    items = items_from(
        [
            (6, [P, P], P),
            (2, [P, P], F),
            (1, [P, P], ABSTAIN),
            (4, [F, F], F),
            (1, [F, F], P),
            (1, [P, F], F),
        ]
    )
    agreement = human_agreement(items)
    assert agreement["method"] == "cohen"
    assert agreement["annotators"] == 2
    # po = 14/15; a: P 10, F 5; b: P 9, F 6 -> pe = 120/225 -> kappa 90/105 = 6/7
    assert_close(agreement["overall"], 6 / 7)
    pairs = [
        (dict(i.human_labels)[ANNOTATORS[0]], dict(i.human_labels)[ANNOTATORS[1]]) for i in items
    ]
    assert_close(agreement["overall"], ref_cohen_sklearn(pairs), "vs sklearn")
    # With two classes, each one-vs-rest kappa equals the overall kappa.
    assert set(agreement["per_class"]) == {P, F}
    for c in (P, F):
        binary = [("y" if a == c else "n", "y" if b == c else "n") for a, b in pairs]
        assert_close(agreement["per_class"][c], ref_cohen_sklearn(binary), c)
        assert_close(agreement["per_class"][c], 6 / 7, c)


def test_human_agreement_three_annotators_is_fleiss_overall_and_per_class() -> None:
    rows = [
        (10, [P, P, P], P),
        (10, [F, F, F], F),
        (4, [M, M, F], M),
        (3, [M, P, M], M),
        (2, [P, F, M], ABSTAIN),
    ]
    items = items_from(rows)
    agreement = human_agreement(items)
    assert agreement["method"] == "fleiss"
    assert agreement["annotators"] == 3
    ratings = [[lab for _, lab in i.human_labels] for i in items]
    assert_close(agreement["overall"], ref_fleiss(ratings), "overall vs statsmodels")
    assert_close(agreement["overall"], float(_fleiss_by_hand(ratings)), "overall by hand")
    assert set(agreement["per_class"]) == {P, F, M}
    for c in (P, F, M):
        binary = [["y" if x == c else "n" for x in r] for r in ratings]
        assert_close(agreement["per_class"][c], ref_fleiss(binary), c)


# ------------------------------------------------------- holdout: precision, recall, kappa


HAND_HOLDOUT = [
    (6, [P, P], P),
    (2, [P, P], F),
    (1, [P, P], ABSTAIN),
    (4, [F, F], F),
    (1, [F, F], P),
    (1, [P, F], F),  # no majority: left out of precision, recall and kappa
]


def test_holdout_metrics_hand_computed_table() -> None:
    h = holdout_metrics(items_from(HAND_HOLDOUT))
    assert set(h["per_class"]) == {P, F}
    pass_, fail = h["per_class"][P], h["per_class"][F]
    # task_pass: 9 majority items, 7 predictions (6 + 1), 6 hits
    assert pass_["support"] == 9
    assert_close(pass_["precision"], 6 / 7)
    assert_close(pass_["recall"], 6 / 9)  # the abstention is a miss
    # task_fail: 5 majority items, 6 predictions (2 + 4), 4 hits
    assert fail["support"] == 5
    assert_close(fail["precision"], 4 / 6)
    assert_close(fail["recall"], 4 / 5)
    for stats, hits, predicted, support in ((pass_, 6, 7, 9), (fail, 4, 6, 5)):
        assert stats["precision_ci"] == pytest.approx(list(ref_wilson(hits, predicted)), abs=1e-12)
        assert stats["recall_ci"] == pytest.approx(list(ref_wilson(hits, support)), abs=1e-12)
    # 13 decided pairs: po = 10/13; majority P 8 F 5, model P 7 F 6 -> pe = 86/169 -> 44/83
    assert_close(h["kappa_vs_majority"], 44 / 83)
    assert_close(h["abstain_rate"], 1 / 15)
    assert h["no_majority"] == 1
    assert h["confusion"] == {P: {ABSTAIN: 1, F: 2, P: 6}, F: {F: 4, P: 1}}


def _reference_holdout(items: Sequence[LabelledItem]) -> dict[str, Any]:
    """Precision/recall from sklearn, intervals from statsmodels, kappa from sklearn."""
    truth, pred = [], []
    for i in items:
        m = majority([lab for _, lab in i.human_labels])
        if m is not None:
            truth.append(m)
            pred.append(i.model_label)
    out: dict[str, Any] = {}
    classes = set(truth) | {i.model_label for i in items if i.model_label != ABSTAIN}
    for c in sorted(classes):
        hits = sum(1 for t, p in zip(truth, pred, strict=True) if t == c and p == c)
        predicted = sum(1 for p in pred if p == c)
        support = sum(1 for t in truth if t == c)
        with quiet():
            precision = (
                float(
                    precision_score(truth, pred, labels=[c], average=None, zero_division=np.nan)[0]
                )
                if truth
                else math.nan
            )
            recall = (
                float(recall_score(truth, pred, labels=[c], average=None, zero_division=np.nan)[0])
                if truth
                else math.nan
            )
        out[c] = {
            "precision": precision,
            "recall": recall,
            "precision_ci": ref_wilson(hits, predicted) if predicted else (0.0, 1.0),
            "recall_ci": ref_wilson(hits, support) if support else (0.0, 1.0),
            "support": support,
        }
    decided = [(t, p) for t, p in zip(truth, pred, strict=True) if p != ABSTAIN]
    kappa = ref_cohen_sklearn(decided) if decided else None
    return {"per_class": out, "kappa": kappa, "decided": decided}


def check_holdout_against_references(items: Sequence[LabelledItem]) -> None:
    h = holdout_metrics(items)
    ref = _reference_holdout(items)
    assert set(h["per_class"]) == set(ref["per_class"])
    for c, expected in ref["per_class"].items():
        got = h["per_class"][c]
        assert got["support"] == expected["support"], c
        for key in ("precision", "recall"):
            if math.isnan(expected[key]):
                # Documented: undefined precision/recall is None with the interval [0, 1].
                assert got[key] is None, (c, key, got)
                assert got[f"{key}_ci"] == [0.0, 1.0], (c, key, got)
            else:
                assert_close(got[key], expected[key], f"{c} {key}")
            assert got[f"{key}_ci"] == pytest.approx(list(expected[f"{key}_ci"]), abs=1e-12)
    if ref["kappa"] is None:
        assert h["kappa_vs_majority"] is None
    elif math.isnan(ref["kappa"]):
        decided = ref["decided"]
        observed = sum(1 for t, p in decided if t == p) / len(decided)
        assert h["kappa_vs_majority"] == documented_degenerate_kappa(observed)
    else:
        assert_close(h["kappa_vs_majority"], ref["kappa"], "kappa vs majority")
    abstained = sum(1 for i in items if i.model_label == ABSTAIN)
    assert_close(h["abstain_rate"], abstained / len(items) if items else 0.0)
    no_nan(h)


def test_holdout_metrics_match_sklearn_on_the_hand_table() -> None:
    check_holdout_against_references(items_from(HAND_HOLDOUT))


def test_holdout_metrics_match_sklearn_on_the_example_label_set() -> None:
    items = load_example("reply-quality.jsonl")
    check_holdout_against_references([i for i in items if i.split == "holdout"])


HUMAN = st.sampled_from([P, F, M])
MODEL = st.sampled_from([P, F, M, ABSTAIN])


@st.composite
def label_sets(draw: st.DrawFn, min_size: int = 1) -> list[LabelledItem]:
    annotators = draw(st.integers(2, 4))
    rows = draw(
        st.lists(
            st.tuples(st.lists(HUMAN, min_size=annotators, max_size=annotators), MODEL),
            min_size=min_size,
            max_size=25,
        )
    )
    splits = draw(
        st.lists(
            st.sampled_from(["calibration", "holdout"]), min_size=len(rows), max_size=len(rows)
        )
    )
    return [
        item(n, labels, model, split)
        for n, ((labels, model), split) in enumerate(zip(rows, splits, strict=True))
    ]


@settings(max_examples=100, deadline=None)
@given(label_sets())
def test_holdout_metrics_match_sklearn_hypothesis(items: list[LabelledItem]) -> None:
    check_holdout_against_references(items)


@settings(max_examples=120, deadline=None)
@given(label_sets())
def test_human_agreement_matches_references_hypothesis(items: list[LabelledItem]) -> None:
    agreement = human_agreement(items)
    ratings = [[lab for _, lab in i.human_labels] for i in items]
    annotators = len(ratings[0])
    assert agreement["annotators"] == annotators
    assert agreement["method"] == ("cohen" if annotators == 2 else "fleiss")

    def reference(rows: list[list[str]]) -> float:
        if annotators == 2:
            return ref_cohen_sklearn([(a, b) for a, b in rows])
        return ref_fleiss(rows)

    def check(got: float | None, rows: list[list[str]], what: str) -> None:
        expected = reference(rows)
        if math.isnan(expected):
            m = len(rows[0])
            observed = sum(
                (sum(c * c for c in Counter(r).values()) - m) / (m * (m - 1)) for r in rows
            ) / len(rows)
            assert got == documented_degenerate_kappa(observed), what
        else:
            assert_close(got, expected, what)

    check(agreement["overall"], ratings, "overall")
    assert set(agreement["per_class"]) == {x for r in ratings for x in r}
    for c, kappa in agreement["per_class"].items():
        check(kappa, [["y" if x == c else "n" for x in r] for r in ratings], c)


@settings(max_examples=200, deadline=None)
@given(label_sets(min_size=0))
def test_calibration_metrics_are_always_defined_and_finite(items: list[LabelledItem]) -> None:
    """Whatever the labels, the record is JSON without NaN/Infinity and in range."""
    metrics = calibration_metrics(items)
    no_nan(metrics)
    counts = metrics["counts"]
    assert counts["calibration"] + counts["holdout"] == len(items)
    assert counts["holdout"] == sum(1 for i in items if i.split == "holdout")
    agreement = metrics["human_agreement"]
    for kappa in [agreement["overall"], *agreement["per_class"].values()]:
        assert kappa is None or -1.0 - TOL <= kappa <= 1.0 + TOL
    holdout = metrics["holdout"]
    kappa = holdout["kappa_vs_majority"]
    assert kappa is None or -1.0 - TOL <= kappa <= 1.0 + TOL
    assert 0.0 <= holdout["abstain_rate"] <= 1.0
    for stats in holdout["per_class"].values():
        for key in ("precision", "recall"):
            assert stats[key] is None or 0.0 <= stats[key] <= 1.0
            low, high = stats[f"{key}_ci"]
            assert 0.0 <= low <= high <= 1.0
            if stats[key] is not None:
                assert low - TOL <= stats[key] <= high + TOL


# ---------------------------------------------------------------------- degenerate cases


def test_one_class_only_is_defined() -> None:
    """Humans and the model only ever say task_pass: agreement is undefined (None, never a
    made-up 1.0: docs/promotion.md), no NaN, no crash."""
    items = items_from([(60, [P, P], P)]) + items_from([(10, [P, P], P)], "calibration")
    metrics = calibration_metrics(items)
    no_nan(metrics)
    assert metrics["human_agreement"]["overall"] is None
    assert metrics["human_agreement"]["per_class"] == {P: None}
    holdout = metrics["holdout"]
    assert holdout["kappa_vs_majority"] is None
    assert set(holdout["per_class"]) == {P}
    assert holdout["per_class"][P]["precision"] == 1.0
    assert holdout["per_class"][P]["recall"] == 1.0
    assert holdout["per_class"][P]["support"] == 60
    assert holdout["abstain_rate"] == 0.0


def test_zero_predictions_of_a_class_is_defined() -> None:
    """The model never says task_fail: its precision is None with the interval [0, 1]."""
    h = holdout_metrics(items_from([(30, [P, P], P), (30, [F, F], P)]))
    no_nan(h)
    fail = h["per_class"][F]
    assert fail["precision"] is None
    assert fail["precision_ci"] == [0.0, 1.0]
    assert fail["recall"] == 0.0
    assert fail["recall_ci"] == pytest.approx(list(ref_wilson(0, 30)), abs=1e-12)
    assert fail["support"] == 30
    assert_close(h["per_class"][P]["precision"], 0.5)
    assert h["per_class"][P]["recall"] == 1.0
    assert_close(h["kappa_vs_majority"], ref_cohen_sklearn([(P, P)] * 30 + [(F, P)] * 30))


def test_a_class_only_the_model_uses_has_no_recall() -> None:
    h = holdout_metrics(items_from([(10, [P, P], P), (3, [P, P], M)]))
    no_nan(h)
    other = h["per_class"][M]
    assert other["support"] == 0
    assert other["recall"] is None
    assert other["recall_ci"] == [0.0, 1.0]
    assert other["precision"] == 0.0


def test_all_abstentions_and_no_majorities_are_defined() -> None:
    abstained = holdout_metrics(items_from([(5, [P, P], ABSTAIN), (5, [F, F], ABSTAIN)]))
    no_nan(abstained)
    assert abstained["kappa_vs_majority"] is None
    assert abstained["abstain_rate"] == 1.0
    for c in (P, F):
        assert abstained["per_class"][c]["precision"] is None
        assert abstained["per_class"][c]["recall"] == 0.0

    ties = calibration_metrics(items_from([(4, [P, F], P), (4, [F, P], F)]))
    no_nan(ties)
    assert ties["holdout"]["no_majority"] == 8
    assert ties["holdout"]["kappa_vs_majority"] is None
    assert ties["counts"]["per_class"] == {"no_majority": {"calibration": 0, "holdout": 8}}
    assert_close(ties["human_agreement"]["overall"], -1.0)

    empty = holdout_metrics([])
    no_nan(empty)
    assert empty["kappa_vs_majority"] is None
    assert empty["abstain_rate"] == 0.0
    assert empty["per_class"] == {}


def load_example(name: str) -> list[LabelledItem]:
    out = []
    for line in (EXAMPLE_LABELS / name).read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        out.append(
            LabelledItem(
                d["item_id"],
                d["split"],
                d["stratum"],
                tuple((h["annotator"], h["label"]) for h in d["human_labels"]),
                d["model_label"],
            )
        )
    return out


def test_example_label_set_metrics() -> None:
    """registry/calibration/reply-quality.jsonl, checked against the references."""
    items = load_example("reply-quality.jsonl")
    metrics = calibration_metrics(items)
    no_nan(metrics)
    assert metrics["counts"]["calibration"] == 40
    assert metrics["counts"]["holdout"] == 120
    pairs = [(i.human_labels[0][1], i.human_labels[1][1]) for i in items]
    assert_close(metrics["human_agreement"]["overall"], ref_cohen_sklearn(pairs))
    for c in (P, F):
        stats = metrics["holdout"]["per_class"][c]
        # 57 majority items, 56 predictions, 54 hits (two judge mistakes, one abstention)
        assert stats["support"] == 57
        assert_close(stats["precision"], 54 / 56)
        assert_close(stats["recall"], 54 / 57)
        assert stats["precision_ci"] == pytest.approx(list(ref_wilson(54, 56)), abs=1e-12)
        assert stats["recall_ci"] == pytest.approx(list(ref_wilson(54, 57)), abs=1e-12)


# --------------------------------------------------------------------------- validity


def judge(**changes: Any) -> Grader:
    spec = copy.deepcopy(JUDGE)
    spec["calibration_requirements"].update(changes)
    return Grader.model_validate(spec)


def good_class(lower: float = 0.85) -> dict[str, Any]:
    return {
        "precision": 0.95,
        "precision_ci": [lower, 0.99],
        "recall": 0.95,
        "recall_ci": [lower, 0.99],
        "support": 30,
    }


def metrics(
    *,
    holdout: int = 90,
    overall: float | None = 0.8,
    agreement: dict[str, float | None] | None = None,
    per_class: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Crafted record metrics in which every requirement is met unless told otherwise."""
    return {
        "counts": {"calibration": 20, "holdout": holdout, "per_class": {}},
        "human_agreement": {
            "method": "fleiss",
            "annotators": 3,
            "items": holdout + 20,
            "overall": overall,
            "per_class": agreement if agreement is not None else {P: 0.8, F: 0.8, M: 0.8},
        },
        "holdout": {
            "kappa_vs_majority": 0.9,
            "abstain_rate": 0.0,
            "no_majority": 0,
            "per_class": per_class
            if per_class is not None
            else {P: good_class(), F: good_class(), M: good_class()},
        },
    }


def stored(m: dict[str, Any], *, config: str = CONFIG, invalidated: str | None = None) -> Any:
    return StoredCalibration("CAL-1", config, m, invalidated)


def validity(m: dict[str, Any], grader: Grader | None = None) -> Validity:
    return calibration_validity(grader or judge(), CONFIG, stored(m))


def test_valid_calibration_blocks_every_class() -> None:
    v = validity(metrics())
    assert v.state == "valid"
    assert v.reasons == ()
    assert v.blockable_classes == {P, F, M}
    assert v.calibration_id == "CAL-1"


def test_thresholds_are_inclusive() -> None:
    m = metrics(
        holdout=50,
        overall=0.6,
        agreement={P: 0.6, F: 0.6, M: 0.6},
        per_class={c: good_class(0.8) for c in (P, F, M)},
    )
    v = validity(m)
    assert v.state == "valid", v.reasons
    assert v.blockable_classes == {P, F, M}


def test_missing_stale_and_invalidated() -> None:
    missing = calibration_validity(judge(), CONFIG, None)
    assert missing.state == "missing"
    assert missing.reasons and all(r.strip() for r in missing.reasons)
    assert missing.blockable_classes == frozenset()

    other = "sha256:" + "d" * 64
    stale = calibration_validity(judge(), other, stored(metrics()))
    assert stale.state == "stale"
    assert len(stale.reasons) == 1
    assert stale.blockable_classes == frozenset()

    withdrawn = calibration_validity(
        judge(), CONFIG, stored(metrics(), invalidated="label distribution shift")
    )
    assert withdrawn.state == "stale"
    assert len(withdrawn.reasons) == 1
    assert "label distribution shift" in withdrawn.reasons[0]
    assert withdrawn.blockable_classes == frozenset()


def test_holdout_below_min_holdout_items_fails_for_exactly_that() -> None:
    v = validity(metrics(holdout=49))
    assert v.state == "failing"
    assert len(v.reasons) == 1, v.reasons
    reason = v.reasons[0]
    assert "holdout" in reason
    assert "49" in reason
    assert "50" in reason


@pytest.mark.parametrize("which", ["precision", "recall"])
@pytest.mark.parametrize("cls", [P, F, M])
def test_a_lower_bound_below_its_minimum_fails_for_exactly_that_class(which: str, cls: str) -> None:
    per_class = {c: good_class() for c in (P, F, M)}
    per_class[cls][f"{which}_ci"] = [0.79, 0.99]
    v = validity(metrics(per_class=per_class))
    assert v.state == "failing"
    assert len(v.reasons) == 1, v.reasons
    reason = v.reasons[0]
    assert cls in reason
    assert which in reason
    assert "lower bound" in reason
    for other in {P, F, M} - {cls}:
        assert other not in reason
    assert v.blockable_classes == {P, F, M} - {cls}


def test_min_bounds_are_read_per_requirement() -> None:
    per_class = {c: good_class() for c in (P, F)}
    per_class[F]["recall_ci"] = [0.7, 0.99]
    m = metrics(per_class=per_class, agreement={P: 0.8, F: 0.8})
    assert validity(m).state == "failing"
    relaxed = validity(m, judge(min_recall_lower_bound=0.7))
    assert relaxed.state == "valid", relaxed.reasons
    assert relaxed.blockable_classes == {P, F}
    strict = validity(metrics(), judge(min_holdout_items=91))
    assert strict.state == "failing"
    assert len(strict.reasons) == 1 and "holdout" in strict.reasons[0]


def test_overall_human_agreement_below_minimum_fails() -> None:
    v = validity(metrics(overall=0.59))
    assert v.state == "failing"
    assert len(v.reasons) == 1, v.reasons
    assert "agreement" in v.reasons[0]
    assert "0.59" in v.reasons[0]
    none = validity(metrics(overall=None))
    assert none.state == "failing"
    assert len(none.reasons) == 1


@pytest.mark.parametrize("cls", [F, M])
def test_low_class_agreement_makes_only_that_class_unblockable(cls: str) -> None:
    """Humans do not agree on `cls`: the model may never block it; the others it may."""
    agreement = dict.fromkeys((P, F, M), 0.8)
    agreement[cls] = 0.4
    # The model is even perfect on that class: it still may not block it.
    v = validity(metrics(agreement=agreement))
    assert cls not in v.blockable_classes
    assert v.blockable_classes == {P, F, M} - {cls}
    assert v.state == "valid", v.reasons


@pytest.mark.parametrize("cls", [P, F, M])
def test_low_class_agreement_is_named_in_the_reasons(cls: str) -> None:
    """`calibration status` says why: the one reason names that class's human agreement."""
    agreement = dict.fromkeys((P, F, M), 0.8)
    agreement[cls] = 0.4
    v = validity(metrics(agreement=agreement))
    assert len(v.reasons) == 1, v.reasons
    reason = v.reasons[0]
    assert cls in reason
    assert "agreement" in reason
    for other in {P, F, M} - {cls}:
        assert other not in reason


@pytest.mark.parametrize(
    ("agreement", "pass_stats", "why"),
    [
        ({P: 0.4, F: 0.8, M: 0.8}, good_class(), "agreement"),
        ({F: 0.8, M: 0.8}, good_class(), "agreement"),
        ({P: 0.8, F: 0.8, M: 0.8}, {**good_class(), "support": 0}, "support"),
        ({P: 0.8, F: 0.8, M: 0.8}, None, "support"),
    ],
    ids=["low-agreement", "no-agreement", "no-support", "absent-from-holdout"],
)
def test_the_pass_class_is_never_exempt(
    agreement: dict[str, float], pass_stats: dict[str, Any] | None, why: str
) -> None:
    """A judge whose pass verdicts humans cannot check (they disagree on what passes, or
    the holdout holds no passing item) would let any trial through: the calibration is
    failing, whatever the other classes show. Evaluator 2 exempted it (kept for replay)."""
    per_class = {F: good_class(), M: good_class()}
    if pass_stats is not None:
        per_class[P] = pass_stats
    m = metrics(agreement=agreement, per_class=per_class)
    v = validity(m)
    assert v.state == "failing"
    assert P not in v.blockable_classes
    assert any(P in r and "pass class" in r and why in r for r in v.reasons), v.reasons
    old_rule = calibration_validity(judge(), CONFIG, stored(m), pass_class_exempt=True)
    assert old_rule.state == "valid", old_rule.reasons


def test_a_class_without_human_agreement_is_unblockable() -> None:
    # The model used a label no human ever gave: no per-class human kappa, never blockable.
    v = validity(metrics(agreement={P: 0.8, F: 0.8}))
    assert M not in v.blockable_classes
    assert v.blockable_classes == {P, F}


def test_no_requirements_is_never_valid() -> None:
    spec = copy.deepcopy(JUDGE)
    spec["blocking"] = False
    del spec["calibration_requirements"]
    v = calibration_validity(Grader.model_validate(spec), CONFIG, stored(metrics()))
    assert v.state == "failing"
    assert v.reasons


def test_validity_of_real_metrics() -> None:
    """The example label sets end to end through the pure functions."""
    good = validity(calibration_metrics(load_example("reply-quality.jsonl")))
    assert good.state == "valid", good.reasons
    assert good.blockable_classes == {P, F}
    disputed = validity(calibration_metrics(load_example("reply-quality-disputed.jsonl")))
    assert disputed.state == "failing"
    assert F not in disputed.blockable_classes


# ------------------------------------------------- validity in full: what `calibration show` says


def test_missing_stale_invalidated_and_unrequired_validity_in_full() -> None:
    assert calibration_validity(judge(), CONFIG, None).as_dict() == {
        "state": "missing",
        "reasons": ["no calibration recorded"],
        "blockable_classes": [],
        "calibration_id": None,
    }
    other = "sha256:" + "d" * 64
    assert calibration_validity(judge(), other, stored(metrics())).as_dict() == {
        "state": "stale",
        "reasons": [
            f"made for grader config {CONFIG}, the grader is now {other} "
            "(prompt, model or rubric changed)"
        ],
        "blockable_classes": [],
        "calibration_id": "CAL-1",
    }
    withdrawn = stored(metrics(), invalidated="label distribution shift")
    assert calibration_validity(judge(), CONFIG, withdrawn).as_dict() == {
        "state": "stale",
        "reasons": ["invalidated: label distribution shift"],
        "blockable_classes": [],
        "calibration_id": "CAL-1",
    }
    spec = copy.deepcopy(JUDGE)
    spec["blocking"] = False
    del spec["calibration_requirements"]
    unrequired = calibration_validity(Grader.model_validate(spec), CONFIG, stored(metrics()))
    assert unrequired.as_dict() == {
        "state": "failing",
        "reasons": ["the grader states no calibration_requirements"],
        "blockable_classes": [],
        "calibration_id": "CAL-1",
    }


def test_failing_validity_lists_every_reason_then_every_note_in_full() -> None:
    m = metrics(
        holdout=12,
        overall=0.5,
        agreement={P: 0.9, F: 0.9, M: None},
        per_class={
            P: good_class(0.7),  # both bounds short by 0.1
            F: {**good_class(), "recall_ci": [0.75, 0.9]},  # recall short by 0.05
            M: good_class(),  # humans do not agree on it: never blockable
            "grader_invalid": {**good_class(), "support": 0},  # no support: no bounds
        },
    )
    v = validity(m)
    assert v.as_dict() == {
        "state": "failing",
        "reasons": [
            "holdout has 12 items, needs 50",
            "human agreement 0.50 is below min_human_agreement 0.60",
            "class task_fail: recall lower bound 0.75 is below 0.80 (short by 0.05)",
            "class task_pass: precision lower bound 0.70 is below 0.80 (short by 0.10)",
            "class task_pass: recall lower bound 0.70 is below 0.80 (short by 0.10)",
            "the grader could block none of its failing classes "
            "(missing_required_evidence, task_fail) under this calibration",
            "class grader_invalid: no holdout support, so no bounds; the model grader may not "
            "block it",
            "class missing_required_evidence: human agreement undefined is below "
            "min_human_agreement 0.60; the model grader may not block it",
        ],
        "blockable_classes": [],
        "calibration_id": "CAL-1",
    }


def test_undefined_overall_agreement_and_missing_blocks_fail_the_calibration() -> None:
    v = validity({"human_agreement": {"overall": None}})
    assert v.state == "failing"
    assert v.reasons == (
        "holdout has 0 items, needs 50",
        "human agreement is undefined (the labels hold a single class): it never meets "
        "min_human_agreement",
        # The pass class is never exempt: with no holdout it has no support either.
        "class task_pass (the pass class): no holdout support, so its precision and recall "
        "are unknown; the model's pass verdicts cannot be believed",
        "the grader could block none of its failing classes "
        "(missing_required_evidence, task_fail) under this calibration",
    )
    no_interval = {**good_class(), "precision_ci": None, "recall_ci": []}
    bare = validity(metrics(per_class={P: good_class(), F: no_interval, M: good_class()}))
    assert bare.blockable_classes == {P, M}  # an absent interval is a lower bound of 0
    assert "class task_fail: precision lower bound 0.00 is below 0.80 (short by 0.80)" in (
        bare.reasons
    )
    valid = validity(metrics(agreement={P: 0.8, F: 0.8, M: 0.2}))
    assert valid.as_dict() == {
        "state": "valid",
        "reasons": [
            "class missing_required_evidence: human agreement 0.20 is below "
            "min_human_agreement 0.60; the model grader may not block it"
        ],
        "blockable_classes": [F, P],
        "calibration_id": "CAL-1",
    }


def test_metrics_without_agreement_blocks_are_read_as_undefined_agreement() -> None:
    """A record whose metrics lack the human agreement (or its per-class part) is judged,
    not crashed on: agreement undefined, so nothing may be blocked."""
    bare = validity({})
    assert bare.state == "failing"
    assert bare.reasons[:2] == (
        "holdout has 0 items, needs 50",
        "human agreement is undefined (the labels hold a single class): it never meets "
        "min_human_agreement",
    )
    m = metrics()
    m["human_agreement"] = {"overall": 0.8}
    v = validity(m)
    assert v.blockable_classes == frozenset()
    assert (
        "class task_fail: human agreement undefined is below min_human_agreement 0.60; "
        "the model grader may not block it"
    ) in v.reasons


def test_metrics_without_human_agreement_read_as_undefined_agreement() -> None:
    """A stored calibration whose metrics carry no human agreement (or no per-class
    agreement) is judged, never a crash: agreement that is undefined never meets a
    requirement and no class may be blocked on it (docs/promotion.md)."""
    undefined = (
        "human agreement is undefined (the labels hold a single class): it never meets "
        "min_human_agreement"
    )
    bare = metrics()
    del bare["human_agreement"]
    v = validity(bare)
    assert v.state == "failing"
    assert undefined in v.reasons
    assert v.blockable_classes == frozenset()

    overall_only = metrics()
    del overall_only["human_agreement"]["per_class"]
    w = validity(overall_only)
    assert w.state == "failing"
    assert undefined not in w.reasons
    assert w.blockable_classes == frozenset()


# ------------------------------------------------------- measured against required (pure)
#
# docs/verify.md: the audit report shows what a calibration record measured beside what the
# grader requires. tests/report/test_report_calibration.py checks the demo's numbers through
# the CLI; these check the rule itself on crafted metrics: a bound is met when the measured
# value (the lower Wilson bound for precision and recall) is at least the required one, a
# class without holdout support has no bounds to meet, and nothing is met or missed when the
# grader states no requirements.


def test_measured_against_required_sets_each_measure_beside_its_bound() -> None:
    from evalops.domain.calibration_validity import measured_against_required

    m = metrics(holdout=50, overall=0.6, agreement={P: 0.6, F: 0.59, M: None})
    m["human_agreement"]["annotators"] = 3
    m["holdout"].update(kappa_vs_majority=0.7, abstain_rate=0.125, no_majority=2)
    m["holdout"]["per_class"] = {
        P: {"precision": 0.9, "precision_ci": [0.8, 0.95], "recall": 0.85,
            "recall_ci": [0.79, 0.9], "support": 40},
        F: {"precision": 0.5, "precision_ci": [0.2, 0.8], "recall": 1.0,
            "recall_ci": [0.81, 1.0], "support": 10},
        M: {"precision": None, "precision_ci": None, "recall": None, "recall_ci": None,
            "support": 0},
    }  # fmt: skip
    m["holdout"]["confusion"] = {F: {F: 7, P: 3}, P: {P: 36, ABSTAIN: 4}}
    measured = measured_against_required(judge().calibration_requirements, m)
    assert measured == {
        "required": CAL_REQ,
        "holdout_items": 50,
        "meets_holdout": True,
        "human_agreement": {"method": "fleiss", "annotators": 3, "overall": 0.6, "meets": True},
        "kappa_vs_majority": 0.7,
        "abstain_rate": 0.125,
        "no_majority": 2,
        "classes": [
            {"class": M, "support": 0, "precision": None, "precision_ci": None,
             "recall": None, "recall_ci": None, "human_kappa": None,
             "meets_precision": None, "meets_recall": None, "meets_human_agreement": None},
            {"class": F, "support": 10, "precision": 0.5, "precision_ci": [0.2, 0.8],
             "recall": 1.0, "recall_ci": [0.81, 1.0], "human_kappa": 0.59,
             "meets_precision": False, "meets_recall": True, "meets_human_agreement": False},
            {"class": P, "support": 40, "precision": 0.9, "precision_ci": [0.8, 0.95],
             "recall": 0.85, "recall_ci": [0.79, 0.9], "human_kappa": 0.6,
             "meets_precision": True, "meets_recall": False, "meets_human_agreement": True},
        ],
        # Human majority by row, model verdict by column, both sorted; a pair never seen is 0.
        "confusion": {
            "columns": [ABSTAIN, F, P],
            "rows": [{"human": F, "counts": [0, 7, 3]}, {"human": P, "counts": [4, 0, 36]}],
        },
    }  # fmt: skip
    assert [c["class"] for c in measured["classes"]] == sorted([P, F, M])
    assert measured["confusion"]["columns"] == sorted([ABSTAIN, P, F])


def test_measured_against_required_below_every_bound() -> None:
    from evalops.domain.calibration_validity import measured_against_required

    m = metrics(holdout=49, overall=0.59, agreement={P: 0.9})
    m["holdout"]["per_class"] = {P: {"precision_ci": (0.5, 0.9), "support": 3}}
    measured = measured_against_required(judge().calibration_requirements, m)
    assert measured["meets_holdout"] is False
    assert measured["human_agreement"]["meets"] is False
    assert measured["classes"] == [
        {"class": P, "support": 3, "precision": None, "precision_ci": (0.5, 0.9),
         "recall": None, "recall_ci": None, "human_kappa": 0.9,
         # No recall interval measured: its bound is not met (a lower bound of 0).
         "meets_precision": False, "meets_recall": False, "meets_human_agreement": True},
    ]  # fmt: skip


def test_measured_without_requirements_or_sections() -> None:
    """A grader without `calibration_requirements` meets and misses nothing; a record
    without some section shows it as unmeasured, never a crash."""
    from evalops.domain.calibration_validity import measured_against_required

    m = metrics(holdout=60)
    m["holdout"]["confusion"] = {P: {P: 1}}
    bare = measured_against_required(None, m)
    assert bare["required"] is None
    assert bare["meets_holdout"] is None
    assert bare["human_agreement"]["meets"] is None
    assert bare["holdout_items"] == 60
    assert bare["classes"][0] == {
        "class": M, "support": 30, "precision": 0.95, "precision_ci": [0.85, 0.99],
        "recall": 0.95, "recall_ci": [0.85, 0.99], "human_kappa": 0.8,
    }  # fmt: skip
    assert bare["confusion"] == {"columns": [P], "rows": [{"human": P, "counts": [1]}]}
    nothing = measured_against_required(judge().calibration_requirements, {})
    assert nothing == {
        "required": CAL_REQ,
        "holdout_items": 0,
        "meets_holdout": False,
        "human_agreement": {"method": None, "annotators": None, "overall": None, "meets": None},
        "kappa_vs_majority": None,
        "abstain_rate": None,
        "no_majority": None,
        "classes": [],
        "confusion": {"columns": [], "rows": []},
    }
    empty_sections = {"human_agreement": None, "holdout": None, "counts": None}
    assert measured_against_required(None, empty_sections)["classes"] == []
    no_support = {"holdout": {"per_class": {P: {"precision_ci": [0.9, 1.0]}}}}
    (row,) = measured_against_required(judge().calibration_requirements, no_support)["classes"]
    assert row["support"] == 0
    assert (row["meets_precision"], row["meets_recall"]) == (None, None)


@pytest.mark.parametrize(("kappa", "shown"), [(0.5, "0.50"), (None, "undefined")])
def test_a_pass_class_without_agreement_says_why_in_words(kappa: float | None, shown: str) -> None:
    """docs/promotion.md: the pass class is never exempt; too little (or undefined) human
    agreement on it makes the calibration failing, the reason showing both numbers."""
    v = validity(metrics(agreement={P: kappa, F: 0.8, M: 0.8}))
    assert v.state == "failing"
    assert v.reasons[0] == (
        f"class {P} (the pass class): human agreement {shown} is below min_human_agreement "
        "0.60; the model's pass verdicts cannot be believed"
    )


def _guard(produces: list[str]) -> Grader:
    """A blocking model trajectory guard (its verdicts are `pass` and `task_fail`)."""
    spec = copy.deepcopy(JUDGE)
    spec.update(layer="trajectory_diagnosis", rule_state="blocking_constraint", produces=produces)
    return Grader.model_validate(spec)


def test_the_pass_class_sorting_first_does_not_hide_the_classes_after_it() -> None:
    """A guard's pass class is `pass`, which sorts before `task_fail`: a pass class that
    cannot be believed is one reason, and `task_fail` is still judged on its own bounds."""
    m = metrics(
        agreement={"pass": 0.8, F: 0.8}, per_class={"pass": {"support": 0}, F: good_class()}
    )
    v = validity(m, _guard(["pass", F, ABSTAIN]))
    assert v.state == "failing"
    assert v.blockable_classes == {F}
    assert len(v.reasons) == 1 and "(the pass class)" in v.reasons[0]


def test_a_grader_without_a_pass_verdict_has_no_pass_class() -> None:
    from evalops.domain.calibration_validity import pass_class

    spec = copy.deepcopy(JUDGE)
    spec["produces"] = [F, ABSTAIN]
    grader = Grader.model_validate(spec)
    assert pass_class(grader) is None
    v = validity(metrics(per_class={F: good_class()}), grader)
    assert (v.state, v.blockable_classes) == ("valid", {F})
    assert pass_class(_guard(["pass", F, ABSTAIN])) == "pass"
    assert pass_class(judge()) == P


def test_the_usable_holdout_of_a_record_made_before_ties_were_counted_is_its_whole_holdout() -> (
    None
):
    """A calibration recorded before `holdout_with_majority` existed is judged as it was
    (every holdout item counted); a new one counts only the items with a human majority."""
    from evalops.domain.calibration_validity import usable_holdout

    assert usable_holdout({"counts": {"holdout": 120}}) == 120
    assert usable_holdout({"counts": {"holdout": 120, "holdout_with_majority": 114}}) == 114
    assert usable_holdout({}) == 0
