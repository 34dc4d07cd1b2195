"""Evaluator 4, the evaluator of every new decision (`domain.gate.EVALUATOR`): the rules of
evaluator 3 (frozen in `domain.legacy.gate_v3`), over a compact inputs document.

Evaluator 3 stored every trial's input in a decision, so a decision's size, and the memory
of everything that reads it, follows the gated build. Evaluator 4 stores one summary per
task instead (docs/gate.md, "Evaluator 4"), whose size does not grow with the task's trials:

- `single`: the trials in no rerun chain (neither a rerun nor the parent of one). Each of
  them is an original and stands for itself whatever the policy's rerun limits, so counts
  are enough: trials by class, the first trial of each class (the reasons name it), exact
  sums of scores, gating scores and efficiency counts (`Fraction` text, so the means are
  the correctly rounded ones evaluator 3 computes with `math.fsum`), fixture misses, and
  the last one's trajectory.
- `chained`: every trial of a rerun chain, in full, with its position among the task's
  trials: which rerun stands in depends on the policy, so these are resolved here as
  evaluator 3 resolves them.

A decision of evaluator 4 says the same as evaluator 3 over the same trials, except that a
task's `firstResults` (every original trial's id and class) becomes `firstResultCounts`
(originals by class). `compact_task` turns an evaluator-3 task input into its summary, the
input loader feeds `CompactTrials` one trial at a time; the differential tests hold the two
evaluators to the same decisions.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, cast

from evalops.domain.classes import EVIDENCE_BLOCKED
from evalops.domain.classify import counted_gating_score
from evalops.domain.gate_documents import (
    ChainedTrial,
    CompactInputs,
    CompactLast,
    CompactSingle,
    CompactTaskInput,
    CompactTrialsDocument,
    DecisionDocument,
    DecisionTask,
    ListedInputs,
    RegressionVerdict,
    TaskInput,
    TrajectoryCounts,
    TrialInput,
)
from evalops.domain.gate_rules import (
    EFFICIENCY_KEYS,
    FAILING,
    INVALID_RUNS,
    highest,
    ignored_by_reason,
    refused_by_policy,
    task_effect,
    waiver_accounting,
    with_baseline,
)
from evalops.domain.policy_rules import PolicyRules, read_policy
from evalops.domain.regression import TaskOutcome, paired_verdict
from evalops.domain.reruns import NO_RERUNS, TrialNode, resolve_reruns
from evalops.domain.stats import blocks_stats, counts_block
from evalops.domain.timestamps import parse_timestamp
from evalops.domain.waivers import WaiverFact, covers, validity_at

EVALUATOR_COMPACT = 4
HARD = "hard_constraint_fail"
# What a chained trial keeps: every field of its evaluator-3 input, plus its position.
CHAINED_KEYS = (
    "trial_id",
    "parent_trial_id",
    "classification",
    "score",
    "gating_score",
    "trajectory",
    "efficiency",
    "fixture_misses",
)


class ExactSum:
    """The exact sum of floats, cheaply: numerators summed per power-of-two denominator (a
    float is an integer over a power of two), one `Fraction` at the end. Scores and counts
    have few distinct denominators, so adding a trial costs a dict update, not a gcd."""

    __slots__ = ("_by_denominator",)

    def __init__(self) -> None:
        self._by_denominator: dict[int, int] = {}

    def add(self, value: float, times: int = 1) -> None:
        """Add `value`, `times` times (the same exact sum as adding it that often)."""
        numerator, denominator = float(value).as_integer_ratio()
        found = self._by_denominator
        found[denominator] = found.get(denominator, 0) + numerator * times

    def _pair(self) -> tuple[int, int]:
        found = self._by_denominator
        if not found:
            return 0, 1
        # Every denominator is a power of two, so the largest is a multiple of the others:
        # one integer sum over it is exact.
        common = max(found)
        return sum(n * (common // d) for d, n in found.items()), common

    def total(self) -> Fraction:
        return Fraction(*self._pair())

    def text(self) -> str:
        """The exact sum as JSON text, `str(self.total())` ("3/2": a float would round, and
        the means must not), without making the `Fraction`: the pair reduced by their gcd
        (the denominator is positive), written as `str(Fraction)` writes it."""
        numerator, denominator = self._pair()
        divisor = math.gcd(numerator, denominator)
        numerator, denominator = numerator // divisor, denominator // divisor
        return str(numerator) if denominator == 1 else f"{numerator}/{denominator}"


Trajectory = Any
"""A trial's trajectory counts as its input holds them, or what `resolve` turns into them."""


