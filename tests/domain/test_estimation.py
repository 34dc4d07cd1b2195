"""Stratified, task-clustered rates (evalops/domain/estimation.py) against independent references.

- The stratified mean and its standard error against svy's Taylor-linearization estimator
  (strata, the task as primary sampling unit, trial weights W_h / (n_h m_i) so that every
  task of a stratum carries the same weight), with and without the finite-population factor.
- Wilson intervals against statsmodels' `proportion_confint(method="wilson")`.
- The paired difference against svy's mean of per-task differences (its t interval with
  PSUs - strata degrees of freedom is the one the contract asks for).
- Small cases worked by hand in the comments.
- A seeded simulation: nominal 95% intervals cover the true rate in 93-97% of 2,000
  cohorts with unequal strata and within-task correlation; a naive per-trial interval does not.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalops.domain.estimation import (
    RATE_KEYS,
    TaskObservation,
    components,
    detectable_difference,
    estimate_rates,
    paired_difference,
    tasks_needed,
    tasks_to_detect,
    wilson,
    z_quantile,
)

WEIGHTS = {"free": 0.2, "pro": 0.5, "enterprise": 0.3}


def obs(task_id: str, stratum: str, passed: int, failed: int, **other: int) -> TaskObservation:
    counts = {"task_pass": passed, "task_fail": failed, **other}
    counts = {k: v for k, v in counts.items() if v}
    return TaskObservation(task_id, stratum, counts, counts)


# ------------------------------------------------------------------------------ references


def svy_mean(
    cohort: Sequence[TaskObservation],
    weights: Mapping[str, float],
    sizes: Mapping[str, int] | None = None,
) -> tuple[float, float]:
    """svy's Taylor estimate of the pass rate, from one row per trial."""
    import polars as pl
    import svy

    per_stratum = {h: sum(1 for t in cohort if t.stratum == h) for h in weights}
    rows: list[dict[str, Any]] = []
    for t in cohort:
        for cls, count in t.effective.items():
            for _ in range(count):
                row: dict[str, Any] = {
                    "stratum": t.stratum,
                    "task": t.task_id,
                    "y": 1.0 if cls == "task_pass" else 0.0,
                    "w": weights[t.stratum] / per_stratum[t.stratum] / t.n,
                }
                if sizes is not None:
                    row["N"] = float(sizes[t.stratum])
                rows.append(row)
    design = svy.Design(
        stratum="stratum", psu="task", wgt="w", pop_size="N" if sizes is not None else None
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimate = svy.Sample(pl.DataFrame(rows), design).estimation.mean("y")
        assert not isinstance(estimate, list)
        result = estimate.to_polars()
    return float(result["est"][0]), float(result["se"][0])


def svy_difference(
    pairs: Sequence[tuple[str, str, float]], weights: Mapping[str, float], alpha: float
) -> tuple[float, float, float, float]:
    """svy's estimate, se and interval of the mean per-task difference (one row per task)."""
    import polars as pl
    import svy

    per_stratum = {h: sum(1 for _, s, _ in pairs if s == h) for h in weights}
    rows = [
        {"stratum": s, "task": t, "d": d, "w": weights[s] / per_stratum[s]} for t, s, d in pairs
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = svy.Sample(pl.DataFrame(rows), svy.Design(stratum="stratum", psu="task", wgt="w"))
        found = sample.estimation.mean("d", alpha=alpha)
        assert not isinstance(found, list)
        r = found.to_polars()
    return float(r["est"][0]), float(r["se"][0]), float(r["lci"][0]), float(r["uci"][0])


# --------------------------------------------------------------------------- cohorts


@st.composite
def cohorts(draw: st.DrawFn) -> list[TaskObservation]:
    out: list[TaskObservation] = []
    for h in WEIGHTS:
        for i in range(draw(st.integers(2, 6))):
            m = draw(st.integers(1, 6))
            k = draw(st.integers(0, m))
            out.append(obs(f"{h}-{i}", h, k, m - k))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohorts())
def test_stratified_mean_and_se_agree_with_svy_taylor(cohort: list[TaskObservation]) -> None:
    rates, _, reasons = estimate_rates(cohort, WEIGHTS, None, 0.95)
    est, se = svy_mean(cohort, WEIGHTS)
    assert reasons == []
    assert rates["pass"]["rate"] == pytest.approx(est, abs=1e-12)
    assert rates["pass"]["se"] == pytest.approx(se, rel=1e-9, abs=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohorts(), st.integers(0, 20))
def test_finite_population_correction_agrees_with_svy(
    cohort: list[TaskObservation], extra: int
) -> None:
    sizes = {h: sum(1 for t in cohort if t.stratum == h) + extra for h in WEIGHTS}
    rates, _, _ = estimate_rates(cohort, WEIGHTS, sizes, 0.95)
    est, se = svy_mean(cohort, WEIGHTS, sizes)
    assert rates["pass"]["rate"] == pytest.approx(est, abs=1e-12)
    assert rates["pass"]["se"] == pytest.approx(se, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("p", "n"), [(0.3, 10), (0.0, 7), (1.0, 7), (0.5, 1), (0.123, 57.5), (0.9, 3.2)]
)
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_wilson_agrees_with_statsmodels(p: float, n: float, confidence: float) -> None:
    from statsmodels.stats.proportion import proportion_confint  # type: ignore[import-untyped]

    low, high = proportion_confint(p * n, n, alpha=1 - confidence, method="wilson")
    got = wilson(p, n, z_quantile(confidence))
    assert got == pytest.approx((low, high), abs=1e-12)
    assert 0.0 <= got[0] <= p <= got[1] <= 1.0


def test_hand_worked_two_strata() -> None:
    # Weights a: 0.4, b: 0.6. Stratum a: task shares 1/2 and 1 (mean 3/4, s^2 = 1/8);
    # stratum b: shares 0, 1/4, 1/2 (mean 1/4, s^2 = 1/16).
    # p = 0.4 * 3/4 + 0.6 * 1/4 = 0.45.
    # var = 0.16 * (1/8) / 2 + 0.36 * (1/16) / 3 = 0.01 + 0.0075 = 0.0175; se = 0.13229.
    # n_eff = 0.45 * 0.55 / 0.0175 = 14.142857 (under the 14 trials? no: 4 + 12 = 16 trials,
    # so not capped); deff = 16 / 14.142857 = 1.131313.
    weights = {"a": 0.4, "b": 0.6}
    cohort = [
        obs("a1", "a", 1, 1),
        obs("a2", "a", 2, 0),
        obs("b1", "b", 0, 4),
        obs("b2", "b", 1, 3),
        obs("b3", "b", 2, 2),
    ]
    rates, table, reasons = estimate_rates(cohort, weights, None, 0.95)
    r = rates["pass"]
    assert reasons == []
    assert r["rate"] == pytest.approx(0.45)
    assert r["se"] == pytest.approx(math.sqrt(0.0175))
    assert r["n_eff"] == pytest.approx(0.2475 / 0.0175)
    assert r["deff"] == pytest.approx(16 / (0.2475 / 0.0175))
    # The failure rate is the complement here (only two classes were seen).
    assert rates["task_fail"]["rate"] == pytest.approx(0.55)
    assert rates["hard_constraint_fail"]["rate"] == 0.0
    assert [row["tasks"] for row in table] == [2, 3]
    assert table[0]["rates"]["pass"]["rate"] == pytest.approx(0.75)


def test_n_eff_is_capped_at_the_number_of_trials() -> None:
    # One trial per task, tasks spread widely: s^2/n under-shoots p(1-p)/trials by n/(n-1);
    # shares 1,0,1,0 -> p = 1/2, s^2 = 1/3, var = 1/12, p(1-p)/var = 3 < 4 trials: not capped.
    # With shares 1,0 twice as many trials in each task (2 of 2, 0 of 2), var = 1/2 / 2 = 1/4,
    # p(1-p)/var = 1: not capped either. A cap shows when tasks agree more than trials:
    # shares 1/2, 1/2, 1/2, 0.6 ... use stratum values 0.5 and 0.6 with 10 trials each:
    # s^2 = 0.005, var = 0.0025, p = 0.55, p(1-p)/var = 99 > 20 trials -> n_eff = 20.
    cohort = [obs("x1", "x", 5, 5), obs("x2", "x", 6, 4)]
    rates, _, _ = estimate_rates(cohort, {"x": 1.0}, None, 0.95)
    assert rates["pass"]["n_eff"] == 20
    assert rates["pass"]["deff"] == 1.0


def test_zero_variance_uses_the_number_of_tasks() -> None:
    # Every task 1/2: no between-task variation; n_eff = 3 tasks, and Wilson at n = 3.
    cohort = [obs(f"t{i}", "x", 1, 1) for i in range(3)]
    rates, _, reasons = estimate_rates(cohort, {"x": 1.0}, None, 0.95)
    from statsmodels.stats.proportion import proportion_confint

    assert reasons == []
    assert rates["pass"]["n_eff"] == 3
    assert rates["pass"]["se"] == 0
    assert (rates["pass"]["low"], rates["pass"]["high"]) == pytest.approx(
        proportion_confint(1.5, 3, method="wilson")
    )


def test_all_pass_and_all_fail_strata_stay_inside_0_1() -> None:
    cohort = [
        obs("a1", "a", 3, 0),
        obs("a2", "a", 2, 0),
        obs("b1", "b", 0, 3),
        obs("b2", "b", 0, 2),
    ]
    rates, table, reasons = estimate_rates(cohort, {"a": 0.5, "b": 0.5}, None, 0.95)
    assert reasons == []
    for block in [rates["pass"], *(row["rates"]["pass"] for row in table)]:
        assert 0.0 <= block["low"] <= block["rate"] <= block["high"] <= 1.0
    a = table[0]["rates"]["pass"]
    assert a["rate"] == 1.0 and a["high"] == 1.0 and a["low"] < 1.0
    b = table[1]["rates"]["pass"]
    assert b["rate"] == 0.0 and b["low"] == 0.0 and b["high"] > 0.0


def test_a_stratum_with_one_task_has_no_interval_and_says_so() -> None:
    cohort = [obs("a1", "free", 1, 1), obs("b1", "pro", 1, 0), obs("b2", "pro", 0, 1)]
    cohort.append(obs("c1", "enterprise", 1, 0))
    cohort.append(obs("c2", "enterprise", 1, 0))
    rates, table, reasons = estimate_rates(cohort, WEIGHTS, None, 0.95)
    assert "interval unavailable: stratum free has 1 task" in reasons
    r = rates["pass"]
    assert r["rate"] == pytest.approx(0.2 * 0.5 + 0.5 * 0.5 + 0.3 * 1.0)
    assert r["low"] is None and r["high"] is None and r["se"] is None
    assert table[0]["rates"]["pass"]["low"] is None


def test_a_stratum_with_no_tasks_is_named_and_no_population_interval_is_given() -> None:
    cohort = [obs("b1", "pro", 1, 0), obs("b2", "pro", 0, 1), obs("c1", "enterprise", 1, 0)]
    cohort.append(obs("c2", "enterprise", 0, 1))
    rates, table, reasons = estimate_rates(cohort, WEIGHTS, None, 0.95)
    assert any("stratum free has no tasks" in r for r in reasons)
    assert rates["pass"]["low"] is None
    # The rate is over the strata observed, weights renormalized: (0.5*0.5 + 0.3*0.5) / 0.8.
    assert rates["pass"]["rate"] == pytest.approx(0.5)
    assert table[0]["tasks"] == 0 and table[0]["rates"] == {}


def test_a_task_without_trials_does_not_count_as_a_task() -> None:
    cohort = [obs("a1", "x", 1, 0), obs("a2", "x", 0, 1), TaskObservation("a3", "x", {}, {})]
    rates, table, _ = estimate_rates(cohort, {"x": 1.0}, None, 0.95)
    assert table[0]["tasks"] == 2
    assert rates["pass"]["rate"] == 0.5


def test_every_rate_key_is_reported() -> None:
    rates, _, _ = estimate_rates([obs("a", "x", 1, 0), obs("b", "x", 0, 1)], {"x": 1.0}, None, 0.9)
    assert set(rates) == set(RATE_KEYS)
    assert "task_pass" not in rates and "pass" in rates


def test_first_results_read_the_originals() -> None:
    # One timed-out original was rerun and passed: effective 2/2 pass, first 1/2.
    t = TaskObservation(
        "a", "x", {"task_pass": 2}, {"task_pass": 1, "infrastructure_invalid": 1}, reruns=1
    )
    u = TaskObservation("b", "x", {"task_pass": 2}, {"task_pass": 2})
    after, _, _ = estimate_rates([t, u], {"x": 1.0}, None, 0.95)
    first, _, _ = estimate_rates([t, u], {"x": 1.0}, None, 0.95, first=True)
    assert after["pass"]["rate"] == 1.0
    assert first["pass"]["rate"] == 0.75
    assert first["infrastructure_invalid"]["rate"] == 0.25


# --------------------------------------------------------------------------- difference


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohorts(), st.randoms(use_true_random=False))
def test_paired_difference_agrees_with_svy(cohort: list[TaskObservation], rnd: Any) -> None:
    baseline = []
    for t in cohort:
        m = rnd.randint(1, 5)
        k = rnd.randint(0, m)
        baseline.append(obs(t.task_id, t.stratum, k, m - k))
    diff, reasons = paired_difference(cohort, baseline, WEIGHTS, None, 0.9)
    # Only classes without an interval are named: those no trial of either build had, or
    # whose differences do not vary.
    assert all(r.startswith("difference interval unavailable for ") for r in reasons), reasons
    base = {b.task_id: b for b in baseline}
    pairs = [
        (t.task_id, t.stratum, t.share("pass") - base[t.task_id].share("pass")) for t in cohort
    ]
    est, se, low, high = svy_difference(pairs, WEIGHTS, 0.1)
    d = diff["pass"]
    assert d["paired_tasks"] == len(cohort)
    assert d["diff"] == pytest.approx(est, abs=1e-12)
    if all(len({x for _, s, x in pairs if s == stratum}) <= 1 for stratum in WEIGHTS):
        # Every stratum's differences alike: no interval of no width, and a reason names it.
        assert d["low"] is None and d["high"] is None and d["se"] == 0.0
        named = [
            r.split(":")[0].removeprefix("difference interval unavailable for ") for r in reasons
        ]
        assert any("pass" in n.split(", ") for n in named), reasons
        return
    assert d["se"] == pytest.approx(se, rel=1e-9, abs=1e-12)
    # svy's interval is not clipped to [-1, 1]; ours is (a difference of rates cannot leave it).
    assert d["low"] == pytest.approx(max(-1.0, low), abs=1e-9)
    assert d["high"] == pytest.approx(min(1.0, high), abs=1e-9)


