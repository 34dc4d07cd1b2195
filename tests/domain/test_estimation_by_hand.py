"""The estimation statistics piece by piece (`evalops.domain.estimation`; DESIGN 16 and
docs/estimation.md), each worked by hand or against a reference: `statistics`, scipy's normal
and t quantiles, statsmodels' Wilson interval, and brute force over the formulas the module
docstring states (tests/domain/test_estimation.py holds the whole estimate to svy).

    p = sum_h W_h * mean_h        var(p) = sum_h W_h^2 * s_h^2 / n_h * (1 - n_h / N_h)

n_eff = p(1-p) / var(p) capped at the trials (the number of tasks when var is 0), deff =
trials / n_eff; planning: proportional n = sum W_h S_h^2 / V, Neyman n = (sum W_h S_h)^2 / V,
the two-stage optimum m = sqrt(cost * within / between).
"""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction
from typing import Any

import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

from evalops.domain import estimation
from evalops.domain.estimation import (
    RATE_KEYS,
    Components,
    StratumPart,
    TaskObservation,
    allocate,
    allocated_variance,
    ceil_count,
    check_confidence,
    class_of,
    combine,
    components,
    detectable_difference,
    estimate_rates,
    paired_difference,
    rate_block,
    sample_variance,
    stratum_part,
    t_quantile,
    tasks_needed,
    tasks_to_detect,
    trials_per_task,
    unseen_variation,
    wilson,
    z_quantile,
)

# Every class but pass and task_fail: the cohorts below have trials of those two only.
UNSEEN = (
    "difference interval unavailable for "
    + ", ".join(k for k in RATE_KEYS if k not in ("pass", "task_fail"))
    + ": no trial of the {} paired tasks was of that class under either build"
)


def obs(task_id: str, stratum: str, passed: int, failed: int, **other: int) -> TaskObservation:
    counts = {k: v for k, v in {"task_pass": passed, "task_fail": failed, **other}.items() if v}
    return TaskObservation(task_id, stratum, counts, counts)


# ------------------------------------------------------------------------------ keys, shares


def test_rate_keys_are_pass_and_every_other_class_in_precedence_order() -> None:
    assert RATE_KEYS == (
        "pass",
        "hard_constraint_fail",
        "ambiguous_external_effect",
        "missing_required_evidence",
        "grader_invalid",
        "infrastructure_invalid",
        "agent_error",
        "runtime_error",
        "task_fail",
    )
    assert class_of("pass") == "task_pass"
    assert class_of("task_fail") == "task_fail"


def test_a_task_share_is_of_its_effective_or_first_trials() -> None:
    t = TaskObservation(
        "t", "s", {"task_pass": 3, "task_fail": 1}, {"task_pass": 1, "grader_invalid": 3}, 2
    )
    assert (t.n, t.n_first, t.reruns) == (4, 4, 2)
    assert t.share("pass") == 0.75
    assert t.share("pass", first=True) == 0.25
    assert t.share("grader_invalid") == 0.0
    assert t.share("grader_invalid", first=True) == 0.75
    empty = TaskObservation("e", "s", {}, {"task_pass": 2})
    assert (empty.n, empty.n_first) == (0, 2)
    assert empty.share("pass") == 0.0
    assert empty.share("pass", first=True) == 1.0
    assert TaskObservation("d", "s", {}, {}).reruns == 0


# ------------------------------------------------------------------------------ quantiles


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_quantiles_are_scipys(confidence: float) -> None:
    assert z_quantile(confidence) == pytest.approx(stats.norm.ppf(1 - (1 - confidence) / 2))
    for df in (1, 2, 7, 30, 1_000_000):
        # The same float as scipy.stats (stored estimates are replayed byte for byte).
        assert t_quantile(confidence, df) == float(stats.t.ppf(1 - (1 - confidence) / 2, df))
    assert z_quantile(0.95) == pytest.approx(1.959963984540054, rel=1e-12)
    assert t_quantile(0.95, 10) == pytest.approx(2.228, abs=5e-4)  # a t table's 2.228


def test_t_quantiles_are_scipy_stats_floats_for_random_levels_and_degrees() -> None:
    """scipy.stats is the reference: the same float for 2,000 random (confidence, df)."""
    draw = random.Random(20261206)
    for _ in range(2000):
        confidence = draw.choice([draw.random(), 0.9, 0.95, 0.99])
        if not 0 < confidence < 1:
            continue
        df = draw.choice([1, 2, 3, draw.randint(1, 60), draw.randint(1, 10**6)])
        expected = float(stats.t.ppf(1 - (1 - confidence) / 2, df))
        assert t_quantile(confidence, df) == expected, (confidence, df)