class CompactTrials:
    """One task's trials, added one at a time in stored order, summarized.

    `chained_ids` are the trial ids named as a parent by any trial of the build (a
    superset is harmless: a chained trial without reruns resolves to itself). A set is
    kept as it is (the loader shares one among every task of the build), never changed.

    Trials outside rerun chains are counted by (class, score, gating score) and by
    efficiency counts, and summed when the document is made: the same exact sums, with a
    dict update per trial instead of six."""

    def __init__(self, chained_ids: Iterable[str] = ()) -> None:
        self._parents = (
            chained_ids if isinstance(chained_ids, (set, frozenset)) else set(chained_ids)
        )
        self._position = 0
        self._single_n = 0
        self._first: dict[str, list[Any]] = {}
        self._scored: dict[tuple[str, float, float], int] = {}
        self._efficiency: dict[tuple[float, ...], int] = {}
        self._fixture_misses = 0
        self._last: tuple[int, Trajectory, Callable[[Any], TrajectoryCounts | None] | None] | None
        self._last = None
        self._chained: list[ChainedTrial] = []

    def is_chained(self, trial_id: str, parent_trial_id: str | None) -> bool:
        """Does this trial belong to a rerun chain (kept in full, `add` only)?"""
        return parent_trial_id is not None or trial_id in self._parents

    def add(self, trial: TrialInput) -> None:
        if self.is_chained(trial["trial_id"], trial["parent_trial_id"]):
            self._chained.append(_chained(trial, self._position))
            self._position += 1
            return
        efficiency = trial.get("efficiency")
        self.add_single(
            trial["trial_id"],
            trial["classification"],
            float(trial["score"]),
            float(trial["gating_score"]),
            tuple(float(efficiency[key]) for key in EFFICIENCY_KEYS) if efficiency else None,
            int(trial.get("fixture_misses", 0)),
            trial.get("trajectory"),
        )

    def add_single(  # noqa: PLR0913 (a trial's parts, per trial: no record built for them)
        self,
        trial_id: str,
        cls: str,
        score: float,
        gating_score: float,
        efficiency: tuple[float, ...] | None,
        fixture_misses: int,
        trajectory: Trajectory,
        resolve: Callable[[Any], TrajectoryCounts | None] | None = None,
    ) -> None:
        """A trial in no rerun chain (`is_chained` false), by its parts: `efficiency` in
        `EFFICIENCY_KEYS` order (None when it has none); `trajectory` as its input holds
        it, or anything `resolve` turns into that when the document is made (only the last
        trial's is kept, so the loader parses one per task)."""
        position = self._position
        self._position += 1
        self._single_n += 1
        if cls not in self._first:
            self._first[cls] = [position, trial_id]
        key = (cls, score, gating_score)
        scored = self._scored
        scored[key] = scored.get(key, 0) + 1
        if efficiency is not None:
            self._efficiency[efficiency] = self._efficiency.get(efficiency, 0) + 1
        self._fixture_misses += fixture_misses
        self._last = (position, trajectory, resolve)

    def document(self) -> CompactTrialsDocument:
        """`{trialCount, single, chained}`: the trials part of an evaluator-4 task input."""
        classes, score_sum, gating_sum, efficiency_count, efficiency_sums = _single_sums(
            self._scored, self._efficiency
        )
        last: CompactLast | None = None
        if self._last is not None:
            position, trajectory, resolve = self._last
            last = {
                "position": position,
                "trajectory": resolve(trajectory) if resolve is not None else trajectory,
            }
        return {
            "trialCount": self._position,
            "single": {
                "n": self._single_n,
                # Copies: the cached sums are shared by every task that has them.
                "classes": dict(classes),
                "first": dict(sorted(self._first.items())),
                "scoreSum": score_sum,
                "gatingSum": gating_sum,
                "efficiencyCount": efficiency_count,
                "efficiencySums": dict(efficiency_sums),
                "fixtureMisses": self._fixture_misses,
                "last": last,
            },
            "chained": self._chained,
        }