def test_difference_only_over_tasks_both_builds_ran() -> None:
    # x1, x2 paired; x3 only in the candidate; x4 only in the baseline.
    cand = [obs("x1", "x", 2, 0), obs("x2", "x", 1, 1), obs("x3", "x", 0, 2)]
    base = [obs("x1", "x", 1, 1), obs("x2", "x", 0, 2), obs("x4", "x", 2, 0)]
    diff, _ = paired_difference(cand, base, {"x": 1.0}, None, 0.95)
    # Both differences are +1/2: diff 0.5, no variance, a degenerate interval.
    assert diff["pass"]["paired_tasks"] == 2
    assert diff["pass"]["diff"] == 0.5
    assert diff["pass"]["se"] == 0.0


# ----------------------------------------------------------------------------- planning


def test_variance_components_by_hand() -> None:
    # Tasks with 4 trials: 4/4, 0/4, 2/4. Within: (0 + 0 + 4 * 1/4) / (3 * 3) = 1/9.
    # Shares 1, 0, 1/2: variance 1/4; minus within * mean(1/m) = 1/9 * 1/4 = 1/36;
    # between = 1/4 - 1/36 = 2/9.
    c = components("x", [(4, 4), (0, 4), (2, 4)])
    assert c is not None
    assert c.within == pytest.approx(1 / 9)
    assert c.between == pytest.approx(2 / 9)
    assert c.unit_variance(4) == pytest.approx(2 / 9 + 1 / 36)
    assert components("x", [(1, 2)]) is None


