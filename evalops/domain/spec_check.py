"""Whether a spec file is valid, decided without pydantic (a start-up optimization).

`evalops validate` would otherwise import pydantic and build the spec models of
evalops/domain/specs.py before reading a file: more than half of its CPU time
(benchmarks/RESULTS.md, "P6: validate without pydantic"). `is_valid` checks a file's JSON
value against a plain table of the same models (the same fields, required or not, the same
strict types, bounds and word lists) and the same rules between fields (the very functions
of evalops/domain/spec_rules.py the models call). It only answers yes or no: when it says
no, or cannot tell (`authority/v1`, not covered), the caller validates with pydantic, which
stays the reference and names every problem. So a file is accepted only when pydantic
would accept it too, and every message still comes from pydantic.

Kept equal to the models by tests/domain/test_spec_check.py: the table field by field
against each model's fields and defaults, and the decision against pydantic's on the
repository's spec files, the malformed-spec fixtures and Hypothesis-generated documents.
Change a model, change its row here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, get_args

from evalops.domain import spec_rules
from evalops.domain import spec_words as words
from evalops.domain.classes import CANONICAL_PRECEDENCE, TrialClass
from evalops.domain.limits import (
    ID_PATTERN,
    MAX_FREE_TEXT_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_TOOL_CALLS,
)
from evalops.domain.timestamps import parse_timestamp

# The `kind` names used in `digest --json` and in the database.
SPEC_KINDS: dict[str, str] = {
    "eval-task/v1": "task",
    "execution-profile/v1": "execution_profile",
    "grader-set/v1": "grader_set",
    "suite/v1": "suite",
    "suite-policy/v1": "suite_policy",
    "gate-policy/v1": "gate_policy",
    "authority/v1": "authority",
}

Check = Callable[[Any], bool]

#: A field with no default: the file must give it.
REQUIRED: Any = object()


# Plain classes rather than dataclasses: creating a dataclass costs more at import than the
# whole check of a registry.
class Field:
    """One field of a model: how its value is checked, and its default."""

    __slots__ = ("check", "default")

    def __init__(self, check: Check, default: Any = None) -> None:
        self.check = check
        #: The model's default (what a rule reads when the file omits the field), or REQUIRED.
        self.default = default


class Model:
    """One pydantic model of evalops/domain/specs.py, by name: its fields and its rule."""

    __slots__ = ("fields", "name", "rule")

    def __init__(
        self,
        name: str,
        fields: dict[str, Field],
        rule: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.name = name
        self.fields = fields
        #: Called with every field (defaults filled in) once each is valid; raises
        #: `SpecValueError` as the model validator does.
        self.rule = rule

    def __call__(self, value: Any) -> bool:
        if type(value) is not dict:
            return False
        fields = self.fields
        fields_get = fields.get
        for key, item in value.items():
            spec = fields_get(key)
            if spec is None or not spec.check(item):
                return False  # an unknown field (extra="forbid"), or a wrong value
        if len(value) < len(fields):
            for key, spec in fields.items():
                if spec.default is REQUIRED and key not in value:
                    return False
        if self.rule is not None:
            every = {key: value.get(key, spec.default) for key, spec in fields.items()}
            try:
                self.rule(every)
            except spec_rules.SpecValueError:
                return False
        return True


# --- the types of pydantic's strict mode, as specs.py and vocabulary.py declare them -----
# Strict: no coercion. A string is a str, an int an int (never a bool or a float), a float
# an int or a float (never a bool), a list a list and a mapping a dict.


def any_value(value: Any) -> bool:
    return True


def text(value: Any) -> bool:
    return type(value) is str


def non_empty(value: Any) -> bool:
    """NonEmptyStr."""
    return type(value) is str and 0 < len(value) <= MAX_FREE_TEXT_CHARS


def identifier(value: Any) -> bool:
    """Identifier."""
    return type(value) is str and 0 < len(value) <= MAX_IDENTIFIER_CHARS


# pydantic matches `pattern` with Rust's regex engine, whose `$` is the end of the text;
# Python's `$` also matches before a final newline, so the pattern is matched whole here.
_ID = re.compile(ID_PATTERN.removeprefix("^").removesuffix("$"))


def an_id(value: Any) -> bool:
    """Id."""
    return type(value) is str and _ID.fullmatch(value) is not None


def boolean(value: Any) -> bool:
    return type(value) is bool


def positive_int(value: Any) -> bool:
    """PositiveInt."""
    return type(value) is int and value >= 1


def number(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Check:
    """A float field (an int is taken too) within the given bounds; a NaN fails every
    bound, as in pydantic (it compares false)."""

    def check(value: Any) -> bool:
        if type(value) is not float and type(value) is not int:
            return False
        if ge is not None and not value >= ge:
            return False
        if gt is not None and not value > gt:
            return False
        if le is not None and not value <= le:
            return False
        return lt is None or value < lt

    return check


unit_float = number(ge=0.0, le=1.0)


def timestamp(value: Any) -> bool:
    """Timestamp: a string `parse_timestamp` reads."""
    if type(value) is not str:
        return False
    try:
        parse_timestamp(value)
    except ValueError:
        return False
    return True


def one_of(literal: Any) -> Check:
    """A `Literal` of strings (its words, from evalops/domain/spec_words.py)."""
    allowed = frozenset(get_args(literal))
    return lambda value: type(value) is str and value in allowed


def always_true(value: Any) -> bool:
    """`Literal[True]`: pydantic takes any number equal to True (True, 1, 1.0)."""
    return type(value) in (bool, int, float) and value == 1


def optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def list_of(check: Check, *, min_length: int = 0, max_length: int | None = None) -> Check:
    def each(value: Any) -> bool:
        if type(value) is not list or len(value) < min_length:
            return False
        if max_length is not None and len(value) > max_length:
            return False
        return all(check(item) for item in value)

    return each


def dict_of(key: Check, item: Check, *, min_length: int = 0) -> Check:
    def each(value: Any) -> bool:
        if type(value) is not dict or len(value) < min_length:
            return False
        return all(key(k) and item(v) for k, v in value.items())

    return each


def either(*checks: Check) -> Check:
    return lambda value: any(check(value) for check in checks)


any_dict = dict_of(text, any_value)


# --- the models of evalops/domain/specs.py, in its order ------------------------------------


def _task_meta(meta: dict[str, Any]) -> None:
    spec_rules.check_task_meta(meta["risk"], meta["protects"])


TASK_META = Model(
    "TaskMeta",
    {
        "title": Field(non_empty, REQUIRED),
        "owner": Field(optional(non_empty)),
        "risk": Field(one_of(words.Risk), REQUIRED),
        "protects": Field(list_of(one_of(words.Protects)), []),
        "invariant": Field(optional(non_empty)),
        "failure_owner": Field(optional(non_empty)),
        "description": Field(optional(text)),
        "tags": Field(list_of(non_empty), []),
        "stratum": Field(optional(dict_of(non_empty, non_empty))),
        "sampled_at": Field(optional(timestamp)),
    },
    _task_meta,
)


def _environment(environment: dict[str, Any]) -> None:
    spec_rules.check_environment(environment["network_policy"], environment["allowlist"])


ENVIRONMENT = Model(
    "Environment",
    {
        "clock": Field(optional(timestamp)),
        "timezone": Field(optional(non_empty)),
        "network_policy": Field(one_of(words.NetworkPolicy), REQUIRED),
        "allowlist": Field(list_of(non_empty), []),
        "services": Field(any_dict, {}),
    },
    _environment,
)
TERMINATION = Model(
    "Termination",
    {"timeout_s": Field(number(gt=0), REQUIRED), "max_steps": Field(optional(positive_int))},
)
REQUIRED_ARTIFACTS = Model(
    "RequiredArtifacts",
    {"logical": Field(list_of(non_empty), []), "evaluation": Field(list_of(non_empty), [])},
)
EXPECTED_CALL = Model(
    "ExpectedCall",
    {
        "tool": Field(identifier, REQUIRED),
        "args": Field(optional(any_dict)),
        "argsMatch": Field(one_of(words.ArgsMatch), "ignore"),
    },
)
TRAJECTORY_EXPECTATION = Model(
    "TrajectoryExpectation",
    {
        "match": Field(one_of(words.TrajectoryMode), REQUIRED),
        "calls": Field(list_of(EXPECTED_CALL, max_length=MAX_TOOL_CALLS), REQUIRED),
        "forbidden": Field(list_of(identifier), []),
        "includeDelegates": Field(boolean, False),
    },
)


def _expected(expected: dict[str, Any]) -> None:
    spec_rules.check_expected(
        expected["kind"], expected["match"], expected["rubric"], expected["trajectory"]
    )


EXPECTED = Model(
    "Expected",
    {
        "kind": Field(one_of(words.ExpectedKind), REQUIRED),
        "match": Field(optional(any_dict)),
        "rubric": Field(optional(either(any_dict, text))),
        "trajectory": Field(optional(TRAJECTORY_EXPECTATION)),
    },
    _expected,
)


def _trial_plan(plan: dict[str, Any]) -> None:
    spec_rules.check_trial_plan(plan["count"], plan["k"])


TRIAL_PLAN = Model(
    "TrialPlan",
    {
        "count": Field(positive_int, 1),
        "k": Field(optional(positive_int)),
        "passRule": Field(one_of(words.PassRule), "all"),
        "passScore": Field(unit_float, 1.0),
    },
    _trial_plan,
)
CONTRACT = Model(
    "Contract",
    {
        "goal": Field(non_empty, REQUIRED),
        "inputs": Field(any_dict, {}),
        "initial_state": Field(any_dict, {}),
        "environment": Field(ENVIRONMENT, REQUIRED),
        "allowed_actions": Field(list_of(non_empty), []),
        "success_state": Field(any_dict, {}),
        "forbidden_effects": Field(list_of(non_empty), []),
        "termination": Field(optional(TERMINATION)),
        "required_artifacts": Field(optional(REQUIRED_ARTIFACTS)),
        "expected": Field(optional(EXPECTED)),
        "trials": Field(optional(TRIAL_PLAN)),
        "score_from": Field(optional(an_id)),
    },
)
TOOL_RESPONSE = Model(
    "ToolResponse",
    {
        "tool": Field(non_empty, REQUIRED),
        "args": Field(optional(any_dict)),
        "argsMatch": Field(one_of(words.ArgsMatch), "ignore"),
        "response": Field(any_value),
    },
)
FIXTURES = Model(
    "Fixtures",
    {
        "onMiss": Field(optional(one_of(words.OnMiss))),
        "toolResponses": Field(list_of(TOOL_RESPONSE), []),
    },
)


def _version(spec_schema_version: str) -> Check:
    return lambda value: type(value) is str and value == spec_schema_version


EVAL_TASK = Model(
    "EvalTaskSpec",
    {
        "spec_schema_version": Field(_version("eval-task/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "revision": Field(positive_int, REQUIRED),
        "meta": Field(TASK_META, REQUIRED),
        "contract": Field(CONTRACT, REQUIRED),
        "fixtures": Field(optional(FIXTURES)),
        "grader_set": Field(an_id, REQUIRED),
    },
)

PROMPT = Model(
    "Prompt",
    {"template_version": Field(optional(non_empty)), "content_hash": Field(optional(non_empty))},
)
MODEL_REF = Model(
    "ModelRef",
    {
        "provider": Field(non_empty, REQUIRED),
        "name": Field(non_empty, REQUIRED),
        "api_version": Field(optional(non_empty)),
        "sampling": Field(any_dict, {}),
        "seed_policy": Field(optional(one_of(words.SeedPolicy))),
    },
)
RUNNER = Model(
    "Runner",
    {
        "commit": Field(optional(non_empty)),
        "container_digest": Field(optional(non_empty)),
        "adapter_version": Field(optional(non_empty)),
    },
)
TOOLS = Model(
    "Tools",
    {
        "schema_digest": Field(optional(non_empty)),
        "service_versions": Field(dict_of(text, non_empty), {}),
    },
)
RETRY_POLICY = Model(
    "RetryPolicy",
    {
        "max_attempts": Field(positive_int, REQUIRED),
        "eligible_states": Field(list_of(one_of(TrialClass)), []),
    },
)
CONCURRENCY = Model(
    "Concurrency",
    {
        "max_workers": Field(positive_int, REQUIRED),
        "scheduling_policy": Field(optional(non_empty)),
    },
)
EXECUTION_PROFILE = Model(
    "ExecutionProfile",
    {
        "spec_schema_version": Field(_version("execution-profile/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "meta": Field(any_dict, {}),
        "system_build": Field(identifier, REQUIRED),
        "prompt": Field(optional(PROMPT)),
        "model": Field(MODEL_REF, REQUIRED),
        "runner": Field(optional(RUNNER)),
        "tools": Field(optional(TOOLS)),
        "retry_policy": Field(optional(RETRY_POLICY)),
        "concurrency": Field(optional(CONCURRENCY)),
    },
)

GRADER_MODEL = Model(
    "GraderModel",
    {
        "provider": Field(non_empty, REQUIRED),
        "name": Field(non_empty, REQUIRED),
        "prompt_hash": Field(non_empty, REQUIRED),
        "rubric_version": Field(either(lambda value: type(value) is int, non_empty), REQUIRED),
    },
)
CALIBRATION_REQUIREMENTS = Model(
    "CalibrationRequirements",
    {
        "min_holdout_items": Field(positive_int, REQUIRED),
        "min_precision_lower_bound": Field(unit_float, REQUIRED),
        "min_recall_lower_bound": Field(unit_float, REQUIRED),
        "min_human_agreement": Field(number(ge=-1.0, le=1.0), REQUIRED),
    },
)
GRADER = Model(
    "Grader",
    {
        "id": Field(an_id, REQUIRED),
        "version": Field(positive_int, REQUIRED),
        "layer": Field(one_of(words.GraderLayer), REQUIRED),
        "type": Field(one_of(words.GraderType), REQUIRED),
        "evidence_required": Field(list_of(non_empty), []),
        "produces": Field(list_of(one_of(words.GraderState), min_length=1), REQUIRED),
        "blocking": Field(boolean, REQUIRED),
        "covers": Field(list_of(non_empty), []),
        "rule_state": Field(optional(one_of(words.RuleState))),
        "model": Field(optional(GRADER_MODEL)),
        "calibration_requirements": Field(optional(CALIBRATION_REQUIREMENTS)),
        "recalibrate_on": Field(list_of(one_of(words.RecalibrationTrigger)), []),
    },
    spec_rules.check_grader,
)


def _grader_set(grader_set: dict[str, Any]) -> None:
    spec_rules.check_grader_ids([grader["id"] for grader in grader_set["graders"]])


GRADER_SET = Model(
    "GraderSet",
    {
        "spec_schema_version": Field(_version("grader-set/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "version": Field(positive_int, REQUIRED),
        "meta": Field(any_dict, {}),
        "graders": Field(list_of(GRADER, min_length=1), REQUIRED),
    },
    _grader_set,
)

SAMPLING_FRAME = Model(
    "SamplingFrame",
    {
        "source": Field(non_empty, REQUIRED),
        "period": Field(non_empty, REQUIRED),
        "frozen_at": Field(timestamp, REQUIRED),
        "sizes": Field(optional(dict_of(non_empty, positive_int))),
    },
)


def _weights(weights: dict[str, Any]) -> None:
    spec_rules.check_weights(weights["values"])


WEIGHTS = Model(
    "Weights",
    {
        "by": Field(non_empty, REQUIRED),
        "values": Field(dict_of(non_empty, number(), min_length=1), REQUIRED),
    },
    _weights,
)


def _suite(suite: dict[str, Any]) -> None:
    frame, weights = suite["sampling_frame"], suite["weights"]
    spec_rules.check_suite(
        suite["kind"],
        [name for name in spec_rules.ESTIMATION_FIELDS if suite[name] is not None],
        frame.get("sizes") if frame is not None else None,
        weights["values"] if weights is not None else None,
    )


SUITE = Model(
    "SuiteDeclaration",
    {
        "spec_schema_version": Field(_version("suite/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "kind": Field(one_of(words.SuiteKind), REQUIRED),
        "owner": Field(optional(non_empty)),
        "description": Field(optional(text)),
        "sampling_frame": Field(optional(SAMPLING_FRAME)),
        "population": Field(optional(non_empty)),
        "weights": Field(optional(WEIGHTS)),
        "update_policy": Field(optional(non_empty)),
        "gate_policy": Field(optional(an_id)),
        "suite_policy": Field(optional(an_id)),
    },
    _suite,
)

INCIDENT_CORPUS_RULE = Model(
    "IncidentCorpusRule",
    {"accepts": Field(list_of(non_empty), []), "executable_required": Field(boolean, False)},
)
ENTRY_RULE = Model("EntryRule", {"requires": Field(list_of(one_of(words.EntryRequirement)), [])})
ESTIMATION_ENTRY_RULE = Model(
    "EstimationEntryRule",
    {**ENTRY_RULE.fields, "claims_limited_to": Field(optional(non_empty))},
)
REPLACEMENT_RULE = Model(
    "ReplacementRule", {"requires": Field(list_of(one_of(words.ReplacementRequirement)), [])}
)
REMOVAL_RULE = Model(
    "RemovalRule", {"requires": Field(list_of(one_of(words.RemovalRequirement)), [])}
)
SUITE_POLICY = Model(
    "SuitePolicy",
    {
        "spec_schema_version": Field(_version("suite-policy/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "incident_corpus": Field(optional(INCIDENT_CORPUS_RULE)),
        "capability_entry": Field(optional(ENTRY_RULE)),
        "estimation_entry": Field(optional(ESTIMATION_ENTRY_RULE)),
        "regression_entry": Field(optional(ENTRY_RULE)),
        "replacement": Field(optional(REPLACEMENT_RULE)),
        "removal": Field(optional(REMOVAL_RULE)),
    },
)

RULE = Model("Rule", {"rule": Field(non_empty, REQUIRED)})
EVIDENCE_RULE = Model("EvidenceRule", {"rule": Field(one_of(words.EvidenceRuleName), REQUIRED)})
HARD_CONSTRAINT_RULE = Model(
    "HardConstraintRule", {"rule": Field(one_of(words.HardConstraintRuleName), REQUIRED)}
)
REGRESSION_RULE = Model(
    "RegressionRule",
    {
        "rule": Field(one_of(words.RegressionRuleName), REQUIRED),
        "baseline": Field(one_of(words.Baseline), "optional"),
        "method": Field(one_of(words.RegressionMethod), "mcnemar"),
        "alpha": Field(number(gt=0.0, lt=1.0), 0.05),
    },
)
RERUN_RULE = Model(
    "RerunRule",
    {
        "preserve_all_trials": Field(always_true, True),
        "report": Field(list_of(one_of(words.RerunReport)), []),
        "max_attempts_by_class": Field(dict_of(one_of(words.RerunClass), positive_int), {}),
        "task_is_primary_statistical_unit": Field(boolean, True),
    },
)


def _waiver_rule(rule: dict[str, Any]) -> None:
    spec_rules.check_waiver_rule(rule["forbidden_states"])


WAIVER_RULE = Model(
    "WaiverRule",
    {
        "allowed_layers": Field(list_of(one_of(words.WaiverLayer)), []),
        "forbidden_states": Field(
            list_of(one_of(TrialClass)), list(spec_rules.MIN_FORBIDDEN_WAIVER_STATES)
        ),
        "require": Field(list_of(one_of(words.WaiverField)), []),
        "max_duration_days": Field(positive_int, REQUIRED),
    },
    _waiver_rule,
)


def _gate_policy(policy: dict[str, Any]) -> None:
    spec_rules.check_precedence(policy["decision_precedence"])


GATE_POLICY = Model(
    "GatePolicy",
    {
        "spec_schema_version": Field(_version("gate-policy/v1"), REQUIRED),
        "id": Field(an_id, REQUIRED),
        "decision_precedence": Field(list_of(one_of(TrialClass)), list(CANONICAL_PRECEDENCE)),
        "unknown_or_missing_evidence": Field(EVIDENCE_RULE, REQUIRED),
        "hard_constraints": Field(HARD_CONSTRAINT_RULE, REQUIRED),
        "critical_regressions": Field(REGRESSION_RULE, REQUIRED),
        "quality_signals": Field(optional(RULE)),
        "reruns": Field(RERUN_RULE, REQUIRED),
        "waivers": Field(WAIVER_RULE, REQUIRED),
    },
    _gate_policy,
)

#: The models checked here, by `spec_schema_version`. `authority/v1` is not: its rules read
#: OpenSSH keys (evalops/domain/sshsig.py), and a registry holds at most one authority.
CHECKED: dict[str, Model] = {
    "eval-task/v1": EVAL_TASK,
    "execution-profile/v1": EXECUTION_PROFILE,
    "grader-set/v1": GRADER_SET,
    "suite/v1": SUITE,
    "suite-policy/v1": SUITE_POLICY,
    "gate-policy/v1": GATE_POLICY,
}

#: Every model of the table, each once (the tests hold each to its pydantic model).
MODELS: tuple[Model, ...] = (
    TASK_META,
    ENVIRONMENT,
    TERMINATION,
    REQUIRED_ARTIFACTS,
    EXPECTED_CALL,
    TRAJECTORY_EXPECTATION,
    EXPECTED,
    TRIAL_PLAN,
    CONTRACT,
    TOOL_RESPONSE,
    FIXTURES,
    EVAL_TASK,
    PROMPT,
    MODEL_REF,
    RUNNER,
    TOOLS,
    RETRY_POLICY,
    CONCURRENCY,
    EXECUTION_PROFILE,
    GRADER_MODEL,
    CALIBRATION_REQUIREMENTS,
    GRADER,
    GRADER_SET,
    SAMPLING_FRAME,
    WEIGHTS,
    SUITE,
    INCIDENT_CORPUS_RULE,
    ENTRY_RULE,
    ESTIMATION_ENTRY_RULE,
    REPLACEMENT_RULE,
    REMOVAL_RULE,
    SUITE_POLICY,
    RULE,
    EVIDENCE_RULE,
    HARD_CONSTRAINT_RULE,
    REGRESSION_RULE,
    RERUN_RULE,
    WAIVER_RULE,
    GATE_POLICY,
)


def is_valid(value: Mapping[str, Any]) -> bool:
    """True only when the spec model its `spec_schema_version` names accepts `value`;
    False when it would not, or when this table does not cover that version."""
    version = value.get("spec_schema_version")
    model = CHECKED.get(version) if isinstance(version, str) else None
    return model is not None and model(value)
