"""Repeated-trial statistics (RFC 0244 section B; docs/classification.md): pure, no database.

pass@k and pass^k are checked against `math.comb` rationals and against independent
product formulas, within the RFC's tolerance |host - formula| <= 1e-9 * max(1, |formula|).
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.stats import (
    TaskTrials,
    pass_at_k,
    pass_hat_k,
    passes_rule,
    task_block,
    trial_stats,
)


def close(host: float, formula: float) -> bool:
    return abs(host - formula) <= 1e-9 * max(1.0, abs(formula))


def comb_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(0) if c == 0 else 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def comb_pass_hat_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(0) if c < k else Fraction(math.comb(c, k), math.comb(n, k))


def product_pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s numerically stable form: 1 - prod_{i=n-c+1}^{n} (1 - k / i)."""
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def product_pass_hat_k(n: int, c: int, k: int) -> float:
    """prod_{i=0}^{k-1} (c - i) / (n - i): drawing k passing trials without replacement."""
    if c < k:
        return 0.0
    return math.prod((c - i) / (n - i) for i in range(k))


def trials(task_id: str, k: int, passed: list[bool], scores: list[float]) -> TaskTrials:
    return TaskTrials(task_id, k, tuple(passed), tuple(scores))


# --------------------------------------------------------------------------- RFC example


def test_rfc_example_n5_c4_k3() -> None:
    assert pass_at_k(5, 4, 3) == Fraction(1)
    assert pass_hat_k(5, 4, 3) == Fraction(2, 5)
    assert isinstance(pass_at_k(5, 4, 3), Fraction)
    assert isinstance(pass_hat_k(5, 4, 3), Fraction)


def test_rfc_example_task_block() -> None:
    t = trials("support-refund", 3, [True, True, True, True, False], [1, 1, 1, 1, 0])
    assert task_block(t) == {
        "n": 5,
        "passedCount": 4,
        "meanScore": 0.8,
        "passAtK": 1.0,
        "passHatK": 0.4,
    }
    # passRule all requires 5/5.
    assert not passes_rule("all", list(t.scores), list(t.passed), 1.0)


def test_tau_bench_pass_hat_3_at_75_percent() -> None:
    # RFC Motivation: at 75% per-trial success pass^3 is about 42% (p^3 in the limit).
    assert abs(float(pass_hat_k(400, 300, 3)) - 0.75**3) < 0.01


# ------------------------------------------------------------------------ (n, c, k) table

TABLE = [
    (1, 0, 1),
    (1, 1, 1),
    (2, 1, 1),
    (2, 1, 2),
    (3, 2, 2),
    (3, 3, 3),
    (5, 0, 3),
    (5, 1, 3),
    (5, 2, 3),
    (5, 3, 3),
    (5, 4, 3),
    (5, 5, 3),
    (5, 4, 5),
    (10, 3, 1),
    (10, 3, 5),
    (10, 7, 4),
    (10, 9, 10),
    (20, 10, 10),
    (50, 25, 7),
    (100, 1, 1),
    (100, 37, 10),
    (100, 99, 50),
    (200, 150, 3),
    (1000, 999, 500),
]


@pytest.mark.parametrize(("n", "c", "k"), TABLE)
def test_table_against_math_comb(n: int, c: int, k: int) -> None:
    at, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    assert at == comb_pass_at_k(n, c, k)
    assert hat == comb_pass_hat_k(n, c, k)
    assert close(float(at), float(comb_pass_at_k(n, c, k)))
    assert close(float(hat), float(comb_pass_hat_k(n, c, k)))
    # An independent float evaluation agrees within the RFC tolerance.
    assert close(float(at), product_pass_at_k(n, c, k))
    assert close(float(hat), product_pass_hat_k(n, c, k))
    assert 0 <= hat <= at <= 1


@pytest.mark.parametrize(("n", "c", "k"), TABLE)
def test_table_task_block(n: int, c: int, k: int) -> None:
    t = trials("t", k, [True] * c + [False] * (n - c), [1.0] * c + [0.0] * (n - c))
    out = task_block(t)
    assert out["n"] == n
    assert out["passedCount"] == c
    assert close(out["meanScore"], c / n)
    assert close(out["passAtK"], float(comb_pass_at_k(n, c, k)))
    assert close(out["passHatK"], float(comb_pass_hat_k(n, c, k)))