_Sums = tuple[dict[str, int], str, str, int, dict[str, str]]
_SUMS: dict[tuple[tuple[Any, ...], tuple[Any, ...]], _Sums] = {}
_SUMS_KEPT = 4096


def _single_sums(
    scored: Mapping[tuple[str, float, float], int], efficiency: Mapping[tuple[float, ...], int]
) -> _Sums:
    """A task's single trials summed: (classes, scoreSum, gatingSum, efficiencyCount,
    efficiencySums), from its counts by (class, score, gating score) and by efficiency
    counts. The sums are exact, so they do not depend on the order trials came in; a
    suite's tasks mostly share a few such counts (five passes scoring 1.0), so each is
    summed once, and kept (a few thousand at most) for the next task that has it. Keyed
    by the counts as they are (equal floats sum alike: -0.0 and 0.0 are both 0/1)."""
    key = (tuple(scored.items()), tuple(efficiency.items()))
    found = _SUMS.get(key)
    if found is not None:
        return found
    classes: Counter[str] = Counter()
    score, gating = ExactSum(), ExactSum()
    for (cls, value, gating_value), times in scored.items():
        classes[cls] += times
        score.add(value, times)
        gating.add(counted_gating_score(cls, gating_value), times)
    sums = {name: ExactSum() for name in EFFICIENCY_KEYS}
    for counts, times in efficiency.items():
        for name, value in zip(EFFICIENCY_KEYS, counts, strict=True):
            sums[name].add(value, times)
    found = (
        dict(sorted(classes.items())),
        score.text(),
        gating.text(),
        sum(efficiency.values()),
        {name: total.text() for name, total in sums.items()},
    )
    if len(_SUMS) >= _SUMS_KEPT:
        _SUMS.clear()
    _SUMS[key] = found
    return found


def _chained(trial: TrialInput, position: int) -> ChainedTrial:
    """Every key of the trial's evaluator-3 input (`CHAINED_KEYS`), and its position."""
    return {
        "trial_id": trial["trial_id"],
        "parent_trial_id": trial["parent_trial_id"],
        "classification": trial["classification"],
        "score": trial["score"],
        "gating_score": trial["gating_score"],
        "trajectory": trial["trajectory"],
        "efficiency": trial["efficiency"],
        "fixture_misses": trial["fixture_misses"],
        "position": position,
    }


def compact_task(task: TaskInput) -> CompactTaskInput:
    """An evaluator-3 task input (with `trials`) as its evaluator-4 summary."""
    trials = list(task["trials"])
    summary = CompactTrials(t["parent_trial_id"] for t in trials if t["parent_trial_id"])
    for trial in trials:
        summary.add(trial)
    return {
        "task_id": task["task_id"],
        "risk": task["risk"],
        "protects": task["protects"],
        "task_digest": task["task_digest"],
        "grader_set_digest": task["grader_set_digest"],
        "plan": task["plan"],
        # Inputs stored before `ignoredTrials` was recorded ignored nothing.
        "ignoredTrials": task.get("ignoredTrials", {}),
        **summary.document(),
    }


def compact_inputs(inputs: ListedInputs) -> CompactInputs:
    """Evaluator-3 inputs as evaluator-4 inputs (the same facts, tasks summarized). Every
    other key is copied as it is, whatever the inputs hold (a test's hold fewer keys than
    stored ones), so the copy is given its type here."""
    out: dict[str, Any] = dict(inputs)
    out["evaluator"] = EVALUATOR_COMPACT
    out["tasks"] = [compact_task(t) for t in inputs["tasks"]]
    baseline = inputs.get("baseline")
    if baseline is not None and "tasks" in baseline:
        out["baseline"] = {**baseline, "tasks": [compact_task(t) for t in baseline["tasks"]]}
    return cast("CompactInputs", out)


# ------------------------------------------------------------------------------ evaluation


