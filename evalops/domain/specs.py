"""Registry spec models (docs/formats.md): what a file may say, and nothing else.

Every model forbids unknown fields and validates strictly (no type coercion), so a typo or
a `"1"` where `1` was meant is an error instead of a silent change of meaning or digest.
Digests are computed from the file's JSON value, not from these models (section 4).
"""

from __future__ import annotations

import ast
import inspect
import itertools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalops.domain import spec_check, spec_rules
from evalops.domain.act_roles import ACT_ROLES, ActKind, Role, SeparationRule  # noqa: F401  (ACT_ROLES: re-exported)
from evalops.domain.spec_rules import MIN_FORBIDDEN_WAIVER_STATES, SpecValueError
from evalops.domain.spec_words import (
    ArgsMatch,
    Baseline,
    EntryRequirement,
    EvidenceRuleName,
    ExpectedKind,
    GraderLayer,
    GraderState,
    GraderType,
    HardConstraintRuleName,
    NetworkPolicy,
    OnMiss,
    PassRule,
    Protects,
    RecalibrationTrigger,
    RegressionMethod,
    RegressionRuleName,
    RemovalRequirement,
    ReplacementRequirement,
    RerunClass,
    RerunReport,
    Risk,
    RuleState,
    SeedPolicy,
    SuiteKind,
    TrajectoryMode,
    WaiverField,
    WaiverLayer,
)
from evalops.domain.vocabulary import (
    CANONICAL_PRECEDENCE,
    MAX_TOOL_CALLS,
    Id,
    Identifier,
    NonEmptyStr,
    PositiveInt,
    Timestamp,
    TrialClass,
    UnitFloat,
)


def _field_docstrings(model: type) -> dict[str, str]:
    """The string literal under each annotated field of `model`'s own class body."""
    try:
        tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(model)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for field, under in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(under, ast.Expr)
            and isinstance(under.value, ast.Constant)
            and isinstance(under.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(under.value.value)
    return docs


def _describe_fields(schema: dict[str, Any], model: type) -> None:
    """Fill each property's JSON Schema `description` from its field's docstring.

    Done when a schema is generated rather than when the class is built (pydantic's
    `use_attribute_docstrings`): reading and parsing the source of every model at import
    cost a tenth of the start-up of every command.
    """
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, Strict):
            docs.update(_field_docstrings(cls))
    fields = getattr(model, "model_fields", {})
    properties = schema.get("properties", {})
    for name, info in fields.items():
        key = info.alias or name
        if key in properties and info.description is None and name in docs:
            properties[key]["description"] = docs[name]


class Strict(BaseModel):
    """Base for every spec model: unknown fields are errors, values are not coerced."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        json_schema_extra=_describe_fields,
        defer_build=True,
    )


# --------------------------------------------------------------------------- task (5.1)


class TaskMeta(Strict):
    """Labels of a task: not part of `task_digest`."""

    title: NonEmptyStr
    """One line saying what the task checks."""
    owner: NonEmptyStr | None = None
    """Who reviews the task (the SuitePolicy `review_owner`)."""
    risk: Risk
    """Risk tier: `critical` failures block a release, the others hold unless waived."""
    protects: list[Protects] = []
    """What the task protects; non-empty means the task must be `critical`."""
    invariant: NonEmptyStr | None = None
    """The invariant the task confirms (enough for `confirmed_failure_or_invariant`)."""
    failure_owner: NonEmptyStr | None = None
    """Who owns a failure of this task (the SuitePolicy `failure_owner`)."""
    description: str | None = None
    """Free text for people; never read by evalops."""
    tags: list[NonEmptyStr] = []
    """Free labels for filtering."""
    stratum: dict[NonEmptyStr, NonEmptyStr] | None = None
    """Members of an estimation suite: `{KEY: STRATUM}`, KEY the suite's `weights.by`."""
    sampled_at: Timestamp | None = None
    """Members of an estimation suite: when the session was sampled (at most `frozen_at`)."""

    @model_validator(mode="after")
    def _protects_needs_critical(self) -> TaskMeta:
        spec_rules.check_task_meta(self.risk, self.protects)
        return self


