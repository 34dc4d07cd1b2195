"""The shape of the report document: what `services/reports/audit.py` `assemble` builds and every
renderer and exporter reads (docs/json.md, docs/exports.md).

The document is the stored decision and its inputs verbatim, plus the facts resolved for a
reader; `evalops report audit --format json` writes it as it is. These types name every
key so `mypy --strict` checks the builder against the renderers and exporters; nothing
here changes a byte of a report. `tests/contract/test_document_types.py` compares them
with the documents the demo's decisions produce, so they cannot drift apart.
"""

from collections.abc import Sequence
from typing import Any, NotRequired, TypeAlias, TypedDict

from evalops.domain.changes import TaskChange
from evalops.domain.gate_documents import (
    Anchor,
    DecisionDocument,
    DecisionTask,
    DryRunOutput,
    PolicyName,
    RefusedByPolicy,
    RefusedWaiver,
    RefusedWaiverRequest,
    RegressionVerdict,
    TrialStats,
)

# `pass` is a keyword, hence the functional form of the two counts by effect.
EffectCounts = TypedDict("EffectCounts", {"block": int, "hold": int, "waived": int, "pass": int})
"""Tasks of a decision by outcome (a waived task passes, and is counted apart)."""

ReportSummary = TypedDict(
    "ReportSummary",
    {
        "tasks": int,
        "block": int,
        "hold": int,
        "waived": int,
        "pass": int,
        "trials": int,
        "ignored_trials": dict[str, int],
    },
)


class Coverage(TypedDict):
    """From which audit event on the rows are covered by their own events' digests."""

    rows_fully_covered_from: int
    carried_forward: list[dict[str, Any]]


class IncidentFact(TypedDict):
    incident_id: str
    title: str
    severity: str
    state: str
    trace_uri: str | None


class Revocation(TypedDict):
    revoked_at: str
    reason: str
    actor: str
    after_decision: bool
    """Recorded after the decision: shown, but the decision did not see it."""


class WaiverRowFacts(TypedDict):
    """A waiver's stored row, as a report shows it beside the task it covers."""

    task_id: str
    build: str
    states: list[str]
    owner: str
    reason: str
    granted_at: str
    expires_at: str
    granted_by: str
    signers: list[dict[str, str]]
    revocation: Revocation | None


class _WaiverRowKeys(TypedDict, total=False):
    # `WaiverRowFacts`'s keys; absent when the decision names a waiver whose row is gone.
    task_id: str
    build: str
    states: list[str]
    owner: str
    reason: str
    granted_at: str
    expires_at: str
    granted_by: str
    signers: list[dict[str, str]]
    revocation: Revocation | None


class ReportWaiver(_WaiverRowKeys):
    """A waiver of the decision's accounting, with its row's facts."""

    waiver_id: str


class ReportRefusedAtGrant(RefusedWaiverRequest):
    """A waiver request refused at grant, with what its audit event recorded."""

    owner: str | None
    reason: str | None
    build: str | None
    expires: str | None
    actor: str | None


class ReportRefusedByPolicy(RefusedByPolicy):
    """A granted waiver the decision's policy refused: `reason` is the owner's, `refusal`
    why the policy in force refused it."""

    refusal: str | None
    owner: str | None
    build: str | None
    expires: str | None
    at: str | None
    actor: str | None


ReportRefused: TypeAlias = ReportRefusedAtGrant | ReportRefusedByPolicy | RefusedWaiver
"""Resolved from the database; as the decision lists it when nothing was resolved."""


class ReportWaivers(TypedDict):
    applied: list[ReportWaiver]
    expired: list[ReportWaiver]
    unused: list[ReportWaiver]
    revoked: list[ReportWaiver]
    refused: list[ReportRefused]


class ReportTask(DecisionTask):
    """A task row of the decision, with what the registry says about the task."""

    outcome: str
    """`waived` for a task a waiver passed, else its effect."""
    title: str | None
    owner: str | None
    failure_owner: str | None
    revision: int | None
    task_digest: str
    grader_set_digest: str
    eval_case_digest: str | None
    incidents: list[IncidentFact]
    first_result: str
    """Original trials by their own class, in words (`2 task_pass, 1 task_fail`)."""
    score_grader: str | None
    evaluator_type: str | None
    ignored: dict[str, int]
    k: int | None
    waiver: WaiverRowFacts | None


class ReconciliationFact(TypedDict):
    effect_key: str
    effect_index: int
    status: str
    evidence_uri: str | None
    at: str
    actor: str


class ReviewFact(TypedDict):
    grader_id: str
    state: str
    reason: str | None
    at: str
    actor: str


class ReportTrial(TypedDict):
    """One trial the decision read, with its stored record's facts (None when the trial's
    row could not be read)."""

    trial_id: str
    task_id: str
    evaluator_type: str | None
    classification: str
    score: float | None
    gating_score: float | None
    shown_score: float | None
    parent_trial_id: str | None
    first_result: bool
    rerun_not_permitted: bool
    fixture_misses: int
    trial_index: int | None
    run_id: str | None
    started_at: str | None
    completed_at: str | None
    record_digest: str | None
    trace_uri: str | None
    runtime_status: str | None
    rerun_reason: str | None
    explanation: str
    reconciliations: list[ReconciliationFact]
    reviews: list[ReviewFact]
    notable: bool
    """Anything but a plain pass: listed first, and the only trials the HTML shows."""