@pytest.mark.parametrize("confidence", [0, 1, 0.0, 1.0, -0.5, 1.5, "0.9", None])
def test_a_confidence_is_strictly_between_0_and_1(confidence: Any) -> None:
    for check in (check_confidence, z_quantile, lambda c: t_quantile(c, 3)):
        with pytest.raises(ValueError) as raised:
            check(confidence)
        assert str(raised.value) == (
            f"confidence must be between 0 and 1 (exclusive), got {confidence!r}"
        )


def test_a_confidence_just_inside_the_bounds_is_one() -> None:
    check_confidence(1e-9)
    check_confidence(1 - 1e-9)


# ------------------------------------------------------------------------------ Wilson


@pytest.mark.parametrize("n", [1, 2.5, 3, 10, 40.25, 1000])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_wilson_is_statsmodels(p: float, n: float) -> None:
    z = z_quantile(0.9)
    low, high = proportion_confint(p * n, n, alpha=0.1, method="wilson")
    got = wilson(p, n, z)
    assert got == pytest.approx((max(0.0, low), min(1.0, high)), abs=1e-12)
    # Exactly 0 and 1 at the ends, not what rounding leaves.
    if p == 0.0:
        assert got[0] == 0.0
    if p == 1.0:
        assert got[1] == 1.0


@pytest.mark.parametrize("n", [0, -1, 0.0])
def test_wilson_needs_a_positive_n(n: float) -> None:
    with pytest.raises(ValueError) as raised:
        wilson(0.5, n, 1.96)
    assert str(raised.value) == f"Wilson interval needs n > 0, got {n}"


# ------------------------------------------------------------------------------ strata


def test_sample_variance_is_statistics_variance() -> None:
    for values in ([0.0, 1.0], [0.25, 0.5, 1.0], [0.1, 0.2, 0.3, 0.9], [1 / 3] * 5):
        assert sample_variance(values) == pytest.approx(statistics.variance(values), abs=1e-18)
    assert sample_variance([0.1, 0.1, 0.1]) == 0.0  # exactly, not 1e-35
    for values in ([], [0.5]):
        with pytest.raises(ValueError) as raised:
            sample_variance(values)
        assert str(raised.value) == "a variance needs at least 2 values"


def test_a_stratum_part_by_hand() -> None:
    assert stratum_part("h", 0.3, [], 9, None) == StratumPart("h", 0.3, 0, 0, None, None)
    assert stratum_part("h", 0.3, [0.25], 4, None) == StratumPart("h", 0.3, 1, 4, 0.25, None)
    # Shares 0, 1/2, 1: mean 1/2, s^2 = 1/4, over 3 tasks: 1/12.
    part = stratum_part("h", 0.3, [0.0, 0.5, 1.0], 12, None)
    assert (part.tasks, part.trials, part.mean, part.why) == (3, 12, 0.5, None)
    assert part.variance_of_mean == pytest.approx(1 / 12)
    # A frame of 5: the finite-population factor 1 - 3/5.
    framed = stratum_part("h", 0.3, [0.0, 0.5, 1.0], 12, 5)
    assert framed.variance_of_mean == pytest.approx(1 / 12 * 2 / 5)
    # Sampled whole: no sampling variance.
    assert stratum_part("h", 0.3, [0.0, 0.5, 1.0], 12, 3).variance_of_mean == 0.0
    too_many = stratum_part("h", 0.3, [0.0, 0.5, 1.0], 12, 2)
    assert too_many == StratumPart(
        "h",
        0.3,
        3,
        12,
        0.5,
        None,
        "interval unavailable: stratum h has 3 tasks but sampling_frame.sizes says the frame "
        "holds 2",
    )
    two = stratum_part("h", 0.3, [0.0, 1.0], 4, None)
    assert two.variance_of_mean == pytest.approx(0.5 / 2)


