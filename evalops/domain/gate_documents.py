"""The shapes of a gate decision's two stored documents: its inputs and its result.

Both are plain JSON (docs/gate.md): `services/gate/inputs.py` `build_inputs` writes the
inputs, `domain/gate_compact.py` `evaluate` (evaluator 4, every new decision's; through
`domain/gate.py`) and the frozen `domain/legacy/gate_v3.py` (evaluator 3, its stored
decisions) turn them into the decision document, `services/gate/check.py` stores both as
canonical JSON, and replay, verify, reports and exports read them back. These types name
every key so `mypy --strict` checks the writers and readers against one another; nothing
here changes a stored byte. `tests/contract/test_document_types.py` compares them with
the documents the code writes, so they cannot drift apart.

Evaluators 1 and 2 are frozen (`domain/legacy/`) and keep plain dicts. Their decision
documents are still read through `DecisionDocument` (reports, replay), which is why the
keys later evaluators added are `NotRequired` there. Evaluator-2 inputs have the shape of
`ListedInputs`; evaluator-1 inputs lack `evaluator`, `request`, `sync` and `execution_id`
and are only ever read as plain dicts.
"""

from typing import Any, Generic, NotRequired, TypeAlias, TypedDict, TypeVar

# ---------------------------------------------------------------------------------- inputs


class GateRequestDocument(TypedDict):
    """What was asked (`GateRequest.as_dict`), stored so `verify` can rebuild the inputs."""

    build: str
    suite: str
    at: str
    cutoff: int
    execution: str | None
    baseline: str | None
    policy: str | None
    method: str | None
    alpha: float | None
    seed: int


class SuiteRef(TypedDict):
    id: str
    kind: str
    suite_digest: str


class SyncRef(TypedDict):
    """The newest sync run at the decision's cutoff."""

    sync_run: int
    git_commit: str | None


class TaskPlan(TypedDict):
    """A task's trial plan (`contract.trials` of its spec, defaults filled in)."""

    count: int
    k: int
    passRule: str
    passScore: float


class TaskHead(TypedDict):
    """A member task's pins, ratcheted risk labels and plan: its input without trials."""

    task_id: str
    risk: str
    protects: list[str]
    task_digest: str
    grader_set_digest: str
    plan: TaskPlan


class TrajectoryCounts(TypedDict):
    """The RFC 0244 trajectory block (counts only): `TrajectoryResult.block`."""

    mode: str
    matched: bool
    expectedCount: int
    observedCount: int
    matchedCount: int
    forbiddenCount: int


class TrialInput(TypedDict):
    """One trial as evaluators 1 to 3 read it."""

    trial_id: str
    parent_trial_id: str | None
    classification: str
    score: float
    gating_score: float
    trajectory: TrajectoryCounts | None
    efficiency: dict[str, float]
    """Counts by name (`toolCallCount`, `modelCallCount`, `inputTokens`, `outputTokens`)."""
    fixture_misses: int


class TaskInput(TaskHead):
    """A member task with every trial listed (evaluators 2 and 3)."""

    trials: list[TrialInput]
    ignoredTrials: dict[str, int]


class ChainedTrial(TrialInput):
    """A trial of a rerun chain, kept whole in an evaluator-4 summary."""

    position: int
    """Its place among the task's trials, in stored order."""


class CompactLast(TypedDict):
    position: int
    trajectory: TrajectoryCounts | None


class CompactSingle(TypedDict):
    """The trials in no rerun chain, counted (`CompactTrials`): sums are exact `Fraction`
    text, `first` maps a class to `[position, trial_id]` of its first trial."""

    n: int
    classes: dict[str, int]
    first: dict[str, list[int | str]]
    scoreSum: str
    gatingSum: str
    efficiencyCount: int
    efficiencySums: dict[str, str]
    fixtureMisses: int
    last: CompactLast | None


class CompactTrialsDocument(TypedDict):
    """`CompactTrials.document`: the trials part of an evaluator-4 task input."""

    trialCount: int
    single: CompactSingle
    chained: list[ChainedTrial]


class CompactTaskInput(TaskHead, CompactTrialsDocument):
    """A member task summarized (evaluator 4, docs/gate.md "Evaluator 4")."""

    ignoredTrials: dict[str, int]


TaskT = TypeVar("TaskT", TaskInput, CompactTaskInput)


class BaselineInput(TypedDict, Generic[TaskT]):
    """The baseline for the paired verdict; `execution_digest` and `tasks` only when a
    baseline build was found."""

    build: str | None
    asked: str | None
    note: str | None
    required: bool
    method: str
    alpha: float
    seed: int
    execution_digest: NotRequired[str]
    tasks: NotRequired[list[TaskT]]


class WaiverFactDocument(TypedDict):
    """A waiver granted for the build, as loaded at the cutoff (`WaiverFact.as_dict`)."""

    waiver_id: str
    task_id: str
    suite_id: str
    build: str
    states: list[str]
    granted_at: str
    expires_at: str
    revoked_at: str | None


class RefusedWaiverRequest(TypedDict):
    """A waiver request refused at grant, read from its `waiver.refused` audit event (or its
    `authority.refused` one: then with the `refusal`), or a granted waiver the authority in
    force refuses by a separation of duties (then with its `waiver_id` and `refusal`)."""

    seq: int
    task_id: str | None
    states: list[str] | None
    rules: list[str]
    at: str
    waiver_id: NotRequired[str]
    refusal: NotRequired[str]


