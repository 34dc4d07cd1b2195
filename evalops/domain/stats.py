"""Repeated-trial statistics (RFC 0244 section B; docs/classification.md), exact where defined.

pass@k and pass^k are ratios of binomial coefficients computed as exact rationals, so two
hosts agree to the last bit; only the final conversion to float rounds.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalops.domain.gate_documents import TrialStats


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
    """`{n, passedCount, meanScore, passAtK, passHatK}` of one task.

    pass@k and pass^k are null when fewer than k trials exist: they are never computed
    with a smaller k (docs/gate.md), which would overstate pass^k.
    """
    return counts_block(t.n, t.c, t.k, mean(t.scores))


def counts_block(n: int, c: int, k: int, mean_score: float | None) -> dict[str, Any]:
    """`task_block` from the counts alone (the compact evaluator keeps no per-trial list)."""
    at_k, hat_k = _pass_floats(n, c, k) if n >= k else (None, None)
    return {"n": n, "passedCount": c, "meanScore": mean_score, "passAtK": at_k, "passHatK": hat_k}


@functools.lru_cache(maxsize=4096)
def _pass_floats(n: int, c: int, k: int) -> tuple[float, float]:
    """pass@k and pass^k as floats, once per (n, c, k): a suite's tasks share a few."""
    return float(pass_at_k(n, c, k)), float(pass_hat_k(n, c, k))


def trial_stats(tasks: Sequence[TaskTrials]) -> TrialStats:
    """Suite `trialStats`: shared k, means of passAtK / passHatK, clustered scoreStderr."""
    return blocks_stats([(t.k, task_block(t)) for t in tasks if t.n])


def blocks_stats(with_trials: Sequence[tuple[int, Mapping[str, Any]]]) -> TrialStats:
    """`trial_stats` from each task's (k, block), tasks with trials only."""
    blocks = [b for _, b in with_trials]
    out: TrialStats = {"taskCount": len(with_trials)}
    ks = {k for k, _ in with_trials}
    if len(ks) == 1:
        out["k"] = ks.pop()
    defined = [b for b in blocks if b["passAtK"] is not None]
    if defined:
        # Means over the tasks where pass@k is defined (enough trials for k).
        out["passAtK"] = mean([b["passAtK"] for b in defined])
        out["passHatK"] = mean([b["passHatK"] for b in defined])
    means = [b["meanScore"] for b in blocks if b["meanScore"] is not None]
    if len(means) >= 2:
        out["scoreStderr"] = statistics.stdev(means) / math.sqrt(len(means))
    return out
