"""What changed per task between a baseline build and a candidate build (pure).

A task is *present* in a build when it has at least one effective trial there: the same
tasks the paired regression verdict pairs, so the regressed and improved flips are exactly
its discordant pairs. A task present in both builds is `regressed` when it passed in the
baseline and does not pass in the candidate, `improved` for the reverse, else `unchanged`;
`new` when present only in the candidate, `missing` when present only in the baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from evalops.domain.humanize import measure
from evalops.domain.regression import BOOTSTRAP_MIN_PAIRS

FLIPS = ("regressed", "improved", "unchanged", "new", "missing")


class TaskSideDocument(TypedDict):
    n: int
    passedCount: int
    passHatK: float | None


class TaskChange(TypedDict):
    """One task's flip, with its side in each build (None: no trials there)."""

    task_id: str
    baseline: TaskSideDocument | None
    candidate: TaskSideDocument | None
    flip: str


@dataclass(frozen=True)
class TaskSide:
    """One task in one build, as the paired verdict sees it."""

    n: int
    passed_count: int
    pass_hat_k: float | None
    passed: bool

    def to_json(self) -> TaskSideDocument:
        return {"n": self.n, "passedCount": self.passed_count, "passHatK": self.pass_hat_k}


def flip(baseline: TaskSide | None, candidate: TaskSide | None) -> str:
    """The flip of one task; a side is None when the task has no trials in that build."""
    if baseline is None and candidate is None:
        raise ValueError("a task absent from both builds has no flip")
    if baseline is None:
        return "new"
    if candidate is None:
        return "missing"
    if baseline.passed and not candidate.passed:
        return "regressed"
    if candidate.passed and not baseline.passed:
        return "improved"
    return "unchanged"


def task_changes(
    baseline: Mapping[str, TaskSide], candidate: Mapping[str, TaskSide]
) -> list[TaskChange]:
    """`[{task_id, baseline, candidate, flip}]`: regressed first, then the rest by task id."""
    rows: list[TaskChange] = []
    for task_id in sorted(baseline.keys() | candidate.keys()):
        base, cand = baseline.get(task_id), candidate.get(task_id)
        rows.append(
            {
                "task_id": task_id,
                "baseline": base.to_json() if base else None,
                "candidate": cand.to_json() if cand else None,
                "flip": flip(base, cand),
            }
        )
    return sorted(rows, key=lambda r: (r["flip"] != "regressed", r["task_id"]))


def flip_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many tasks of each flip, every flip named (zeros included)."""
    return {f: sum(1 for r in rows if r["flip"] == f) for f in FLIPS}


def smallest_p_value(method: str, pairs: int) -> float | None:
    """The smallest two-sided p-value the method can produce with `pairs` paired tasks, or
    None when it is not a closed form of the pair count alone.

    McNemar and the sign test are exact binomial tests at 0.5: the most extreme outcome
    (every pair discordant, or every difference of one sign, all in one direction) has
    probability 0.5**pairs on each side, so the p-value is 2 * 0.5**pairs, capped at 1.
    """
    if method in ("mcnemar", "sign-test") and pairs >= 1:
        return min(1.0, 2 * 0.5**pairs)
    return None


_METHOD_NAMES = {"mcnemar": "McNemar's", "sign-test": "the sign test's"}


def alpha_note(method: str, alpha: float, pairs: int) -> str | None:
    """A sentence saying that `method` cannot reach `alpha` with `pairs` paired tasks, or
    None when it can (or when that cannot be known from the pair count alone)."""
    if pairs < 1:
        return None  # nothing is paired: the verdict's own reason says so
    tasks = f"{pairs} paired task{'' if pairs == 1 else 's'}"
    if method == "paired-bootstrap":
        if pairs < BOOTSTRAP_MIN_PAIRS:
            return (
                f"with {tasks} paired-bootstrap cannot reach alpha {alpha:g}: "
                f"it needs at least {BOOTSTRAP_MIN_PAIRS}"
            )
        return None
    floor = smallest_p_value(method, pairs)
    if floor is None or floor < alpha:
        return None
    # A verdict needs p < alpha, so a floor equal to alpha cannot reach it either.
    relation = ">" if floor > alpha else "="
    return (
        f"with {tasks} {_METHOD_NAMES[method]} smallest p-value is {measure(floor)} "
        f"{relation} alpha {measure(alpha)}"
    )


def sides_from_inputs(
    inputs: Mapping[str, Any], tasks: Iterable[Mapping[str, Any]]
) -> dict[str, TaskSide]:
    """Each task with effective trials in `tasks` (a decision's stored task inputs, or its
    baseline's), summarized by the evaluator that made the decision, under its policy: the
    same pass the paired verdict used."""
    from evalops.domain.evaluators import stored_version, summaries_for

    read_policy, summarize = summaries_for(stored_version(inputs))
    policy = read_policy(inputs["policy"])
    out: dict[str, TaskSide] = {}
    for task in tasks:
        # An evaluator-4 task input counts its trials instead of listing them.
        if not (task["trialCount"] if "trialCount" in task else task["trials"]):
            continue
        s = summarize(task, policy)
        if s.n:
            out[task["task_id"]] = TaskSide(s.n, s.passed_count, s.block["passHatK"], s.passed)
    return out
