"""The gate policy as evaluators 1 and 2 validate it, frozen: `GatePolicy` and the rule
models under it, copied from `domain.specs` as they stood when these evaluators were frozen
whole (ARCHITECTURE.md, "Add an evaluator version"). A stored decision keeps its policy
document in its inputs; replaying it validates that document with these models, so a field
added to (or tightened in) the live `GatePolicy` never changes how an old decision replays.

The live models' JSON-schema descriptions are left out: these are never written as a schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalops.domain.legacy.vocabulary_v2 import (
    CANONICAL_PRECEDENCE,
    MIN_FORBIDDEN_WAIVER_STATES,
    Id,
    NonEmptyStr,
    PositiveInt,
    RegressionMethod,
    SpecValueError,
    TrialClass,
)


class Strict(BaseModel):
    """Base for every spec model: unknown fields are errors, values are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Rule(Strict):
    """A named rule."""

    rule: NonEmptyStr
    """Rule name."""


class EvidenceRule(Strict):
    """Unknown or missing evidence."""

    rule: Literal["block_until_resolved"]
    """Always `block_until_resolved` (a hold)."""


class HardConstraintRule(Strict):
    """Hard constraints."""

    rule: Literal["any_confirmed_failure_blocks"]
    """Always `any_confirmed_failure_blocks`."""


class RegressionRule(Strict):
    """The paired regression verdict against a baseline."""

    rule: Literal["no_unapproved_regression_against_baseline"]
    """Rule name."""
    baseline: Literal["optional", "required"] = "optional"
    """Whether a gate needs a baseline."""
    method: RegressionMethod = "mcnemar"
    """Paired test."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Significance level."""


RerunClass = Literal["infrastructure_invalid", "grader_invalid", "missing_required_evidence"]


class RerunRule(Strict):
    """Reruns never overwrite; only these classes may be stood in for."""

    preserve_all_trials: Literal[True] = True
    """Always true: every trial is kept."""
    report: list[Literal["first_result", "invalid_rate", "rerun_count", "rerun_results"]] = []
    """What reports show about reruns."""
    max_attempts_by_class: dict[RerunClass, PositiveInt] = {}
    """Class -> how many attempts, the first included, a chain that passed through a trial
    of that class may reach (1: no rerun stands in; 2: one rerun may)."""
    task_is_primary_statistical_unit: bool = True
    """Statistics count tasks, not trials."""


class WaiverRule(Strict):
    """What a waiver may cover."""

    allowed_layers: list[Literal["quality_signal", "noncritical_regression"]] = []
    """Risk tiers a waiver may cover."""
    forbidden_states: list[TrialClass] = list(MIN_FORBIDDEN_WAIVER_STATES)
    """States no waiver may cover; at least the five evidence and hard-failure states
    (omitted: exactly those five)."""
    require: list[Literal["owner", "reason", "build_scope", "expires_at"]] = []
    """Fields a waiver must carry."""
    max_duration_days: PositiveInt
    """Longest validity."""

    @model_validator(mode="after")
    def _minimum_forbidden(self) -> WaiverRule:
        missing = [s for s in MIN_FORBIDDEN_WAIVER_STATES if s not in self.forbidden_states]
        if missing:
            raise SpecValueError(
                f"forbidden_states must contain {', '.join(missing)} (a policy may forbid "
                "more states, never fewer)",
                "forbidden_states",
            )
        return self


class GatePolicy(Strict):
    """Release-gate rules (`registry/policies/gate-policy.yaml`)."""

    spec_schema_version: Literal["gate-policy/v1"]
    """Format version of this file."""
    id: Id
    """Policy id."""
    decision_precedence: list[TrialClass] = list(CANONICAL_PRECEDENCE)
    """Must be exactly the canonical precedence (omitted: the canonical precedence)."""
    unknown_or_missing_evidence: EvidenceRule
    """Unknown or missing evidence holds."""
    hard_constraints: HardConstraintRule
    """Any confirmed hard failure blocks."""
    critical_regressions: RegressionRule
    """Paired regression verdict rule."""
    quality_signals: Rule | None = None
    """Quality-signal rule."""
    reruns: RerunRule
    """Rerun rule."""
    waivers: WaiverRule
    """Waiver rule."""

    @model_validator(mode="after")
    def _canonical_precedence(self) -> GatePolicy:
        if tuple(self.decision_precedence) != CANONICAL_PRECEDENCE:
            raise SpecValueError(
                "decision_precedence must be exactly the canonical order: "
                + " > ".join(CANONICAL_PRECEDENCE),
                "decision_precedence",
            )
        return self