# -------------------------------------------------------------------------------- edges


@pytest.mark.parametrize(("n", "k"), [(1, 1), (3, 1), (3, 3), (10, 4)])
def test_c_zero(n: int, k: int) -> None:
    assert pass_at_k(n, 0, k) == 0
    assert pass_hat_k(n, 0, k) == 0


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 3), (5, 1, 2), (10, 3, 4), (4, 3, 4)])
def test_c_below_k(n: int, c: int, k: int) -> None:
    assert pass_hat_k(n, c, k) == 0
    assert pass_at_k(n, c, k) > 0  # at least one passed trial can still be drawn


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_k_equals_n(n: int) -> None:
    for c in range(n + 1):
        # Drawing all n trials: one pass anywhere is enough for pass@k; pass^k needs all.
        assert pass_at_k(n, c, n) == (1 if c >= 1 else 0)
        assert pass_hat_k(n, c, n) == (1 if c == n else 0)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_k_one_is_the_pass_rate(n: int) -> None:
    for c in range(n + 1):
        assert pass_at_k(n, c, 1) == Fraction(c, n)
        assert pass_hat_k(n, c, 1) == Fraction(c, n)


def test_all_passed() -> None:
    assert pass_at_k(6, 6, 4) == 1
    assert pass_hat_k(6, 6, 4) == 1


