"""The rules of a spec file that tie one field to another (docs/formats.md), over plain values.

One implementation for both readers of a spec: the pydantic models of
evalops/domain/specs.py (the reference, which names every problem) call these from their
model validators, and the plain checker of evalops/domain/spec_check.py (which only says
whether a file is valid, without importing pydantic) calls them on the file's JSON value.
Each function raises `SpecValueError` naming the first problem, exactly as the model
validator always did, or returns None. No pydantic here.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from evalops.domain.classes import CANONICAL_PRECEDENCE, EVIDENCE_BLOCKED, TrialClass


class SpecValueError(ValueError):
    """A validation error that knows which field (below the validated model) is at fault."""

    def __init__(self, message: str, *loc: str | int) -> None:
        super().__init__(message)
        self.loc = loc


MIN_FORBIDDEN_WAIVER_STATES: tuple[TrialClass, ...] = ("hard_constraint_fail", *EVIDENCE_BLOCKED)

# What each layer may say (docs/formats.md, "A grader's layer bounds its verdicts").
# Nobody produces agent_error, runtime_error or infrastructure_invalid: those come from
# `runtime.status` alone.
LAYER_STATES: dict[str, frozenset[str]] = {
    "outcome": frozenset({"task_pass", "task_fail"}),
    "hard_constraint": frozenset({"pass", "hard_constraint_fail"}),
    "trajectory_diagnosis": frozenset({"task_pass", "task_fail", "pass"}),
}
EVERY_LAYER_STATES = frozenset(
    {"missing_required_evidence", "ambiguous_external_effect", "grader_invalid"}
)

WEIGHT_SUM_TOLERANCE = 1e-9
"""How far from 1 stratum weights may sum (decimal shares such as 0.1 + 0.2 do not add exactly)."""

#: The fields of a suite that only an estimation suite may declare, in the order named.
ESTIMATION_FIELDS = ("sampling_frame", "population", "weights", "update_policy")


def states_allowed(layer: str, grader_type: str) -> frozenset[str]:
    """The states a grader of this layer and type may list in `produces`."""
    extra = {"abstain"} if grader_type in ("model", "human") else set()
    return LAYER_STATES[layer] | EVERY_LAYER_STATES | extra


def check_task_meta(risk: str, protects: Sequence[str]) -> None:
    if protects and risk != "critical":
        raise SpecValueError(
            f"a task that protects {list(protects)} must have risk: critical, not {risk}",
            "protects",
        )


def check_environment(network_policy: str, allowlist: Sequence[str]) -> None:
    if allowlist and network_policy != "allowlist":
        raise SpecValueError(
            "allowlist is only meaningful with network_policy: allowlist", "allowlist"
        )


def check_expected(kind: str, match: object, rubric: object, trajectory: object) -> None:
    if kind == "trajectory":
        if trajectory is None:
            raise SpecValueError("kind: trajectory needs a trajectory block", "trajectory")
        if match is not None or rubric is not None:
            raise SpecValueError(
                "kind: trajectory must not carry match or rubric",
                "match" if match is not None else "rubric",
            )


def check_trial_plan(count: int, k: int | None) -> None:
    if k is not None and k > count:
        raise SpecValueError(f"k ({k}) must be at most count ({count})", "k")


def check_grader(grader: Mapping[str, Any]) -> None:
    """`grader`: a grader's fields by name (its model as a dict, or `dict(model)`), those
    it omits read as their defaults."""
    layer, grader_type, produces = grader["layer"], grader["type"], grader["produces"]
    blocking, rule_state = grader["blocking"], grader.get("rule_state")
    # A model grader's `model` (and `calibration_requirements`) holds required fields, so
    # once valid it is never empty: present means truthy, for a dict as for a model.
    has_model = bool(grader.get("model"))
    has_calibration_requirements = grader.get("calibration_requirements") is not None
    if len(set(produces)) != len(produces):
        raise SpecValueError("produces lists a state twice", "produces")
    if grader_type == "model" and not has_model:
        raise SpecValueError(
            "a model grader needs a model block (provider, name, prompt_hash)", "model"
        )
    if grader_type != "model" and (has_model or has_calibration_requirements):
        raise SpecValueError(
            "model and calibration_requirements are for type: model only",
            "model" if has_model else "calibration_requirements",
        )
    allowed = states_allowed(layer, grader_type)
    for index, state in enumerate(produces):
        if state not in allowed:
            raise SpecValueError(
                f"a {layer} {grader_type} grader may not produce {state} (it may "
                f"produce {', '.join(sorted(allowed))}; see docs/formats.md, grader sets)",
                "produces",
                index,
            )
    if rule_state == "blocking_constraint" and not blocking:
        raise SpecValueError(
            "rule_state: blocking_constraint makes the grader act as a blocking hard "
            "constraint: set blocking: true (or use guardrail_candidate)",
            "blocking",
        )
    if grader_type == "model" and blocking and not has_calibration_requirements:
        raise SpecValueError(
            "a blocking model grader needs calibration_requirements",
            "calibration_requirements",
        )
    # A trajectory_diagnosis grader may say task_pass (docs/formats.md example); the
    # classification never lets that result make a trial pass.
    if layer == "trajectory_diagnosis":
        if blocking and rule_state != "blocking_constraint":
            raise SpecValueError(
                "a trajectory_diagnosis grader blocks only with rule_state: blocking_constraint",
                "blocking",
            )
    elif rule_state is not None:
        raise SpecValueError("rule_state is for trajectory_diagnosis graders only", "rule_state")


def check_grader_ids(grader_ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for index, grader_id in enumerate(grader_ids):
        if grader_id in seen:
            raise SpecValueError(f"grader id {grader_id!r} appears twice", "graders", index, "id")
        seen.add(grader_id)


def check_weights(values: Mapping[str, Any]) -> None:
    for stratum, share in values.items():
        if not (isinstance(share, float | int) and math.isfinite(share) and share > 0):
            raise SpecValueError(
                f"weight of stratum {stratum!r} must be a positive number, not {share!r}",
                "values",
                stratum,
            )
    total = math.fsum(values.values())
    if abs(total - 1) > WEIGHT_SUM_TOLERANCE:
        raise SpecValueError(
            f"weights must sum to 1, not {total:g}: each is a stratum's share of the population",
            "values",
        )


def check_suite(
    kind: str,
    declared: Collection[str],
    sizes: Collection[str] | None,
    strata: Collection[str] | None,
) -> None:
    """`declared`: which of ESTIMATION_FIELDS the suite sets (not null); `sizes`: the
    strata of `sampling_frame.sizes` (None when absent); `strata`: those of
    `weights.values` (None without weights)."""
    extra = [name for name in ESTIMATION_FIELDS if name in declared]
    if extra and kind != "estimation":
        verb = "applies" if len(extra) == 1 else "apply"
        raise SpecValueError(
            f"{', '.join(extra)} only {verb} to kind: estimation, not {kind}", extra[0]
        )
    if sizes is not None:
        named = set(strata) if strata is not None else set()
        if set(sizes) != named:
            raise SpecValueError(
                "sampling_frame.sizes must name exactly the strata of weights.values "
                f"({', '.join(sorted(named)) or 'none declared'}), not "
                f"{', '.join(sorted(sizes))}",
                "sampling_frame",
                "sizes",
            )


def check_waiver_rule(forbidden_states: Sequence[str]) -> None:
    missing = [s for s in MIN_FORBIDDEN_WAIVER_STATES if s not in forbidden_states]
    if missing:
        raise SpecValueError(
            f"forbidden_states must contain {', '.join(missing)} (a policy may forbid "
            "more states, never fewer)",
            "forbidden_states",
        )


def check_precedence(decision_precedence: Sequence[str]) -> None:
    if tuple(decision_precedence) != CANONICAL_PRECEDENCE:
        raise SpecValueError(
            "decision_precedence must be exactly the canonical order: "
            + " > ".join(CANONICAL_PRECEDENCE),
            "decision_precedence",
        )
