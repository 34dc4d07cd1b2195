"""Evaluator 1, frozen (decisions stored before migration 0002 replay with it).

Repeated-trial statistics (RFC 0244 section B; docs/classification.md), exact where defined.

pass@k and pass^k are ratios of binomial coefficients computed as exact rationals, so two
hosts agree to the last bit; only the final conversion to float rounds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """`1 - C(n-c, k) / C(n, k)`: the chance at least one of k trials drawn passes."""
    _check(n, c, k)
    if c == 0:
        return Fraction(0)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """`C(c, k) / C(n, k)`: the chance all k trials drawn pass (0 when c < k)."""
    _check(n, c, k)
    if c < k:
        return Fraction(0)
    return Fraction(math.comb(c, k), math.comb(n, k))


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def passes_rule(
    rule: str, gating_scores: Sequence[float], passed: Sequence[bool], pass_score: float
) -> bool:
    """Task pass by `passRule` over effective trials: all / any pass, or mean gating score."""
    if not passed:
        return False
    if rule == "all":
        return all(passed)
    if rule == "any":
        return any(passed)
    m = mean(gating_scores)
    return m is not None and m >= pass_score


@dataclass(frozen=True)
class TaskTrials:
    """One task's effective trials, reduced to what statistics need."""

    task_id: str
    k: int
    passed: tuple[bool, ...]
    scores: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.passed)

    @property
    def c(self) -> int:
        return sum(self.passed)


def task_block(t: TaskTrials) -> dict[str, Any]:
    """`{n, passedCount, meanScore, passAtK, passHatK}` of one task (k capped at n)."""
    k = min(t.k, t.n)
    return {
        "n": t.n,
        "passedCount": t.c,
        "meanScore": mean(t.scores),
        "passAtK": float(pass_at_k(t.n, t.c, k)) if t.n else None,
        "passHatK": float(pass_hat_k(t.n, t.c, k)) if t.n else None,
    }


def trial_stats(tasks: Sequence[TaskTrials]) -> dict[str, Any]:
    """Suite `trialStats`: shared k, means of passAtK / passHatK, clustered scoreStderr."""
    with_trials = [t for t in tasks if t.n]
    blocks = [task_block(t) for t in with_trials]
    out: dict[str, Any] = {"taskCount": len(with_trials)}
    ks = {t.k for t in with_trials}
    if len(ks) == 1:
        out["k"] = ks.pop()
    if blocks:
        out["passAtK"] = mean([b["passAtK"] for b in blocks])
        out["passHatK"] = mean([b["passHatK"] for b in blocks])
    means = [b["meanScore"] for b in blocks if b["meanScore"] is not None]
    if len(means) >= 2:
        out["scoreStderr"] = statistics.stdev(means) / math.sqrt(len(means))
    return out
