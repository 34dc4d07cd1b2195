"""Decision integrity, pure domain: no trial, reviewer, config swap
or relabel can turn a block into a pass.

Each rule of docs/formats.md, docs/classification.md, docs/promotion.md and docs/gate.md
that guards a decision is attacked here without a database;
`test_decision_integrity_cli.py` attacks the same rules through the CLI on a copy of the
example registry. Expectations come from the contract's
words or from brute force, never from the code under test.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalops.domain.calibration_validity import StoredCalibration, Validity, calibration_validity
from evalops.domain.classify import classify
from evalops.domain.regression import TaskOutcome, paired_verdict
from evalops.domain.reruns import TrialNode, resolve_reruns
from evalops.domain.specs import (
    EVERY_LAYER_STATES,
    LAYER_STATES,
    EvalTaskSpec,
    GatePolicy,
    Grader,
    GraderSet,
    SuitePolicy,
)
from evalops.domain.stats import TaskTrials, task_block
from evalops.domain.suite_policy import (
    EntryFacts,
    evaluate_entry,
    evaluate_retirement,
)
from evalops.domain.trial_record import GraderResult, TrialRecord
from evalops.domain.vocabulary import GRADER_STATES
from tests.decide import evaluate
from tests.helpers import EXAMPLE_REGISTRY

DIGEST = "sha256:" + "0" * 64
GATE_POLICY: dict[str, Any] = {
    "spec_schema_version": "gate-policy/v1",
    "id": "release-gate",
    "unknown_or_missing_evidence": {"rule": "block_until_resolved"},
    "hard_constraints": {"rule": "any_confirmed_failure_blocks"},
    "critical_regressions": {"rule": "no_unapproved_regression_against_baseline"},
    "reruns": {"max_attempts_by_class": {"infrastructure_invalid": 2, "grader_invalid": 1}},
    "waivers": {"max_duration_days": 30},
}

# ----------------------------------------------------- 1. at most one result per grader


def _record(results: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "schema": "evalops.trial/v1",
        "trial_id": "t-1",
        "task_id": "task",
        "task_digest": DIGEST,
        "execution_digest": DIGEST,
        "grader_set_digest": DIGEST,
        "trial_index": 0,
        "started_at": "2026-11-29T10:00:00Z",
        "completed_at": "2026-11-29T10:01:00Z",
        "grader_results": results,
        "runtime": {"status": "ok"},
        **extra,
    }


@pytest.mark.parametrize(
    "states", [("hard_constraint_fail", "pass"), ("pass", "hard_constraint_fail"), ("pass", "pass")]
)
def test_a_second_result_from_one_grader_is_refused_naming_both(states: tuple[str, str]) -> None:
    results = [{"grader_id": "guard", "grader_version": 1, "state": s} for s in states]
    with pytest.raises(ValidationError) as caught:
        TrialRecord.model_validate(_record(results))
    (error,) = caught.value.errors()
    assert error["ctx"]["error"].loc == ("grader_results", 1, "grader_id")
    assert "grader_results[0] and [1]" in error["msg"]


# ------------------------------------------------ 5.3 a grader's layer bounds its verdicts

RUNTIME_ONLY = {"agent_error", "runtime_error", "infrastructure_invalid"}


def _grader(layer: str, gtype: str, produces: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "g",
        "version": 1,
        "layer": layer,
        "type": gtype,
        "produces": produces,
        "blocking": False,
    }
    if gtype == "model":
        out["model"] = {"provider": "p", "name": "n", "prompt_hash": "h", "rubric_version": 1}
    if layer == "trajectory_diagnosis":
        out["rule_state"] = "diagnostic_only"
    return out


# The table of docs/formats.md, written out from the contract's words.
CONTRACT_TABLE = {
    "outcome": {"task_pass", "task_fail"},
    "hard_constraint": {"pass", "hard_constraint_fail"},
    "trajectory_diagnosis": {"task_pass", "task_fail", "pass"},
}
EVERY_LAYER = {"missing_required_evidence", "ambiguous_external_effect", "grader_invalid"}


def test_the_layer_table_is_the_contracts() -> None:
    assert {k: set(v) for k, v in LAYER_STATES.items()} == CONTRACT_TABLE
    assert set(EVERY_LAYER_STATES) == EVERY_LAYER


@pytest.mark.parametrize(
    ("layer", "gtype", "state"),
    list(itertools.product(CONTRACT_TABLE, ("deterministic", "model", "human"), GRADER_STATES)),
)
def test_produces_is_bounded_by_layer_and_type(layer: str, gtype: str, state: str) -> None:
    allowed = (
        CONTRACT_TABLE[layer] | EVERY_LAYER | ({"abstain"} if gtype != "deterministic" else set())
    )
    doc = _grader(layer, gtype, [state])
    if state in allowed:
        assert state not in RUNTIME_ONLY
        Grader.model_validate(doc)
    else:
        with pytest.raises(ValidationError, match=f"may not produce {state}"):
            Grader.model_validate(doc)


def test_a_blocking_constraint_guard_must_be_blocking() -> None:
    doc = _grader("trajectory_diagnosis", "deterministic", ["pass", "task_fail"])
    doc["rule_state"] = "blocking_constraint"
    with pytest.raises(ValidationError, match="set blocking: true"):
        Grader.model_validate(doc)
    Grader.model_validate({**doc, "blocking": True})


# ------------------------------------------- 6.3 attempts, the first included, per chain

LIMITS = {"infrastructure_invalid": 2, "grader_invalid": 1}


def _chain(*classes: str) -> list[TrialNode]:
    return [TrialNode(f"t{i}", f"t{i - 1}" if i else None, cls) for i, cls in enumerate(classes)]


@pytest.mark.parametrize(
    ("classes", "effective", "excluded"),
    [
        # one rerun may stand in for a timed-out trial...
        (("infrastructure_invalid", "task_pass"), "t1", set()),
        # ...a third attempt may not
        (("infrastructure_invalid", "infrastructure_invalid", "task_pass"), "t1", {"t2"}),
        # no rerun stands in for a grader_invalid trial (fix the grader, run the build again)
        (("grader_invalid", "task_pass"), "t0", {"t1"}),
        # bounded by every earlier class: infra (2) then grader_invalid (1) stops at attempt 2
        (("infrastructure_invalid", "grader_invalid", "task_pass"), "t1", {"t2"}),
        # a class that is not listed allows no rerun
        (("task_fail", "task_pass"), "t0", {"t1"}),
        (("hard_constraint_fail", "task_pass"), "t0", {"t1"}),
        (("task_pass", "task_fail"), "t0", {"t1"}),
    ],
)
def test_attempts_count_the_first_and_every_earlier_class_bounds_the_chain(
    classes: tuple[str, ...], effective: str, excluded: set[str]
) -> None:
    outcome = resolve_reruns(_chain(*classes), LIMITS)
    assert outcome.effective == (effective,)
    assert outcome.not_permitted == excluded


def test_a_rerun_whose_parent_is_not_evidence_is_never_an_extra_original() -> None:
    trials = [
        TrialNode("a", None, "task_fail"),
        TrialNode("orphan", "elsewhere", "task_pass"),  # its parent is of another eval case
    ]
    outcome = resolve_reruns(trials, LIMITS)
    assert outcome.effective == ("a",)
    assert outcome.not_permitted == {"orphan"}


def _brute_force(trials: list[TrialNode], limits: dict[str, int]) -> tuple[set[str], set[str]]:
    """The contract read literally: walk each original's chain of first-stored reruns; a
    trial at attempt N stands in iff N <= limits[c] (absent: 1) for every earlier c."""
    ids = {t.trial_id for t in trials}
    effective: set[str] = set()
    counted: set[str] = set()
    for original in (t for t in trials if t.parent_trial_id is None):
        chain = [original]
        while True:
            kids = [t for t in trials if t.parent_trial_id == chain[-1].trial_id]
            if not kids:
                break
            chain.append(kids[0])
        standing = chain[0]
        for n, trial in enumerate(chain[1:], start=2):
            earlier = [t.classification for t in chain[: n - 1]]
            if all(n <= limits.get(c, 1) for c in earlier):
                standing = trial
            else:
                break
        effective.add(standing.trial_id)
        counted.update(t.trial_id for t in chain[: chain.index(standing) + 1])
    excluded = {t.trial_id for t in trials if t.parent_trial_id is not None} - counted
    assert excluded <= ids
    return effective, excluded


CLASSES = st.sampled_from(
    [
        "infrastructure_invalid",
        "grader_invalid",
        "missing_required_evidence",
        "task_pass",
        "task_fail",
        "hard_constraint_fail",
    ]
)


@st.composite
def rerun_forests(draw: st.DrawFn) -> tuple[list[TrialNode], dict[str, int]]:
    n = draw(st.integers(1, 12))
    trials: list[TrialNode] = []
    for i in range(n):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        trials.append(TrialNode(f"t{i}", None if parent is None else f"t{parent}", draw(CLASSES)))
    limits = draw(
        st.dictionaries(
            st.sampled_from(
                ["infrastructure_invalid", "grader_invalid", "missing_required_evidence"]
            ),
            st.integers(1, 4),
        )
    )
    return trials, limits


@settings(max_examples=400, deadline=None)
@given(rerun_forests())
def test_rerun_resolution_agrees_with_a_brute_force_reading(
    drawn: tuple[list[TrialNode], dict[str, int]],
) -> None:
    trials, limits = drawn
    outcome = resolve_reruns(trials, limits)
    effective, excluded = _brute_force(trials, limits)
    assert set(outcome.effective) == effective
    assert outcome.not_permitted == excluded
    assert len(outcome.effective) == sum(1 for t in trials if t.parent_trial_id is None)


# --------------------------------------------------- 9 passAtK / passHatK null when n < k


@pytest.mark.parametrize(("n", "k"), [(1, 3), (2, 3), (4, 5)])
def test_pass_at_k_is_null_with_fewer_trials_than_k(n: int, k: int) -> None:
    block = task_block(TaskTrials("t", k, (True,) * n, (1.0,) * n))
    assert block["passAtK"] is None
    assert block["passHatK"] is None
    full = task_block(TaskTrials("t", k, (True,) * k, (1.0,) * k))
    assert (full["passAtK"], full["passHatK"]) == (1.0, 1.0)


# ------------------------------------------------------- 9 the bootstrap's minimum and floor


def _outcomes(diffs: list[float]) -> tuple[dict[str, TaskOutcome], dict[str, TaskOutcome]]:
    base = {f"t{i}": TaskOutcome(True, 0.5) for i in range(len(diffs))}
    cand = {f"t{i}": TaskOutcome(True, 0.5 + d) for i, d in enumerate(diffs)}
    return base, cand


@pytest.mark.parametrize("pairs", [2, 5, 9])
def test_bootstrap_below_ten_pairs_is_inconclusive_with_that_reason(pairs: int) -> None:
    base, cand = _outcomes([-0.4 - 0.01 * i for i in range(pairs)])
    verdict = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=7)
    assert verdict["verdict"] == "inconclusive"
    assert "at least 10 paired tasks" in verdict["reason"]
    assert verdict["pValue"] is None


def test_bootstrap_with_equal_differences_is_inconclusive() -> None:
    base, cand = _outcomes([-0.3] * 12)
    verdict = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=7)
    assert verdict["verdict"] == "inconclusive"
    assert "equal" in verdict["reason"]


# Differences around a shift: no shift gives noise (inconclusive), a shift of a few noise
# widths a clear verdict either way, so both sides of alpha are reached (see the events).
shifted_diffs = st.builds(
    lambda shift, noise: [round(shift + n, 6) for n in noise],
    st.sampled_from([-0.3, -0.1, -0.03, 0.0, 0.03, 0.1, 0.3]),
    st.lists(st.floats(-0.1, 0.1, allow_nan=False), min_size=10, max_size=30),
)


@settings(max_examples=25, deadline=None)
@given(shifted_diffs, st.integers(0, 2**31))
def test_bootstrap_p_is_count_plus_one_over_resamples_plus_one_never_zero(
    diffs: list[float], seed: int
) -> None:
    base, cand = _outcomes(diffs)
    verdict = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=seed)
    assume(verdict["verdict"] != "unchanged" and not verdict.get("reason"))
    event(f"verdict: {verdict['verdict']}")
    resamples = verdict["resamples"]
    p = verdict["pValue"]
    assert p >= 1 / (resamples + 1)
    count = p * (resamples + 1) - 1
    assert math.isclose(count, round(count), abs_tol=1e-6)
    low, high = verdict["interval"]
    significant = p < 0.05 and (low > 0 or high < 0)
    mean = sum(diffs) / len(diffs)
    expected = ("improved" if mean > 0 else "regressed") if significant else "inconclusive"
    assert verdict["verdict"] == expected


def test_bootstrap_separates_a_clear_regression_on_enough_pairs() -> None:
    base, cand = _outcomes([-0.3 - 0.01 * i for i in range(12)])
    verdict = paired_verdict(base, cand, method="paired-bootstrap", alpha=0.05, seed=7)
    assert verdict["verdict"] == "regressed"
    assert verdict["pValue"] == pytest.approx(1 / 10000)


# ------------------------------------------------- 6.2 the score_from fallback


def _scoring_setup(score_from: str | None) -> tuple[EvalTaskSpec, GraderSet]:
    graders = GraderSet.model_validate(
        {
            "spec_schema_version": "grader-set/v1",
            "id": "gs",
            "version": 1,
            "graders": [
                {**_grader("outcome", "deterministic", ["task_pass", "task_fail"]),
                 "id": "primary", "blocking": True},
                {**_grader("outcome", "deterministic", ["task_pass", "task_fail"]),
                 "id": "secondary", "blocking": True},
            ],
        }
    )  # fmt: skip
    contract: dict[str, Any] = {"goal": "g", "environment": {"network_policy": "deny"}}
    if score_from:
        contract["score_from"] = score_from
    task = EvalTaskSpec.model_validate(
        {
            "spec_schema_version": "eval-task/v1",
            "id": "task",
            "revision": 1,
            "meta": {"title": "t", "risk": "quality_signal"},
            "contract": contract,
            "grader_set": "gs",
        }
    )
    return task, graders


def _scored(score_from: str | None, scores: dict[str, float | None]) -> float:
    task, graders = _scoring_setup(score_from)
    results = []
    for gid, score in scores.items():
        result: dict[str, Any] = {"grader_id": gid, "grader_version": 1, "state": "task_pass"}
        if score is not None:
            result["score"] = score
        results.append(result)
    record = TrialRecord.model_validate(_record(results))
    return classify(record, task, graders, validity={}, trajectory=None).score


def test_score_from_without_a_score_falls_back_to_the_first_blocking_outcome_grader() -> None:
    assert _scored("secondary", {"primary": 0.7, "secondary": 0.4}) == 0.4
    assert _scored("secondary", {"primary": 0.7, "secondary": None}) == 0.7
    assert _scored(None, {"primary": 0.6, "secondary": 0.2}) == 0.6
    assert _scored("secondary", {"primary": None, "secondary": None}) == 1.0


# ------------------------------------------- 5.4 entry rules complete in themselves; absent


def _example_policy(**changes: Any) -> SuitePolicy:
    import yaml

    doc = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return SuitePolicy.model_validate(doc)


def _facts() -> EntryFacts:
    import yaml

    task = EvalTaskSpec.model_validate(
        yaml.safe_load((EXAMPLE_REGISTRY / "tasks" / "support-refund-in-order.yaml").read_text())
    )
    return EntryFacts(task, "tasks/x.yaml", DIGEST, None, None)


def _suite(kind: str) -> Any:
    from evalops.domain.specs import SuiteDeclaration

    return SuiteDeclaration.model_validate(
        {"spec_schema_version": "suite/v1", "id": f"{kind}/x", "kind": kind}
    )


def test_regression_entry_checks_exactly_what_it_lists() -> None:
    policy = _example_policy(regression_entry={"requires": ["failure_owner"]})
    checklist = evaluate_entry(_facts(), _suite("regression"), policy)
    assert [r.name for r in checklist.requirements] == ["failure_owner"]


@pytest.mark.parametrize(
    ("kind", "rule"),
    [
        ("regression", "regression_entry"),
        ("capability", "capability_entry"),
        ("estimation", "estimation_entry"),
        ("incident_corpus", "incident_corpus"),
    ],
)
def test_an_absent_entry_rule_refuses(kind: str, rule: str) -> None:
    policy = _example_policy(**{rule: None})
    checklist = evaluate_entry(_facts(), _suite(kind), policy)
    assert not checklist.accepted
    (only,) = checklist.requirements
    assert only.evidence == f"the suite policy has no {rule} rule"


@pytest.mark.parametrize(("rule", "reason"), [("removal", "obsolete"), ("replacement", "replaced")])
def test_an_absent_removal_or_replacement_rule_refuses(rule: str, reason: str) -> None:
    policy = _example_policy(**{rule: None})
    checklist = evaluate_retirement(
        task=_facts().task,
        grader_set=None,
        reason=reason,
        approved_by="risk-owner@example.com",
        replacement=None,
        policy=policy,
    )
    assert not checklist.accepted
    assert checklist.requirements[0].evidence == f"the suite policy has no {rule} rule"


# ----------------------------------------------- 8 one-class calibrations; no support


def _judge() -> Grader:
    return Grader.model_validate(
        {
            **_grader("outcome", "model", ["task_pass", "task_fail", "abstain"]),
            "blocking": True,
            "calibration_requirements": {
                "min_holdout_items": 50,
                "min_precision_lower_bound": 0.8,
                "min_recall_lower_bound": 0.8,
                "min_human_agreement": 0.6,
            },
        }
    )


def _metrics(per_class: dict[str, Any], overall: float | None, kappas: dict[str, Any]) -> Any:
    return {
        "counts": {"holdout": 60},
        "human_agreement": {"overall": overall, "per_class": kappas},
        "holdout": {"per_class": per_class},
    }


GOOD_CLASS = {"precision_ci": [0.9, 1.0], "recall_ci": [0.9, 1.0], "support": 30}


def test_undefined_agreement_never_meets_a_requirement() -> None:
    record = StoredCalibration(
        "CAL-1", "c", _metrics({"task_pass": GOOD_CLASS}, None, {"task_pass": None})
    )
    validity = calibration_validity(_judge(), "c", record)
    assert validity.state == "failing"
    assert "task_fail" not in validity.blockable_classes


def test_a_class_without_holdout_support_is_never_blockable() -> None:
    empty = {"precision_ci": [0.0, 1.0], "recall_ci": [0.0, 1.0], "support": 0}
    record = StoredCalibration(
        "CAL-1",
        "c",
        _metrics(
            {"task_pass": GOOD_CLASS, "task_fail": empty},
            0.9,
            {"task_pass": 0.9, "task_fail": 0.9},
        ),
    )
    validity = calibration_validity(_judge(), "c", record)
    assert "task_fail" not in validity.blockable_classes
    assert validity.state == "failing"  # it could block no failing class
    assert any("no holdout support" in r for r in validity.reasons)


def test_a_calibration_blocking_some_failing_class_is_valid() -> None:
    record = StoredCalibration(
        "CAL-1",
        "c",
        _metrics(
            {"task_pass": GOOD_CLASS, "task_fail": GOOD_CLASS},
            0.9,
            {"task_pass": 0.9, "task_fail": 0.9},
        ),
    )
    validity = calibration_validity(_judge(), "c", record)
    assert validity.state == "valid"
    assert validity.blockable_classes == {"task_pass", "task_fail"}


# ------------------------------------------------------------ Hypothesis: the hard promise

GUARD = "guard"
HARD_SET = GraderSet.model_validate(
    {
        "spec_schema_version": "grader-set/v1",
        "id": "gs",
        "version": 1,
        "graders": [
            {"id": "outcome", "version": 1, "layer": "outcome", "type": "deterministic",
             "produces": ["task_pass", "task_fail"], "blocking": True},
            {"id": GUARD, "version": 1, "layer": "hard_constraint", "type": "deterministic",
             "produces": ["pass", "hard_constraint_fail"], "blocking": True},
            {"id": "judge", "version": 1, "layer": "outcome", "type": "model",
             "produces": ["task_pass", "task_fail", "abstain"], "blocking": True,
             "model": {"provider": "p", "name": "n", "prompt_hash": "h", "rubric_version": 1},
             "calibration_requirements": {"min_holdout_items": 1, "min_precision_lower_bound": 0,
                                          "min_recall_lower_bound": 0, "min_human_agreement": 0}},
        ],
    }
)  # fmt: skip
CRITICAL_TASK = EvalTaskSpec.model_validate(
    {
        "spec_schema_version": "eval-task/v1",
        "id": "crit",
        "revision": 1,
        "meta": {"title": "t", "risk": "critical", "protects": ["external_effect"]},
        "contract": {
            "goal": "g",
            "environment": {"network_policy": "deny"},
            "trials": {"count": 3, "k": 2},
        },
        "grader_set": "gs",
    }
)
STATE_OF = {
    "outcome": ["task_pass", "task_fail"],
    GUARD: ["pass", "hard_constraint_fail"],
    "judge": ["task_pass", "task_fail", "abstain"],
}


@st.composite
def hostile_trials(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Trials of one pinned eval case, at least one with the guard's hard_constraint_fail,
    with any other results, reruns, runtime statuses and reviews around it."""
    n = draw(st.integers(1, 6))
    trials: list[dict[str, Any]] = []
    for i in range(n):
        graders = draw(st.permutations(list(STATE_OF)))
        results = [
            {"grader_id": g, "grader_version": 1, "state": draw(st.sampled_from(STATE_OF[g]))}
            for g in graders
            if draw(st.booleans()) or g == GUARD
        ]
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        reviews = {
            g: draw(st.sampled_from([s for s in STATE_OF[g] if s != "abstain"]))
            for g in draw(st.lists(st.sampled_from(list(STATE_OF)), unique=True))
        }
        trials.append(
            {
                "results": results,
                "parent": parent,
                "runtime": draw(st.sampled_from(["ok", "ok", "timeout", "agent_error"])),
                "reviews": reviews,
                "judge_valid": draw(st.booleans()),
            }
        )
    failing = draw(st.integers(0, n - 1))
    for r in trials[failing]["results"]:
        if r["grader_id"] == GUARD:
            r["state"] = "hard_constraint_fail"
    return trials