def test_n_minus_c_below_k_gives_pass_at_k_one() -> None:
    assert pass_at_k(5, 3, 3) == 1  # C(2, 3) = 0
    assert pass_at_k(5, 2, 3) == Fraction(9, 10)  # 1 - C(3,3)/C(5,3)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 3), (5, -1, 3), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_out_of_range_is_refused(n: int, c: int, k: int) -> None:
    said = f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}"
    with pytest.raises(ValueError) as raised:
        pass_at_k(n, c, k)
    assert str(raised.value) == said
    with pytest.raises(ValueError) as raised:
        pass_hat_k(n, c, k)
    assert str(raised.value) == said


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), st.data())
def test_random_n_c_k_against_formulas(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    k = data.draw(st.integers(1, n))
    at, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    assert at == comb_pass_at_k(n, c, k)
    assert hat == comb_pass_hat_k(n, c, k)
    assert close(float(at), product_pass_at_k(n, c, k))
    assert close(float(hat), product_pass_hat_k(n, c, k))
    assert 0 <= hat <= at <= 1
    if c < n:  # one more passing trial never lowers either
        assert pass_at_k(n, c + 1, k) >= at
        assert pass_hat_k(n, c + 1, k) >= hat


# ------------------------------------------------------------------------------ passRule


def test_pass_rule_all() -> None:
    assert passes_rule("all", [1.0, 1.0, 1.0], [True, True, True], 1.0)
    assert not passes_rule("all", [1.0, 1.0, 0.0], [True, True, False], 0.0)


def test_pass_rule_any() -> None:
    assert passes_rule("any", [0.0, 0.0, 1.0], [False, False, True], 1.0)
    assert not passes_rule("any", [0.9, 0.9, 0.9], [False, False, False], 0.0)


def test_pass_rule_mean_reads_gating_scores_against_pass_score() -> None:
    gating = [1.0, 0.5, 0.75]  # mean 0.75
    passed = [True, False, False]
    assert passes_rule("mean", gating, passed, 0.75)  # >= is a pass
    assert passes_rule("mean", gating, passed, 0.5)
    assert not passes_rule("mean", gating, passed, 0.76)
    # An unmatched trajectory contributes gating score 0, whatever its output score.
    assert not passes_rule("mean", [1.0, 0.0], [True, False], 0.9)
    assert passes_rule("mean", [1.0, 0.0], [True, False], 0.5)


def test_pass_rule_mean_can_pass_with_no_passed_trial() -> None:
    # mean is a threshold on scores, independent of the per-trial pass flags.
    assert passes_rule("mean", [0.8, 0.8], [False, False], 0.8)


def test_a_task_without_trials_has_no_mean_score_and_no_pass_at_k() -> None:
    # The mean of no scores is undefined: null, never a 0 that would read as a failing
    # score; pass@k and pass^k are null below k trials (docs/gate.md).
    assert task_block(trials("empty", 1, [], [])) == {
        "n": 0,
        "passedCount": 0,
        "meanScore": None,
        "passAtK": None,
        "passHatK": None,
    }


@pytest.mark.parametrize("rule", ["all", "any", "mean"])
def test_pass_rule_without_trials_never_passes(rule: str) -> None:
    assert not passes_rule(rule, [], [], 0.0)


# ------------------------------------------------------------------------ suite trialStats


def test_score_stderr_against_the_formula() -> None:
    tasks = [
        trials("a", 3, [True, True, True, False, True], [1.0, 1.0, 1.0, 0.0, 1.0]),
        trials("b", 3, [False, False, True, False, False], [0.2, 0.4, 1.0, 0.0, 0.4]),
        trials("c", 3, [True, True, True, True, True], [0.9, 1.0, 1.0, 0.8, 1.0]),
    ]
    out = trial_stats(tasks)
    means = [statistics.fmean(t.scores) for t in tasks]  # 0.8, 0.4, 0.94
    mu = sum(means) / 3
    sample_sd = math.sqrt(sum((m - mu) ** 2 for m in means) / (3 - 1))
    assert close(out["scoreStderr"], sample_sd / math.sqrt(3))
    assert out["k"] == 3
    at = [float(pass_at_k(5, c, 3)) for c in (4, 1, 5)]
    hat = [float(pass_hat_k(5, c, 3)) for c in (4, 1, 5)]
    assert close(out["passAtK"], sum(at) / 3)
    assert close(out["passHatK"], sum(hat) / 3)


def test_score_stderr_two_tasks_exact_value() -> None:
    tasks = [trials("a", 1, [True], [1.0]), trials("b", 1, [False], [0.0])]
    # sample sd of (1, 0) is sqrt(0.5); divided by sqrt(2) gives 0.5.
    assert close(trial_stats(tasks)["scoreStderr"], 0.5)


def test_score_stderr_clusters_by_task_not_by_trial() -> None:
    # Same per-task means, very different trial counts: the stderr only sees the means.
    few = [trials("a", 1, [True], [1.0]), trials("b", 1, [False], [0.5])]
    many = [
        trials("a", 1, [True] * 8, [1.0] * 8),
        trials("b", 1, [False] * 8, [0.0, 1.0] * 4),
    ]
    assert close(trial_stats(few)["scoreStderr"], trial_stats(many)["scoreStderr"])


def test_score_stderr_omitted_below_two_tasks() -> None:
    one = trial_stats([trials("a", 3, [True, False, True], [1.0, 0.0, 1.0])])
    assert "scoreStderr" not in one
    assert one["k"] == 3
    assert close(one["passAtK"], 1.0)
    assert close(one["passHatK"], 0.0)
    assert "scoreStderr" not in trial_stats([])


def test_identical_task_means_give_zero_stderr() -> None:
    tasks = [trials(t, 1, [True], [0.5]) for t in ("a", "b", "c")]
    assert trial_stats(tasks)["scoreStderr"] == 0.0


def test_k_reported_only_when_shared() -> None:
    tasks = [trials("a", 2, [True, True], [1.0, 1.0]), trials("b", 1, [True], [1.0])]
    assert "k" not in trial_stats(tasks)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=6),
        min_size=2,
        max_size=6,
    )
)
def test_score_stderr_property(per_task_scores: list[list[float]]) -> None:
    tasks = [
        trials(f"t{i}", 1, [s >= 0.5 for s in scores], scores)
        for i, scores in enumerate(per_task_scores)
    ]
    means = [math.fsum(s) / len(s) for s in per_task_scores]
    mu = math.fsum(means) / len(means)
    sample_sd = math.sqrt(math.fsum((m - mu) ** 2 for m in means) / (len(means) - 1))
    expected = sample_sd / math.sqrt(len(means))
    got = trial_stats(tasks)["scoreStderr"]
    assert abs(got - expected) <= 1e-9 * max(1.0, expected)


def test_the_task_count_is_of_tasks_with_trials() -> None:
    tasks = [
        trials("a", 2, [True, False], [1.0, 0.0]),
        trials("b", 2, [], []),
        trials("c", 2, [True, True], [1.0, 1.0]),
    ]
    out = trial_stats(tasks)
    assert out["taskCount"] == 2
    assert trial_stats([])["taskCount"] == 0