def test_tasks_needed_proportional_and_neyman_by_hand() -> None:
    # W = (0.5, 0.5), S^2 = (0.04, 0.16): S = (0.2, 0.4). Target variance 0.0004.
    # Proportional: sum W S^2 / V = 0.1 / 0.0004 = 250.
    # Neyman: (sum W S)^2 / V = 0.3^2 / 0.0004 = 225.
    w = {"a": 0.5, "b": 0.5}
    v = {"a": 0.04, "b": 0.16}
    assert tasks_needed(w, v, 0.0004, neyman=False) == 250
    assert tasks_needed(w, v, 0.0004, neyman=True) == 225


def test_detectable_difference_round_trips_with_tasks_to_detect() -> None:
    w = {"a": 0.3, "b": 0.7}
    var = {"a": 0.05, "b": 0.05}
    n_total = tasks_to_detect(w, var, 0.1, 0.95, 0.8)
    # (1.959964 + 0.841621)^2 * 0.05 / 0.01 = 39.24 -> 40 tasks.
    assert n_total == 40
    n = {"a": 12, "b": 28}
    mde = detectable_difference(w, var, n, 0.95, 0.8)
    assert mde is not None and mde == pytest.approx(
        (z_quantile(0.95) + 0.8416212335729143) * math.sqrt(0.05 / 40), rel=1e-9
    )