def test_a_rate_block_by_hand() -> None:
    z = z_quantile(0.95)
    nothing = {"rate": 0.3, "low": None, "high": None, "se": None, "deff": None, "n_eff": None}
    assert rate_block(0.3, None, 10, 3, z) == nothing
    assert rate_block(0.3, 0.01, 10, 0, z) == nothing
    # p(1-p)/var = 0.21 / 0.01 = 21 > 10 trials: capped at 10.
    block = rate_block(0.3, 0.01, 10, 3, z)
    assert block["n_eff"] == 10.0 and block["deff"] == 1.0
    assert block["se"] == pytest.approx(0.1)
    assert (block["low"], block["high"]) == pytest.approx(
        proportion_confint(3, 10, alpha=0.05, method="wilson"), abs=1e-12
    )
    # Under the cap: n_eff = 0.21 / 0.03 = 7, deff = 10 / 7.
    block = rate_block(0.3, 0.03, 10, 3, z)
    assert block["n_eff"] == pytest.approx(7.0)
    assert block["deff"] == pytest.approx(10 / 7)
    # No variance, or a rate of 0 or 1: as many draws as tasks.
    for p, var in ((0.3, 0.0), (0.0, 0.01), (1.0, 0.01), (0.3, -1e-18)):
        block = rate_block(p, var, 10, 4, z)
        assert block["n_eff"] == 4.0 and block["deff"] == 2.5
        assert block["se"] == math.sqrt(max(var, 0.0))
    # A rate rounding left outside [0, 1] is brought back in.
    assert rate_block(1 + 1e-15, None, 1, 1, z)["rate"] == 1.0
    assert rate_block(-1e-15, None, 1, 1, z)["rate"] == 0.0


def _part(stratum: str, weight: float, tasks: int, mean: float | None, var: float | None) -> Any:
    return StratumPart(stratum, weight, tasks, tasks * 2, mean, var)


def test_combining_strata_by_hand() -> None:
    parts = [_part("a", 0.25, 3, 0.5, 0.01), _part("b", 0.75, 2, 0.1, 0.04)]
    estimate, variance, reasons = combine(parts)
    assert estimate == pytest.approx(0.25 * 0.5 + 0.75 * 0.1)
    assert variance == pytest.approx(0.25**2 * 0.01 + 0.75**2 * 0.04)
    assert reasons == []
    # A stratum with no tasks: the mean over the others, weights renormalized, no variance.
    parts = [_part("a", 0.25, 0, None, None), _part("b", 0.5, 2, 0.4, 0.01)]
    parts.append(_part("c", 0.25, 2, 0.1, 0.01))
    estimate, variance, reasons = combine(parts)
    assert estimate == pytest.approx((0.5 * 0.4 + 0.25 * 0.1) / 0.75)
    assert variance is None
    assert reasons == [
        "interval unavailable: stratum a has no tasks (its weight 0.25 of the population is "
        "unobserved)"
    ]
    # One task: said; another reason: its own.
    parts = [_part("a", 0.5, 1, 0.4, None), StratumPart("b", 0.5, 3, 6, 0.2, None, "why b")]
    estimate, variance, reasons = combine(parts)
    assert estimate == pytest.approx(0.3)
    assert (variance, reasons) == (None, ["interval unavailable: stratum a has 1 task", "why b"])
    assert combine([_part("a", 1.0, 0, None, None)]) == (
        None,
        None,
        ["no member task has trials under this build"],
    )
    assert combine([]) == (None, None, ["no member task has trials under this build"])


def test_a_stratum_variance_of_zero_counts_as_known() -> None:
    parts = [_part("a", 0.5, 2, 0.5, 0.0), _part("b", 0.5, 2, 0.5, 0.02)]
    estimate, variance, reasons = combine(parts)
    assert (estimate, reasons) == (0.5, [])
    assert variance == pytest.approx(0.25 * 0.02)


# ------------------------------------------------------------------------------ estimates


def test_estimate_rates_by_hand() -> None:
    # Stratum a (W 0.4): shares 1/2, 1 (4 trials... 2 + 2); stratum b (W 0.6): 0, 1/2 (2 + 4).
    cohort = [
        obs("a1", "a", 1, 1),
        obs("a2", "a", 2, 0),
        obs("b1", "b", 0, 2),
        obs("b2", "b", 2, 2),
        obs("z1", "not-a-stratum", 5, 0),  # names no stratum of the weights: not read
        TaskObservation("a3", "a", {}, {}),  # no trials: not a task
    ]
    rates, table, reasons = estimate_rates(cohort, {"a": 0.4, "b": 0.6}, {"a": 10, "b": 4}, 0.9)
    assert reasons == []
    p = 0.4 * 0.75 + 0.6 * 0.25
    var = 0.16 * statistics.variance([0.5, 1.0]) / 2 * (1 - 2 / 10)
    var += 0.36 * statistics.variance([0.0, 0.5]) / 2 * (1 - 2 / 4)
    n_eff = min(p * (1 - p) / var, 10)
    assert rates["pass"]["rate"] == pytest.approx(p)
    assert rates["pass"]["se"] == pytest.approx(math.sqrt(var))
    assert rates["pass"]["n_eff"] == pytest.approx(n_eff)
    assert rates["pass"]["deff"] == pytest.approx(10 / n_eff)
    assert (rates["pass"]["low"], rates["pass"]["high"]) == pytest.approx(
        proportion_confint(p * n_eff, n_eff, alpha=0.1, method="wilson"), abs=1e-12
    )
    assert [(row["stratum"], row["weight"], row["tasks"]) for row in table] == [
        ("a", 0.4, 2),
        ("b", 0.6, 2),
    ]
    a = table[0]["rates"]["pass"]
    assert a["rate"] == 0.75
    assert a["se"] == pytest.approx(math.sqrt(statistics.variance([0.5, 1.0]) / 2 * 0.8))
    assert a["deff"] == pytest.approx(4 / a["n_eff"])
    assert set(table[0]["rates"]) == set(RATE_KEYS)


