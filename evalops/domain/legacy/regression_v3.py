"""Evaluator 3, frozen: the paired regression verdict, copied from `domain.regression` as
it stood when evaluator 3 was frozen whole (ARCHITECTURE.md, "Add an evaluator version"),
with each method's test as its own step, as `regression_v2` splits it (the copy keeps the
complexity limits; what it computes is the live function's, key for key). Never edited
afterwards: a change to the live rule must not change how an old decision replays.

The paired regression verdict (RFC 0244 section F; docs/gate.md), on scipy.stats.

Tasks present in both builds are paired by task id (the task is the statistical unit).
`inconclusive` whenever the method cannot separate the runs at alpha; `unchanged` only when
every pair is identical. Methods:
- `mcnemar`: exact McNemar (a two-sided binomial test on the discordant pairs of per-task
  pass; `binomial_two_sided`);
- `sign-test`: two-sided binomial test on the signs of per-task meanScore differences;
- `paired-t`: `scipy.stats.ttest_rel` on per-task meanScore;
- `paired-bootstrap`: `scipy.stats.bootstrap` of the mean difference, seeded (the seed is
  recorded); needs at least 10 pairs and some spread in the differences; its p-value is
  `(count + 1) / (resamples + 1)`, never 0; significant when p < alpha and the (1 - alpha)
  interval excludes 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

METHODS = ("mcnemar", "sign-test", "paired-t", "paired-bootstrap")
BOOTSTRAP_RESAMPLES = 9999
# Fewer pairs than this give a bootstrap distribution too coarse to trust (docs/gate.md).
BOOTSTRAP_MIN_PAIRS = 10
# Below this many trials, `scipy.stats.binomtest(k, n, 0.5)` returns the exact two-sided
# p-value, a multiple of 2**-n: it is computed from binomial coefficients, so that a verdict
# on a small suite does not import scipy.stats. From 15 trials on, scipy's floating sum
# differs from the exact value in the last bits, and stored decisions hold scipy's values.
EXACT_BELOW = 15


@dataclass(frozen=True)
class TaskOutcome:
    passed: bool
    mean_score: float


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def binomial_two_sided(k: int, n: int) -> float:
    """The two-sided p-value of `k` successes in `n` fair trials, as scipy.stats.binomtest."""
    if n >= EXACT_BELOW:
        from scipy import stats

        return float(stats.binomtest(k, n, 0.5).pvalue)
    if 2 * k == n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, math.ldexp(2 * tail, -n))


def paired_verdict(
    baseline: Mapping[str, TaskOutcome],
    candidate: Mapping[str, TaskOutcome],
    *,
    method: str,
    alpha: float,
    seed: int = 0,
) -> dict[str, Any]:
    """`{verdict, method, alpha, pairedTaskCount, pValue, ...}` over tasks in both builds."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    shared = sorted(baseline.keys() & candidate.keys())
    out: dict[str, Any] = {
        "verdict": "inconclusive",
        "method": method,
        "alpha": alpha,
        "pairedTaskCount": len(shared),
        "pValue": None,
    }
    if not shared:
        return out
    base = [baseline[t] for t in shared]
    cand = [candidate[t] for t in shared]
    if method == "mcnemar":
        return _mcnemar(out, base, cand, alpha)
    diffs = [y.mean_score - x.mean_score for x, y in zip(base, cand, strict=True)]
    mean_diff = math.fsum(diffs) / len(diffs)
    out["meanDifference"] = mean_diff
    if all(d == 0 for d in diffs):
        out.update(verdict="unchanged", pValue=1.0)
        return out
    if method == "sign-test":
        return _sign_test(out, diffs, alpha)
    if method == "paired-t":
        return _paired_t(out, (base, cand), diffs, mean_diff, alpha)
    # paired-bootstrap
    out["seed"] = seed
    return _bootstrap(out, diffs, mean_diff, alpha, seed)