# ---------------------------------------------------------------------------- simulation


@pytest.mark.slow
def test_nominal_95_covers_93_to_97_percent_and_naive_per_trial_under_covers() -> None:
    weights = {"free": 0.2, "pro": 0.5, "enterprise": 0.3}
    n_tasks = {"free": 8, "pro": 20, "enterprise": 12}
    # Task rates vary within each stratum (Beta), so a task's trials are correlated.
    beta = {"free": (1.0, 3.0), "pro": (2.0, 2.0), "enterprise": (4.0, 1.5)}
    trials = 5
    true_rate = sum(weights[h] * a / (a + b) for h, (a, b) in beta.items())
    rng = random.Random(20261206)
    z = z_quantile(0.95)
    covered = naive_covered = 0
    cohorts_run = 2000
    for _ in range(cohorts_run):
        cohort = []
        for h in weights:
            a, b = beta[h]
            for i in range(n_tasks[h]):
                p = rng.betavariate(a, b)
                k = sum(rng.random() < p for _ in range(trials))
                cohort.append(obs(f"{h}{i}", h, k, trials - k))
        rates, _, _ = estimate_rates(cohort, weights, None, 0.95)
        block = rates["pass"]
        covered += block["low"] <= true_rate <= block["high"]
        # Naive: every trial an independent draw (per-stratum binomial variance).
        var = 0.0
        for h, w in weights.items():
            k = sum(t.effective.get("task_pass", 0) for t in cohort if t.stratum == h)
            m = n_tasks[h] * trials
            var += w**2 * (k / m) * (1 - k / m) / m
        p = block["rate"]
        n_naive = p * (1 - p) / var if var > 0 else sum(n_tasks.values()) * trials
        low, high = wilson(p, n_naive, z)
        naive_covered += low <= true_rate <= high
    assert 0.93 <= covered / cohorts_run <= 0.97
    assert naive_covered / cohorts_run < 0.90