def test_without_any_task_there_is_no_rate_and_the_reason() -> None:
    rates, table, reasons = estimate_rates([], {"a": 1.0}, None, 0.95)
    assert rates == {}
    assert table == [{"stratum": "a", "weight": 1.0, "tasks": 0, "rates": {}}]
    assert reasons == ["no member task has trials under this build"]
    only_first = [TaskObservation("t", "a", {}, {"task_pass": 1})]
    assert estimate_rates(only_first, {"a": 1.0}, None, 0.95)[0] == {}
    first, _, _ = estimate_rates(only_first, {"a": 1.0}, None, 0.95, first=True)
    assert first["pass"]["rate"] == 1.0


def test_reasons_are_the_last_keys_and_alike_for_every_key() -> None:
    cohort = [obs("a1", "a", 1, 1), obs("b1", "b", 1, 0), obs("b2", "b", 0, 1)]
    rates, _, reasons = estimate_rates(cohort, {"a": 0.5, "b": 0.5}, None, 0.95)
    assert reasons == ["interval unavailable: stratum a has 1 task"]
    assert all(rates[k]["low"] is None for k in RATE_KEYS)
    assert rates["pass"]["rate"] == pytest.approx(0.5)


# ------------------------------------------------------------------------------ differences


def test_a_paired_difference_by_hand() -> None:
    # Stratum a (W 0.5): differences +1/2, 0, +1/4; stratum b (W 0.5): -1/2, 0.
    candidate = [
        obs("a1", "a", 2, 0),
        obs("a2", "a", 1, 1),
        obs("a3", "a", 3, 1),
        obs("b1", "b", 0, 2),
        obs("b2", "b", 1, 1),
        obs("c1", "c", 1, 0),  # a stratum the weights do not name
        TaskObservation("a4", "a", {}, {}),  # no trials under the candidate
    ]
    baseline = [
        obs("a1", "a", 1, 1),
        obs("a2", "a", 1, 1),
        obs("a3", "a", 1, 1),
        obs("b1", "b", 1, 1),
        obs("b2", "b", 1, 1),
        obs("c1", "c", 0, 1),
        obs("a4", "a", 1, 1),
        TaskObservation("b3", "b", {}, {}),
    ]
    diff, reasons = paired_difference(candidate, baseline, {"a": 0.5, "b": 0.5}, None, 0.9)
    assert reasons == [UNSEEN.format(5)]
    da, db = [0.5, 0.0, 0.25], [-0.5, 0.0]
    d = 0.5 * statistics.mean(da) + 0.5 * statistics.mean(db)
    var = 0.25 * statistics.variance(da) / 3 + 0.25 * statistics.variance(db) / 2
    half = stats.t.ppf(0.95, 5 - 2) * math.sqrt(var)
    block = diff["pass"]
    assert block["paired_tasks"] == 5
    assert block["diff"] == pytest.approx(d)
    assert block["se"] == pytest.approx(math.sqrt(var))
    assert block["low"] == pytest.approx(d - half)
    assert block["high"] == pytest.approx(d + half)
    assert set(diff) == set(RATE_KEYS)


def test_a_difference_interval_is_clipped_to_minus_one_and_one() -> None:
    candidate = [obs("a", "x", 1, 0), obs("b", "x", 0, 1)]
    baseline = [obs("a", "x", 0, 1), obs("b", "x", 1, 0)]
    diff, _ = paired_difference(candidate, baseline, {"x": 1.0}, None, 0.95)
    # Differences +1 and -1: mean 0, se 1, t(1) half-width 12.7: clipped.
    assert diff["pass"]["diff"] == 0.0
    assert diff["pass"]["se"] == pytest.approx(1.0)
    assert (diff["pass"]["low"], diff["pass"]["high"]) == (-1.0, 1.0)