def _direction(mean_diff: float) -> str:
    return "improved" if mean_diff > 0 else "regressed"


def _mcnemar(
    out: dict[str, Any], base: Sequence[TaskOutcome], cand: Sequence[TaskOutcome], alpha: float
) -> dict[str, Any]:
    b = sum(1 for x, y in zip(base, cand, strict=True) if x.passed and not y.passed)
    c = sum(1 for x, y in zip(base, cand, strict=True) if not x.passed and y.passed)
    out["discordant"] = {"baselineOnlyPassed": b, "candidateOnlyPassed": c}
    if b + c == 0:
        out.update(verdict="unchanged", pValue=1.0)
        return out
    p = binomial_two_sided(b, b + c)
    out["pValue"] = p
    if p < alpha:
        out["verdict"] = "regressed" if b > c else "improved"
    return out


def _sign_test(out: dict[str, Any], diffs: Sequence[float], alpha: float) -> dict[str, Any]:
    pos = sum(1 for d in diffs if d > 0)
    neg = sum(1 for d in diffs if d < 0)
    p = binomial_two_sided(pos, pos + neg)
    out.update(pValue=p, signs={"positive": pos, "negative": neg, "zero": len(diffs) - pos - neg})
    if p < alpha:
        out["verdict"] = "improved" if pos > neg else "regressed"
    return out


def _paired_t(
    out: dict[str, Any],
    pairs: tuple[Sequence[TaskOutcome], Sequence[TaskOutcome]],
    diffs: Sequence[float],
    mean_diff: float,
    alpha: float,
) -> dict[str, Any]:
    from scipy import stats

    base, cand = pairs
    if len(diffs) < 2:
        return out
    if len(set(diffs)) == 1:
        # Every task moved by the same amount: zero variance, t is undefined.
        out["interval"] = [mean_diff, mean_diff]
        return out
    result = stats.ttest_rel([y.mean_score for y in cand], [x.mean_score for x in base])
    p_t = _finite(float(result.pvalue))
    ci = result.confidence_interval(confidence_level=1 - alpha)
    out.update(pValue=p_t, interval=[_finite(float(ci.low)), _finite(float(ci.high))])
    if p_t is not None and p_t < alpha:
        out["verdict"] = _direction(mean_diff)
    return out


def _bootstrap(
    out: dict[str, Any], diffs: Sequence[float], mean_diff: float, alpha: float, seed: int
) -> dict[str, Any]:
    from scipy import stats

    if len(diffs) < BOOTSTRAP_MIN_PAIRS:
        out["reason"] = (
            f"paired-bootstrap needs at least {BOOTSTRAP_MIN_PAIRS} paired tasks, got {len(diffs)}"
        )
        return out
    if len(set(diffs)) == 1:
        out["reason"] = "every paired difference is equal: the bootstrap cannot separate them"
        return out
    boot = stats.bootstrap(
        (diffs,),
        lambda d, axis=-1: d.mean(axis=axis),
        n_resamples=BOOTSTRAP_RESAMPLES,
        confidence_level=1 - alpha,
        method="percentile",
        random_state=seed,
    )
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    dist = boot.bootstrap_distribution
    # Two-sided: resampled means on the far side of 0 from the observed mean, doubled; the
    # +1s make the p-value that of a permutation-style test and never 0.
    at_or_below = int((dist <= 0).sum())
    at_or_above = int((dist >= 0).sum())
    count = min(BOOTSTRAP_RESAMPLES, 2 * min(at_or_below, at_or_above))
    p_boot = (count + 1) / (BOOTSTRAP_RESAMPLES + 1)
    out.update(
        interval=[_finite(low), _finite(high)],
        pValue=p_boot,
        resamples=BOOTSTRAP_RESAMPLES,
    )
    if p_boot < alpha and (low > 0 or high < 0):
        out["verdict"] = _direction(mean_diff)
    return out
