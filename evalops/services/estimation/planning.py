"""`evalops estimate plan`: how many tasks per stratum and trials per task a question needs.

From the latest build's trials (the build asked for, else the build of the suite's newest
stored estimate, else the build of the newest trial of a member): the variance components of
each stratum (between tasks, within a task), then the tasks the desired half-width needs
under proportional and Neyman allocation, the trials per task that spend a budget best, the
smallest paired difference today's tasks can detect, and (`--detect D --power P`) the tasks a
paired comparison needs. Nothing is stored. What is assumed is said, above all when there
are no trials yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain.estimate_documents import sampled_after_the_frame
from evalops.domain.estimation import (
    DEFAULT_CONFIDENCE,
    MIN_TASKS_FOR_VARIANCE,
    PASS,
    RATE_KEYS,
    WORST_CASE_VARIANCE,
    Components,
    allocate,
    class_of,
    components,
    detectable_difference,
    sample_variance,
    tasks_needed,
    tasks_to_detect,
    trials_per_task,
    unseen_variation,
    z_quantile,
)
from evalops.errors import InputError
from evalops.services.estimation.inputs import EstimateAsk, estimate_inputs, estimation_suite
from evalops.store import queries
from evalops.store.engine import read_session
from evalops.store.tables import Estimate, ExecutionProfileRow, Trial

DEFAULT_POWER = 0.8


def latest_build(session: Session, suite_id: str) -> str | None:
    """The build of the suite's newest stored estimate, else of the newest trial of a member."""
    newest = session.exec(
        select(Estimate.build)
        .where(Estimate.suite_id == suite_id)
        .order_by(col(Estimate.id).desc())
    ).first()
    if newest is not None:
        return newest
    members = [m.task_id for m in queries.members(session, suite_id)]
    if not members:
        return None
    digest = session.exec(
        select(Trial.execution_digest)
        .where(col(Trial.task_id).in_(members[:500]))
        .order_by(col(Trial.id).desc())
    ).first()
    if digest is None:
        return None
    return session.exec(
        select(ExecutionProfileRow.system_build).where(
            ExecutionProfileRow.execution_digest == digest
        )
    ).first()


SMALLEST = 1e-6
"""The narrowest half-width and smallest difference planned for: finer ones need more than a
trillion tasks (and their squares leave floating point), which no frame holds."""


def _check(half_width: float | None, detect: float | None, power: float, task_cost: float) -> None:
    if half_width is not None and not 0 < half_width < 1:
        raise InputError("must be between 0 and 1 (a rate's ±)", field="--half-width")
    if half_width is not None and half_width < SMALLEST:
        raise InputError(
            f"must be at least {SMALLEST:g}: a narrower interval needs more tasks than any "
            "frame holds",
            field="--half-width",
        )
    if detect is not None and not 0 < detect <= 1:
        raise InputError("must be a difference of rates in (0, 1]", field="--detect")
    if detect is not None and detect < SMALLEST:
        raise InputError(
            f"must be at least {SMALLEST:g}: a smaller difference needs more tasks than any "
            "frame holds",
            field="--detect",
        )
    if not 0 < power < 1:
        raise InputError("must be between 0 and 1", field="--power")
    if not (math.isfinite(task_cost) and task_cost > 0):
        raise InputError("must be a positive number of trials", field="--task-cost")


def _by_stratum(
    tasks: Sequence[Mapping[str, Any]], strata: Sequence[str]
) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {s: [] for s in strata}
    for t in tasks:
        if t["stratum"] in out and sum(t["effective"].values()):
            out[t["stratum"]].append(t)
    return out


def _hits(t: Mapping[str, Any], key: str) -> tuple[int, int]:
    return int(t["effective"].get(class_of(key), 0)), int(sum(t["effective"].values()))


def _paired_variance(
    cand: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]], key: str
) -> float | None:
    """The observed variance of per-task differences in one stratum (None below 2 pairs)."""
    b = {t["task_id"]: t for t in base if sum(t["effective"].values())}
    diffs = []
    for t in cand:
        if t["task_id"] in b:
            h1, n1 = _hits(t, key)
            h0, n0 = _hits(b[t["task_id"]], key)
            diffs.append(h1 / n1 - h0 / n0)
    return sample_variance(diffs) if len(diffs) >= MIN_TASKS_FOR_VARIANCE else None


def _within_frame(by: Mapping[str, int], sizes: Mapping[str, int]) -> dict[str, int]:
    """An allocation with no stratum over its frame's size: a stratum planned more tasks
    than it holds is sampled whole (a census)."""
    return {s: min(n, sizes[s]) if s in sizes else n for s, n in by.items()}


def _census_variance(
    weights: Mapping[str, float],
    unit_var: Mapping[str, float],
    by: Mapping[str, int],
    sizes: Mapping[str, int],
) -> float:
    """`allocated_variance` with the finite-population factor of the strata with a size."""
    factor = {s: 1 - n / sizes[s] if s in sizes else 1.0 for s, n in by.items()}
    return math.fsum(
        w**2 * unit_var[s] / by[s] * factor[s] for s, w in weights.items() if by.get(s)
    )