def test_a_difference_without_degrees_of_freedom_or_variance_has_no_interval() -> None:
    # One pair per stratum in two strata: 2 pairs - 2 strata = 0 degrees of freedom, and no
    # variance either (a stratum of one).
    candidate = [obs("a", "x", 1, 0), obs("b", "y", 1, 0)]
    baseline = [obs("a", "x", 0, 1), obs("b", "y", 0, 1)]
    diff, reasons = paired_difference(candidate, baseline, {"x": 0.5, "y": 0.5}, None, 0.95)
    assert diff["pass"] == {
        "diff": 1.0,
        "low": None,
        "high": None,
        "se": None,
        "paired_tasks": 2,
    }
    assert reasons == [
        "difference interval unavailable: stratum x has 1 task",
        "difference interval unavailable: stratum y has 1 task",
    ]
    # A census of two pairs: variance 0, one degree of freedom: a degenerate interval.
    candidate = [obs("a", "x", 1, 0), obs("b", "x", 1, 0)]
    baseline = [obs("a", "x", 0, 1), obs("b", "x", 1, 1)]
    diff, reasons = paired_difference(candidate, baseline, {"x": 1.0}, {"x": 2}, 0.95)
    assert reasons == []  # a census: every interval of no width is exact, none withheld
    assert diff["pass"]["se"] == 0.0
    assert diff["pass"]["low"] == diff["pass"]["high"] == 0.75


def test_a_difference_that_does_not_vary_has_no_interval_of_no_width() -> None:
    """Both builds alike on every task: a t interval would be [0, 0], claiming the builds
    exactly equal; the paired tasks cannot say how much the difference varies."""
    candidate = [obs("a", "x", 1, 1), obs("b", "x", 0, 2), obs("c", "y", 2, 0), obs("d", "y", 2, 0)]
    diff, reasons = paired_difference(candidate, candidate, {"x": 0.5, "y": 0.5}, None, 0.95)
    for key in ("pass", "task_fail"):
        assert diff[key] == {"diff": 0.0, "low": None, "high": None, "se": 0.0, "paired_tasks": 4}
    assert reasons == [
        "difference interval unavailable for pass, task_fail: the paired tasks of each stratum "
        "(4 in all) differ by the same amount, so they cannot tell how much the difference "
        "varies (an interval of no width would claim it exact)",
        UNSEEN.format(4),
    ]
    # Alike within each stratum, apart between them: still no variation to measure.
    shifted = [obs("a", "x", 2, 0), obs("b", "x", 1, 1), obs("c", "y", 2, 0), obs("d", "y", 2, 0)]
    diff, _ = paired_difference(shifted, candidate, {"x": 0.5, "y": 0.5}, None, 0.95)
    assert diff["pass"]["diff"] == pytest.approx(0.25) and diff["pass"]["low"] is None
    # Alike as fractions, not as floats: 2/3-1/3, 1/3-0 and 3/3-2/3 are each 1/3, which
    # float subtraction spells 0.3333333333333333 or 0.33333333333333337.
    third = [obs("a", "x", 2, 1), obs("b", "x", 1, 2), obs("c", "x", 3, 0)]
    less = [obs("a", "x", 1, 2), obs("b", "x", 0, 3), obs("c", "x", 2, 1)]
    assert len({c.share("pass") - b.share("pass") for c, b in zip(third, less, strict=True)}) > 1
    diff, _ = paired_difference(third, less, {"x": 1.0}, None, 0.95)
    assert diff["pass"]["low"] is None and diff["pass"]["se"] == 0.0
    # A census of those three (frame size 3) keeps its interval of no width: exact.
    diff, reasons = paired_difference(third, less, {"x": 1.0}, {"x": 3}, 0.95)
    assert diff["pass"]["low"] == diff["pass"]["high"] == pytest.approx(1 / 3)
    assert not any("same amount" in r for r in reasons)
    # Estimator 1 stored the interval of no width; its estimates replay with it.
    diff, reasons = paired_difference(
        candidate, candidate, {"x": 0.5, "y": 0.5}, None, 0.95, interval_of_no_variation=True
    )
    assert (diff["pass"]["low"], diff["pass"]["high"]) == (0.0, 0.0)
    assert reasons == []