class Environment(Strict):
    """The frozen environment contract the task runs in."""

    clock: Timestamp | None = None
    """The frozen wall clock, RFC 3339 with offset."""
    timezone: NonEmptyStr | None = None
    """IANA time zone the agent sees."""
    network_policy: NetworkPolicy
    """`deny`: no network; `allowlist`: only `allowlist` hosts; `live`: the real network."""
    allowlist: list[NonEmptyStr] = []
    """Hosts reachable under `network_policy: allowlist`."""
    services: dict[str, Any] = {}
    """Service versions and state digests the task was frozen against."""

    @model_validator(mode="after")
    def _allowlist_matches_policy(self) -> Environment:
        spec_rules.check_environment(self.network_policy, self.allowlist)
        return self


class Termination(Strict):
    """When a run is stopped."""

    timeout_s: float = Field(gt=0)
    """Wall-clock limit in seconds."""
    max_steps: PositiveInt | None = None
    """Step limit."""


class RequiredArtifacts(Strict):
    """Artifacts a trial must produce."""

    logical: list[NonEmptyStr] = []
    """Artifact kinds that must appear in the trial's artifact manifest."""
    evaluation: list[NonEmptyStr] = []
    """Evaluation evidence (trace, manifest, grader results) the trial must carry."""


class ExpectedCall(Strict):
    """One expected tool call of a trajectory (RFC 0244 section A)."""

    tool: Identifier
    """Tool name, compared exactly."""
    args: dict[str, Any] | None = None
    """Expected arguments, compared by `argsMatch`."""
    argsMatch: ArgsMatch = "ignore"
    """`ignore` (default), `exact` (JSON-deep-equal) or `subset` (every key path present)."""


class TrajectoryExpectation(Strict):
    """How the tool path of a trial must look (RFC 0244 section A)."""

    match: TrajectoryMode
    """`exact`, `in-order`, `any-order` or `subset`."""
    calls: list[ExpectedCall] = Field(max_length=MAX_TOOL_CALLS)
    """The expected calls (at most 10,000)."""
    forbidden: list[Identifier] = []
    """Tools whose any call makes the trajectory unmatched."""
    includeDelegates: bool = False
    """Grade every agent's calls, not only the target agent's."""


class Expected(Strict):
    """What a correct run produces."""

    kind: ExpectedKind
    """`golden` / `rubric` grade the output; `trajectory` grades the path alone."""
    match: dict[str, Any] | None = None
    """Output match for `golden` (e.g. `{strategy: contains, value: ...}`)."""
    rubric: dict[str, Any] | str | None = None
    """Rubric for `rubric`."""
    trajectory: TrajectoryExpectation | None = None
    """Optional trajectory expectation; required for `kind: trajectory`."""

    @model_validator(mode="after")
    def _kind_fits(self) -> Expected:
        spec_rules.check_expected(self.kind, self.match, self.rubric, self.trajectory)
        return self


class TrialPlan(Strict):
    """Repeated trials (RFC 0244 section B)."""

    count: PositiveInt = 1
    """How many trials a task needs."""
    k: PositiveInt | None = None
    """k of pass@k and pass^k; absent means `count`."""
    passRule: PassRule = "all"
    """`all`, `any` or `mean` (mean gating score against `passScore`)."""
    passScore: UnitFloat = 1.0
    """Threshold read by `passRule: mean`."""

    @model_validator(mode="after")
    def _k_within_count(self) -> TrialPlan:
        spec_rules.check_trial_plan(self.count, self.k)
        return self


class Contract(Strict):
    """What the task is: everything here is in `task_digest`."""

    goal: NonEmptyStr
    """The goal in one identifier-like phrase."""
    inputs: dict[str, Any] = {}
    """Inputs given to the agent."""
    initial_state: dict[str, Any] = {}
    """The frozen initial state (repositories with commits, documents, drafts)."""
    environment: Environment
    """The environment contract."""
    allowed_actions: list[NonEmptyStr] = []
    """Actions the agent may take."""
    success_state: dict[str, Any] = {}
    """Facts of the environment that define success, keyed by name."""
    forbidden_effects: list[NonEmptyStr] = []
    """Effects that must never happen."""
    termination: Termination | None = None
    """When a run is stopped."""
    required_artifacts: RequiredArtifacts | None = None
    """Artifacts a trial must produce."""
    expected: Expected | None = None
    """Expected output or trajectory (RFC 0244 section A)."""
    trials: TrialPlan | None = None
    """Repeated-trial plan (RFC 0244 section B); absent means one trial."""
    score_from: Id | None = None
    """The outcome grader whose score is the trial score."""