def _allocation(
    weights: Mapping[str, float],
    unit_var: Mapping[str, float],
    target: float,
    z: float,
    sizes: Mapping[str, int],
) -> dict[str, Any]:
    out = {}
    for name, neyman in (("proportional", False), ("neyman", True)):
        total = tasks_needed(weights, unit_var, target, neyman=neyman)
        sd = {s: math.sqrt(v) for s, v in unit_var.items()}
        by = _within_frame(allocate(weights, sd, total, neyman), sizes)
        out[name] = {
            "tasks": sum(by.values()),
            "by_stratum": by,
            "half_width": z * math.sqrt(_census_variance(weights, unit_var, by, sizes)),
        }
    return out


@dataclass(frozen=True)
class PlanAsk:
    """What `estimate plan` was asked."""

    suite_id: str
    half_width: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    detect: float | None = None
    power: float = DEFAULT_POWER
    build: str | None = None
    """The build whose trials are measured (None: the latest, see the module docstring)."""
    baseline: str | None = None
    """A second build: measure the paired differences' variance instead of assuming it."""
    rate: str = PASS
    task_cost: float = 1.0
    """What a new task costs, in trials (sets the trials per task that spend a budget best)."""


@dataclass
class _Observed:
    weights: dict[str, float]
    build: str | None
    by: dict[str, list[Mapping[str, Any]]]
    base_by: dict[str, list[Mapping[str, Any]]] | None
    sizes: dict[str, int]
    """`sampling_frame.sizes`: no stratum is planned more tasks than its frame holds."""


def _observe(engine: Engine, ask: PlanAsk, now: datetime) -> _Observed:
    with read_session(engine) as session:
        _, declaration = estimation_suite(session, ask.suite_id, _head(session))
        if declaration.weights is None:
            raise InputError(f"suite {ask.suite_id} declares no weights", field="--suite")
        weights = {s: float(w) for s, w in declaration.weights.values.items()}
        chosen = ask.build or latest_build(session, ask.suite_id)
        tasks: list[Mapping[str, Any]] = []
        base_tasks: list[Mapping[str, Any]] | None = None
        if chosen is not None:
            estimate_ask = EstimateAsk(
                ask.suite_id, chosen, ask.baseline, confidence=ask.confidence
            )
            inputs = estimate_inputs(session, estimate_ask, now)
            # What the estimate would count: not the members sampled after the frame.
            late = set(
                sampled_after_the_frame(inputs["tasks"], inputs["suite"]["frame"]["frozen_at"])
            )
            tasks = [t for t in inputs["tasks"] if t["task_id"] not in late]
            base_tasks = inputs["baseline_tasks"]
            if base_tasks is not None:
                base_tasks = [t for t in base_tasks if t["task_id"] not in late]
    strata = list(weights)
    frame = declaration.sampling_frame
    return _Observed(
        weights,
        chosen,
        _by_stratum(tasks, strata),
        _by_stratum(base_tasks, strata) if base_tasks is not None else None,
        dict(frame.sizes) if frame is not None and frame.sizes else {},
    )


def _weighted(values: Sequence[tuple[float, float]]) -> float:
    """The weighted mean of (value, weight) pairs (0 when there are none)."""
    total = math.fsum(w for _, w in values)
    return math.fsum(v * w for v, w in values) / total if total else 0.0


def _stratum_rows(
    seen: _Observed, found: Mapping[str, Components | None], unit_var: Mapping[str, float]
) -> list[dict[str, Any]]:
    return [
        {
            "stratum": s,
            "weight": w,
            "tasks": len(seen.by[s]),
            "trials_per_task": None if (c := found[s]) is None else c.trials_per_task,
            "between_task_variance": None if c is None else c.between,
            "within_task_variance": None if c is None else c.within,
            "task_variance_at_plan": unit_var[s],
        }
        for s, w in seen.weights.items()
    ]