class CompactSummary(NamedTuple):
    """One task's summary as the decision reads it (a named tuple: made once per task, and
    a frozen dataclass of sixteen fields cost more to make than the rest of the step)."""

    state: str
    n: int
    passed_count: int
    passed: bool
    k: int
    block: dict[str, Any]
    gating_score: float | None
    failing: tuple[str, ...]
    invalid_count: int
    rerun_count: int
    not_permitted: tuple[str, ...]
    trajectory: TrajectoryCounts | None
    efficiency: dict[str, float | None]
    fixture_misses: int
    why: str
    first_result_counts: dict[str, int]

    @property
    def mean_score(self) -> float | None:
        return self.block["meanScore"]  # type: ignore[no-any-return]


Exact = tuple[int, int]
"""An exact sum as (numerator, denominator), not reduced: only its correctly rounded
quotient is ever used, and `int / int` is correctly rounded, as `float(Fraction)` is."""

_EXACT_TEXT = re.compile(r"(-?[0-9]+)(?:/([0-9]+))?")


@functools.lru_cache(maxsize=4096)
def _parse_exact(text: str) -> Exact:
    """An exact sum's text ("3/2", "-7", as `str(Fraction)` writes it) as a pair; any other
    spelling `Fraction` reads is read by it (and refused as it refuses it). Cached: a
    suite's tasks share a few sums (six per task), and a pair is never changed."""
    found = _EXACT_TEXT.fullmatch(text)
    if found is None:
        value = Fraction(text)
        return value.numerator, value.denominator
    numerator, denominator = found.groups()
    if denominator is None:
        return int(numerator), 1
    if int(denominator) == 0:
        raise ZeroDivisionError(f"Fraction({text}, 0)")
    return int(numerator), int(denominator)


def _plus(total: Exact, value: float) -> Exact:
    """`total + value`, exactly."""
    a, b = total
    c, d = float(value).as_integer_ratio()
    return a * d + c * b, b * d


class _Effective(NamedTuple):
    """The trials that count: counts and exact sums, and the chains' stand-ins, each with
    the position of the original it stands for."""

    classes: Counter[str]
    n: int
    score: Exact
    gating: Exact
    efficiency_n: int
    efficiency: dict[str, Exact]
    fixture_misses: int
    chained: list[tuple[int, ChainedTrial]]


def _effective(task: CompactTaskInput, limits: Mapping[str, int]) -> tuple[_Effective, Any]:
    single = task["single"]
    chained = task["chained"]
    outcome = (
        resolve_reruns(
            [TrialNode(t["trial_id"], t["parent_trial_id"], t["classification"]) for t in chained],
            limits,
        )
        if chained
        else NO_RERUNS
    )
    standing: list[tuple[int, ChainedTrial]] = []
    if chained:
        by_id = {t["trial_id"]: t for t in chained}
        originals = [t for t in chained if t["parent_trial_id"] is None]
        standing = [
            (o["position"], by_id[i]) for o, i in zip(originals, outcome.effective, strict=True)
        ]
    # Filled key by key, as `Counter(mapping)` would (zero counts kept), without its
    # abstract `Mapping` check, once per task.
    classes: Counter[str] = Counter()
    for key, value in single["classes"].items():
        classes[str(key)] = int(value)
    score = _parse_exact(single["scoreSum"])
    gating = _parse_exact(single["gatingSum"])
    efficiency = {k: _parse_exact(v) for k, v in single["efficiencySums"].items()}
    efficiency_n = int(single["efficiencyCount"])
    misses = int(single["fixtureMisses"])
    for _, t in standing:
        cls = t["classification"]
        classes[cls] += 1
        score = _plus(score, t["score"])
        gating = _plus(gating, counted_gating_score(cls, float(t["gating_score"])))
        if t.get("efficiency"):
            efficiency_n += 1
            for key in EFFICIENCY_KEYS:
                efficiency[key] = _plus(efficiency[key], t["efficiency"][key])
        misses += int(t.get("fixture_misses", 0))
    found = _Effective(
        classes=classes,
        n=int(single["n"]) + len(standing),
        score=score,
        gating=gating,
        efficiency_n=efficiency_n,
        efficiency=efficiency,
        fixture_misses=misses,
        chained=standing,
    )
    return found, outcome


@dataclass(frozen=True)
class TrialCounts:
    """A task's trials by class, as the gate counts them: after reruns are resolved under
    the policy's limits (`effective`), and the originals by their own first result."""

    effective: dict[str, int]
    first: dict[str, int]
    rerun_count: int