class ToolResponse(Strict):
    """A scripted tool response (RFC 0244 section D)."""

    tool: NonEmptyStr
    """Tool name."""
    args: dict[str, Any] | None = None
    """Arguments the call must match."""
    argsMatch: ArgsMatch = "ignore"
    """How `args` is compared."""
    response: Any = None
    """What the tool returns."""


class Fixtures(Strict):
    """Versioned fixtures: part of `task_digest`."""

    onMiss: OnMiss | None = None
    """`fail` (also when absent): a miss is a tool error; `live`: a miss may reach the tool."""
    toolResponses: list[ToolResponse] = []
    """Responses served in place of live tools, each consumed once."""


class EvalTaskSpec(Strict):
    """A reproducible evaluation task (`registry/tasks/*.yaml`)."""

    spec_schema_version: Literal["eval-task/v1"]
    """Format version of this file."""
    id: Id
    """Task id; stable across revisions."""
    revision: PositiveInt
    """Must change whenever `task_digest` changes."""
    meta: TaskMeta
    """Labels (not in `task_digest`)."""
    contract: Contract
    """The task contract (in `task_digest`)."""
    fixtures: Fixtures | None = None
    """Fixtures (in `task_digest`)."""
    grader_set: Id
    """Id of the grader set used with this task, in the same registry snapshot."""


# ------------------------------------------------------------------ execution (5.2)


class Prompt(Strict):
    """The prompt under evaluation."""

    template_version: NonEmptyStr | None = None
    """Template name and version."""
    content_hash: NonEmptyStr | None = None
    """Hash of the rendered template."""


class ModelRef(Strict):
    """The model under evaluation."""

    provider: NonEmptyStr
    """Provider name."""
    name: NonEmptyStr
    """Model name."""
    api_version: NonEmptyStr | None = None
    """Provider API version."""
    sampling: dict[str, Any] = {}
    """Sampling parameters (temperature, top_p, ...)."""
    seed_policy: SeedPolicy | None = None
    """How seeds are handled."""


class Runner(Strict):
    """The harness that ran the agent."""

    commit: NonEmptyStr | None = None
    """Runner source commit."""
    container_digest: NonEmptyStr | None = None
    """Container image digest."""
    adapter_version: NonEmptyStr | None = None
    """Adapter version."""


class Tools(Strict):
    """Tool schemas and service versions."""

    schema_digest: NonEmptyStr | None = None
    """Digest of the tool schemas offered to the agent."""
    service_versions: dict[str, NonEmptyStr] = {}
    """Service name -> version."""


class RetryPolicy(Strict):
    """Harness retries."""

    max_attempts: PositiveInt
    """Attempts per trial, first included."""
    eligible_states: list[TrialClass] = []
    """Classes that may be retried."""


class Concurrency(Strict):
    """Harness concurrency."""

    max_workers: PositiveInt
    """Parallel trials."""
    scheduling_policy: NonEmptyStr | None = None
    """Scheduler name."""


class ExecutionProfile(Strict):
    """What is being evaluated (`registry/executions/*.yaml`)."""

    spec_schema_version: Literal["execution-profile/v1"]
    """Format version of this file."""
    id: Id
    """Profile id (not in `execution_digest`)."""
    meta: dict[str, Any] = {}
    """Labels (not in `execution_digest`)."""
    system_build: Identifier
    """The build a gate is checked for."""
    prompt: Prompt | None = None
    """Prompt template and hash."""
    model: ModelRef
    """Model provider and name."""
    runner: Runner | None = None
    """Runner commit and container."""
    tools: Tools | None = None
    """Tool schema and service versions."""
    retry_policy: RetryPolicy | None = None
    """Harness retries."""
    concurrency: Concurrency | None = None
    """Harness concurrency."""


# ---------------------------------------------------------------- grader set (5.3)


class GraderModel(Strict):
    """The judge behind a model grader; a change makes its calibration stale."""

    provider: NonEmptyStr
    """Provider name."""
    name: NonEmptyStr
    """Model name."""
    prompt_hash: NonEmptyStr
    """Hash of the judge prompt."""
    rubric_version: int | NonEmptyStr
    """Rubric version."""


