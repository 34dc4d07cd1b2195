"""The closed word lists of the spec files (docs/formats.md): plain `Literal` types.

Kept apart from the vocabulary's spec types (which need pydantic), like
evalops/domain/classes.py, so that the plain checker of evalops/domain/spec_check.py reads
the very lists the pydantic models of evalops/domain/specs.py are built from (both import
them from here).
"""

from __future__ import annotations

from typing import Literal

from evalops.domain.classes import TrialClass

# What a grader may say: the nine classes plus `pass` and `abstain` (section 5.3).
GraderState = Literal[TrialClass, "pass", "abstain"]

Risk = Literal["critical", "noncritical_regression", "quality_signal"]
Protects = Literal[
    "permissions", "secrets", "human_approval", "external_effect", "required_evidence"
]
SuiteKind = Literal["incident_corpus", "capability", "estimation", "regression"]
GraderLayer = Literal["outcome", "hard_constraint", "trajectory_diagnosis"]
GraderType = Literal["deterministic", "model", "human"]
RuleState = Literal["diagnostic_only", "guardrail_candidate", "blocking_constraint"]
ArgsMatch = Literal["ignore", "exact", "subset"]
TrajectoryMode = Literal["exact", "in-order", "any-order", "subset"]
PassRule = Literal["all", "any", "mean"]
RegressionMethod = Literal["mcnemar", "sign-test", "paired-t", "paired-bootstrap"]

# Requirement names of the SuitePolicy (docs/promotion.md table).
EntryRequirement = Literal[
    "reproducible_fixture",
    "task_digest",
    "minimum_grader_coverage",
    "review_owner",
    "failure_owner",
    "confirmed_failure_or_invariant",
    "stable_success_state",
    "calibrated_graders",
    "versioned_fixture",
    "grader_set_digest",
    "frozen_sampling_frame",
    "production_population_definition",
    "weights",
    "update_policy",
]
ReplacementRequirement = Literal["coverage_mapping", "review"]
RemovalRequirement = Literal["obsolete_reason", "risk_owner_approval"]

# Words only one field of one spec kind uses.
NetworkPolicy = Literal["deny", "allowlist", "live"]
ExpectedKind = Literal["golden", "rubric", "trajectory"]
OnMiss = Literal["fail", "live"]
SeedPolicy = Literal["fixed", "recorded", "unsupported"]
RecalibrationTrigger = Literal[
    "grader_prompt_changed", "grader_model_changed", "rubric_changed", "label_distribution_shift"
]
EvidenceRuleName = Literal["block_until_resolved"]
HardConstraintRuleName = Literal["any_confirmed_failure_blocks"]
RegressionRuleName = Literal["no_unapproved_regression_against_baseline"]
Baseline = Literal["optional", "required"]
RerunClass = Literal["infrastructure_invalid", "grader_invalid", "missing_required_evidence"]
RerunReport = Literal["first_result", "invalid_rate", "rerun_count", "rerun_results"]
WaiverLayer = Literal["quality_signal", "noncritical_regression"]
WaiverField = Literal["owner", "reason", "build_scope", "expires_at"]