def test_a_census_beside_a_sampled_stratum_that_does_not_vary_is_no_exact_difference() -> None:
    """Estimator 3. Stratum x (frame size 2) is sampled whole and its two differences are
    0 and +1; stratum y (frame size 100) has three sampled tasks that each differ by +1/2.
    x contributes no variance because nothing in it was left unsampled, y none because its
    tasks happen to agree: the sum is 0 without the difference being known, so there is no
    interval. Estimator 2 gave [+0.5, +0.5] here."""
    candidate = [obs("a1", "x", 2, 0), obs("a2", "x", 2, 0)]
    candidate += [obs("b1", "y", 1, 1), obs("b2", "y", 2, 0), obs("b3", "y", 2, 0)]
    baseline = [obs("a1", "x", 2, 0), obs("a2", "x", 0, 2)]
    baseline += [obs("b1", "y", 0, 2), obs("b2", "y", 1, 1), obs("b3", "y", 1, 1)]
    weights, sizes = {"x": 0.5, "y": 0.5}, {"x": 2, "y": 100}
    members = {"x": 2, "y": 3}
    # By hand: x's mean difference (0 + 1) / 2, y's 1/2; p = 0.5 * 0.5 + 0.5 * 0.5.
    diff, reasons = paired_difference(candidate, baseline, weights, sizes, 0.95, members=members)
    assert diff["pass"]["diff"] == pytest.approx(0.5)
    assert (diff["pass"]["low"], diff["pass"]["high"]) == (None, None)
    assert any("stratum x is sampled whole" in r and "pass" in r for r in reasons)
    # Estimator 2 (no members) called it exact.
    old, _ = paired_difference(candidate, baseline, weights, sizes, 0.95)
    assert old["pass"]["low"] == old["pass"]["high"] == pytest.approx(0.5)
    # Both strata sampled whole: exact, as a census is.
    whole, _ = paired_difference(
        candidate, baseline, weights, {"x": 2, "y": 3}, 0.95, members=members
    )
    assert whole["pass"]["low"] == whole["pass"]["high"] == pytest.approx(0.5)


def test_a_frame_size_is_held_to_the_stratum_s_members_not_to_those_with_trials() -> None:
    """Estimator 3. Stratum x's frame holds 2 tasks and x has 3 members, one without
    trials (under the build, or under the baseline). Two observed tasks are no census of
    it: the declared size is wrong, and neither the rates nor the difference claim one."""
    build = [obs("a1", "x", 2, 0), obs("a2", "x", 1, 1), obs("a3", "x", 0, 0)]
    base = [obs("a1", "x", 1, 1), obs("a2", "x", 0, 2), obs("a3", "x", 0, 0)]
    weights, sizes = {"x": 1.0}, {"x": 2}
    members = estimation.members_by_stratum(build, list(weights))
    assert members == {"x": 3}
    rates, _, reasons = estimation.estimate_rates(build, weights, sizes, 0.95, members=members)
    assert rates["pass"]["rate"] == pytest.approx(0.75)
    assert rates["pass"]["low"] is None and rates["pass"]["se"] is None
    wrong = (
        "interval unavailable: stratum x has 3 tasks but sampling_frame.sizes says the "
        "frame holds 2"
    )
    assert wrong in reasons
    diff, why = paired_difference(build, base, weights, sizes, 0.95, members=members)
    assert diff["pass"]["diff"] == pytest.approx(0.5)
    assert diff["pass"]["low"] is None
    assert f"difference {wrong}" in why
    # Estimator 2 took the two observed tasks for the whole frame: a factor of 0, se 0.
    rates, _, _ = estimation.estimate_rates(build, weights, sizes, 0.95)
    assert rates["pass"]["se"] == 0.0


def test_no_pair_no_difference() -> None:
    diff, reasons = paired_difference(
        [obs("a", "x", 1, 0)], [obs("b", "x", 1, 0)], {"x": 1.0}, None, 0.95
    )
    assert diff == {}
    assert reasons == ["no task has trials under both builds"]


# ------------------------------------------------------------------------------ planning


def test_components_by_hand() -> None:
    # (hits, trials): 1/2, 3/4, 0/2 and a task without trials (left out).
    c = components("h", [(1, 2), (3, 4), (0, 2), (0, 0)])
    shares = [0.5, 0.75, 0.0]
    within = (2 * 0.25 + 4 * 0.75 * 0.25 + 0) / (1 + 3 + 1)
    between = statistics.variance(shares) - within * (1 / 2 + 1 / 4 + 1 / 2) / 3
    assert c is not None
    assert (c.stratum, c.tasks) == ("h", 3)
    assert c.trials_per_task == pytest.approx(8 / 3)
    assert c.within == pytest.approx(within)
    assert c.between == pytest.approx(between)
    assert c.unit_variance(5) == pytest.approx(between + within / 5)
    assert components("h", [(1, 2), (0, 0)]) is None
    assert components("h", []) is None