class CalibrationRequirements(Strict):
    """What a calibration must show before a model grader may block (section 8)."""

    min_holdout_items: PositiveInt
    """Smallest holdout split."""
    min_precision_lower_bound: UnitFloat
    """Wilson 95% lower bound of precision, per class."""
    min_recall_lower_bound: UnitFloat
    """Wilson 95% lower bound of recall, per class."""
    min_human_agreement: float = Field(ge=-1.0, le=1.0)
    """Cohen's kappa (2 annotators) or Fleiss' kappa (3+), per class."""


class Grader(Strict):
    """One versioned grader of a grader set."""

    id: Id
    """Grader id, unique in its set."""
    version: PositiveInt
    """Grader version."""
    layer: GraderLayer
    """`outcome`, `hard_constraint` or `trajectory_diagnosis`."""
    type: GraderType
    """`deterministic`, `model` or `human`."""
    evidence_required: list[NonEmptyStr] = []
    """Evidence the grader reads."""
    produces: list[GraderState] = Field(min_length=1)
    """The only states this grader may give; anything else makes the trial grader_invalid."""
    blocking: bool
    """Whether the grader's result can fail a trial."""
    covers: list[NonEmptyStr] = []
    """Success-state keys and forbidden effects the grader checks."""
    rule_state: RuleState | None = None
    """For trajectory diagnosis: `blocking_constraint` makes it act as a hard constraint."""
    model: GraderModel | None = None
    """The judge (model graders only)."""
    calibration_requirements: CalibrationRequirements | None = None
    """What its calibration must show before it may block (model graders only)."""
    recalibrate_on: list[RecalibrationTrigger] = []
    """Changes that make a calibration stale (prompt, model and rubric always do)."""

    @model_validator(mode="after")
    def _consistent(self) -> Grader:
        spec_rules.check_grader(dict(self))
        return self

    @property
    def acts_as_hard_constraint(self) -> bool:
        return self.layer == "hard_constraint" or self.rule_state == "blocking_constraint"


# What each layer may say: evalops/domain/spec_rules.py (no pydantic), named here as well.
LAYER_STATES = spec_rules.LAYER_STATES
EVERY_LAYER_STATES = spec_rules.EVERY_LAYER_STATES
states_allowed = spec_rules.states_allowed


class GraderSet(Strict):
    """Versioned, layered graders (`registry/graders/*.yaml`)."""

    spec_schema_version: Literal["grader-set/v1"]
    """Format version of this file."""
    id: Id
    """Grader set id (in `grader_set_digest`)."""
    version: PositiveInt
    """Must change whenever `grader_set_digest` changes."""
    meta: dict[str, Any] = {}
    """Labels (not in `grader_set_digest`)."""
    graders: list[Grader] = Field(min_length=1)
    """The graders."""

    @model_validator(mode="after")
    def _unique_ids(self) -> GraderSet:
        spec_rules.check_grader_ids([grader.id for grader in self.graders])
        return self

    def grader(self, grader_id: str) -> Grader | None:
        return next((g for g in self.graders if g.id == grader_id), None)


# --------------------------------------------------------- suites and policies (5.4)


class SamplingFrame(Strict):
    """The frozen frame an estimation suite samples from."""

    source: NonEmptyStr
    """Where samples come from."""
    period: NonEmptyStr
    """The period sampled."""
    frozen_at: Timestamp
    """When the frame was frozen."""
    sizes: dict[NonEmptyStr, PositiveInt] | None = None
    """Optional: stratum -> sessions in the frame (enables the finite-population correction)."""


WEIGHT_SUM_TOLERANCE = spec_rules.WEIGHT_SUM_TOLERANCE


class Weights(Strict):
    """Stratum weights of an estimation suite."""

    by: NonEmptyStr
    """Stratification variable."""
    values: dict[NonEmptyStr, float] = Field(min_length=1)
    """Stratum -> its share of the population: positive, summing to 1."""

    @model_validator(mode="after")
    def _shares(self) -> Weights:
        spec_rules.check_weights(self.values)
        return self