def test_sizes_smaller_than_the_sample_are_said_not_read_as_a_census() -> None:
    # 3 tasks in a stratum whose frame is said to hold 2 sessions: no factor of 0 (a census).
    cohort = [obs("a", "x", 1, 1), obs("b", "x", 2, 0), obs("c", "x", 0, 2)]
    rates, _, reasons = estimate_rates(cohort, {"x": 1.0}, {"x": 2}, 0.95)
    assert rates["pass"]["low"] is None
    assert reasons == [
        "interval unavailable: stratum x has 3 tasks but sampling_frame.sizes says the frame "
        "holds 2"
    ]
    # A stratum sampled whole has no sampling variance: Wilson at n = tasks.
    census, _, why = estimate_rates(cohort, {"x": 1.0}, {"x": 3}, 0.95)
    assert why == [] and census["pass"]["se"] == 0 and census["pass"]["n_eff"] == 3


def test_a_member_whose_stratum_the_weights_no_longer_name_is_named() -> None:
    from evalops.domain.estimate_documents import evaluate_estimate

    def task(task_id: str, stratum: str | None, passed: int) -> dict[str, Any]:
        counts = {"task_pass": passed, "task_fail": 2 - passed}
        return {
            "task_id": task_id,
            "stratum": stratum,
            "effective": counts,
            "first": counts,
            "reruns": 0,
        }

    inputs = {
        "estimate_id": "EST-1",
        "request": {
            "build": "b",
            "baseline": None,
            "at": "2026-12-01T00:00:00Z",
            "confidence": 0.95,
        },
        "suite": {
            "id": "estimation/x",
            "population": "p",
            "frame": {"source": "s", "period": "2026-10", "frozen_at": "2026-11-01T00:00:00Z"},
            "weights": {"by": "tier", "values": {"a": 1.0}},
            "claims_limited_to": None,
        },
        "tasks": [
            task("t1", "a", 1),
            task("t2", "a", 2),
            task("t3", "gone", 0),
            task("t4", None, 0),
        ],
        "baseline_tasks": None,
    }
    doc = evaluate_estimate(inputs)
    assert doc["task_count"] == 2 and doc["trial_count"] == 4
    assert doc["rates"]["pass"]["rate"] == 0.75
    assert doc["unavailable"] == ["2 members name no stratum of tier (a): not counted: t3, t4"]
