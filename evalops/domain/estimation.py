"""Stratified, task-clustered rates of an estimation suite (docs/estimation.md).

The task is the statistical unit. Each task contributes the share of its effective trials in
each primary class; a stratum's estimate is the mean of its tasks' shares and its variance
the between-task variance of those shares over the number of tasks, so trials of one task
(which resemble each other) are never counted as independent evidence. The population rate
is the weighted sum of stratum means with the declared weights:

    p = sum_h W_h * mean_h        var(p) = sum_h W_h^2 * s_h^2 / n_h * (1 - n_h / N_h)

(the finite-population factor only when the frame's sizes `N_h` are declared). Its interval
is a Wilson interval at the effective sample size `n_eff = p(1-p) / var(p)`, capped at the
number of trials (Korn and Graubard 1998), and `n_eff` = the number of tasks when the
variance is 0. `deff` = trials / n_eff says how much the trials are worth less than as many
independent draws. A stratum with fewer than two tasks has no variance: the interval is not
given, and the reason is.

Everything here is pure: no clock (times come in as text), no database; the documents it
returns are plain JSON, stored and replayed byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any

from evalops.domain.classes import CANONICAL_PRECEDENCE

PASS = "pass"
"""The key of the pass rate: the share of trials classified `task_pass`."""
# Rates are reported for `pass` and for every primary class that is not a pass: the question
# an estimation suite answers is "how often does this failure happen".
RATE_KEYS: tuple[str, ...] = (PASS, *(c for c in CANONICAL_PRECEDENCE if c != "task_pass"))
INVALID_CLASSES = ("infrastructure_invalid", "grader_invalid")
DEFAULT_CONFIDENCE = 0.95
MIN_TASKS_FOR_VARIANCE = 2


def class_of(key: str) -> str:
    """The primary class a rate key counts (`pass` counts `task_pass`)."""
    return "task_pass" if key == PASS else key


@dataclass(frozen=True)
class TaskObservation:
    """One member task under one build: its stratum and its trials, counted by class.

    `effective` counts the trials that count after reruns are resolved (as the gate resolves
    them); `first` counts the original trials by their own first result."""

    task_id: str
    stratum: str
    effective: Mapping[str, int]
    first: Mapping[str, int]
    reruns: int = 0

    @property
    def n(self) -> int:
        return sum(self.effective.values())

    @property
    def n_first(self) -> int:
        return sum(self.first.values())

    def share(self, key: str, *, first: bool = False) -> float:
        counts = self.first if first else self.effective
        total = sum(counts.values())
        return counts.get(class_of(key), 0) / total if total else 0.0

    def exact_share(self, key: str) -> Fraction:
        """`share` as a fraction: shares compared for equality are compared exactly (2/6
        and 1/3 are one share, which their float differences need not show)."""
        total = self.n
        return Fraction(self.effective.get(class_of(key), 0), total) if total else Fraction(0)


# ------------------------------------------------------------------------------ quantiles


def z_quantile(confidence: float) -> float:
    """The two-sided standard-normal quantile for `confidence` (0.95 -> 1.959963...)."""
    check_confidence(confidence)
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student t quantile (scipy, imported only when a comparison needs it).

    `scipy.special.stdtrit` is what `scipy.stats.t.ppf` computes inside (the same float),
    without importing `scipy.stats`: half a second of CPU less for `estimate` and `verify`
    of a registry that stores comparisons."""
    check_confidence(confidence)
    from scipy import special

    return float(special.stdtrit(df, 1 - (1 - confidence) / 2))


