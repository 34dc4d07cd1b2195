"""The pure SuitePolicy engine (docs/formats.md and docs/promotion.md), without a database.

`evaluate_entry(EntryFacts, SuiteDeclaration, SuitePolicy)` answers a checklist naming every
requirement of the target kind's entry rule (regression includes the capability rule), met
or unmet, with evidence and, when unmet, a fix. For every requirement of the section 7
table there is a case below in which it is the only unmet one. `evaluate_retirement`
checks removal (reason, risk-owner approval) and replacement (coverage mapping).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from evalops.domain.specs import EvalTaskSpec, GraderSet, SuiteDeclaration, SuitePolicy
from evalops.domain.suite_policy import (
    Checklist,
    EntryFacts,
    LinkedIncident,
    Replacement,
    evaluate_entry,
    evaluate_retirement,
)
from tests.helpers import (
    CAPABILITY_REQUIREMENTS,
    ESTIMATION_REQUIREMENTS,
    EXAMPLE_REGISTRY,
    MINI_GRADERS,
    MINI_JUDGE,
    MINI_TASK,
    REGRESSION_REQUIREMENTS,
)

TASK_DIGEST = "sha256:" + "1" * 64
GRADER_SET_DIGEST = "sha256:" + "2" * 64
EXEC_A = "sha256:" + "a" * 64
EXEC_B = "sha256:" + "b" * 64


TASK: dict[str, Any] = copy.deepcopy(MINI_TASK)
TASK["meta"]["invariant"] = "the thing is done exactly once"
# What a member of an estimation suite declares (section 16): its stratum and when sampled.
TASK["meta"]["stratum"] = {"tenant_tier": "pro"}
TASK["meta"]["sampled_at"] = "2026-10-15T09:30:00Z"
TASK["fixtures"]["toolResponses"] = [
    {"tool": "svc:do", "args": {"n": 1}, "argsMatch": "subset", "response": {"ok": True}}
]

JUDGE: dict[str, Any] = MINI_JUDGE

SUITES: dict[str, dict[str, Any]] = {
    "capability": {"spec_schema_version": "suite/v1", "id": "capability/x", "kind": "capability"},
    "regression": {"spec_schema_version": "suite/v1", "id": "regression/x", "kind": "regression"},
    "estimation": {
        "spec_schema_version": "suite/v1",
        "id": "estimation/x",
        "kind": "estimation",
        "sampling_frame": {
            "source": "production-sessions",
            "period": "2026-10",
            "frozen_at": "2026-11-01T00:00:00Z",
        },
        "population": "sessions of paying tenants in the EU region",
        "weights": {"by": "tenant_tier", "values": {"free": 0.2, "pro": 0.5, "enterprise": 0.3}},
        "update_policy": "refreshed quarterly; old cohorts kept read-only",
    },
}

POLICY: dict[str, Any] = yaml.safe_load(
    (EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml").read_text(encoding="utf-8")
)


# ----------------------------------------------------------------------------- builders


def task_spec(mutate: Callable[[dict[str, Any]], None] | None = None) -> EvalTaskSpec:
    value = copy.deepcopy(TASK)
    if mutate:
        mutate(value)
    return EvalTaskSpec.model_validate(value)


def grader_set(mutate: Callable[[dict[str, Any]], None] | None = None) -> GraderSet:
    value = copy.deepcopy(MINI_GRADERS)
    if mutate:
        mutate(value)
    return GraderSet.model_validate(value)


def suite(kind: str, mutate: Callable[[dict[str, Any]], Any] | None = None) -> SuiteDeclaration:
    value = copy.deepcopy(SUITES[kind])
    if mutate:
        mutate(value)
    return SuiteDeclaration.model_validate(value)


def policy(mutate: Callable[[dict[str, Any]], None] | None = None) -> SuitePolicy:
    value = copy.deepcopy(POLICY)
    if mutate:
        mutate(value)
    return SuitePolicy.model_validate(value)


def facts(**overrides: Any) -> EntryFacts:
    """Facts of a task that may enter every kind of suite under the default policy."""
    base = EntryFacts(
        task=task_spec(),
        task_file="registry/tasks/mini-task.yaml",
        task_digest=TASK_DIGEST,
        grader_set=grader_set(),
        grader_set_digest=GRADER_SET_DIGEST,
        valid_trials_by_execution={EXEC_A: 2},
    )
    return replace(base, **overrides)


def unmet_names(checklist: Checklist) -> list[str]:
    return [r.name for r in checklist.requirements if not r.met]


def drop(*names: str) -> Callable[[dict[str, Any]], None]:
    """A policy mutation removing requirement names from every entry rule."""

    def mutate(p: dict[str, Any]) -> None:
        for rule in ("capability_entry", "regression_entry", "estimation_entry"):
            p[rule]["requires"] = [n for n in p[rule]["requires"] if n not in names]

    return mutate


def without(section: str, key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(value: dict[str, Any]) -> None:
        del value[section][key]

    return mutate


# ----------------------------------------------------------------------- the base facts


def test_base_facts_meet_every_regression_requirement() -> None:
    checklist = evaluate_entry(facts(), suite("regression"), policy())

    assert [r.name for r in checklist.requirements] == REGRESSION_REQUIREMENTS
    assert checklist.accepted is True
    for r in checklist.requirements:
        assert r.met is True, r
        assert r.evidence.strip(), r
    data = checklist.as_dict()
    assert data["accepted"] is True
    assert [set(r) for r in data["requirements"]] == [{"name", "met", "evidence", "fix"}] * 10


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("capability", CAPABILITY_REQUIREMENTS),
        ("regression", REGRESSION_REQUIREMENTS),
        ("estimation", ESTIMATION_REQUIREMENTS),
    ],
)
def test_each_kind_checks_its_entry_rule(kind: str, names: list[str]) -> None:
    checklist = evaluate_entry(facts(), suite(kind), policy())
    assert [r.name for r in checklist.requirements] == names
    assert checklist.accepted is True


def test_each_entry_rule_is_complete_in_itself() -> None:
    """docs/formats.md: promotion checks exactly what the target kind's rule lists;
    `regression_entry` does not silently add `capability_entry`'s requirements."""
    regression = evaluate_entry(facts(), suite("regression"), policy())
    example = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml").read_text())
    assert [r.name for r in regression.requirements] == example["regression_entry"]["requires"]

    # A stricter capability rule changes nothing for regression, and the reverse.
    stricter = policy(lambda p: p["capability_entry"]["requires"].append("failure_owner"))
    no_failure_owner = facts(task=task_spec(without("meta", "failure_owner")))
    assert unmet_names(evaluate_entry(no_failure_owner, suite("capability"), stricter)) == [
        "failure_owner"
    ]
    lax = policy(lambda p: p["regression_entry"]["requires"].remove("failure_owner"))
    assert unmet_names(evaluate_entry(no_failure_owner, suite("regression"), lax)) == []
    assert unmet_names(evaluate_entry(no_failure_owner, suite("capability"), lax)) == []