def trial_counts(task: CompactTaskInput, policy: PolicyRules) -> TrialCounts:
    """The effective and first-result class counts `summarize_compact` decides on: the
    estimate of an estimation suite reads its trials exactly as the gate does."""
    eff, outcome = _effective(task, rerun_limits_of(policy))
    _, originals = _all_and_original_classes(task)
    return TrialCounts(
        effective={c: n for c, n in sorted(eff.classes.items()) if n},
        first={c: n for c, n in sorted(originals.items()) if n},
        rerun_count=outcome.rerun_count,
    )


def rerun_limits_of(policy: PolicyRules) -> dict[str, int]:
    """The policy's `reruns.max_attempts_by_class`, as `resolve_reruns` reads it."""
    return {str(k): v for k, v in policy.reruns.max_attempts_by_class.items()}


def _mean(total: Exact, n: int) -> float | None:
    # The quotient is correctly rounded (`int / int`, as `float(Fraction)`), as `math.fsum`
    # is: the same mean evaluator 3 has.
    return total[0] / total[1] / n if n else None


def _first(cls: str, single: CompactSingle, candidates: Sequence[tuple[int, ChainedTrial]]) -> str:
    """The trial id of the first trial of class `cls`, by position."""
    found = [(p, t["trial_id"]) for p, t in candidates if t["classification"] == cls]
    if cls in single["first"]:
        position, trial_id = single["first"][cls]
        found.append((int(position), str(trial_id)))
    return str(min(found)[1])


def _state(task: CompactTaskInput, eff: _Effective, passes: bool, passed: int) -> tuple[str, str]:
    """The task's state and why, in evaluator 3's order and words."""
    single = task["single"]
    plan = task["plan"]
    count = int(plan["count"])
    if int(single["classes"].get(HARD, 0)) or any(
        t["classification"] == HARD for t in task["chained"]
    ):
        everything = [(int(t["position"]), t) for t in task["chained"]]
        return HARD, f"hard constraint failed in {_first(HARD, single, everything)}"
    blocked = [c for c in eff.classes if c in EVIDENCE_BLOCKED and eff.classes[c]]
    if blocked:
        state = highest(blocked)
        return state, f"{state} in {_first(state, single, eff.chained)}"
    if eff.n < count:
        why = (
            "no trials for this build"
            if not eff.n
            else f"{eff.n} effective trials, trials.count is {count}"
        )
        return "missing_required_evidence", why
    if passes:
        return "task_pass", f"{passed}/{eff.n} passed ({plan['passRule']})"
    failing = [c for c in eff.classes if c in FAILING and eff.classes[c]]
    state = highest(failing) if failing else "task_fail"
    return state, f"{eff.n - passed}/{eff.n} trials failed (passRule {plan['passRule']})"


def _passes(rule: str, eff: _Effective, passed: int, pass_score: float) -> bool:
    """`passes_rule` of `domain.stats`, from counts and the exact gating sum."""
    if not eff.n:
        return False
    if rule == "all":
        return passed == eff.n
    if rule == "any":
        return passed > 0
    m = _mean(eff.gating, eff.n)
    return m is not None and m >= pass_score


def _trajectory(task: CompactTaskInput, eff: _Effective) -> TrajectoryCounts | None:
    """The trajectory of the last effective trial (by its original's position)."""
    last = task["single"]["last"]
    best: tuple[int, TrajectoryCounts | None] | None = (
        (int(last["position"]), last["trajectory"]) if last else None
    )
    for position, t in eff.chained:
        if best is None or position > best[0]:
            best = (position, t.get("trajectory"))
    return best[1] if best else None


def _all_and_original_classes(
    task: CompactTaskInput,
) -> tuple[Mapping[str, int], Mapping[str, int]]:
    """Every trial and every original by class (classes with a positive count, as a sum of
    `Counter`s keeps them); without rerun chains both are the single trials' counts."""
    single = task["single"]["classes"]
    chained = task["chained"]
    if not chained:
        counted = {c: n for c, n in single.items() if n > 0}
        return counted, counted
    every = Counter(single) + Counter(t["classification"] for t in chained)
    originals = Counter(single) + Counter(
        t["classification"] for t in chained if t["parent_trial_id"] is None
    )
    return every, originals


