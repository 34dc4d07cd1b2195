"""Evaluator 4's exact sums, against `fractions.Fraction` summed trial by trial.

A task summary counts its trials by (class, score, gating score) and by efficiency counts
and sums each distinct value times its count when the document is made; evaluation reads
the sums back as integer pairs instead of `Fraction`s. Both must be the exact rationals
(and the correctly rounded means) that adding every trial's float as a `Fraction` gives.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.classify import ZERO_GATING_CLASSES
from evalops.domain.gate_compact import CompactTrials, ExactSum, _mean, _parse_exact
from evalops.domain.gate_documents import TrialInput
from evalops.domain.gate_rules import EFFICIENCY_KEYS

# Few distinct values, so that many trials share one (the counted path), and awkward ones.
VALUES = st.sampled_from([0.0, 1.0, 0.1, 0.2, 0.3, 0.7, 1e-300, 2.5e-8, 1 / 3, 0.9])
CLASSES = st.sampled_from(["task_pass", "task_fail", sorted(ZERO_GATING_CLASSES)[0]])


@st.composite
def single_trials(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=0, max_value=60))
    out = []
    for i in range(n):
        counts = draw(
            st.one_of(
                st.just({}),
                st.fixed_dictionaries(
                    {k: st.sampled_from([0, 3, 1200, 0.5]) for k in EFFICIENCY_KEYS}
                ),
            )
        )
        out.append(
            {
                "trial_id": f"t.{i}",
                "parent_trial_id": None,
                "classification": draw(CLASSES),
                "score": draw(VALUES),
                "gating_score": draw(VALUES),
                "trajectory": {"steps": i},
                "efficiency": counts,
                "fixture_misses": draw(st.integers(min_value=0, max_value=2)),
            }
        )
    return out


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=200, deadline=None)
@given(single_trials())
def test_a_summary_s_sums_are_the_fractions_of_its_trials(trials: list[dict[str, Any]]) -> None:
    summary = CompactTrials()
    for t in trials:
        summary.add(t)
    single = summary.document()["single"]
    gating = [
        0.0 if t["classification"] in ZERO_GATING_CLASSES else t["gating_score"] for t in trials
    ]
    assert Fraction(single["scoreSum"]) == sum((Fraction(t["score"]) for t in trials), Fraction(0))
    assert Fraction(single["gatingSum"]) == sum((Fraction(g) for g in gating), Fraction(0))
    # The text is `str` of the reduced fraction, as the stored documents spell it.
    assert single["scoreSum"] == str(sum((Fraction(t["score"]) for t in trials), Fraction(0)))
    with_counts = [t for t in trials if t["efficiency"]]
    assert single["efficiencyCount"] == len(with_counts)
    for key in EFFICIENCY_KEYS:
        expected = sum((Fraction(float(t["efficiency"][key])) for t in with_counts), Fraction(0))
        assert single["efficiencySums"][key] == str(expected)
    assert single["classes"] == dict(sorted(Counter(t["classification"] for t in trials).items()))
    assert single["n"] == len(trials)
    assert single["fixtureMisses"] == sum(t["fixture_misses"] for t in trials)
    firsts: dict[str, list[Any]] = {}
    for i, t in enumerate(trials):
        firsts.setdefault(t["classification"], [i, t["trial_id"]])
    assert single["first"] == dict(sorted(firsts.items()))
    if trials:
        assert single["last"] == {
            "position": len(trials) - 1,
            "trajectory": trials[-1]["trajectory"],
        }
    else:
        assert single["last"] is None


def test_a_trial_added_by_its_parts_resolves_only_the_last_trajectory() -> None:
    resolved: list[str] = []

    def resolve(text: str) -> Any:
        resolved.append(text)
        return {"steps": len(text)}

    summary = CompactTrials()
    for i, text in enumerate(["a", "bb", "ccc"]):
        summary.add_single(f"t.{i}", "task_pass", 1.0, 1.0, None, 0, text, resolve)
    assert summary.document()["single"]["last"] == {"position": 2, "trajectory": {"steps": 3}}
    assert resolved == ["ccc"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(allow_nan=False, allow_infinity=False, width=64),
            st.integers(min_value=1, max_value=10**6),
        ),
        max_size=20,
    )
)
def test_an_exact_sum_of_repeated_values_is_their_fraction(pairs: list[tuple[float, int]]) -> None:
    total = ExactSum()
    for value, times in pairs:
        total.add(value, times)
    expected = sum((Fraction(v) * t for v, t in pairs), Fraction(0))
    assert total.total() == expected
    assert total.text() == str(expected)


@settings(max_examples=300, deadline=None)
@given(
    st.fractions(max_denominator=2**60),
    st.integers(min_value=1, max_value=10**6),
)
def test_a_stored_sum_reads_back_as_its_fraction(value: Fraction, n: int) -> None:
    numerator, denominator = _parse_exact(str(value))
    assert Fraction(numerator, denominator) == value
    assert _mean((numerator, denominator), n) == float(value) / n


@pytest.mark.parametrize("text", ["3/2", "-7", "0", " 3/2 ", "1.5", "+3/2", "1e3", "06/4"])
def test_other_spellings_are_read_as_fraction_reads_them(text: str) -> None:
    numerator, denominator = _parse_exact(text)
    assert Fraction(numerator, denominator) == Fraction(text)


@pytest.mark.parametrize("text", ["3/0", "x", "3/-2", "", "3 / 2"])
def test_what_fraction_refuses_is_refused(text: str) -> None:
    with pytest.raises((ValueError, ZeroDivisionError)) as expected:
        Fraction(text)
    with pytest.raises(expected.type):
        _parse_exact(text)


def test_a_zero_denominator_is_refused_naming_the_stored_text() -> None:
    # A stored sum is refused with the text it was stored as, so the document can be found.
    with pytest.raises(ZeroDivisionError, match="3/0"):
        _parse_exact("3/0")


def _trial(i: int, cls: str, score: float, counts: dict[str, Any]) -> dict[str, Any]:
    return {
        "trial_id": f"t.{i}",
        "parent_trial_id": None,
        "classification": cls,
        "score": score,
        "gating_score": score,
        "trajectory": None,
        "efficiency": counts,
        "fixture_misses": 0,
    }


def _single(trials: list[dict[str, Any]]) -> Any:
    summary = CompactTrials()
    for t in trials:
        summary.add(cast("TrialInput", t))
    return summary.document()["single"]


def test_tasks_with_the_same_counts_share_sums_never_their_dicts() -> None:
    # Sums are summed once per shape of counts and reused by the next task with that shape
    # (whatever order its trials came in): each task still gets dicts of its own.
    counts = dict.fromkeys(EFFICIENCY_KEYS, 3)
    trials = [_trial(0, "task_pass", 0.1, counts), _trial(1, "task_fail", 0.7, {})]
    first = _single(trials)
    second = _single(list(reversed(trials)))
    expected_score = str(Fraction(0.1) + Fraction(0.7))
    for single in (first, second):
        assert single["scoreSum"] == expected_score
        assert single["classes"] == {"task_fail": 1, "task_pass": 1}
        assert single["efficiencyCount"] == 1
        assert single["efficiencySums"] == dict.fromkeys(EFFICIENCY_KEYS, "3")
    first["classes"]["task_pass"] = 99
    first["efficiencySums"][EFFICIENCY_KEYS[0]] = "99"
    third = _single(trials)
    assert third["classes"] == {"task_fail": 1, "task_pass": 1}
    assert third["efficiencySums"] == dict.fromkeys(EFFICIENCY_KEYS, "3")


def test_a_negative_zero_sums_as_zero_after_a_zero_and_before() -> None:
    # -0.0 == 0.0, so the two share one cached entry: both are the fraction 0.
    for order in ((0.0, -0.0), (-0.0, 0.0)):
        for score in order:
            single = _single([_trial(0, "task_fail", score, {})])
            assert single["scoreSum"] == str(Fraction(score)) == "0"
            assert single["gatingSum"] == "0"