def check_confidence(confidence: float) -> None:
    if not (isinstance(confidence, float | int) and 0 < confidence < 1):
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    # The quantile's probability in floats: 1e-16 makes it 0.5 (a quantile of 0, an
    # interval of no width), 1 - 1e-16 makes it 1 (no quantile at all).
    if not 0.5 < 1 - (1 - confidence) / 2 < 1:
        raise ValueError(
            f"confidence {confidence!r} is too close to {0 if confidence < 0.5 else 1} for "
            "an interval to be computed"
        )


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion `p` observed over `n` (possibly fractional,
    an effective n) draws; always inside [0, 1], and never empty for p of 0 or 1."""
    if n <= 0:
        raise ValueError(f"Wilson interval needs n > 0, got {n}")
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    # At p = 0 (or 1) the bound is exactly 0 (or 1); rounding would leave 1e-17.
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


# ------------------------------------------------------------------------------ estimation


def sample_variance(values: Sequence[float]) -> float:
    """The unbiased sample variance (n - 1), exactly 0 when every value is alike."""
    n = len(values)
    if n < 2:
        raise ValueError("a variance needs at least 2 values")
    m = math.fsum(values) / n
    if all(v == values[0] for v in values):
        return 0.0
    return math.fsum((v - m) ** 2 for v in values) / (n - 1)


@dataclass(frozen=True)
class StratumPart:
    stratum: str
    weight: float
    tasks: int
    trials: int
    mean: float | None
    variance_of_mean: float | None
    """`s_h^2 / n_h` (times the finite-population factor); None below 2 tasks."""
    why: str | None = None
    """Why there is no variance, when it is not the number of tasks."""


def stratum_part(  # noqa: PLR0913 (a stratum's parts, and its members since estimator 3)
    stratum: str,
    weight: float,
    values: Sequence[float],
    trials: int,
    size: int | None,
    members: int | None = None,
) -> StratumPart:
    """`members`: the stratum's member tasks, counted or not (None: estimators 1 and 2,
    which compared the frame's size with the tasks that have values only)."""
    n = len(values)
    if n == 0:
        return StratumPart(stratum, weight, 0, 0, None, None)
    m = math.fsum(values) / n
    if n < MIN_TASKS_FOR_VARIANCE:
        return StratumPart(stratum, weight, n, trials, m, None)
    sampled = n if members is None else max(n, members)
    if size is not None and sampled > size:
        # More sampled tasks than the frame holds: the declared size is wrong, and a factor
        # of 0 would claim a census.
        why = (
            f"interval unavailable: stratum {stratum} has {sampled} tasks but "
            f"sampling_frame.sizes says the frame holds {size}"
        )
        return StratumPart(stratum, weight, n, trials, m, None, why)
    fpc = 1.0 if size is None else 1 - n / size
    return StratumPart(stratum, weight, n, trials, m, sample_variance(values) / n * fpc)


def rate_block(
    p: float, variance: float | None, trials: int, tasks: int, z: float
) -> dict[str, Any]:
    """`{rate, low, high, se, deff, n_eff}` of one estimate (`low`/`high`/`se`/`deff`/`n_eff`
    null when the variance is unknown)."""
    p = min(1.0, max(0.0, p))
    if variance is None or tasks == 0:
        return {"rate": p, "low": None, "high": None, "se": None, "deff": None, "n_eff": None}
    if variance <= 0 or p in (0.0, 1.0):
        # No variation was seen: the tasks are as many independent draws as there are.
        n_eff = float(tasks)
    else:
        n_eff = min(p * (1 - p) / variance, float(trials))
    low, high = wilson(p, n_eff, z)
    return {
        "rate": p,
        "low": low,
        "high": high,
        "se": math.sqrt(max(variance, 0.0)),
        "deff": trials / n_eff,
        "n_eff": n_eff,
    }


def combine(parts: Sequence[StratumPart]) -> tuple[float | None, float | None, list[str]]:
    """(weighted estimate, its variance, reasons the variance is unknown) over the strata.

    A stratum without tasks leaves part of the population unobserved: the estimate is then
    the weighted mean over the strata that have tasks (weights renormalized) and no variance
    is claimed for the population."""
    seen = [s for s in parts if s.tasks]
    if not seen:
        return None, None, ["no member task has trials under this build"]
    reasons: list[str] = []
    for s in parts:
        if s.tasks == 0:
            reasons.append(
                f"interval unavailable: stratum {s.stratum} has no tasks (its weight "
                f"{s.weight:g} of the population is unobserved)"
            )
        elif s.variance_of_mean is None:
            reasons.append(s.why or f"interval unavailable: stratum {s.stratum} has 1 task")
    covered = math.fsum(s.weight for s in seen)
    estimate = math.fsum(s.weight / covered * (s.mean or 0.0) for s in seen)
    if reasons:
        return estimate, None, reasons
    variance = math.fsum(s.weight**2 * (s.variance_of_mean or 0.0) for s in seen)
    return estimate, variance, []


def _strata_values(
    tasks: Sequence[TaskObservation], strata: Sequence[str]
) -> dict[str, list[TaskObservation]]:
    by: dict[str, list[TaskObservation]] = {s: [] for s in strata}
    for t in tasks:
        if t.stratum in by:
            by[t.stratum].append(t)
    return by