def test_an_unmet_capability_requirement_refuses_regression_entry() -> None:
    f = facts(task=task_spec(without("meta", "owner")))
    for kind in ("capability", "regression"):
        checklist = evaluate_entry(f, suite(kind), policy())
        assert checklist.accepted is False
        assert unmet_names(checklist) == ["review_owner"]


def test_unknown_requirement_name_in_a_policy_is_an_error() -> None:
    with pytest.raises(ValidationError):
        policy(lambda p: p["regression_entry"]["requires"].append("good_vibes"))


def test_evaluate_entry_is_a_pure_function() -> None:
    f = facts(task=task_spec(without("meta", "owner")))
    first = evaluate_entry(f, suite("regression"), policy())
    second = evaluate_entry(f, suite("regression"), policy())
    assert first == second
    assert first.as_dict() == second.as_dict()


# ------------------------------------------------------------ one unmet requirement each


def _live(t: dict[str, Any]) -> None:
    t["fixtures"]["onMiss"] = "live"


def _no_fixtures_live_network(t: dict[str, Any]) -> None:
    del t["fixtures"]
    t["contract"]["environment"]["network_policy"] = "live"


def _no_fixtures_tool_calls_expected(t: dict[str, Any]) -> None:
    del t["fixtures"]
    t["contract"]["expected"] = {
        "kind": "trajectory",
        "trajectory": {"match": "in-order", "calls": [{"tool": "svc:do"}]},
    }