class SuiteDeclaration(Strict):
    """A suite (`registry/suites/*.yaml`); membership lives in the database."""

    spec_schema_version: Literal["suite/v1"]
    """Format version of this file."""
    id: Id
    """Suite id, e.g. `regression/core`."""
    kind: SuiteKind
    """`incident_corpus`, `capability`, `estimation` or `regression`."""
    owner: NonEmptyStr | None = None
    """Who owns the suite."""
    description: str | None = None
    """What the suite is for."""
    sampling_frame: SamplingFrame | None = None
    """Estimation only: the frozen sampling frame."""
    population: NonEmptyStr | None = None
    """Estimation only: the production population the samples represent."""
    weights: Weights | None = None
    """Estimation only: stratum weights."""
    update_policy: NonEmptyStr | None = None
    """Estimation only: how the sample is refreshed."""
    gate_policy: Id | None = None
    """The gate policy that decides this suite's releases (omitted: the only one in force)."""
    suite_policy: Id | None = None
    """The suite policy for entering and leaving this suite (omitted: the only one in force)."""

    @model_validator(mode="after")
    def _estimation_fields(self) -> SuiteDeclaration:
        spec_rules.check_suite(
            self.kind,
            [name for name in spec_rules.ESTIMATION_FIELDS if getattr(self, name) is not None],
            self.sampling_frame.sizes if self.sampling_frame else None,
            self.weights.values if self.weights else None,
        )
        return self


class IncidentCorpusRule(Strict):
    """What the incident corpus accepts."""

    accepts: list[NonEmptyStr] = []
    """Kinds of findings accepted."""
    executable_required: bool = False
    """Whether an incident needs an executable task to enter."""


class EntryRule(Strict):
    """Requirements a task must meet to enter a suite kind."""

    requires: list[EntryRequirement] = []
    """Requirement names from the SuitePolicy table."""


class EstimationEntryRule(EntryRule):
    """Entry rule of estimation suites."""

    claims_limited_to: NonEmptyStr | None = None
    """What an estimate may claim to describe."""


class ReplacementRule(Strict):
    """What replacing a member requires."""

    requires: list[ReplacementRequirement] = []
    """`coverage_mapping`, `review`."""


class RemovalRule(Strict):
    """What removing a member requires."""

    requires: list[RemovalRequirement] = []
    """`obsolete_reason`, `risk_owner_approval`."""


class SuitePolicy(Strict):
    """Suite entry, replacement and removal rules (`registry/policies/suite-policy.yaml`)."""

    spec_schema_version: Literal["suite-policy/v1"]
    """Format version of this file."""
    id: Id
    """Policy id."""
    incident_corpus: IncidentCorpusRule | None = None
    """Incident corpus rule; absent: nothing enters an incident corpus suite."""
    capability_entry: EntryRule | None = None
    """Capability suite entry rule; absent: nothing enters a capability suite."""
    estimation_entry: EstimationEntryRule | None = None
    """Estimation suite entry rule; absent: nothing enters an estimation suite."""
    regression_entry: EntryRule | None = None
    """Regression suite entry rule; absent: nothing enters a regression suite."""
    replacement: ReplacementRule | None = None
    """Replacement rule; absent: no member may be retired as replaced."""
    removal: RemovalRule | None = None
    """Removal rule; absent: no member may be retired (a policy never fails open)."""


class Rule(Strict):
    """A named rule."""

    rule: NonEmptyStr
    """Rule name."""


class EvidenceRule(Strict):
    """Unknown or missing evidence."""

    rule: EvidenceRuleName
    """Always `block_until_resolved` (a hold)."""


class HardConstraintRule(Strict):
    """Hard constraints."""

    rule: HardConstraintRuleName
    """Always `any_confirmed_failure_blocks`."""


class RegressionRule(Strict):
    """The paired regression verdict against a baseline."""

    rule: RegressionRuleName
    """Rule name."""
    baseline: Baseline = "optional"
    """Whether a gate needs a baseline."""
    method: RegressionMethod = "mcnemar"
    """Paired test."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Significance level."""


class RerunRule(Strict):
    """Reruns never overwrite; only these classes may be stood in for."""

    preserve_all_trials: Literal[True] = True
    """Always true: every trial is kept."""
    report: list[RerunReport] = []
    """What reports show about reruns."""
    max_attempts_by_class: dict[RerunClass, PositiveInt] = {}
    """Class -> how many attempts, the first included, a chain that passed through a trial
    of that class may reach (1: no rerun stands in; 2: one rerun may)."""
    task_is_primary_statistical_unit: bool = True
    """Statistics count tasks, not trials."""


class WaiverRule(Strict):
    """What a waiver may cover."""

    allowed_layers: list[WaiverLayer] = []
    """Risk tiers a waiver may cover."""
    forbidden_states: list[TrialClass] = list(MIN_FORBIDDEN_WAIVER_STATES)
    """States no waiver may cover; at least the five evidence and hard-failure states
    (omitted: exactly those five)."""
    require: list[WaiverField] = []
    """Fields a waiver must carry."""
    max_duration_days: PositiveInt
    """Longest validity."""

    @model_validator(mode="after")
    def _minimum_forbidden(self) -> WaiverRule:
        spec_rules.check_waiver_rule(self.forbidden_states)
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
        spec_rules.check_precedence(self.decision_precedence)
        return self


