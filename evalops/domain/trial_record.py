"""The `evalops.trial/v1` record (docs/formats.md): one execution of one eval case."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from evalops.domain.spec_rules import SpecValueError
from evalops.domain.spec_words import GraderState
from evalops.domain.specs import Strict
from evalops.domain.vocabulary import (
    MAX_TOOL_CALLS,
    Digest,
    EffectStatus,
    Id,
    Identifier,
    NonEmptyStr,
    NonNegativeInt,
    PositiveInt,
    RuntimeStatus,
    Timestamp,
    TrialClass,
    UnitFloat,
    parse_timestamp,
)

RecordId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$")]


class Artifact(Strict):
    """One artifact of the manifest: identity, source and the assertions it backs."""

    kind: NonEmptyStr
    """Logical artifact kind (e.g. `research_plan`)."""
    artifact_id: Identifier | None = None
    """Artifact id."""
    digest: NonEmptyStr | None = None
    """Content digest."""
    producer: NonEmptyStr | None = None
    """The step or service that produced it."""
    location: NonEmptyStr | None = None
    """Where it is stored."""
    assertion_refs: list[NonEmptyStr] = []
    """Assertions this artifact is evidence for."""


class ArtifactManifest(Strict):
    """The artifacts a trial produced."""

    manifest_id: Identifier | None = None
    """Manifest id."""
    artifacts: list[Artifact] = []
    """The artifacts."""


class GraderResult(Strict):
    """What one grader said about the trial."""

    grader_id: Id
    """Grader id in the task's grader set."""
    grader_version: PositiveInt
    """Grader version."""
    state: GraderState
    """One of the grader states (section 5.3)."""
    score: UnitFloat | None = None
    """Score in [0, 1]."""
    evidence: list[NonEmptyStr] = []
    """Evidence the grader read."""
    reason: str | None = None
    """Short reason code (no content)."""


class ExternalEffect(Strict):
    """A side effect outside the sandbox."""

    effect_key: Identifier
    """Identity of the effect; the same key committed twice is a hard failure."""
    status: EffectStatus
    """`committed`, `not_committed`, `requested` or `unknown`."""
    external_ref: NonEmptyStr | None = None
    """Receipt or reference from the external system."""


class Runtime(Strict):
    """How the run ended."""

    status: RuntimeStatus
    """`ok`, `agent_error`, `runtime_error`, `infrastructure_error` or `timeout`."""
    message: str | None = None
    """Short diagnostic."""


class ToolCall(Strict):
    """An observed tool call; graded, never stored (content-free)."""

    tool: Identifier
    """Tool name."""
    args: dict[str, Any] = {}
    """Arguments."""
    agent_id: Identifier | None = None
    """The agent that made the call."""


class Usage(Strict):
    """Model usage of the agent under test."""

    model_calls: NonNegativeInt = 0
    """Model calls."""
    input_tokens: NonNegativeInt = 0
    """Input tokens."""
    output_tokens: NonNegativeInt = 0
    """Output tokens."""


class Rerun(Strict):
    """Link from a rerun to the trial it re-executes."""

    parent_trial_id: Identifier | None = None
    """The trial this one reruns."""
    reason: NonEmptyStr | None = None
    """Why it was rerun."""
    ordinal: NonNegativeInt | None = None
    """Position in the rerun chain (informational)."""


class TrialRecord(Strict):
    """One trial (`evalops.trial/v1`), one JSON object per line of a JSONL file."""

    schema_: Literal["evalops.trial/v1"] = Field(alias="schema")
    """Record format version."""
    trial_id: RecordId
    """Unique trial id."""
    run_id: Identifier | None = None
    """Harness run id."""
    attempt_id: Identifier | None = None
    """Harness attempt id."""
    task_id: Id
    """Task id."""
    task_digest: Digest
    """`task_digest` of the registered task revision."""
    execution_digest: Digest
    """`execution_digest` of the registered execution profile."""
    grader_set_digest: Digest
    """`grader_set_digest` of the registered grader set."""
    eval_case_digest: Digest | None = None
    """Must equal the recomputed eval case digest when present."""
    trial_index: NonNegativeInt
    """0-based; an original trial is unique per run, eval case and index; a rerun keeps its
    parent's."""
    started_at: Timestamp
    """Start, RFC 3339 with offset."""
    completed_at: Timestamp
    """End, RFC 3339 with offset, not before `started_at`."""
    effective_seed: int | None = None
    """Seed used."""
    trace_uri: NonEmptyStr | None = None
    """Where the trace is."""
    artifact_manifest_uri: NonEmptyStr | None = None
    """Where the manifest is."""
    artifact_manifest: ArtifactManifest | None = None
    """The manifest."""
    grader_results: list[GraderResult]
    """Grader results, at most one per grader (a later result never hides an earlier one)."""
    external_effects: list[ExternalEffect] = []
    """External side effects."""
    runtime: Runtime
    """How the run ended."""
    tool_calls: list[ToolCall] = Field(default=[], max_length=MAX_TOOL_CALLS)
    """Observed tool calls, in order (graded, not stored)."""
    target_agent_id: Identifier | None = None
    """The agent under test; other agents' calls are delegates."""
    usage: Usage | None = None
    """Model usage."""
    fixture_misses: NonNegativeInt = 0
    """Tool calls that matched no fixture."""
    rerun: Rerun | None = None
    """Rerun link."""
    secondary_labels: list[NonEmptyStr] = []
    """Labels the harness attached (evalops adds its own)."""
    primary_classification: TrialClass | None = None
    """The harness's claim; evalops derives its own and refuses a disagreement."""

    model_config = Strict.model_config | {"populate_by_name": True}

    @model_validator(mode="after")
    def _ordered_times(self) -> TrialRecord:
        if parse_timestamp(self.completed_at) < parse_timestamp(self.started_at):
            raise SpecValueError("completed_at is before started_at", "completed_at")
        return self

    @model_validator(mode="after")
    def _one_result_per_grader(self) -> TrialRecord:
        first: dict[str, int] = {}
        for index, result in enumerate(self.grader_results):
            if result.grader_id in first:
                raise SpecValueError(
                    f"grader {result.grader_id} has two results (grader_results"
                    f"[{first[result.grader_id]}] and [{index}]); a record carries at most one "
                    "result per grader",
                    "grader_results",
                    index,
                    "grader_id",
                )
            first[result.grader_id] = index
        return self
