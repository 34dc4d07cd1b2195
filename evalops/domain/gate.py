"""The GatePolicy evaluator (docs/gate.md): `evaluate(inputs) -> decision`, pure.

New decisions are made by one evaluator, version 4 (`domain.gate_compact`): its inputs hold
one summary per task, whose size does not grow with the task's trials. Stored decisions
replay under the evaluator they record (`evaluate_stored`, by the table of
`domain.evaluators`; the earlier ones are frozen in `domain.legacy`).

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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalops.domain.evaluators import evaluator_for, stored_version
from evalops.domain.gate_compact import (
    EVALUATOR_COMPACT,
    CompactSummary,
    evaluate,
    summarize_compact,
)
from evalops.domain.gate_rules import verdict_effect

if TYPE_CHECKING:
    from evalops.domain.gate_documents import CompactTaskInput, DecisionDocument
    from evalops.domain.policy_rules import PolicyRules

__all__ = ["EVALUATOR", "evaluate", "evaluate_stored", "summarize_task", "verdict_effect"]

EVALUATOR = EVALUATOR_COMPACT
"""The rules version new decisions record in their inputs (4: per-task summaries); earlier
ones are frozen in `domain.legacy` so a decision replays under the rules it was made under.
Every version's functions are listed in `domain.evaluators`."""


def summarize_task(task: CompactTaskInput, policy: PolicyRules) -> CompactSummary:
    """State and statistics of one task from its summary (the baseline uses it too)."""
    return summarize_compact(task, policy)


def evaluate_stored(inputs: Mapping[str, Any]) -> DecisionDocument:
    """Replay a stored decision under the evaluator it was made with (the `evaluator`
    number its inputs record picks the function in `domain.evaluators`)."""
    return evaluator_for(stored_version(inputs))(inputs)