def summarize_compact(
    task: CompactTaskInput, policy: PolicyRules, limits: Mapping[str, int] | None = None
) -> CompactSummary:
    """`domain.gate.summarize_task` over an evaluator-4 task summary (`limits`: the policy's
    rerun limits, `rerun_limits_of(policy)`, when the caller has them for every task)."""
    plan = task["plan"]
    if limits is None:
        limits = rerun_limits_of(policy)
    eff, outcome = _effective(task, limits)
    passed = eff.classes.get("task_pass", 0)
    passes = _passes(plan["passRule"], eff, passed, float(plan["passScore"]))
    state, why = _state(task, eff, passes, passed)
    k = int(plan.get("k") or plan["count"])
    all_classes, originals = _all_and_original_classes(task)
    present_failing = {c for c in eff.classes if c in FAILING and eff.classes[c]}
    return CompactSummary(
        state=state,
        n=eff.n,
        passed_count=passed,
        passed=passes and eff.n >= 1,
        k=k,
        block=counts_block(eff.n, passed, k, _mean(eff.score, eff.n)),
        gating_score=_mean(eff.gating, eff.n),
        failing=tuple(sorted({state, *present_failing} & set(FAILING))),
        invalid_count=sum(all_classes.get(c, 0) for c in INVALID_RUNS),
        rerun_count=outcome.rerun_count,
        not_permitted=tuple(sorted(outcome.not_permitted)),
        trajectory=_trajectory(task, eff),
        efficiency={key: _mean(eff.efficiency[key], eff.efficiency_n) for key in EFFICIENCY_KEYS},
        fixture_misses=eff.fixture_misses,
        why=why,
        first_result_counts={c: n for c, n in sorted(originals.items()) if n},
    )


def _task_row(
    task: CompactTaskInput, s: CompactSummary, effect: str, waiver_id: str | None
) -> DecisionTask:
    return {
        "task_id": task["task_id"],
        "state": s.state,
        "effect": effect,
        "risk": task["risk"],
        "n": s.n,
        "passedCount": s.passed_count,
        "meanScore": s.mean_score,
        "gatingScore": s.gating_score,
        "passAtK": s.block["passAtK"],
        "passHatK": s.block["passHatK"],
        "invalidCount": s.invalid_count,
        "rerunCount": s.rerun_count,
        "waiver_id": waiver_id,
        "trajectory": s.trajectory,
        "efficiency": s.efficiency,
        "fixtureMissCount": s.fixture_misses,
        "ignoredTrials": dict(task.get("ignoredTrials", {})),
        "rerunsNotPermitted": list(s.not_permitted),
        "firstResultCounts": s.first_result_counts,
        "reason": s.why,
    }