def plan(engine: Engine, ask: PlanAsk, now: datetime) -> dict[str, Any]:
    """The planning document of `estimate plan` (nothing stored)."""
    _check(ask.half_width, ask.detect, ask.power, ask.task_cost)
    if ask.rate not in RATE_KEYS:
        raise InputError(
            f"--rate {ask.rate!r} is not one of {', '.join(RATE_KEYS)}", field="--rate"
        )
    try:
        z = z_quantile(ask.confidence)
    except ValueError as exc:
        raise InputError(str(exc), field="--confidence") from None
    seen = _observe(engine, ask, now)
    weights = seen.weights
    found = {s: components(s, [_hits(t, ask.rate) for t in seen.by[s]]) for s in weights}
    trials_now = [sum(t["effective"].values()) for s in weights for t in seen.by[s]]
    current_m = round(sum(trials_now) / len(trials_now)) if trials_now else 1
    assumptions = _assumptions(seen, found, bool(trials_now))
    known = [(c, weights[s]) for s, c in found.items() if c is not None]
    if known:
        m, why = trials_per_task(
            _weighted([(c.between, w) for c, w in known]),
            _weighted([(c.within, w) for c, w in known]),
            ask.task_cost,
            current_m,
        )
    else:
        m, why = current_m, "no variance components yet: today's trials per task kept"
    unit_var = {}
    for s, c in found.items():
        if c is None:
            unit_var[s] = WORST_CASE_VARIANCE
        elif c.unit_variance(m) > 0:
            unit_var[s] = min(WORST_CASE_VARIANCE, c.unit_variance(m))
        else:
            hits = sum(_hits(t, ask.rate)[0] for t in seen.by[s])
            trials = sum(_hits(t, ask.rate)[1] for t in seen.by[s])
            unit_var[s] = unseen_variation(hits, trials, m)
            assumptions.append(
                f"stratum {s}: every trial went the same way ({hits}/{trials}); its variance "
                f"is taken at the rate (hits + 1) / (trials + 2), not at 0"
            )
    # The variance of one task's paired difference: observed with a baseline; else assumed
    # twice a task's variance (a change unrelated to the task's own rate: no pairing gain).
    diff_var = {}
    for s in weights:
        observed = _paired_variance(seen.by[s], seen.base_by[s], ask.rate) if seen.base_by else None
        if observed is not None and observed <= 0:
            # Every paired task differed alike: a variance of 0 would promise any difference
            # detectable by the fewest tasks. Planned as if unpaired instead.
            assumptions.append(
                f"stratum {s}: every paired task's difference was the same, a variance of 0; "
                "its paired differences are assumed to vary twice as much as one build's task "
                "rates (no gain from pairing)"
            )
            observed = None
        diff_var[s] = observed if observed is not None else 2 * unit_var[s]
    today = {s: len(seen.by[s]) for s in weights}
    empty = [s for s in weights if not today[s]]
    document: dict[str, Any] = {
        "suite": ask.suite_id,
        "build": seen.build,
        "baseline": ask.baseline,
        "rate": ask.rate,
        "confidence": ask.confidence,
        "strata": _stratum_rows(seen, found, unit_var),
        "trials_per_task": {"now": current_m if trials_now else None, "plan": m, "why": why},
        "half_width": ask.half_width,
        "allocation": None,
        "detectable_difference": {
            "power": ask.power,
            "tasks_by_stratum": today,
            "difference": detectable_difference(
                weights, diff_var, today, ask.confidence, ask.power
            ),
            "why": (
                f"no paired difference is detectable yet: stratum {', '.join(empty)} "
                "has no tasks with trials"
                if empty
                else None
            ),
        },
        "detect": None,
        "assumptions": assumptions,
    }
    if ask.half_width is not None:
        document["allocation"] = _allocation(
            weights, unit_var, (ask.half_width / z) ** 2, z, seen.sizes
        )
    if ask.detect is not None:
        total = tasks_to_detect(weights, diff_var, ask.detect, ask.confidence, ask.power)
        by = _within_frame(
            allocate(weights, dict.fromkeys(weights, 1.0), total, neyman=False), seen.sizes
        )
        document["detect"] = {
            "difference": ask.detect,
            "power": ask.power,
            # The tasks the strata are given (at least 2 each, none over its frame).
            "tasks": sum(by.values()),
            "by_stratum": by,
        }
    assumptions += _censuses(document, seen.sizes)
    return document


def _censuses(document: Mapping[str, Any], sizes: Mapping[str, int]) -> list[str]:
    """Each stratum some plan samples whole because its frame holds no more tasks."""
    planned = [a["by_stratum"] for a in (document["allocation"] or {}).values()]
    if document["detect"]:
        planned.append(document["detect"]["by_stratum"])
    whole = sorted({s for by in planned for s, n in by.items() if s in sizes and n >= sizes[s]})
    return [
        f"stratum {s}: its frame holds {sizes[s]} tasks (sampling_frame.sizes), so a plan "
        f"that needs as many or more samples it whole (a census, no sampling variance)"
        for s in whole
    ]


def _assumptions(
    seen: _Observed, found: Mapping[str, Components | None], any_trials: bool
) -> list[str]:
    out = []
    if not any_trials:
        out.append(
            "no trials yet"
            + (f" under build {seen.build}" if seen.build else "")
            + f": every stratum is assumed at the largest variance a rate can have "
            f"({WORST_CASE_VARIANCE:g}, a rate of 0.5 with tasks as unlike as possible) and "
            "1 trial per task; plan again once a build has run"
        )
    else:
        out += [
            f"stratum {s} has {len(seen.by[s])} task(s) with trials: its variance is assumed "
            f"at the largest possible, {WORST_CASE_VARIANCE:g}"
            for s, c in found.items()
            if c is None
        ]
    if seen.base_by is None:
        out.append(
            "paired differences are assumed to vary twice as much as one build's task rates "
            "(no gain from pairing); pass --baseline to measure it"
        )
    return out


def _head(session: Session) -> int:
    from evalops.services.gate.inputs import cutoff_at

    return cutoff_at(session, None)
