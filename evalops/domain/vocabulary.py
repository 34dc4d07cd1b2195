"""The closed vocabularies of the public contract (docs/formats.md), in one place."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, StringConstraints

from evalops.domain import classes as _classes
from evalops.domain import limits as _limits
from evalops.domain import timestamps as _timestamps
from evalops.domain.limits import MAX_FREE_TEXT_CHARS, MAX_IDENTIFIER_CHARS

# The trial classes live in evalops/domain/classes.py (no pydantic there); named here as well.
TrialClass = _classes.TrialClass
CANONICAL_PRECEDENCE = _classes.CANONICAL_PRECEDENCE
EVIDENCE_BLOCKED = _classes.EVIDENCE_BLOCKED

# What a grader may say: the nine classes plus `pass` and `abstain` (section 5.3).
GraderState = Literal[TrialClass, "pass", "abstain"]
GRADER_STATES: tuple[GraderState, ...] = get_args(GraderState)

MIN_FORBIDDEN_WAIVER_STATES: tuple[TrialClass, ...] = ("hard_constraint_fail", *EVIDENCE_BLOCKED)

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
RuntimeStatus = Literal["ok", "agent_error", "runtime_error", "infrastructure_error", "timeout"]
EffectStatus = Literal["committed", "not_committed", "requested", "unknown"]
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


class SpecValueError(ValueError):
    """A validation error that knows which field (below the validated model) is at fault."""

    def __init__(self, message: str, *loc: str | int) -> None:
        super().__init__(message)
        self.loc = loc


# The id pattern lives in evalops/domain/limits.py (no pydantic there); named here as well.
ID_PATTERN = _limits.ID_PATTERN
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
# Limits that hold alike on every engine (a PostgreSQL index cannot hold a 4 KB key, SQLite
# would): build names and other identifiers at most 256 characters, free text at most 4,096.
NonEmptyStr = Annotated[str, StringConstraints(min_length=1, max_length=MAX_FREE_TEXT_CHARS)]
"""Free text (a title, a reason, a URI, a message): at most 4,096 characters."""
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDENTIFIER_CHARS)]
"""A build name, run, attempt, tool or agent name: at most 256 characters."""
#: Expected calls of a trajectory, and observed tool calls of a trial, at most.
MAX_TOOL_CALLS = 10_000
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]

# Timestamps live in evalops/domain/timestamps.py (no pydantic there); named here as well.
EARLIEST = _timestamps.EARLIEST
LATEST = _timestamps.LATEST
parse_timestamp = _timestamps.parse_timestamp
format_timestamp = _timestamps.format_timestamp


def _check_timestamp(text: str) -> str:
    parse_timestamp(text)
    return text


Timestamp = Annotated[str, AfterValidator(_check_timestamp)]