class ClassCount(TypedDict):
    classification: str
    trials: int


class LayerCount(TypedDict):
    layer: str
    state: str
    count: int


class FailureClasses(TypedDict):
    by_class: list[ClassCount]
    by_layer: list[LayerCount]


class CalibrationFact(TypedDict):
    """A model grader of a pinned grader set, judged for its pinned config."""

    grader_set_id: str
    grader_set_digest: str
    grader_id: str
    grader_version: int
    grader_config_digest: str
    layer: str
    blocking: bool
    state: str
    reasons: list[str]
    blockable_classes: list[str]
    calibration_id: str | None
    recorded_at: str | None
    recorded_by: str | None
    measured: dict[str, Any] | None


class Changes(TypedDict):
    """Per-task flips against the baseline build, or the suite's previous decision."""

    baseline_build: str | None
    source: str | None
    """`baseline`, `previous_decision`, or None when there is nothing to compare with."""
    baseline_gate_id: str | None
    tasks: list[TaskChange]
    counts: dict[str, int]
    paired: dict[str, Any] | None
    """The paired verdict's `verdict`, `method`, `alpha`, `pairedTaskCount`, `pValue`
    and, as the method gives them, `discordant` and `signs`."""
    alpha_note: str | None


class EvalCaseDigests(TypedDict):
    task_id: str
    eval_case_digest: str | None
    task_digest: str
    grader_set_digest: str


class ReportDigests(TypedDict):
    suite_digest: str
    policy_digest: str
    execution_digest: str
    baseline_execution_digest: str | None
    inputs_digest: str
    result_digest: str
    eval_cases: list[EvalCaseDigests]


class SyncView(TypedDict):
    sync_run: int
    at: str
    actor: str
    git_commit: str | None
    git_branch: str | None
    git_remote: str | None
    git_dirty: bool


class DefinitionProvenance(TypedDict):
    kind: str
    id: str
    digest: str
    file_path: str | None
    sync: SyncView | None


class Provenance(TypedDict):
    syncs: list[SyncView]
    in_force: SyncView | None
    definitions: list[DefinitionProvenance]


class AuthorityAct(TypedDict):
    act: str
    subject: str
    signers: list[dict[str, str]]
    """`{principal, fingerprint}` of each signer of the act; empty when unsigned."""


class RuleChange(TypedDict):
    """Who last changed the decision's gate policy or suite."""

    kind: str
    id: str | None
    at: str | None
    commit: str | None
    signers: list[dict[str, str]]
    """`{principal, fingerprint}` of the commit's signer; empty when unsigned."""


class AuthorityFacts(TypedDict):
    id: str | None
    digest: str | None
    acts: list[AuthorityAct]
    rules_changed_by: NotRequired[list[RuleChange]]
    """Absent only from a document assembled without resolved facts (no database)."""


class ReportVoid(TypedDict):
    """A void that left trials of the decision out (docs/trials.md, "Voiding a mistaken
    record"): one recorded at or before the decision's cutoff covering trials of its build
    and member tasks. The same entry is `voids` of `gate check --json` (docs/json.md)."""

    void_id: str
    at: str
    actor: str
    signers: list[dict[str, str]]
    """`{principal, fingerprint}` of each signer of the void; empty when unsigned."""
    by: str
    """Its signers, else the actor who recorded it."""
    reason: str
    trials_left_out: int
    """How many of this decision's trials it left out."""
    hard_count: int
    """How many of the void's trials were hard failures (listed first, in the block colour)."""
    line: str


class HistoryEntry(TypedDict):
    gate_id: str
    decision: str
    build: str
    evaluated_at: str
    tasks: EffectCounts


class ReportDocument(TypedDict):
    """`evalops.audit-report/v1`: one decision, everything a reader needs to follow it."""

    report: str
    evalops_version: str
    rendered_at: str
    gate_id: str
    decision: str
    build: str
    suite: str
    suite_kind: str | None
    evaluated_at: str
    decided_at: str | None
    decided_by: str | None
    stored: bool
    reasons: list[str]
    policy: PolicyName
    audit_head: Anchor | None
    decision_event: Anchor | None
    coverage: Coverage | None
    summary: ReportSummary
    tasks: list[ReportTask]
    trialStats: TrialStats
    failure_classes: FailureClasses
    trials: Sequence[ReportTrial]
    """A list, or for a decision of many trials a `RowSpool` (`report/rows.py`): rows read
    back from disk as they are iterated, equal to the ones listed."""
    failing_trials: Sequence[dict[str, Any]]
    """The drill-down of each trial that did not pass (`services/reports/drilldown.py`); like
    `trials`, read back from disk for a decision of many trials."""
    waivers: ReportWaivers
    voids: list[ReportVoid]
    """The voids the decision's inputs left out, hard-failure voids first."""
    calibration: list[CalibrationFact]
    regression: RegressionVerdict | None
    changes: Changes
    efficiency: dict[str, float | None]
    digests: ReportDigests
    provenance: Provenance
    authority: AuthorityFacts
    history: list[HistoryEntry]
    recompute: list[str]
    decision_document: DecisionDocument | DryRunOutput
    """The stored decision; for a dry run's report (`gate check --dry-run --report`), what
    the dry run returned: the decision with `policy`, `stored` and `audit_head` beside it
    (and `digests.result_digest` is of that)."""
    inputs: dict[str, Any]
    """The decision's inputs as stored, of whichever evaluator made it."""
