"""The rules of the gate that do not depend on how a decision's inputs hold its trials
(docs/gate.md): what a task's state does to the decision, which waivers the policy in force
refuses, how the waivers are accounted for, and the decision's `regression` entry.

`domain.gate_compact` (the evaluator of new decisions) reads them; the frozen evaluators
of `domain.legacy` keep their own copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from evalops.domain.classes import CANONICAL_PRECEDENCE, EVIDENCE_BLOCKED
from evalops.domain.waivers import WaiverFact, policy_refusals, validity_at

if TYPE_CHECKING:
    from evalops.domain.gate_documents import (
        BaselineInput,
        CompactTaskInput,
        RefusedByPolicy,
        RefusedWaiver,
        RefusedWaiverRequest,
        RegressionVerdict,
        TaskInput,
        WaiverAccounting,
    )
    from evalops.domain.policy_rules import PolicyRules

RANK: dict[str, int] = {c: i for i, c in enumerate(CANONICAL_PRECEDENCE)}
FAILING = ("agent_error", "runtime_error", "task_fail")
INVALID_RUNS = ("infrastructure_invalid", "grader_invalid")
EFFICIENCY_KEYS = ("toolCallCount", "modelCallCount", "inputTokens", "outputTokens")


def highest(classes: Sequence[str]) -> str:
    """The class of highest precedence among `classes` (docs/classification.md)."""
    return min(classes, key=RANK.__getitem__)


def task_effect(state: str, risk: str) -> str:
    """What the gate does with a task in `state` of layer `risk`, before waivers: a hard
    failure blocks, evidence-blocked holds, a failure blocks a critical task and holds any
    other, a pass passes."""
    if state == "hard_constraint_fail":
        return "block"
    if state in EVIDENCE_BLOCKED:
        return "hold"
    if state in FAILING:
        return "block" if risk == "critical" else "hold"
    return "pass"


def verdict_effect(state: str, risk: str) -> str:
    """What the gate does with a task in this state, as `suite coverage` shows it."""
    found = task_effect(state, risk)
    return "hold unless waived" if found == "hold" and state in FAILING else found


def ignored_by_reason(tasks: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Trials that are not evidence for the pins, summed by reason over the suite."""
    out: dict[str, int] = {}
    for task in tasks:
        for reason, n in task.get("ignoredTrials", {}).items():
            out[reason] = out.get(reason, 0) + int(n)
    return dict(sorted(out.items()))


def with_baseline(
    verdict: Mapping[str, Any],
    baseline: BaselineInput[TaskInput] | BaselineInput[CompactTaskInput],
) -> RegressionVerdict:
    """The paired verdict with the baseline it was computed against: a decision's
    `regression`. `paired_verdict` returns a plain dict; its keys are `PairedVerdict`'s."""
    return cast(
        "RegressionVerdict",
        {
            **verdict,
            "baseline": baseline["build"],
            "baseline_execution_digest": baseline.get("execution_digest"),
        },
    )


def refused_by_policy(
    in_scope: Sequence[WaiverFact], risks: Mapping[str, str], policy: PolicyRules
) -> dict[str, RefusedByPolicy]:
    """Waiver id -> why the policy this decision applies forbids it (the ones it allows are
    left out). A waiver for a task outside the suite has no layer to judge: it covers
    nothing here and is listed as unused."""
    out: dict[str, RefusedByPolicy] = {}
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


def waiver_accounting(
    in_scope: Sequence[WaiverFact],
    applied: Sequence[str],
    at: datetime,
    refused: Sequence[RefusedWaiverRequest],
    refused_by_policy: Mapping[str, RefusedByPolicy],
) -> WaiverAccounting:
    """Every waiver the decision considered, each in one list: refused by the policy in
    force comes first (it is refused whatever its time), then applied, expired, revoked,
    unused; `refused` also lists waiver requests refused at grant (by audit event)."""
    out: WaiverAccounting = {
        "applied": [],
        "expired": [],
        "unused": [],
        "revoked": [],
        "refused": [],
    }
    by_policy: list[RefusedWaiver] = []
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
    at_grant: list[RefusedWaiver] = [r.copy() for r in refused]
    out["refused"] = at_grant + by_policy
    return out