def test_components_of_one_trial_per_task_have_no_within_variance() -> None:
    c = components("h", [(1, 1), (0, 1), (1, 1), (1, 1)])
    assert c is not None
    assert c.within == 0.0
    assert c.between == pytest.approx(statistics.variance([1, 0, 1, 1]))


def test_a_between_variance_below_rounding_is_none() -> None:
    # Every task 2 of 4: shares alike, so between = 0 - within / 4 < 0: floored at 0.
    c = components("h", [(2, 4), (2, 4), (2, 4)])
    assert c is not None and c.between == 0.0
    # Shares 1/4, 1/2: variance 1/32 exactly what within explains? Within = (4 * 3/16 +
    # 4 * 1/4) / 6 = 7/24; within * mean(1/m) = 7/96 > 1/32: floored at 0 too.
    c = components("h", [(1, 4), (2, 4)])
    assert c is not None and c.between == 0.0
    # A true between-task variance well above rounding is kept.
    c = components("h", [(0, 10), (10, 10)])
    assert c is not None and c.between == pytest.approx(0.5)


def _exact_components(counts: list[tuple[int, int]]) -> tuple[Fraction, Fraction, Fraction]:
    """(within, variance of the shares, between) in exact arithmetic, by the docstring's
    formulas: within = sum m p (1 - p) / sum (m - 1), between = s^2 - within * mean(1/m)."""
    shares = [Fraction(h, m) for h, m in counts]
    zero = Fraction(0)
    within = sum((m * p * (1 - p) for (_, m), p in zip(counts, shares, strict=True)), zero)
    within /= sum(m - 1 for _, m in counts)
    mean = sum(shares, zero) / len(shares)
    variance = sum(((p - mean) ** 2 for p in shares), zero) / (len(shares) - 1)
    inv_m = sum((Fraction(1, m) for _, m in counts), zero) / len(counts)
    return within, variance, variance - within * inv_m


@pytest.mark.parametrize(
    "counts",
    [
        # Two large tasks whose shares differ by about what their trials' noise explains: a
        # true between-task variance near the floor of 1e-9 of the larger component.
        [(4031, 8191), (4095, 8191)],
        [(8009, 16199), (8099, 16199)],
        [(15749, 31751), (15875, 31751)],
        [(0, 10), (10, 10)],
        [(3, 10), (5, 10), (9, 10)],
    ],
)
def test_a_between_variance_is_kept_above_the_noise_floor_and_none_at_or_below(
    counts: list[tuple[int, int]],
) -> None:
    """VARIANCE_NOISE: a between-task variance of at most 1e-9 of the larger of the within
    variance and the shares' variance is rounding, not variation."""
    within, variance, between = _exact_components(counts)
    found = components("h", counts)
    assert found is not None
    assert found.within == pytest.approx(float(within), rel=1e-12)
    if between <= Fraction(1, 10**9) * max(within, variance):
        assert found.between == 0.0
    else:
        assert found.between == pytest.approx(float(between), rel=1e-6)


def test_a_between_variance_exactly_at_the_floor_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shares 0 and 1 of 2 trials each: within 0, shares' variance 1/2, between 1/2. With the
    # floor raised to the whole of the larger component, 1/2 is exactly at it: rounding.
    monkeypatch.setattr(estimation, "VARIANCE_NOISE", 1.0)
    found = components("h", [(0, 2), (2, 2)])
    assert found is not None and found.between == 0.0
    monkeypatch.setattr(estimation, "VARIANCE_NOISE", 0.999)
    found = components("h", [(0, 2), (2, 2)])
    assert found is not None and found.between == 0.5


def test_unseen_variation_is_laplaces_rate() -> None:
    assert unseen_variation(0, 8, 4) == pytest.approx((1 / 10) * (9 / 10) / 4)
    assert unseen_variation(6, 6, 2) == pytest.approx((7 / 8) * (1 / 8) / 2)


def test_allocation_by_hand() -> None:
    w = {"a": 0.2, "b": 0.3, "c": 0.5}
    sd = {"a": 0.5, "b": 0.1, "c": 0.2}
    # Proportional: 100 * W.
    assert allocate(w, sd, 100, neyman=False) == {"a": 20, "b": 30, "c": 50}
    # Neyman: W S = 0.1, 0.03, 0.1 of 0.23: 43.48 -> 44, 13.04 -> 14, 44.
    assert allocate(w, sd, 100, neyman=True) == {"a": 44, "b": 14, "c": 44}
    # At least 2 per stratum.
    assert allocate({"a": 0.99, "b": 0.01}, sd, 10, neyman=False) == {"a": 10, "b": 2}
    # No variation anywhere: Neyman falls back to the weights.
    none = {"a": 0.0, "b": 0.0, "c": 0.0}
    assert allocate(w, none, 10, neyman=True) == {"a": 2, "b": 3, "c": 5}