def _no_success_state(t: dict[str, Any]) -> None:
    t["contract"]["success_state"] = {}


def _hard_constraint_not_blocking(g: dict[str, Any]) -> None:
    g["graders"][1]["blocking"] = False


def _effect_covered_by_outcome_grader_only(g: dict[str, Any]) -> None:
    g["graders"][0]["covers"] = ["done", "do_it_twice"]
    g["graders"][1]["covers"] = []


def _key_covered_by_hard_constraint_grader_only(g: dict[str, Any]) -> None:
    # Deterministic, so the success state is stable; but no blocking *outcome* grader.
    g["graders"][0]["covers"] = []
    g["graders"][1]["covers"] = ["do_it_twice", "done"]


def _human_outcome_grader(g: dict[str, Any]) -> None:
    g["graders"][0]["type"] = "human"


def _with_judge(g: dict[str, Any]) -> None:
    g["graders"].append(copy.deepcopy(JUDGE))


OPEN = LinkedIncident("INC-1", "open", was_confirmed=False)
CLOSED_UNCONFIRMED = LinkedIncident("INC-2", "closed", was_confirmed=False)


@dataclass(frozen=True)
class Case:
    requirement: str
    kind: str
    facts: Callable[[], EntryFacts]
    suite_change: Callable[[dict[str, Any]], Any] | None
    policy_change: Callable[[dict[str, Any]], None] | None


def _case(
    requirement: str,
    kind: str = "regression",
    *,
    task: Callable[[dict[str, Any]], None] | None = None,
    graders: Callable[[dict[str, Any]], None] | None = None,
    suite_change: Callable[[dict[str, Any]], Any] | None = None,
    policy_change: Callable[[dict[str, Any]], None] | None = None,
    **fact_overrides: Any,
) -> Case:
    """Base facts with one change (of the task, its grader set or a fact)."""

    def build_facts() -> EntryFacts:
        overrides: dict[str, Any] = dict(fact_overrides)
        if task is not None:
            overrides["task"] = task_spec(task)
        if graders is not None:
            overrides["grader_set"] = grader_set(graders)
        return facts(**overrides)

    return Case(requirement, kind, build_facts, suite_change, policy_change)