class _InputsHead(TypedDict):
    evaluator: int
    request: GateRequestDocument
    build: str
    suite: SuiteRef
    sync: SyncRef | None
    execution_id: str
    execution_digest: str
    policy: dict[str, Any]
    """The gate policy file's object as written (its digest is of exactly this)."""
    policy_digest: str
    evaluated_at: str
    waivers: list[WaiverFactDocument]
    refused_waivers: list[RefusedWaiverRequest]
    gate_id: NotRequired[str]
    """Set once the decision is numbered (`GATE-N`, `dry-run`, `compare`): every stored
    decision's inputs have it."""


class GateInputs(_InputsHead, Generic[TaskT]):
    """A decision's inputs: `tasks` are listed (`TaskInput`) or summarized
    (`CompactTaskInput`) by the evaluator they are for."""

    tasks: list[TaskT]
    baseline: BaselineInput[TaskT] | None


ListedInputs: TypeAlias = GateInputs[TaskInput]
"""Inputs of evaluators 2 and 3: every trial listed."""
CompactInputs: TypeAlias = GateInputs[CompactTaskInput]
"""Inputs of evaluator 4: per-task summaries."""
AnyGateInputs: TypeAlias = ListedInputs | CompactInputs


# -------------------------------------------------------------------------------- decision


class DecisionTask(TypedDict):
    """One task of a decision. Evaluator 4 counts first results by class
    (`firstResultCounts`) where the others list them by trial (`firstResults`); evaluators
    1 and 2 wrote no `gatingScore`, and evaluator 1 counted `ignoredTrials` without
    reasons."""

    task_id: str
    state: str
    effect: str
    risk: str
    n: int
    passedCount: int
    meanScore: float | None
    gatingScore: NotRequired[float | None]
    passAtK: float | None
    passHatK: float | None
    invalidCount: int
    rerunCount: int
    waiver_id: str | None
    trajectory: TrajectoryCounts | None
    efficiency: dict[str, float | None]
    fixtureMissCount: int
    ignoredTrials: dict[str, int] | int
    """By reason; evaluator 1 wrote a count."""
    rerunsNotPermitted: list[str]
    firstResults: NotRequired[dict[str, str]]
    firstResultCounts: NotRequired[dict[str, int]]
    reason: str


class TrialStats(TypedDict):
    """Suite `trialStats` (`domain/stats.py` `blocks_stats`): `k` when every task shares
    it, pass@k means when defined, `scoreStderr` from two tasks with scores."""

    taskCount: int
    k: NotRequired[int]
    passAtK: NotRequired[float | None]
    passHatK: NotRequired[float | None]
    scoreStderr: NotRequired[float]


class Discordant(TypedDict):
    baselineOnlyPassed: int
    candidateOnlyPassed: int


class Signs(TypedDict):
    positive: int
    negative: int
    zero: int


class PairedVerdict(TypedDict):
    """`domain/regression.py` `paired_verdict`; the method decides the optional keys."""

    verdict: str
    method: str
    alpha: float
    pairedTaskCount: int
    pValue: float | None
    discordant: NotRequired[Discordant]
    meanDifference: NotRequired[float]
    signs: NotRequired[Signs]
    interval: NotRequired[list[float | None]]
    seed: NotRequired[int]
    reason: NotRequired[str]
    resamples: NotRequired[int]


class RegressionVerdict(PairedVerdict):
    """A decision's `regression`: the paired verdict against its baseline build, or
    `inconclusive` with a `reason` when no baseline build was found."""

    baseline: str | None
    baseline_execution_digest: NotRequired[str | None]


class RefusedByPolicy(TypedDict):
    """A granted waiver the policy of the decision refuses (`_refused_by_policy`)."""

    waiver_id: str
    task_id: str
    states: list[str]
    rules: list[str]
    reason: str


RefusedWaiver: TypeAlias = RefusedWaiverRequest | RefusedByPolicy


class WaiverAccounting(TypedDict):
    """Every waiver the decision considered, each in one list."""

    applied: list[str]
    expired: list[str]
    unused: list[str]
    revoked: list[str]
    refused: list[RefusedWaiver]


class DecisionDocument(TypedDict):
    """A decision (the stored `result`), of any evaluator."""

    gate_id: str
    decision: str
    build: str
    suite: str
    suite_digest: str
    policy_digest: str
    execution_digest: str
    evaluated_at: str
    reasons: list[str]
    tasks: list[DecisionTask]
    trialStats: TrialStats
    waivers: WaiverAccounting
    regression: RegressionVerdict | None
    ignoredTrials: dict[str, int] | int
    """By reason; evaluator 1 wrote a count."""


class PolicyName(TypedDict):
    """The applied gate policy named: its id, revision (when the file has one) and digest."""

    id: str | None
    revision: int | None
    digest: str | None


class Anchor(TypedDict):
    """`{"seq", "hash"}` of an audit event: what `evalops verify --anchor` checks."""

    seq: int
    hash: str


class StoredOutput(DecisionDocument):
    """What `gate check` returns and prints with `--json` for a stored decision: the
    decision, the gate policy it applied by name, and the audit anchors (docs/json.md)."""

    policy: PolicyName
    audit_head: Anchor
    decision_event: Anchor


class DryRunOutput(DecisionDocument):
    """What `gate check --dry-run` returns: nothing stored, so no decision event."""

    policy: PolicyName
    stored: bool
    audit_head: Anchor | None