def _classified(spec: dict[str, Any], i: int) -> dict[str, Any]:
    record = TrialRecord.model_validate(
        _record(
            spec["results"],
            trial_id=f"t{i}",
            runtime={"status": spec["runtime"]},
            rerun={"parent_trial_id": f"t{spec['parent']}"} if spec["parent"] is not None else None,
        )
    )
    validity = {
        "judge": Validity("valid", blockable_classes=frozenset({"task_pass", "task_fail"}))
        if spec["judge_valid"]
        else Validity("failing")
    }
    reviews = {
        g: GraderResult(grader_id=g, grader_version=1, state=s)  # type: ignore[arg-type]
        for g, s in spec["reviews"].items()
    }
    c = classify(
        record, CRITICAL_TASK, HARD_SET, validity=validity, trajectory=None, reviews=reviews
    )
    return {
        "trial_id": f"t{i}",
        "parent_trial_id": record.rerun.parent_trial_id if record.rerun else None,
        "classification": c.primary,
        "score": c.score,
        "gating_score": c.gating_score,
        "trajectory": None,
        "efficiency": {},
        "fixture_misses": 0,
    }


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=300, deadline=None)
@given(hostile_trials(), st.sampled_from(["critical", "noncritical_regression"]))
def test_a_hard_constraint_failure_anywhere_in_the_eval_case_blocks(
    trials: list[dict[str, Any]], risk: str
) -> None:
    inputs = {
        "gate_id": "GATE-1",
        "build": "b",
        "suite": {"id": "s", "kind": "regression", "suite_digest": DIGEST},
        "execution_digest": DIGEST,
        "policy": copy.deepcopy(GATE_POLICY),
        "policy_digest": DIGEST,
        "evaluated_at": "2026-12-01T00:00:00Z",
        "tasks": [
            {
                "task_id": "crit",
                "risk": risk,
                "protects": [],
                "task_digest": DIGEST,
                "grader_set_digest": DIGEST,
                "plan": {"count": 3, "k": 2, "passRule": "all", "passScore": 1.0},
                "trials": [_classified(t, i) for i, t in enumerate(trials)],
                "ignoredTrials": {},
            }
        ],
        "waivers": [
            {
                "waiver_id": "WVR-1",
                "task_id": "crit",
                "suite_id": "s",
                "build": "b",
                "states": ["hard_constraint_fail", "task_fail"],
                "granted_at": "2026-11-01T00:00:00Z",
                "expires_at": "2026-12-30T00:00:00Z",
            }
        ],
        "baseline": None,
    }
    GatePolicy.model_validate(inputs["policy"])
    decision = evaluate(inputs)
    assert decision["decision"] == "block", decision["reasons"]
    assert decision["tasks"][0]["state"] == "hard_constraint_fail"
    assert decision["tasks"][0]["waiver_id"] is None