def members_by_stratum(tasks: Sequence[TaskObservation], strata: Sequence[str]) -> dict[str, int]:
    """How many member tasks each stratum has, with trials or without."""
    return {s: len(found) for s, found in _strata_values(tasks, strata).items()}


def estimate_rates(  # noqa: PLR0913 (the design, and the members since estimator 3)
    tasks: Sequence[TaskObservation],
    weights: Mapping[str, float],
    sizes: Mapping[str, int] | None,
    confidence: float,
    *,
    first: bool = False,
    members: Mapping[str, int] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(rates by key, the per-stratum table, reasons) over the tasks with trials.

    `first`: from each task's first results instead of its post-rerun ones. `members`:
    each stratum's member tasks (`members_by_stratum`), which a declared frame size must
    hold (None: estimators 1 and 2)."""
    z = z_quantile(confidence)
    strata = list(weights)
    by = _strata_values([t for t in tasks if (t.n_first if first else t.n)], strata)
    rates: dict[str, dict[str, Any]] = {}
    table: dict[str, dict[str, Any]] = {
        s: {"stratum": s, "weight": weights[s], "tasks": len(by[s]), "rates": {}} for s in strata
    }
    reasons: list[str] = []
    for key in RATE_KEYS:
        parts = []
        for s in strata:
            found = by[s]
            trials = sum(t.n_first if first else t.n for t in found)
            part = stratum_part(
                s,
                weights[s],
                [t.share(key, first=first) for t in found],
                trials,
                None if sizes is None else sizes.get(s),
                None if members is None else members.get(s, 0),
            )
            parts.append(part)
            if part.mean is not None:
                table[s]["rates"][key] = rate_block(
                    part.mean, part.variance_of_mean, trials, part.tasks, z
                )
        estimate, variance, why = combine(parts)
        if estimate is None:
            reasons = why
            break
        total_trials = sum(p.trials for p in parts)
        total_tasks = sum(p.tasks for p in parts)
        rates[key] = rate_block(estimate, variance, total_trials, total_tasks, z)
        reasons = why
    return rates, list(table.values()), reasons


# ------------------------------------------------------------------------------ difference


def paired_difference(  # noqa: PLR0913 (two builds, the design, and the rules of versions)
    candidate: Sequence[TaskObservation],
    baseline: Sequence[TaskObservation],
    weights: Mapping[str, float],
    sizes: Mapping[str, int] | None,
    confidence: float,
    *,
    interval_of_no_variation: bool = False,
    members: Mapping[str, int] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per key: the stratified mean of per-task differences (candidate - baseline) over the
    tasks both builds ran, its standard error, and a t interval with (pairs - strata)
    degrees of freedom, the survey convention for a stratified cluster sample.

    Pairing removes the task-to-task variation both builds share, which is most of it.
    When every paired task differs alike, the variance is 0 and a t interval would have no
    width, claiming the difference exact: no interval is given, with the reason.
    `interval_of_no_variation` keeps the zero-width interval estimator 1 stored.

    `members` (estimator 3; None before): each stratum's member tasks. A stratum is then a
    census only when its frame's size, its members and its paired tasks are one number (a
    member left unpaired is not observed), and the variance is known to be 0 only when every
    stratum is one: a census beside a sampled stratum whose differences are alike is no
    exact difference. Estimator 2 called the strata a census together, by paired tasks."""
    base = {t.task_id: t for t in baseline if t.n}
    pairs = [(c, base[c.task_id]) for c in candidate if c.n and c.task_id in base]
    strata = list(weights)
    by: dict[str, list[tuple[TaskObservation, TaskObservation]]] = {s: [] for s in strata}
    for c, b in pairs:
        if c.stratum in by:
            by[c.stratum].append((c, b))
    out: dict[str, dict[str, Any]] = {}
    reasons: list[str] = []
    alike: list[str] = []
    unseen: list[str] = []
    if members is None:
        census = sizes is not None and all(sizes.get(s) == len(by[s]) for s in strata if by[s])
        whole: set[str] = set(strata) if census else set()
    else:
        whole = {
            s
            for s in strata
            if by[s] and sizes is not None and sizes.get(s) == members.get(s) == len(by[s])
        }
        census = all(s in whole for s in strata if by[s])
    for key in RATE_KEYS:
        differences = {s: [c.share(key) - b.share(key) for c, b in by[s]] for s in strata}
        parts = [
            stratum_part(
                s,
                weights[s],
                differences[s],
                sum(c.n + b.n for c, b in by[s]),
                None if sizes is None else sizes.get(s),
                None if members is None else members.get(s, 0),
            )
            for s in strata
        ]
        diff, variance, why = combine(parts)
        reasons = [
            w.replace("interval unavailable", "difference interval unavailable") for w in why
        ]
        if diff is None:
            reasons = ["no task has trials under both builds"]
            break
        paired = sum(p.tasks for p in parts)
        df = paired - sum(1 for p in parts if p.tasks)
        block: dict[str, Any] = {
            "diff": diff,
            "low": None,
            "high": None,
            "se": None,
            "paired_tasks": paired,
        }
        # Differences all alike within each stratum, compared exactly. A census (every
        # stratum's frame size its paired tasks) keeps its interval of no width: its
        # variance is 0 because nothing was left unsampled, and the difference is exact.
        alike_in_each = all(
            len({c.exact_share(key) - b.exact_share(key) for c, b in by[s]}) <= 1
            for s in strata
            if members is None or s not in whole
        )
        if (
            variance is not None
            and df >= 1
            and alike_in_each
            and not census
            and not interval_of_no_variation
        ):
            block.update(se=0.0)
            seen = any(c.share(key) or b.share(key) for s in strata for c, b in by[s])
            (alike if seen else unseen).append(key)
        elif variance is not None and df >= 1:
            se = math.sqrt(max(variance, 0.0))
            half = t_quantile(confidence, df) * se
            block.update(low=max(-1.0, diff - half), high=min(1.0, diff + half), se=se)
        out[key] = block
    paired = sum(len(by[s]) for s in strata)
    if alike:
        sampled_whole = sorted(s for s in whole if by[s]) if members is not None else []
        beside = (
            f" (stratum {', '.join(sampled_whole)} is sampled whole, which leaves the others "
            "to tell it)"
            if sampled_whole
            else ""
        )
        reasons.append(
            f"difference interval unavailable for {', '.join(alike)}: the paired tasks of each "
            f"{'sampled ' if sampled_whole else ''}stratum ({paired} in all) differ by the "
            f"same amount{beside}, so they cannot tell how much the difference varies (an "
            "interval of no width would claim it exact)"
        )
    if unseen:
        reasons.append(
            f"difference interval unavailable for {', '.join(unseen)}: no trial of the "
            f"{paired} paired tasks was of that class under either build"
        )
    return out, reasons


# -------------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class Components:
    """Variance components of one stratum's task shares (one-way random effects, moments)."""

    stratum: str
    tasks: int
    trials_per_task: float
    between: float
    """Variance of the tasks' true rates (floored at 0)."""
    within: float
    """Pooled variance of one trial's outcome around its task's rate."""

    def unit_variance(self, trials_per_task: float) -> float:
        """The variance of one task's observed share with that many trials."""
        return self.between + self.within / trials_per_task


def unseen_variation(hits: int, trials: int, per_task: float) -> float:
    """The task variance planning assumes for a stratum whose trials all went one way (an
    observed variance of 0 would plan it no tasks): a trial's variance at Laplace's rate
    `(hits + 1) / (trials + 2)`, over `per_task` trials."""
    p = (hits + 1) / (trials + 2)
    return p * (1 - p) / per_task


def components(stratum: str, counts: Sequence[tuple[int, int]]) -> Components | None:
    """From (hits, trials) per task: method-of-moments components, None below 2 tasks.

    Within: sum over tasks of `m_i p_i (1 - p_i)` over `sum (m_i - 1)` (the pooled variance
    of a 0/1 outcome within tasks). Between: the variance of task shares minus the part the
    within variance explains, `within * mean(1 / m_i)`, floored at 0."""
    usable = [(h, m) for h, m in counts if m >= 1]
    if len(usable) < MIN_TASKS_FOR_VARIANCE:
        return None
    shares = [h / m for h, m in usable]
    dof = sum(m - 1 for _, m in usable)
    within = math.fsum(m * p * (1 - p) for (_, m), p in zip(usable, shares, strict=True))
    within = within / dof if dof else 0.0
    inv_m = math.fsum(1 / m for _, m in usable) / len(usable)
    between = sample_variance(shares) - within * inv_m
    # What rounding leaves of an exact 0 (1e-17) is no variance: it would ask for 10^8 trials.
    if between <= VARIANCE_NOISE * max(within, sample_variance(shares), 1e-300):
        between = 0.0
    m_bar = sum(m for _, m in usable) / len(usable)
    return Components(stratum, len(usable), m_bar, between, within)


VARIANCE_NOISE = 1e-9
"""Relative size below which a variance component is rounding, not variation."""

WORST_CASE_VARIANCE = 0.25
"""The largest variance any share in [0, 1] can have: what planning assumes with no data."""


def allocate(
    weights: Mapping[str, float], unit_sd: Mapping[str, float], total: int, neyman: bool
) -> dict[str, int]:
    """Tasks per stratum for `total` tasks: proportional to W_h, or (Neyman) to W_h S_h.
    Each stratum gets at least 2 (a variance needs 2)."""
    key = {s: w * (unit_sd[s] if neyman else 1.0) for s, w in weights.items()}
    norm = math.fsum(key.values())
    if norm <= 0:
        key = dict(weights)
        norm = math.fsum(key.values())
    return {s: max(MIN_TASKS_FOR_VARIANCE, ceil_count(total * k / norm)) for s, k in key.items()}


def tasks_needed(
    weights: Mapping[str, float], unit_var: Mapping[str, float], target_var: float, neyman: bool
) -> int:
    """Total tasks so that `sum W_h^2 S_h^2 / n_h <= target_var` under the allocation.

    Proportional (n_h = n W_h): n = sum W_h S_h^2 / V. Neyman (n_h ∝ W_h S_h):
    n = (sum W_h S_h)^2 / V."""
    if neyman:
        numerator = math.fsum(w * math.sqrt(unit_var[s]) for s, w in weights.items()) ** 2
    else:
        numerator = math.fsum(w * unit_var[s] for s, w in weights.items())
    if numerator <= 0:
        return MIN_TASKS_FOR_VARIANCE * len(weights)
    return ceil_count(numerator / target_var)


def ceil_count(x: float) -> int:
    """`ceil`, forgiving the last bits of rounding (225.00000000000003 tasks is 225)."""
    return math.ceil(x - 1e-9 * max(1.0, abs(x)))


def allocated_variance(
    weights: Mapping[str, float], unit_var: Mapping[str, float], n: Mapping[str, int]
) -> float:
    return math.fsum(w**2 * unit_var[s] / n[s] for s, w in weights.items() if n.get(s))


def trials_per_task(
    between: float, within: float, task_cost: float, current: int
) -> tuple[int, str]:
    """The trials per task that minimize the variance for a fixed budget, when a new task
    costs `task_cost` trials: `sqrt(task_cost * within / between)` (the classic two-stage
    optimum), at least 1; with no between-task variance, today's number is kept."""
    if between <= 0:
        return max(1, current), "no between-task variance observed: today's trials per task kept"
    m = max(1, round(math.sqrt(task_cost * within / between)))
    return (
        m,
        f"sqrt({task_cost:g} x within / between) = {math.sqrt(task_cost * within / between):.2f}",
    )


def detectable_difference(
    weights: Mapping[str, float],
    diff_var: Mapping[str, float],
    n: Mapping[str, int],
    confidence: float,
    power: float,
) -> float | None:
    """The smallest paired difference a two-sided test at `1 - confidence` detects with
    `power`, with n_h tasks per stratum: (z_{1-a/2} + z_power) * sqrt(sum W_h^2 S_dh^2 / n_h)."""
    if any(not n.get(s) for s in weights):
        return None
    se = math.sqrt(allocated_variance(weights, diff_var, n))
    return (z_quantile(confidence) + NormalDist().inv_cdf(power)) * se


def tasks_to_detect(
    weights: Mapping[str, float],
    diff_var: Mapping[str, float],
    detect: float,
    confidence: float,
    power: float,
) -> int:
    """Total tasks (proportional allocation) a paired comparison needs to detect `detect`."""
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1, got {power}")
    if not 0 < detect <= 1:
        raise ValueError(f"the difference to detect must be in (0, 1], got {detect}")
    z = z_quantile(confidence) + NormalDist().inv_cdf(power)
    return tasks_needed(weights, diff_var, (detect / z) ** 2, neyman=False)