ONLY_UNMET = {
    "reproducible_fixture/onMiss-live": _case("reproducible_fixture", task=_live),
    "reproducible_fixture/no-trials": _case("reproducible_fixture", valid_trials_by_execution={}),
    "reproducible_fixture/one-valid-trial": _case(
        "reproducible_fixture", valid_trials_by_execution={EXEC_A: 1}
    ),
    "reproducible_fixture/split-over-two-eval-cases": _case(
        "reproducible_fixture", valid_trials_by_execution={EXEC_A: 1, EXEC_B: 1}
    ),
    "reproducible_fixture/no-fixtures-live-network": _case(
        "reproducible_fixture", task=_no_fixtures_live_network
    ),
    "reproducible_fixture/no-fixtures-tool-calls-expected": _case(
        "reproducible_fixture", task=_no_fixtures_tool_calls_expected
    ),
    "reproducible_fixture/capability": _case("reproducible_fixture", "capability", task=_live),
    # An unsynced task also has nothing pinned (versioned_fixture): in the capability rule
    # task_digest is the only requirement that looks at it.
    "task_digest/capability": _case("task_digest", "capability", task_digest=None),
    "minimum_grader_coverage/hard-constraint-not-blocking": _case(
        "minimum_grader_coverage", graders=_hard_constraint_not_blocking
    ),
    "minimum_grader_coverage/effect-covered-by-outcome-grader": _case(
        "minimum_grader_coverage", graders=_effect_covered_by_outcome_grader_only
    ),
    "minimum_grader_coverage/key-covered-by-hard-constraint-grader": _case(
        "minimum_grader_coverage", graders=_key_covered_by_hard_constraint_grader_only
    ),
    "minimum_grader_coverage/capability": _case(
        "minimum_grader_coverage", "capability", graders=_hard_constraint_not_blocking
    ),
    "review_owner": _case("review_owner", task=without("meta", "owner")),
    "review_owner/capability": _case("review_owner", "capability", task=without("meta", "owner")),
    "failure_owner": _case("failure_owner", task=without("meta", "failure_owner")),
    "confirmed_failure_or_invariant/nothing": _case(
        "confirmed_failure_or_invariant", task=without("meta", "invariant")
    ),
    "confirmed_failure_or_invariant/open-incident": _case(
        "confirmed_failure_or_invariant", task=without("meta", "invariant"), incidents=(OPEN,)
    ),
    "confirmed_failure_or_invariant/closed-never-confirmed": _case(
        "confirmed_failure_or_invariant",
        task=without("meta", "invariant"),
        incidents=(CLOSED_UNCONFIRMED,),
    ),
    "stable_success_state/empty": _case("stable_success_state", task=_no_success_state),
    "stable_success_state/human-grader": _case(
        "stable_success_state", graders=_human_outcome_grader
    ),
    "calibrated_graders/missing": _case("calibrated_graders", graders=_with_judge),
    "calibrated_graders/stale": _case(
        "calibrated_graders",
        graders=_with_judge,
        calibration_states={"judge": "stale"},
        calibration_reasons={"judge": ["grader_config_digest changed"]},
    ),
    "calibrated_graders/failing": _case(
        "calibrated_graders",
        graders=_with_judge,
        calibration_states={"judge": "failing"},
        calibration_reasons={"judge": ["precision lower bound 0.6 < 0.8"]},
    ),
    # versioned_fixture is unmet only when the task or its grader set is not synced, which
    # also fails task_digest / grader_set_digest: a policy that does not ask for
    # task_digest leaves it the only unmet one (a policy may require fewer, section 5.4).
    "versioned_fixture": _case(
        "versioned_fixture", task_digest=None, policy_change=drop("task_digest")
    ),
    # An unsynced grader set also leaves coverage, stability and the pin unmet (see
    # test_unsynced_grader_set_fails_everything_that_reads_it); without those in the policy,
    # grader_set_digest is the only unmet one.
    "grader_set_digest": _case(
        "grader_set_digest",
        grader_set=None,
        grader_set_digest=None,
        policy_change=drop("minimum_grader_coverage", "stable_success_state", "versioned_fixture"),
    ),
    "frozen_sampling_frame": _case(
        "frozen_sampling_frame", "estimation", suite_change=lambda s: s.pop("sampling_frame")
    ),
    "production_population_definition": _case(
        "production_population_definition",
        "estimation",
        suite_change=lambda s: s.pop("population"),
    ),
    "weights": _case("weights", "estimation", suite_change=lambda s: s.pop("weights")),
    "update_policy": _case(
        "update_policy", "estimation", suite_change=lambda s: s.pop("update_policy")
    ),
}