# --------------------------------------------------------------------------- authority

# Role, ActKind, ACT_ROLES and SeparationRule: evalops/domain/act_roles.py (no pydantic).


class Principal(Strict):
    """A person or machine that signs acts with one of its OpenSSH keys."""

    id: Id
    """How grants and reports name the principal."""
    email: NonEmptyStr | None = None
    """For people reading reports; never used to authenticate."""
    keys: list[NonEmptyStr] = Field(min_length=1)
    """OpenSSH public keys as in a `.pub` file (`ssh-ed25519 AAAA... comment`)."""

    @model_validator(mode="after")
    def _keys_parse(self) -> Principal:
        from evalops.domain.sshsig import MalformedKey, parse_public_key

        for index, line in enumerate(self.keys):
            try:
                parse_public_key(line)
            except MalformedKey as exc:
                raise SpecValueError(f"not an OpenSSH public key: {exc}", "keys", index) from None
        return self


class RoleGrant(Strict):
    """One principal holding a role, optionally only for some suites or tasks."""

    principal: Id
    """The principal's id."""
    suites: list[NonEmptyStr] = []
    """Suite id globs (`regression/*`); empty: every suite."""
    tasks: list[NonEmptyStr] = []
    """Task id globs; empty: every task."""


class AuthoritySpec(Strict):
    """Who may sign which act (`registry/policies/authority.yaml`)."""

    spec_schema_version: Literal["authority/v1"]
    """Format version of this file."""
    id: Id
    """Authority id."""
    principals: list[Principal] = Field(min_length=1)
    """Everyone who may sign anything."""
    roles: dict[Role, list[RoleGrant]] = {}
    """Role -> its grants; a role with no grant cannot be exercised."""
    thresholds: dict[ActKind, PositiveInt] = {}
    """Act -> how many distinct principals must sign it (default 1)."""
    separation_of_duties: list[SeparationRule] = []
    """`no_self_waiver`: no signer of a waiver signed the ingest of that build's trials;
    `no_self_review`: no signer of a review signed the ingest of the reviewed trial."""
    max_act_age_days: PositiveInt = 7
    """An act signed longer ago than this is refused."""

    @model_validator(mode="after")
    def _consistent(self) -> AuthoritySpec:
        from evalops.domain.sshsig import identity, parse_public_key

        ids: set[str] = set()
        owner_of: dict[bytes, str] = {}
        for index, principal in enumerate(self.principals):
            if principal.id in ids:
                raise SpecValueError(
                    f"principal {principal.id!r} is listed twice", "principals", index, "id"
                )
            ids.add(principal.id)
            for k, line in enumerate(principal.keys):
                blob = identity(parse_public_key(line))  # one key, whatever its encoding
                if owner_of.get(blob, principal.id) != principal.id:
                    raise SpecValueError(
                        f"this key is also a key of {owner_of[blob]!r}: a key names one principal",
                        "principals", index, "keys", k,
                    )  # fmt: skip
                owner_of[blob] = principal.id
        for role, grants in self.roles.items():
            for index, grant in enumerate(grants):
                if grant.principal not in ids:
                    raise SpecValueError(
                        f"unknown principal {grant.principal!r}", "roles", role, index, "principal"
                    )
        from evalops.domain.thresholds import threshold_problem

        problem = threshold_problem(self.roles, self.thresholds)
        if problem is not None:
            raise SpecValueError(problem[1], "thresholds", problem[0])
        return self


SPEC_MODELS: dict[str, type[Strict]] = {
    "eval-task/v1": EvalTaskSpec,
    "execution-profile/v1": ExecutionProfile,
    "grader-set/v1": GraderSet,
    "suite/v1": SuiteDeclaration,
    "suite-policy/v1": SuitePolicy,
    "gate-policy/v1": GatePolicy,
    "authority/v1": AuthoritySpec,
}

# The `kind` names used in `digest --json` and in the database: evalops/domain/spec_check.py
# (no pydantic there), named here as well.
SPEC_KINDS = spec_check.SPEC_KINDS
