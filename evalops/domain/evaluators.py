"""Every gate evaluator, by the version a decision's inputs record (ARCHITECTURE.md, "Add an
evaluator version"; docs/gate.md, "Replay").

A stored decision replays under the rules it was made under: `evaluate_stored`
(`domain.gate`, used by `gate check`, `gate replay`, `verify` and the exports) and the
report's changes since the baseline pick their functions here by the inputs' `"evaluator"`
(absent from decisions made before it was recorded: evaluator 1). New decisions are made by
the current version only (4, `domain.gate_compact`: per-task summaries); the versions before
it live in `domain/legacy/` and import nothing from the live rules, so changing a live rule
never changes what an old decision replays to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from evalops.domain.gate_documents import CompactInputs, DecisionDocument

Evaluate = Callable[[Mapping[str, Any]], "DecisionDocument"]
"""Plain-JSON inputs -> the decision document."""

ReadPolicy = Callable[[Any], Any]
"""The stored policy document -> the policy model the evaluator reads it as."""

Summarize = Callable[[Any, Any], Any]
"""(one task input, the read policy) -> that task's summary (`n`, `passed_count`, `passed`,
`block`), as the evaluator's paired verdict saw it."""

UNRECORDED = 1
"""The version of inputs that record none (decisions made before versions were recorded)."""


# The other versions are imported when a decision of theirs is met, not with this table: a
# new decision (the current version) never loads them.
# Stored inputs are plain JSON; the version they record says which shape they have, so
# each function below is where they are given their type. The frozen evaluators write
# plain dicts of the shape `DecisionDocument` describes.
def _evaluate_v1(inputs: Mapping[str, Any]) -> DecisionDocument:
    from evalops.domain.legacy.gate_v1 import evaluate

    return cast("DecisionDocument", evaluate(inputs))


def _evaluate_v2(inputs: Mapping[str, Any]) -> DecisionDocument:
    from evalops.domain.legacy.gate_v2 import evaluate

    return cast("DecisionDocument", evaluate(inputs))


def _evaluate_v3(inputs: Mapping[str, Any]) -> DecisionDocument:
    from evalops.domain.legacy.gate_v3 import evaluate

    return cast("DecisionDocument", evaluate(inputs))


def _evaluate_v4(inputs: Mapping[str, Any]) -> DecisionDocument:
    from evalops.domain.gate_compact import evaluate

    return evaluate(cast("CompactInputs", inputs))


EVALUATORS: dict[int, Evaluate] = {
    1: _evaluate_v1,
    2: _evaluate_v2,
    3: _evaluate_v3,
    4: _evaluate_v4,
}
"""Version -> its evaluate function: `legacy.gate_v1`, `legacy.gate_v2`, `legacy.gate_v3`
(every trial listed) and `gate_compact` (4, `gate.EVALUATOR`: the current rules over
per-task summaries, the only evaluator of new decisions)."""


def _summaries_v1() -> tuple[ReadPolicy, Summarize]:
    from evalops.domain.legacy.gate_v1 import summarize_task
    from evalops.domain.legacy.specs_v2 import GatePolicy

    return GatePolicy.model_validate, summarize_task


def _summaries_v3() -> tuple[ReadPolicy, Summarize]:
    from evalops.domain.legacy.gate_v3 import summarize_task
    from evalops.domain.legacy.specs_v2 import GatePolicy

    return GatePolicy.model_validate, summarize_task


def _summaries_v4() -> tuple[ReadPolicy, Summarize]:
    from evalops.domain.gate_compact import summarize_compact
    from evalops.domain.policy_rules import read_policy

    return read_policy, summarize_compact


SUMMARIES: dict[int, Callable[[], tuple[ReadPolicy, Summarize]]] = {
    1: _summaries_v1,
    # Decisions of evaluator 2 have been summarized for the report by evaluator 1's rules
    # since evaluator 3 became current; kept so that their reports do not change.
    2: _summaries_v1,
    3: _summaries_v3,
    4: _summaries_v4,
}
"""Version -> how it reads the stored policy and summarizes a task: what the report's
changes since the baseline read (`domain.changes.sides_from_inputs`)."""


def stored_version(inputs: Mapping[str, Any]) -> Any:
    """The evaluator a decision's inputs record (as stored: normally a whole number)."""
    return inputs.get("evaluator", UNRECORDED)


def evaluator_for(version: Any) -> Evaluate:
    """The evaluate function of `version`; an unknown version is an error (a decision made
    by a newer evalops)."""
    # Compared with `==`, not looked up: a stored value is matched as the inputs hold it.
    for known, evaluate in EVALUATORS.items():
        if version == known:
            return evaluate
    raise ValueError(f"decision made by evaluator {version}, unknown to this evalops")


def summaries_for(version: Any) -> tuple[ReadPolicy, Summarize]:
    """How a decision of `version` reads its policy and summarizes a task; a version this
    table does not know is read as evaluator 1."""
    for known, summaries in SUMMARIES.items():
        if version == known:
            return summaries()
    return SUMMARIES[UNRECORDED]()