@pytest.mark.parametrize("case", ONLY_UNMET.values(), ids=list(ONLY_UNMET))
def test_requirement_is_the_only_unmet_one(case: Case) -> None:
    requirement = case.requirement

    checklist = evaluate_entry(
        case.facts(), suite(case.kind, case.suite_change), policy(case.policy_change)
    )

    assert checklist.accepted is False
    assert unmet_names(checklist) == [requirement]
    refusal = next(r for r in checklist.requirements if not r.met)
    assert isinstance(refusal.evidence, str) and refusal.evidence.strip()
    assert isinstance(refusal.fix, str) and refusal.fix.strip()
    data = checklist.as_dict()
    assert data["accepted"] is False
    assert [r["name"] for r in data["requirements"] if r["met"] is False] == [requirement]


def test_every_section_7_requirement_has_an_only_unmet_case() -> None:
    table = {
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
    }
    assert {case.requirement for case in ONLY_UNMET.values()} == table


# --------------------------------------------------------------- evidence names the gap


def test_coverage_evidence_names_the_uncovered_items() -> None:
    checklist = evaluate_entry(
        facts(grader_set=grader_set(_hard_constraint_not_blocking)),
        suite("regression"),
        policy(),
    )
    refusal = next(r for r in checklist.requirements if r.name == "minimum_grader_coverage")
    assert "do_it_twice" in refusal.evidence
    assert "done" not in refusal.evidence.split("uncovered", 1)[-1]


def test_calibration_evidence_names_the_grader() -> None:
    checklist = evaluate_entry(
        facts(grader_set=grader_set(_with_judge)), suite("regression"), policy()
    )
    refusal = next(r for r in checklist.requirements if r.name == "calibrated_graders")
    assert "judge" in refusal.evidence or "judge" in (refusal.fix or "")


@pytest.mark.parametrize(
    ("requirement", "field"),
    [
        ("frozen_sampling_frame", "sampling_frame"),
        ("production_population_definition", "population"),
        ("weights", "weights"),
        ("update_policy", "update_policy"),
    ],
)
def test_estimation_fix_names_the_missing_declaration_field(requirement: str, field: str) -> None:
    checklist = evaluate_entry(facts(), suite("estimation", lambda s: s.pop(field)), policy())
    refusal = next(r for r in checklist.requirements if r.name == requirement)
    assert field in (refusal.fix or "")


# ------------------------------------------------------------------------ met variants


def _on_miss_absent(t: dict[str, Any]) -> None:
    del t["fixtures"]["onMiss"]


def _sealed_without_fixtures(t: dict[str, Any]) -> None:
    del t["fixtures"]


def _diagnosis_as_hard_constraint(g: dict[str, Any]) -> None:
    g["graders"][1] = {
        "id": "no-twice",
        "version": 1,
        "layer": "trajectory_diagnosis",
        "type": "deterministic",
        "rule_state": "blocking_constraint",
        "produces": ["task_fail", "pass"],  # its task_fail is a hard failure (section 5.3)
        "blocking": True,
        "covers": ["do_it_twice"],
    }


def _non_blocking_judge(g: dict[str, Any]) -> None:
    judge = copy.deepcopy(JUDGE)
    judge["blocking"] = False
    del judge["calibration_requirements"]
    g["graders"].append(judge)