def test_tasks_needed_by_hand() -> None:
    w = {"a": 0.25, "b": 0.75}
    v = {"a": 0.09, "b": 0.01}
    # Proportional: (0.25 * 0.09 + 0.75 * 0.01) / 0.001 = 30; Neyman: (0.075 + 0.075)^2 / 0.001.
    assert tasks_needed(w, v, 0.001, neyman=False) == 30
    assert tasks_needed(w, v, 0.001, neyman=True) == 23  # 22.5 -> 23
    # No variance: two tasks per stratum.
    assert tasks_needed(w, {"a": 0.0, "b": 0.0}, 0.001, neyman=False) == 4
    assert tasks_needed(w, {"a": 0.0, "b": 0.0}, 0.001, neyman=True) == 4


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (225.00000000000003, 225),
        (225.0, 225),
        (225.001, 226),
        (0.5, 1),
        (1000.0000001, 1000),  # the last bits of a large count are rounding
        (1000.01, 1001),
        (0.0, 0),
        (-2.5, -2),
        # Below 1 the rounding forgiven is that of 1: 1.5e-9 above 1 is more than rounding.
        (1 + 1.5e-9, 2),
    ],
)
def test_ceil_count_forgives_rounding_only(x: float, expected: float) -> None:
    assert ceil_count(x) == expected


def test_allocated_variance_by_hand() -> None:
    w = {"a": 0.5, "b": 0.5, "c": 0.0}
    v = {"a": 0.2, "b": 0.1, "c": 9.0}
    assert allocated_variance(w, v, {"a": 10, "b": 5, "c": 0}) == pytest.approx(
        0.25 * 0.2 / 10 + 0.25 * 0.1 / 5
    )
    assert allocated_variance(w, v, {"a": 10}) == pytest.approx(0.25 * 0.2 / 10)


def test_trials_per_task_by_hand() -> None:
    # sqrt(10 * 0.2 / 0.05) = sqrt(40) = 6.32 -> 6 trials.
    assert trials_per_task(0.05, 0.2, 10, 3) == (6, "sqrt(10 x within / between) = 6.32")
    # Less than one trial is one.
    assert trials_per_task(1.0, 0.01, 2.5, 3) == (1, "sqrt(2.5 x within / between) = 0.16")
    kept = "no between-task variance observed: today's trials per task kept"
    assert trials_per_task(0.0, 0.2, 10, 3) == (3, kept)
    assert trials_per_task(-1e-12, 0.2, 10, 0) == (1, kept)


def test_detectable_difference_by_hand() -> None:
    w = {"a": 0.5, "b": 0.5}
    v = {"a": 0.04, "b": 0.16}
    n = {"a": 10, "b": 20}
    se = math.sqrt(0.25 * 0.04 / 10 + 0.25 * 0.16 / 20)
    expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * se
    assert detectable_difference(w, v, n, 0.95, 0.8) == pytest.approx(expected)
    assert detectable_difference(w, v, {"a": 10, "b": 0}, 0.95, 0.8) is None
    assert detectable_difference(w, v, {"a": 10}, 0.95, 0.8) is None


def test_tasks_to_detect_by_hand() -> None:
    w = {"a": 0.5, "b": 0.5}
    v = {"a": 0.04, "b": 0.16}
    z = stats.norm.ppf(0.95) + stats.norm.ppf(0.9)
    # Proportional: sum W S^2 / (d / z)^2 = 0.1 * z^2 / 0.01.
    assert tasks_to_detect(w, v, 0.1, 0.9, 0.9) == math.ceil(0.1 * z * z / 0.01)
    assert tasks_to_detect(w, v, 1.0, 0.9, 0.9) == math.ceil(0.1 * z * z)
    for power in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError) as raised:
            tasks_to_detect(w, v, 0.1, 0.9, power)
        assert str(raised.value) == f"power must be between 0 and 1, got {power}"
    for detect in (0, -0.1, 1.01):
        with pytest.raises(ValueError) as raised:
            tasks_to_detect(w, v, detect, 0.9, 0.8)
        assert str(raised.value) == (f"the difference to detect must be in (0, 1], got {detect}")


def test_components_is_a_plain_record() -> None:
    c = Components("h", 3, 4.0, 0.1, 0.2)
    assert c.unit_variance(2) == pytest.approx(0.2)