def evaluate(inputs: CompactInputs) -> DecisionDocument:
    """The decision for one build on one suite, from evaluator-4 inputs: evaluator 3's
    `evaluate` step for step, over task summaries."""
    policy = read_policy(inputs["policy"])
    at = parse_timestamp(inputs["evaluated_at"])
    build = inputs["build"]
    suite_id = inputs["suite"]["id"]
    in_scope = [
        w
        for w in (WaiverFact.from_dict(d) for d in inputs["waivers"])
        if w.build == build and w.suite_id == suite_id
    ]
    risks = {t["task_id"]: t["risk"] for t in inputs["tasks"]}
    refused = refused_by_policy(in_scope, risks, policy)
    usable_now = [
        w for w in in_scope if w.waiver_id not in refused and validity_at(w, at) == "valid"
    ]
    applied: list[str] = []
    blocks: list[str] = []
    holds: list[str] = []
    tasks_out: list[DecisionTask] = []
    summaries: dict[str, CompactSummary] = {}
    limits = rerun_limits_of(policy)
    for task in sorted(inputs["tasks"], key=lambda t: t["task_id"]):
        s = summarize_compact(task, policy, limits)
        summaries[task["task_id"]] = s
        effect = task_effect(s.state, task["risk"])
        waiver_id = None
        if effect == "hold" and s.state in FAILING:
            usable = [
                w
                for w in usable_now
                if covers(
                    w, task_id=task["task_id"], suite_id=suite_id, build=build, failing=s.failing
                )
            ]
            if usable:
                waiver_id = sorted(usable, key=lambda w: w.waiver_id)[0].waiver_id
                applied.append(waiver_id)
                effect = "pass"
        line = f"{task['task_id']} ({task['risk']}): {s.state} -> {effect}; {s.why}"
        if waiver_id:
            line += f"; waived by {waiver_id}"
        if effect == "block":
            blocks.append(line)
        elif effect == "hold":
            holds.append(line)
        tasks_out.append(_task_row(task, s, effect, waiver_id))
    if not inputs["tasks"]:
        holds.append(f"suite {suite_id} has no members: nothing guards this release")
    notes: list[str] = []
    regression = _regression(inputs, summaries, policy, (blocks, holds, notes))
    decision = "block" if blocks else ("hold" if holds else "pass")
    stats = blocks_stats([(s.k, s.block) for s in summaries.values() if s.n])
    return {
        "gate_id": inputs["gate_id"],
        "decision": decision,
        "build": build,
        "suite": suite_id,
        "suite_digest": inputs["suite"]["suite_digest"],
        "policy_digest": inputs["policy_digest"],
        "execution_digest": inputs["execution_digest"],
        "evaluated_at": inputs["evaluated_at"],
        "reasons": blocks + holds + notes,
        "tasks": tasks_out,
        "trialStats": stats,
        "waivers": waiver_accounting(
            in_scope, applied, at, inputs.get("refused_waivers", []), refused
        ),
        "regression": regression,
        "ignoredTrials": ignored_by_reason(inputs["tasks"]),
    }


def _regression(
    inputs: CompactInputs,
    summaries: Mapping[str, CompactSummary],
    policy: PolicyRules,
    reasons: tuple[list[str], list[str], list[str]],
) -> RegressionVerdict | None:
    """Evaluator 3's baseline step over task summaries; `reasons` are the decision's
    (blocks, holds, notes), which it adds to."""
    blocks, holds, notes = reasons
    limits = rerun_limits_of(policy)
    baseline = inputs.get("baseline")
    if baseline is None:
        return None
    if baseline.get("build") is None:
        if baseline.get("required"):
            why = "a baseline is required (critical_regressions.baseline) and none was found"
            if baseline.get("note"):
                why += f" ({baseline['note']})"
            holds.append(why)
        else:
            why = f"no baseline: {baseline.get('note') or 'none given'}"
            notes.append(why)
        return {
            "baseline": None,
            "verdict": "inconclusive",
            "method": baseline["method"],
            "alpha": baseline["alpha"],
            "pairedTaskCount": 0,
            "pValue": None,
            "reason": why,
        }
    base_summaries = {
        t["task_id"]: summarize_compact(t, policy, limits)
        for t in baseline["tasks"]
        if int(t["trialCount"])
    }
    if not base_summaries and baseline.get("required"):
        holds.append(f"required baseline {baseline['build']} has no trials for this suite")
    verdict = with_baseline(
        paired_verdict(
            {
                k: TaskOutcome(s.passed, s.mean_score or 0.0)
                for k, s in base_summaries.items()
                if s.n
            },
            {k: TaskOutcome(s.passed, s.mean_score or 0.0) for k, s in summaries.items() if s.n},
            method=baseline["method"],
            alpha=float(baseline["alpha"]),
            seed=int(baseline.get("seed", 0)),
        ),
        baseline,
    )
    if verdict["verdict"] == "regressed":
        blocks.append(
            f"regressed against baseline {baseline['build']} ({verdict['method']}, "
            f"p={verdict['pValue']}, alpha={verdict['alpha']})"
        )
    return verdict


def same_decision_as_evaluator_3(result: DecisionDocument) -> DecisionDocument:
    """An evaluator-3 decision as evaluator 4 words it (for the differential tests): each
    task's `firstResults` becomes `firstResultCounts`."""
    tasks: list[DecisionTask] = []
    for t in result["tasks"]:
        row = t.copy()
        first = row.pop("firstResults", {})
        counts = Counter(first.values())
        row["firstResultCounts"] = {c: n for c, n in sorted(counts.items()) if n}
        tasks.append(row)
    return {**result, "tasks": tasks}