MET = {
    "onMiss-absent-is-fail": ({"task": task_spec(_on_miss_absent)}, "reproducible_fixture"),
    "sealed-task-needs-no-fixtures": (
        {"task": task_spec(_sealed_without_fixtures)},
        "reproducible_fixture",
    ),
    "best-eval-case-counts": (
        {"valid_trials_by_execution": {EXEC_A: 1, EXEC_B: 3}},
        "reproducible_fixture",
    ),
    "blocking-constraint-diagnosis-covers-effects": (
        {"grader_set": grader_set(_diagnosis_as_hard_constraint)},
        "minimum_grader_coverage",
    ),
    "confirmed-incident": (
        {
            "task": task_spec(without("meta", "invariant")),
            "incidents": (LinkedIncident("INC-1", "confirmed", was_confirmed=True),),
        },
        "confirmed_failure_or_invariant",
    ),
    "reproduced-incident": (
        {
            "task": task_spec(without("meta", "invariant")),
            "incidents": (OPEN, LinkedIncident("INC-3", "reproduced", was_confirmed=True)),
        },
        "confirmed_failure_or_invariant",
    ),
    "closed-after-confirmation": (
        {
            "task": task_spec(without("meta", "invariant")),
            "incidents": (LinkedIncident("INC-4", "closed", was_confirmed=True),),
        },
        "confirmed_failure_or_invariant",
    ),
    "valid-calibration": (
        {"grader_set": grader_set(_with_judge), "calibration_states": {"judge": "valid"}},
        "calibrated_graders",
    ),
    "non-blocking-model-grader-needs-none": (
        {"grader_set": grader_set(_non_blocking_judge)},
        "calibrated_graders",
    ),
}


@pytest.mark.parametrize("case", MET.values(), ids=list(MET))
def test_requirement_met(case: tuple[dict[str, Any], str]) -> None:
    overrides, requirement = case
    checklist = evaluate_entry(facts(**overrides), suite("regression"), policy())
    result = next(r for r in checklist.requirements if r.name == requirement)
    assert result.met is True, result
    assert checklist.accepted is True, unmet_names(checklist)


def test_confirmed_incident_evidence_names_it() -> None:
    f = facts(
        task=task_spec(without("meta", "invariant")),
        incidents=(LinkedIncident("INC-9", "confirmed", was_confirmed=True),),
    )
    checklist = evaluate_entry(f, suite("regression"), policy())
    result = next(r for r in checklist.requirements if r.name == "confirmed_failure_or_invariant")
    assert result.met is True
    assert "INC-9" in result.evidence


# ------------------------------------------------------------ what an unsynced input fails


def test_unsynced_task_fails_task_digest_and_versioned_fixture() -> None:
    checklist = evaluate_entry(facts(task_digest=None), suite("regression"), policy())
    assert unmet_names(checklist) == ["task_digest", "versioned_fixture"]


def test_unsynced_grader_set_fails_everything_that_reads_it() -> None:
    checklist = evaluate_entry(
        facts(grader_set=None, grader_set_digest=None), suite("regression"), policy()
    )
    assert set(unmet_names(checklist)) == {
        "minimum_grader_coverage",
        "stable_success_state",
        "versioned_fixture",
        "grader_set_digest",
    }


# --------------------------------------------------------------------------- retirement


def _narrow(t: dict[str, Any]) -> None:
    t["id"] = "narrow-task"
    t["contract"]["forbidden_effects"] = []


def _wide(t: dict[str, Any]) -> None:
    t["id"] = "wide-task"
    t["contract"]["forbidden_effects"] = ["do_it_twice", "leak_a_secret"]
    t["contract"]["success_state"] = {"done": True, "receipt": "ok"}


def _wide_graders(g: dict[str, Any]) -> None:
    g["graders"][0]["covers"] = ["done", "receipt"]
    g["graders"][1]["covers"] = ["do_it_twice", "leak_a_secret"]


def retire(
    *,
    reason: str = "obsolete",
    approved_by: str | None = "risk@example.com",
    replacement: Replacement | None = None,
    pol: SuitePolicy | None = None,
) -> Checklist:
    return evaluate_retirement(
        task=task_spec(),
        grader_set=grader_set(),
        reason=reason,
        approved_by=approved_by,
        replacement=replacement,
        policy=pol or policy(),
    )


def test_removal_with_reason_and_approval_is_accepted() -> None:
    checklist = retire()
    assert checklist.accepted is True
    assert {r.name for r in checklist.requirements} >= {"obsolete_reason", "risk_owner_approval"}


