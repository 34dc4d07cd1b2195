"""Evaluator 3, frozen (decisions stored by evalops before evaluator 4, the per-task
summaries, became the only way new decisions are made, replay with it; ARCHITECTURE.md,
"Add an evaluator version"). Copied from `domain.gate` as it stood then, its rules from
the live modules into `legacy/` (`regression_v3`, `waivers_v3`; `reruns_v2`, `stats_v2`,
`vocabulary_v2` and `specs_v2` were still identical). Never edited afterwards.

The GatePolicy evaluator (docs/gate.md): `evaluate(inputs) -> decision`, pure.

`inputs` is plain JSON (the store loads it, the decision stores it), so any decision can be
replayed byte for byte months later. Steps:

1. Task state: a hard constraint failure in any trial of the pinned eval case (effective
   or not: a rerun never hides one) => hard_constraint_fail; else the highest
   evidence-blocked class among effective trials; else fewer effective trials than
   `trials.count` (none at all included) => missing_required_evidence; else `passRule`:
   task_pass, or the highest failing class present.
   `passRule: mean` reads gating scores, which are 0 for a trial that hard-failed, crashed
   or lacks evidence, whatever its graders scored.
2. Task effect: hard failure => block; evidence-blocked => hold; agent_error,
   runtime_error, task_fail => block for a critical task, else hold unless a valid waiver
   covers it (pass, waived); task_pass => pass. Every waiver is judged against the policy
   this decision applies (a tightened policy refuses waivers granted under a looser one),
   and covers a task only when it names every failing class among the task's trials.
3. Baseline: the paired verdict; `regressed` blocks; a required baseline with no trials
   holds.
4. Decision: block if any block, else hold if any hold, else pass. An empty suite holds:
   "no confirmed failures" is never enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalops.domain.legacy.regression_v3 import TaskOutcome, paired_verdict
from evalops.domain.legacy.reruns_v2 import TrialNode, resolve_reruns
from evalops.domain.legacy.specs_v2 import GatePolicy
from evalops.domain.legacy.stats_v2 import TaskTrials, mean, passes_rule, task_block, trial_stats
from evalops.domain.legacy.vocabulary_v2 import (
    CANONICAL_PRECEDENCE,
    EVIDENCE_BLOCKED,
    parse_timestamp,
)
from evalops.domain.legacy.waivers_v3 import WaiverFact, covers, policy_refusals, validity_at

RANK: dict[str, int] = {c: i for i, c in enumerate(CANONICAL_PRECEDENCE)}
FAILING = ("agent_error", "runtime_error", "task_fail")
INVALID_RUNS = ("infrastructure_invalid", "grader_invalid")
EFFICIENCY_KEYS = ("toolCallCount", "modelCallCount", "inputTokens", "outputTokens")
ZERO_GATING_CLASSES = frozenset(
    {"hard_constraint_fail", *EVIDENCE_BLOCKED, "agent_error", "runtime_error"}
)


def counted_gating_score(primary: str, gating_score: float) -> float:
    """The gating score the gate counts (from `domain.classify`): the stored one, or 0 for a
    crashed, hard-failed or evidence-blocked trial."""
    return 0.0 if primary in ZERO_GATING_CLASSES else gating_score


@dataclass(frozen=True)
class TaskSummary:
    state: str
    n: int
    passed_count: int
    passed: bool
    mean_score: float | None
    """The mean of trial scores (the RFC's meanScore)."""
    gating_score: float | None
    """The mean gating score of the effective trials: what people see as the task's score."""
    failing: tuple[str, ...]
    """Every failing class a waiver must name to cover the task (its state included)."""
    block: dict[str, Any]
    invalid_count: int
    rerun_count: int
    not_permitted: tuple[str, ...]
    trajectory: dict[str, Any] | None
    efficiency: dict[str, float | None]
    fixture_misses: int
    why: str
    trials: TaskTrials
    """Effective trials reduced to pass flags and scores (for suite statistics)."""
    first_results: dict[str, str] = field(default_factory=dict)


def _highest(classes: Sequence[str]) -> str:
    return min(classes, key=RANK.__getitem__)


def summarize_task(task: Mapping[str, Any], policy: GatePolicy) -> TaskSummary:
    """State and statistics of one task from its trials (the baseline uses it too)."""
    trials = list(task["trials"])
    plan = task["plan"]
    outcome = resolve_reruns(
        [TrialNode(t["trial_id"], t["parent_trial_id"], t["classification"]) for t in trials],
        {str(k): v for k, v in policy.reruns.max_attempts_by_class.items()},
    )
    by_id = {t["trial_id"]: t for t in trials}
    effective = [by_id[i] for i in outcome.effective]
    classes = [t["classification"] for t in effective]
    passed_flags = [c == "task_pass" for c in classes]
    gating = [
        counted_gating_score(t["classification"], float(t["gating_score"])) for t in effective
    ]
    scores = [float(t["score"]) for t in effective]
    count = int(plan["count"])
    k = int(plan.get("k") or count)
    hard = [t for t in trials if t["classification"] == "hard_constraint_fail"]
    blocked = [c for c in classes if c in EVIDENCE_BLOCKED]
    passes = passes_rule(plan["passRule"], gating, passed_flags, float(plan["passScore"]))
    if hard:
        state, why = "hard_constraint_fail", f"hard constraint failed in {hard[0]['trial_id']}"
    elif blocked:
        state = _highest(blocked)
        trial = next(t for t in effective if t["classification"] == state)
        why = f"{state} in {trial['trial_id']}"
    elif len(effective) < count:
        state = "missing_required_evidence"
        why = (
            "no trials for this build"
            if not effective
            else f"{len(effective)} effective trials, trials.count is {count}"
        )
    elif passes:
        state, why = (
            "task_pass",
            f"{sum(passed_flags)}/{len(effective)} passed ({plan['passRule']})",
        )
    else:
        failing = [c for c in classes if c in FAILING]
        state = _highest(failing) if failing else "task_fail"
        why = (
            f"{len(effective) - sum(passed_flags)}/{len(effective)} trials failed "
            f"(passRule {plan['passRule']})"
        )
    reduced = TaskTrials(task["task_id"], k, tuple(passed_flags), tuple(scores))
    block = task_block(reduced)
    efficiency = {
        key: mean([float(t["efficiency"][key]) for t in effective if t.get("efficiency")])
        for key in EFFICIENCY_KEYS
    }
    return TaskSummary(
        state=state,
        n=len(effective),
        passed_count=sum(passed_flags),
        passed=passes and len(effective) >= 1,
        mean_score=block["meanScore"],
        gating_score=mean(gating),
        failing=tuple(sorted({state, *(c for c in classes if c in FAILING)} & set(FAILING))),
        block=block,
        invalid_count=sum(1 for t in trials if t["classification"] in INVALID_RUNS),
        rerun_count=outcome.rerun_count,
        not_permitted=tuple(sorted(outcome.not_permitted)),
        trajectory=effective[-1].get("trajectory") if effective else None,
        efficiency=efficiency,
        fixture_misses=sum(int(t.get("fixture_misses", 0)) for t in effective),
        why=why,
        trials=reduced,
        first_results=dict(outcome.first_results),
    )


def _effect(state: str, risk: str) -> str:
    if state == "hard_constraint_fail":
        return "block"
    if state in EVIDENCE_BLOCKED:
        return "hold"
    if state in FAILING:
        return "block" if risk == "critical" else "hold"
    return "pass"


def evaluate(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The decision for one build on one suite, from plain-JSON inputs."""
    policy = GatePolicy.model_validate(inputs["policy"])
    at = parse_timestamp(inputs["evaluated_at"])
    build = inputs["build"]
    suite_id = inputs["suite"]["id"]
    in_scope = [
        w
        for w in (WaiverFact.from_dict(d) for d in inputs["waivers"])
        if w.build == build and w.suite_id == suite_id
    ]
    risks = {t["task_id"]: t["risk"] for t in inputs["tasks"]}
    refused = _refused_by_policy(in_scope, risks, policy)
    usable_now = [
        w for w in in_scope if w.waiver_id not in refused and validity_at(w, at) == "valid"
    ]
    applied: list[str] = []
    blocks: list[str] = []
    holds: list[str] = []
    tasks_out: list[dict[str, Any]] = []
    summaries: dict[str, TaskSummary] = {}
    for task in sorted(inputs["tasks"], key=lambda t: t["task_id"]):
        s = summarize_task(task, policy)
        summaries[task["task_id"]] = s
        effect = _effect(s.state, task["risk"])
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
        tasks_out.append(
            {
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
                "firstResults": s.first_results,
                "reason": s.why,
            }
        )
    if not inputs["tasks"]:
        holds.append(f"suite {suite_id} has no members: nothing guards this release")
    notes: list[str] = []
    regression = _regression(inputs, summaries, policy, blocks, holds, notes)
    decision = "block" if blocks else ("hold" if holds else "pass")
    trial_stats_out = trial_stats([s.trials for s in summaries.values()])
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
        "trialStats": trial_stats_out,
        "waivers": _waiver_accounting(
            in_scope, applied, at, inputs.get("refused_waivers", []), refused
        ),
        "regression": regression,
        "ignoredTrials": _ignored_by_reason(inputs["tasks"]),
    }


def _ignored_by_reason(tasks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Trials that are not evidence for the pins, summed by reason over the suite."""
    out: dict[str, int] = {}
    for task in tasks:
        for reason, n in task.get("ignoredTrials", {}).items():
            out[reason] = out.get(reason, 0) + int(n)
    return dict(sorted(out.items()))


def _regression(
    inputs: Mapping[str, Any],
    summaries: Mapping[str, TaskSummary],
    policy: GatePolicy,
    blocks: list[str],
    holds: list[str],
    notes: list[str],
) -> dict[str, Any] | None:
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
        t["task_id"]: summarize_task(t, policy) for t in baseline["tasks"] if t["trials"]
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


def with_baseline(verdict: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, Any]:
    """The paired verdict with the baseline it was computed against: a decision's
    `regression`."""
    return {
        **verdict,
        "baseline": baseline["build"],
        "baseline_execution_digest": baseline.get("execution_digest"),
    }


def _refused_by_policy(
    in_scope: Sequence[WaiverFact], risks: Mapping[str, str], policy: GatePolicy
) -> dict[str, dict[str, Any]]:
    """Waiver id -> why the policy this decision applies forbids it (the ones it allows are
    left out). A waiver for a task outside the suite has no layer to judge: it covers
    nothing here and is listed as unused."""
    out: dict[str, dict[str, Any]] = {}
    for w in in_scope:
        if w.task_id not in risks:
            continue
        refusals = policy_refusals(w, risk=risks[w.task_id], policy=policy)
        if refusals:
            out[w.waiver_id] = {
                "waiver_id": w.waiver_id,
                "task_id": w.task_id,
                "states": list(w.states),
                "rules": [r.rule for r in refusals],
                "reason": f"refused by the policy in force ({policy.id}): "
                + "; ".join(r.message for r in refusals),
            }
    return out


def _waiver_accounting(
    in_scope: Sequence[WaiverFact],
    applied: Sequence[str],
    at: Any,
    refused: Sequence[Mapping[str, Any]],
    refused_by_policy: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    """Every waiver the decision considered, each in one list: refused by the policy in
    force comes first (it is refused whatever its time), then applied, expired, revoked,
    unused; `refused` also lists waiver requests refused at grant (by audit event)."""
    out: dict[str, Any] = {
        "applied": [],
        "expired": [],
        "unused": [],
        "revoked": [],
        "refused": [],
    }
    by_policy: list[dict[str, Any]] = []
    for w in sorted(in_scope, key=lambda w: w.waiver_id):
        state = validity_at(w, at)
        if w.waiver_id in refused_by_policy:
            by_policy.append(refused_by_policy[w.waiver_id].copy())
        elif w.waiver_id in applied:
            out["applied"].append(w.waiver_id)
        elif state == "expired":
            out["expired"].append(w.waiver_id)
        elif state == "revoked":
            out["revoked"].append(w.waiver_id)
        else:
            out["unused"].append(w.waiver_id)
    at_grant: list[dict[str, Any]] = [dict(r) for r in refused]
    out["refused"] = at_grant + by_policy
    return out