def test_removal_without_approval_is_refused() -> None:
    checklist = retire(approved_by=None)
    assert checklist.accepted is False
    assert unmet_names(checklist) == ["risk_owner_approval"]
    refusal = next(r for r in checklist.requirements if not r.met)
    assert refusal.evidence.strip()
    assert (refusal.fix or "").strip()


def test_removal_without_reason_is_refused() -> None:
    checklist = retire(reason="")
    assert unmet_names(checklist) == ["obsolete_reason"]


def test_replacement_needs_a_replacement_task() -> None:
    checklist = retire(reason="replaced")
    assert checklist.accepted is False
    assert unmet_names(checklist) == ["coverage_mapping"]


def test_replacement_that_loses_coverage_is_refused() -> None:
    narrow = Replacement(task_spec(_narrow), grader_set())
    checklist = retire(reason="replaced", replacement=narrow)
    assert checklist.accepted is False
    assert unmet_names(checklist) == ["coverage_mapping"]
    refusal = next(r for r in checklist.requirements if not r.met)
    assert "do_it_twice" in refusal.evidence
    assert (refusal.fix or "").strip()


def test_replacement_whose_grader_no_longer_blocks_loses_coverage() -> None:
    same_items = Replacement(task_spec(), grader_set(_hard_constraint_not_blocking))
    checklist = retire(reason="replaced", replacement=same_items)
    assert unmet_names(checklist) == ["coverage_mapping"]


def test_replacement_covering_everything_is_accepted() -> None:
    wide = Replacement(task_spec(_wide), grader_set(_wide_graders))
    checklist = retire(reason="replaced", replacement=wide)
    assert checklist.accepted is True, unmet_names(checklist)
    assert "coverage_mapping" in {r.name for r in checklist.requirements}


def test_replacement_still_needs_the_approval() -> None:
    wide = Replacement(task_spec(_wide), grader_set(_wide_graders))
    checklist = retire(reason="replaced", approved_by=None, replacement=wide)
    assert checklist.accepted is False
    assert "coverage_mapping" not in unmet_names(checklist)
    assert unmet_names(checklist)


def test_on_miss_live_is_never_a_reproducible_fixture() -> None:
    """Even a task that needs no fixtures is not sealed once it allows live misses."""
    from evalops.domain.specs import EvalTaskSpec
    from evalops.domain.suite_policy import EntryFacts, _reproducible_fixture
    from tests.helpers import MINI_TASK

    sealed = EvalTaskSpec.model_validate({**MINI_TASK, "fixtures": {"toolResponses": []}})
    live = EvalTaskSpec.model_validate(
        {**MINI_TASK, "fixtures": {"onMiss": "live", "toolResponses": []}}
    )
    trials = {"sha256:" + "e" * 64: 2}
    ok = _reproducible_fixture(
        EntryFacts(sealed, "t.yaml", "d", None, None, valid_trials_by_execution=trials),
        None,  # type: ignore[arg-type]
    )
    refused = _reproducible_fixture(
        EntryFacts(live, "t.yaml", "d", None, None, valid_trials_by_execution=trials),
        None,  # type: ignore[arg-type]
    )
    assert ok.met
    assert not refused.met
    assert "live" in refused.evidence


def test_incident_corpus_requires_an_executable_task_only_when_the_policy_says_so() -> None:
    from evalops.domain.specs import SuitePolicy
    from evalops.domain.suite_policy import required_names

    base = {
        "spec_schema_version": "suite-policy/v1",
        "id": "p",
        "capability_entry": {"requires": []},
        "estimation_entry": {"requires": []},
        "regression_entry": {"requires": []},
    }
    lenient = SuitePolicy.model_validate(
        {**base, "incident_corpus": {"executable_required": False}}
    )
    strict = SuitePolicy.model_validate({**base, "incident_corpus": {"executable_required": True}})
    assert required_names(lenient, "incident_corpus") == []
    assert required_names(strict, "incident_corpus") == ["reproducible_fixture"]
