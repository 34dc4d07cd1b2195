"""The pure gate evaluator `evalops.domain.gate.evaluate(inputs)` (docs/gate.md).

`inputs` has the shape `evalops.services.gate.check.build_inputs` produces (plain JSON): the
policy document, the suite, the build, `evaluated_at`, one entry per member task with its
plan and re-derived trials, the waiver facts of the build, refused waivers and an optional
baseline block. No database, no clock: everything here is a function of its arguments.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.canonical import canonical_json, digest
from tests.decide import evaluate
from tests.helpers import EXAMPLE_REGISTRY

POLICY: dict[str, Any] = yaml.safe_load(
    (EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text(encoding="utf-8")
)
AT = "2026-12-01T00:00:00.000000Z"
BUILD = "build-b"
SUITE = "regression/core"
RISKS = ("critical", "noncritical_regression", "quality_signal")
NONCRITICAL = ("noncritical_regression", "quality_signal")
HARD = "hard_constraint_fail"
AMB = "ambiguous_external_effect"
EVIDENCE_BLOCKED = (
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
)
FAILING = ("agent_error", "runtime_error", "task_fail")
CLASSES = (HARD, *EVIDENCE_BLOCKED, *FAILING, "task_pass")
ZERO_USAGE = {"toolCallCount": 0, "modelCallCount": 0, "inputTokens": 0, "outputTokens": 0}


def fake_digest(label: str) -> str:
    return digest({"label": label})


def trial(
    cls: str,
    trial_id: str,
    *,
    parent: str | None = None,
    score: float | None = None,
) -> dict[str, Any]:
    value = (1.0 if cls == "task_pass" else 0.0) if score is None else score
    return {
        "trial_id": trial_id,
        "parent_trial_id": parent,
        "classification": cls,
        "score": value,
        "gating_score": value,
        "trajectory": None,
        "efficiency": dict(ZERO_USAGE),
        "fixture_misses": 0,
    }


def task(
    task_id: str,
    risk: str,
    classes: Sequence[str] = ("task_pass",),
    *,
    count: int = 1,
    k: int | None = None,
    pass_rule: str = "all",
    pass_score: float = 1.0,
    trials: list[dict[str, Any]] | None = None,
    scores: Sequence[float] | None = None,
) -> dict[str, Any]:
    if trials is None:
        trials = [
            trial(c, f"{task_id}.{i}", score=None if scores is None else scores[i])
            for i, c in enumerate(classes)
        ]
    return {
        "task_id": task_id,
        "risk": risk,
        "protects": ["external_effect"] if risk == "critical" else [],
        "task_digest": fake_digest(f"task:{task_id}"),
        "grader_set_digest": fake_digest("graders"),
        "plan": {"count": count, "k": k or count, "passRule": pass_rule, "passScore": pass_score},
        "trials": trials,
        "ignoredTrials": {},
    }


def waiver(
    waiver_id: str,
    task_id: str,
    states: Sequence[str] = ("task_fail",),
    *,
    build: str = BUILD,
    suite: str = SUITE,
    granted_at: str = "2026-11-25T00:00:00.000000Z",
    expires_at: str = "2026-12-10T00:00:00.000000Z",
    revoked_at: str | None = None,
) -> dict[str, Any]:
    return {
        "waiver_id": waiver_id,
        "task_id": task_id,
        "suite_id": suite,
        "build": build,
        "states": list(states),
        "granted_at": granted_at,
        "expires_at": expires_at,
        "revoked_at": revoked_at,
    }


def baseline(
    tasks: list[dict[str, Any]] | None,
    *,
    build: str | None = "build-a",
    required: bool = False,
    method: str = "mcnemar",
    alpha: float = 0.05,
    seed: int = 7,
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "build": build,
        "required": required,
        "method": method,
        "alpha": alpha,
        "seed": seed,
    }
    if build is not None:
        block["execution_digest"] = fake_digest(f"execution:{build}")
        block["tasks"] = tasks or []
    return block


def make_inputs(
    tasks: list[dict[str, Any]],
    *,
    waivers: list[dict[str, Any]] | None = None,
    at: str = AT,
    build: str = BUILD,
    base: dict[str, Any] | None = None,
    refused: list[dict[str, Any]] | None = None,
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc = policy or POLICY
    return {
        "gate_id": "GATE-1",
        "build": build,
        "suite": {"id": SUITE, "kind": "regression", "suite_digest": fake_digest("suite")},
        "execution_digest": fake_digest(f"execution:{build}"),
        "policy": copy.deepcopy(doc),
        "policy_digest": digest(doc),
        "evaluated_at": at,
        "tasks": tasks,
        "waivers": waivers or [],
        "refused_waivers": refused or [],
        "baseline": base,
    }


def row(result: dict[str, Any], task_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [t for t in result["tasks"] if t["task_id"] == task_id]
    assert len(found) == 1, result["tasks"]
    return found[0]


def names(result: dict[str, Any], task_id: str) -> bool:
    return any(r.startswith(f"{task_id} ") or f" {task_id} " in r for r in result["reasons"])


def expected_effect(state: str, risk: str) -> str:
    """Section 9 step 2 without waivers."""
    if state == HARD:
        return "block"
    if state in EVIDENCE_BLOCKED:
        return "hold"
    if state in FAILING:
        return "block" if risk == "critical" else "hold"
    return "pass"


# ----------------------------------------------------------------- the section 9 mapping


@pytest.mark.parametrize("risk", RISKS)
@pytest.mark.parametrize("cls", CLASSES)
def test_mapping_of_state_and_risk_to_effect(cls: str, risk: str) -> None:
    result = evaluate(make_inputs([task("t1", risk, [cls])]))
    effect = expected_effect(cls, risk)
    assert row(result, "t1")["state"] == cls
    assert row(result, "t1")["effect"] == effect
    assert result["decision"] == effect
    if effect == "pass":
        assert result["reasons"] == []
    else:
        assert names(result, "t1"), result["reasons"]


@pytest.mark.parametrize("risk", NONCRITICAL)
@pytest.mark.parametrize("cls", FAILING)
def test_failing_noncritical_task_with_a_valid_waiver_passes_waived(cls: str, risk: str) -> None:
    result = evaluate(
        make_inputs([task("t1", risk, [cls])], waivers=[waiver("WVR-1", "t1", [cls])])
    )
    assert result["decision"] == "pass"
    assert row(result, "t1")["effect"] == "pass"
    assert row(result, "t1")["state"] == cls
    assert row(result, "t1")["waiver_id"] == "WVR-1"
    assert result["waivers"]["applied"] == ["WVR-1"]
    assert result["reasons"] == []


@pytest.mark.parametrize("cls", FAILING)
def test_a_waiver_fact_never_passes_a_critical_failure(cls: str) -> None:
    result = evaluate(
        make_inputs([task("t1", "critical", [cls])], waivers=[waiver("WVR-1", "t1", [cls])])
    )
    assert result["decision"] == "block"
    assert row(result, "t1")["waiver_id"] is None
    assert result["waivers"]["applied"] == []


@pytest.mark.parametrize("risk", NONCRITICAL)
@pytest.mark.parametrize("cls", [HARD, *EVIDENCE_BLOCKED])
def test_a_waiver_fact_never_covers_a_forbidden_state(cls: str, risk: str) -> None:
    result = evaluate(
        make_inputs([task("t1", risk, [cls])], waivers=[waiver("WVR-1", "t1", [cls])])
    )
    assert result["decision"] == expected_effect(cls, risk)
    assert row(result, "t1")["waiver_id"] is None
    assert result["waivers"]["applied"] == []


# --------------------------------------------------------------------- task state rules


@pytest.mark.parametrize(
    ("classes", "state"),
    [
        (["task_pass", "task_pass", HARD], HARD),
        (["ambiguous_external_effect", HARD, "task_pass"], HARD),
        (["task_pass", "infrastructure_invalid", AMB], AMB),
        (["grader_invalid", "missing_required_evidence"], "missing_required_evidence"),
        (["infrastructure_invalid", "grader_invalid", "task_fail"], "grader_invalid"),
        (["task_fail", "infrastructure_invalid", "agent_error"], "infrastructure_invalid"),
        (["task_fail", "agent_error", "runtime_error"], "agent_error"),
        (["task_pass", "task_fail", "runtime_error"], "runtime_error"),
        (["task_pass", "task_fail", "task_pass"], "task_fail"),
        (["task_pass", "task_pass", "task_pass"], "task_pass"),
    ],
)  # fmt: skip
def test_task_state_follows_the_precedence(classes: list[str], state: str) -> None:
    result = evaluate(make_inputs([task("t1", "noncritical_regression", classes, count=3)]))
    assert row(result, "t1")["state"] == state


@pytest.mark.parametrize("position", [0, 4, 9])
@pytest.mark.parametrize(
    "others", ["task_pass", "task_fail", "agent_error", "infrastructure_invalid", "grader_invalid"]
)
@pytest.mark.parametrize("rule", ["all", "any", "mean"])
def test_one_hard_failure_in_ten_trials_blocks_whatever_the_other_nine_say(
    others: str, position: int, rule: str
) -> None:
    classes = [others] * 10
    classes[position] = HARD
    for risk in RISKS:
        t = task("t1", risk, classes, count=10, k=3, pass_rule=rule, pass_score=0.1)
        result = evaluate(make_inputs([t]))
        assert result["decision"] == "block"
        assert row(result, "t1")["state"] == HARD
        assert row(result, "t1")["n"] == 10


def test_a_rerun_never_hides_a_hard_failure() -> None:
    trials = [
        trial("task_pass", "t1.0"),
        trial(HARD, "t1.1"),
        trial("task_pass", "t1.1-rerun", parent="t1.1"),
    ]
    result = evaluate(make_inputs([task("t1", "quality_signal", count=2, trials=trials)]))
    assert result["decision"] == "block"
    assert row(result, "t1")["state"] == HARD


@pytest.mark.parametrize("first", ["task_fail", "grader_invalid", "task_pass"])
@pytest.mark.parametrize("risk", NONCRITICAL)
def test_a_hard_failure_in_a_rerun_that_does_not_count_still_blocks(first: str, risk: str) -> None:
    """The hard failure is a rerun not permitted to stand in: it is not an effective trial,
    and the task is still a hard failure (any trial, effective or not)."""
    trials = [
        trial(first, "t1.0"),
        trial(HARD, "t1.0-rerun", parent="t1.0"),
    ]
    result = evaluate(make_inputs([task("t1", risk, trials=trials)]))
    assert row(result, "t1")["rerunsNotPermitted"] == ["t1.0-rerun"]
    assert row(result, "t1")["n"] == 1
    assert row(result, "t1")["state"] == HARD
    assert row(result, "t1")["effect"] == "block"
    assert result["decision"] == "block"


def test_a_hard_failure_in_a_second_rerun_still_blocks_behind_a_passing_stand_in() -> None:
    """A timed-out trial rerun twice: the first rerun passes and stands in (the task would
    pass on its effective trials alone); the second, a hard failure, is excluded and blocks."""
    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial("task_pass", "t1.0-rerun", parent="t1.0"),
        trial(HARD, "t1.0-rerun-2", parent="t1.0"),
    ]
    result = evaluate(make_inputs([task("t1", "quality_signal", trials=trials)]))
    assert row(result, "t1")["rerunsNotPermitted"] == ["t1.0-rerun-2"]
    assert row(result, "t1")["passedCount"] == 1  # the passing rerun stood in
    assert row(result, "t1")["state"] == HARD
    assert result["decision"] == "block"


def test_a_hard_failure_in_a_permitted_rerun_blocks() -> None:
    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial(HARD, "t1.0-rerun", parent="t1.0"),
    ]
    result = evaluate(make_inputs([task("t1", "noncritical_regression", trials=trials)]))
    assert result["decision"] == "block"
    assert row(result, "t1")["state"] == HARD


def test_a_permitted_rerun_of_an_invalid_run_stands_in_for_it() -> None:
    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial("task_pass", "t1.0-rerun", parent="t1.0"),
    ]
    result = evaluate(make_inputs([task("t1", "critical", trials=trials)]))
    assert result["decision"] == "pass"
    assert row(result, "t1")["state"] == "task_pass"
    assert row(result, "t1")["n"] == 1
    assert row(result, "t1")["rerunCount"] == 1


@pytest.mark.parametrize("risk", RISKS)
def test_a_task_with_no_trials_holds(risk: str) -> None:
    result = evaluate(make_inputs([task("t1", risk, [], count=1)]))
    assert result["decision"] == "hold"
    assert row(result, "t1")["state"] == "missing_required_evidence"
    assert row(result, "t1")["effect"] == "hold"
    assert row(result, "t1")["n"] == 0
    assert names(result, "t1")


@pytest.mark.parametrize("rule", ["all", "any", "mean"])
@pytest.mark.parametrize("n", [1, 5, 9])
def test_fewer_trials_than_trials_count_holds(n: int, rule: str) -> None:
    t = task("t1", "critical", ["task_pass"] * n, count=10, k=1, pass_rule=rule, pass_score=0.5)
    result = evaluate(make_inputs([t]))
    assert result["decision"] == "hold"
    assert row(result, "t1")["state"] == "missing_required_evidence"
    assert row(result, "t1")["n"] == n


def test_fewer_trials_than_count_cannot_be_waived() -> None:
    t = task("t1", "noncritical_regression", ["task_fail"] * 2, count=3)
    w = waiver("WVR-1", "t1", ["task_fail", "agent_error", "runtime_error"])
    result = evaluate(make_inputs([t], waivers=[w]))
    assert result["decision"] == "hold"
    assert row(result, "t1")["state"] == "missing_required_evidence"
    assert result["waivers"]["applied"] == []


@pytest.mark.parametrize(
    ("rule", "classes", "scores", "pass_score", "state"),
    [
        ("all", ["task_pass", "task_pass", "task_fail"], None, 1.0, "task_fail"),
        ("all", ["task_pass"] * 3, None, 1.0, "task_pass"),
        ("any", ["task_fail", "task_fail", "task_pass"], None, 1.0, "task_pass"),
        ("any", ["task_fail", "agent_error", "task_fail"], None, 1.0, "agent_error"),
        ("mean", ["task_pass", "task_pass", "task_fail"], [1.0, 1.0, 0.0], 0.6, "task_pass"),
        ("mean", ["task_pass", "task_pass", "task_fail"], [1.0, 1.0, 0.0], 0.7, "task_fail"),
        ("mean", ["task_pass"] * 3, [0.5, 0.5, 0.5], 0.8, "task_fail"),
        # A mean that reaches passScore exactly passes (docs/formats.md: "reaches"):
        # (0.5 + 1.0 + 0.75) / 3 is 0.75 exactly in floats.
        ("mean", ["task_fail", "task_pass", "task_pass"], [0.5, 1.0, 0.75], 0.75, "task_pass"),
    ],
)
def test_pass_rule(
    rule: str, classes: list[str], scores: list[float] | None, pass_score: float, state: str
) -> None:
    t = task(
        "t1", "critical", classes, count=3, pass_rule=rule, pass_score=pass_score, scores=scores
    )
    result = evaluate(make_inputs([t]))
    assert row(result, "t1")["state"] == state
    assert result["decision"] == ("pass" if state == "task_pass" else "block")


def test_task_statistics() -> None:
    t = task("t1", "critical", ["task_pass"] * 3 + ["task_fail"] * 2, count=5, k=3, pass_rule="any")
    r = row(evaluate(make_inputs([t])), "t1")
    assert (r["n"], r["passedCount"]) == (5, 3)
    assert r["meanScore"] == pytest.approx(0.6)
    assert r["passAtK"] == pytest.approx(1.0)  # C(2,3) = 0
    assert r["passHatK"] == pytest.approx(1 / 10)  # C(3,3)/C(5,3)


# --------------------------------------------------------------------------- decisions


def test_block_wins_over_hold_and_hold_over_pass() -> None:
    tasks = [
        task("a", "critical", ["task_pass"]),
        task("b", "noncritical_regression", ["task_fail"]),
        task("c", "critical", ["task_fail"]),
    ]
    assert evaluate(make_inputs(tasks))["decision"] == "block"
    assert evaluate(make_inputs(tasks[:2]))["decision"] == "hold"
    assert evaluate(make_inputs(tasks[:1]))["decision"] == "pass"
    result = evaluate(make_inputs(tasks))
    assert names(result, "b") and names(result, "c") and not names(result, "a")


def test_an_empty_suite_is_not_a_pass() -> None:
    """ "No confirmed failures" is never enough."""
    result = evaluate(make_inputs([]))
    assert result["decision"] == "hold"
    assert result["reasons"]


def test_tasks_are_reported_in_task_id_order() -> None:
    tasks = [task(t, "critical") for t in ("zeta", "alpha", "mid")]
    assert [t["task_id"] for t in evaluate(make_inputs(tasks))["tasks"]] == ["alpha", "mid", "zeta"]


def test_identity_fields_are_passed_through() -> None:
    inputs = make_inputs([task("t1", "critical")])
    result = evaluate(inputs)
    assert result["gate_id"] == "GATE-1"
    assert result["build"] == BUILD
    assert result["suite"] == SUITE
    assert result["suite_digest"] == inputs["suite"]["suite_digest"]
    assert result["policy_digest"] == inputs["policy_digest"]
    assert result["execution_digest"] == inputs["execution_digest"]
    assert result["evaluated_at"] == AT
    assert result["regression"] is None
    assert set(result["waivers"]) >= {"applied", "expired", "unused", "refused"}


def test_evaluate_is_deterministic_and_does_not_change_its_inputs() -> None:
    tasks = [
        task("a", "critical", ["task_pass", "task_fail"], count=2),
        task("b", "quality_signal", ["task_fail"]),
        task("c", "noncritical_regression", ["agent_error"]),
    ]
    inputs = make_inputs(
        tasks,
        waivers=[waiver("WVR-1", "b"), waiver("WVR-2", "c", ["agent_error"], expires_at=AT)],
        base=baseline([task("a", "critical"), task("b", "quality_signal")]),
        refused=[{"seq": 3, "task_id": "a", "states": ["task_fail"], "rules": ["critical_task"]}],
    )
    frozen = copy.deepcopy(inputs)
    first = evaluate(inputs)
    assert inputs == frozen
    again = evaluate(json.loads(json.dumps(inputs)))
    assert canonical_json(first) == canonical_json(again)
    assert json.loads(json.dumps(first)) == first  # plain JSON


# --------------------------------------------------------------------------- waivers


def test_waiver_accounting_lists_applied_expired_unused_and_refused() -> None:
    tasks = [
        task("a", "noncritical_regression", ["task_fail"]),
        task("b", "noncritical_regression", ["task_pass"]),
        task("c", "quality_signal", ["agent_error"]),
    ]
    refused = [{"seq": 9, "task_id": "a", "states": [HARD], "rules": ["forbidden_state"]}]
    waivers = [
        waiver("WVR-1", "a"),  # applied
        waiver("WVR-2", "b"),  # unused: b passes
        waiver("WVR-3", "c", ["task_fail"]),  # unused: does not cover agent_error
        waiver("WVR-4", "c", ["agent_error"], expires_at=AT),  # expired at AT
        waiver("WVR-5", "a", build="build-other"),  # another build: not considered
    ]
    result = evaluate(make_inputs(tasks, waivers=waivers, refused=refused))
    assert result["waivers"]["applied"] == ["WVR-1"]
    assert sorted(result["waivers"]["unused"]) == ["WVR-2", "WVR-3"]
    assert result["waivers"]["expired"] == ["WVR-4"]
    assert result["waivers"]["refused"] == refused
    listed = [w for key in ("applied", "expired", "unused") for w in result["waivers"][key]]
    assert "WVR-5" not in listed
    assert result["decision"] == "hold"  # c is not covered
    assert row(result, "c")["effect"] == "hold"


@pytest.mark.parametrize(
    ("at", "applies"),
    [
        ("2026-11-24T23:59:59.999999Z", False),  # before granted_at
        ("2026-11-25T00:00:00.000000Z", True),  # at granted_at
        ("2026-12-09T23:59:59.999999Z", True),  # expires_at minus 1 microsecond
        ("2026-12-10T00:00:00.000000Z", False),  # at expires_at
        ("2026-12-10T09:00:00.000000+09:00", False),  # the same instant, another offset
        ("2026-12-10T08:59:59.999999+09:00", True),
        ("2026-12-09T15:59:59.999999-08:00", True),
        ("2026-12-09T16:00:00.000000-08:00", False),
    ],
)
def test_a_waiver_applies_from_granted_at_until_before_expires_at(at: str, applies: bool) -> None:
    result = evaluate(
        make_inputs(
            [task("t1", "quality_signal", ["task_fail"])], waivers=[waiver("WVR-1", "t1")], at=at
        )
    )
    assert (result["decision"] == "pass") is applies
    assert (result["waivers"]["applied"] == ["WVR-1"]) is applies
    assert row(result, "t1")["waiver_id"] == ("WVR-1" if applies else None)
    if not applies:
        listed = [w for key, ids in result["waivers"].items() if key != "refused" for w in ids]
        assert "WVR-1" in listed  # never dropped silently


@pytest.mark.parametrize(
    ("field", "value"),
    [("build", "build-a"), ("task_id", "t2"), ("suite_id", "regression/other")],
)
def test_a_waiver_applies_only_to_its_build_task_and_suite(field: str, value: str) -> None:
    w = waiver("WVR-1", "t1")
    w[field] = value
    tasks = [task("t1", "noncritical_regression", ["task_fail"]), task("t2", "critical")]
    result = evaluate(make_inputs(tasks, waivers=[w]))
    assert result["decision"] == "hold"
    assert result["waivers"]["applied"] == []


# ------------------------------------------------------------------------- the baseline


def _paired(candidate_classes: Sequence[str], baseline_classes: Sequence[str]) -> tuple[Any, Any]:
    cand = [task(f"t{i}", "quality_signal", [c]) for i, c in enumerate(candidate_classes)]
    base = [task(f"t{i}", "quality_signal", [c]) for i, c in enumerate(baseline_classes)]
    return cand, base


def test_a_regressed_verdict_blocks() -> None:
    """Six tasks that passed on the baseline fail now (each a hold): the verdict blocks."""
    cand, base = _paired(["task_fail"] * 6, ["task_pass"] * 6)
    result = evaluate(make_inputs(cand, base=baseline(base)))
    assert result["regression"]["verdict"] == "regressed"
    assert result["regression"]["pairedTaskCount"] == 6
    assert result["regression"]["baseline"] == "build-a"
    assert result["decision"] == "block"
    assert any("regress" in r for r in result["reasons"])


def test_a_regressed_verdict_blocks_even_when_every_task_passes() -> None:
    cand = [task(f"t{i}", "critical", ["task_pass"], scores=[0.6]) for i in range(6)]
    base = [task(f"t{i}", "critical", ["task_pass"]) for i in range(6)]
    result = evaluate(make_inputs(cand, base=baseline(base, method="sign-test")))
    assert {t["effect"] for t in result["tasks"]} == {"pass"}
    assert result["regression"]["verdict"] == "regressed"
    assert result["decision"] == "block"


@pytest.mark.parametrize("method", ["mcnemar", "sign-test"])
def test_a_p_value_equal_to_alpha_is_not_significant(method: str) -> None:
    """Five tasks that all passed on the baseline fail now: the exact two-sided p-value is
    2 * (1/2)**5 = 0.0625. Significance is p < alpha, so at alpha = 0.0625 the verdict is
    inconclusive and the gate is not blocked by it; any alpha above separates them."""
    cand, base = _paired(["task_fail"] * 5, ["task_pass"] * 5)
    waivers = [waiver(f"WVR-{i}", f"t{i}") for i in range(5)]
    at_p = evaluate(make_inputs(cand, base=baseline(base, method=method, alpha=0.0625),
                                waivers=waivers))  # fmt: skip
    assert at_p["regression"]["pValue"] == 0.0625
    assert at_p["regression"]["verdict"] == "inconclusive"
    assert at_p["decision"] == "pass"
    above = evaluate(make_inputs(cand, base=baseline(base, method=method, alpha=0.0626),
                                 waivers=waivers))  # fmt: skip
    assert above["regression"]["verdict"] == "regressed"
    assert above["decision"] == "block"


def test_an_inconclusive_verdict_does_not_block() -> None:
    cand, base = _paired(["task_fail", "task_pass", "task_pass"], ["task_pass"] * 3)
    waivers = [waiver("WVR-1", "t0")]
    result = evaluate(make_inputs(cand, base=baseline(base), waivers=waivers))
    assert result["regression"]["verdict"] == "inconclusive"
    assert result["decision"] == "pass"


def test_an_improved_verdict_does_not_block() -> None:
    cand, base = _paired(["task_pass"] * 6, ["task_fail"] * 6)
    result = evaluate(make_inputs(cand, base=baseline(base)))
    assert result["regression"]["verdict"] == "improved"
    assert result["decision"] == "pass"


def test_a_required_baseline_with_no_trials_holds() -> None:
    cand = [task("t1", "critical")]
    base = [task("t1", "critical", [])]
    result = evaluate(make_inputs(cand, base=baseline(base, required=True)))
    assert result["decision"] == "hold"
    assert result["regression"]["pairedTaskCount"] == 0
    assert any("baseline" in r for r in result["reasons"])


def test_a_required_baseline_that_was_not_found_holds() -> None:
    result = evaluate(
        make_inputs([task("t1", "critical")], base=baseline(None, build=None, required=True))
    )
    assert result["decision"] == "hold"
    assert any("baseline" in r for r in result["reasons"])


def test_an_optional_baseline_with_no_trials_does_not_hold() -> None:
    base = [task("t1", "critical", [])]
    result = evaluate(make_inputs([task("t1", "critical")], base=baseline(base)))
    assert result["decision"] == "pass"
    assert result["regression"]["verdict"] == "inconclusive"
    assert result["regression"]["pairedTaskCount"] == 0


def test_only_tasks_with_trials_in_both_builds_are_paired() -> None:
    cand = [task(f"t{i}", "quality_signal", ["task_pass"]) for i in range(5)]
    cand.append(task("t5", "quality_signal", []))  # no trials for the candidate
    base = [task(f"t{i}", "quality_signal", ["task_pass"]) for i in range(2, 8)]
    result = evaluate(make_inputs(cand, base=baseline(base)))
    assert result["regression"]["pairedTaskCount"] == 3  # t2, t3, t4


# ------------------------------------------------------------------ generated properties

TASK_IDS = ("t1", "t2", "t3")
TIMES = (
    "2026-11-20T00:00:00.000000Z",
    "2026-11-30T23:59:59.999999Z",
    "2026-12-01T00:00:00.000000Z",
    "2026-12-01T00:00:00.000001Z",
    "2026-12-05T00:00:00.000000Z",
)


@st.composite
def task_inputs(draw: st.DrawFn, task_id: str) -> dict[str, Any]:
    classes = draw(st.lists(st.sampled_from(CLASSES), min_size=0, max_size=4))
    count = draw(st.integers(min_value=1, max_value=4))
    return task(
        task_id,
        draw(st.sampled_from(RISKS)),
        classes,
        count=count,
        k=draw(st.integers(min_value=1, max_value=count)),
        pass_rule=draw(st.sampled_from(["all", "any", "mean"])),
        pass_score=draw(st.sampled_from([0.0, 0.5, 1.0])),
    )


@st.composite
def waiver_facts(draw: st.DrawFn, build: str, prefix: str) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(min_value=0, max_value=4))):
        granted, expires = sorted(draw(st.lists(st.sampled_from(TIMES), min_size=2, max_size=2)))
        out.append(
            waiver(
                f"{prefix}-{i}",
                draw(st.sampled_from(TASK_IDS)),
                draw(st.lists(st.sampled_from(CLASSES[:-1]), min_size=1, max_size=3, unique=True)),
                build=build,
                granted_at=granted,
                expires_at=expires,
                revoked_at=draw(st.none() | st.sampled_from(TIMES)),
            )
        )
    return out


@st.composite
def gate_inputs(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.sampled_from(TASK_IDS), min_size=1, max_size=3, unique=True))
    tasks = [draw(task_inputs(t)) for t in ids]
    return make_inputs(
        tasks, waivers=draw(waiver_facts(BUILD, "WVR-B")), at=draw(st.sampled_from(TIMES))
    )


@settings(max_examples=150, deadline=None)
@given(gate_inputs())
def test_decision_is_the_worst_task_effect_and_effects_follow_the_mapping(
    inputs: dict[str, Any],
) -> None:
    result = evaluate(inputs)
    effects = {t["task_id"]: t["effect"] for t in result["tasks"]}
    worst = (
        "block" if "block" in effects.values() else "hold" if "hold" in effects.values() else "pass"
    )
    assert result["decision"] == worst
    for t in result["tasks"]:
        if t["waiver_id"] is None:
            assert t["effect"] == expected_effect(t["state"], t["risk"])
        else:
            assert t["risk"] != "critical"
            assert t["state"] in FAILING
            assert t["effect"] == "pass"
            assert t["waiver_id"] in result["waivers"]["applied"]
        if t["n"] == 0:
            assert t["state"] == "missing_required_evidence"
    assert canonical_json(evaluate(inputs)) == canonical_json(result)


# ------------------------------------------------------------ what a decision says, in words
#
# A stored decision keeps its reasons and every task row, and `verify` replays it byte for
# byte (docs/verify.md): each line below is part of the decision. The wording is the one
# docs/tutorial.md prints for `gate check` ("- TASK (RISK): STATE -> EFFECT; WHY").


def test_each_task_state_explains_itself_in_the_reasons() -> None:
    tasks = [
        task("a-hard", "critical", ["task_pass", HARD, HARD], count=3),
        task("b-amb", "critical", ["task_pass", AMB], count=2),
        task("c-fail", "noncritical_regression", ["task_pass", "task_fail", "task_fail"], count=3),
        task("d-none", "critical", []),
        task("e-short", "quality_signal", ["task_pass"], count=3),
        task("f-pass", "critical", ["task_pass", "task_pass"], count=2, pass_rule="any"),
        task("g-crash", "critical", ["task_fail", "agent_error", "runtime_error"], count=3),
    ]
    result = evaluate(make_inputs(tasks))
    assert result["reasons"] == [
        "a-hard (critical): hard_constraint_fail -> block; hard constraint failed in a-hard.1",
        "g-crash (critical): agent_error -> block; 3/3 trials failed (passRule all)",
        "b-amb (critical): ambiguous_external_effect -> hold; ambiguous_external_effect in b-amb.1",
        "c-fail (noncritical_regression): task_fail -> hold; 2/3 trials failed (passRule all)",
        "d-none (critical): missing_required_evidence -> hold; no trials for this build",
        "e-short (quality_signal): missing_required_evidence -> hold; "
        "1 effective trials, trials.count is 3",
    ]
    assert [t["reason"] for t in result["tasks"]] == [
        "hard constraint failed in a-hard.1",
        "ambiguous_external_effect in b-amb.1",
        "2/3 trials failed (passRule all)",
        "no trials for this build",
        "1 effective trials, trials.count is 3",
        "2/2 passed (any)",
        "3/3 trials failed (passRule all)",
    ]
    assert result["decision"] == "block"


def test_the_highest_evidence_blocked_class_names_its_first_trial() -> None:
    classes = ["task_pass", "infrastructure_invalid", "grader_invalid", "grader_invalid"]
    result = evaluate(make_inputs([task("t1", "critical", classes, count=4)]))
    assert row(result, "t1")["state"] == "grader_invalid"
    assert row(result, "t1")["reason"] == "grader_invalid in t1.2"


def test_an_empty_suite_says_nothing_guards_the_release() -> None:
    result = evaluate(make_inputs([]))
    assert result["reasons"] == [f"suite {SUITE} has no members: nothing guards this release"]
    assert result["tasks"] == []
    assert result["ignoredTrials"] == {}


def test_a_waived_task_is_no_reason_and_names_its_waiver() -> None:
    """A waived task passes (docs/gate.md: "pass, waived"): the row names the waiver with the
    lowest id among those that cover it, and no reason is given for it."""
    result = evaluate(
        make_inputs(
            [task("t1", "quality_signal", ["task_fail"])],
            waivers=[waiver("WVR-2", "t1"), waiver("WVR-1", "t1")],
        )
    )
    assert result["decision"] == "pass"
    assert result["reasons"] == []
    assert row(result, "t1")["waiver_id"] == "WVR-1"
    assert row(result, "t1")["effect"] == "pass"
    assert result["waivers"]["applied"] == ["WVR-1"]
    assert result["waivers"]["unused"] == ["WVR-2"]


def test_a_waiver_must_name_every_failing_class_of_the_task() -> None:
    """docs/gate.md: an `agent_error` waiver does not pass a task whose trials also failed
    as `task_fail`; one naming both does."""
    t = task("t1", "quality_signal", ["agent_error", "task_fail"], count=2)
    one = evaluate(make_inputs([t], waivers=[waiver("WVR-1", "t1", ["agent_error"])]))
    assert row(one, "t1")["state"] == "agent_error"
    assert (one["decision"], row(one, "t1")["waiver_id"]) == ("hold", None)
    both = evaluate(make_inputs([t], waivers=[waiver("WVR-1", "t1", ["agent_error", "task_fail"])]))
    assert (both["decision"], row(both, "t1")["waiver_id"]) == ("pass", "WVR-1")
    # The state itself is a failing class to name, even when the passRule alone failed it.
    mean_fail = task("t2", "quality_signal", ["task_pass"], pass_rule="mean", scores=[0.4])
    named = evaluate(make_inputs([mean_fail], waivers=[waiver("WVR-2", "t2", ["task_fail"])]))
    assert row(named, "t2")["state"] == "task_fail"
    assert row(named, "t2")["waiver_id"] == "WVR-2"


def test_a_waiver_the_policy_forbids_is_refused_with_its_rules_and_why() -> None:
    """docs/gate.md: a waiver is judged again at every decision against the policy it
    applies; one it forbids is never applied and is listed under `waivers.refused` with the
    rules it breaks and why ("refused by the policy in force (release-gate): ..."), after the
    grant requests refused earlier. Each waiver is in exactly one list."""
    tasks = [
        task("a", "noncritical_regression", ["task_fail"]),
        task("b", "quality_signal", ["task_fail"]),
    ]
    request = {"seq": 4, "task_id": "a", "states": ["task_fail"], "rules": ["owner"]}
    waivers = [
        # Forbidden twice over: a forbidden state, and 39 days of validity (max 30).
        waiver("WVR-1", "a", [HARD, "task_fail"], granted_at="2026-11-01T00:00:00.000000Z"),
        waiver("WVR-2", "b", revoked_at="2026-11-30T00:00:00.000000Z"),
        waiver("WVR-3", "b"),
        waiver("WVR-4", "not-a-member"),  # outside the suite: nothing to judge, unused
        waiver("WVR-5", "b", granted_at="2026-12-02T00:00:00.000000Z"),  # not yet valid
    ]
    result = evaluate(make_inputs(tasks, waivers=waivers, refused=[request]))
    assert result["waivers"] == {
        "applied": ["WVR-3"],
        "expired": [],
        "unused": ["WVR-4", "WVR-5"],
        "revoked": ["WVR-2"],
        "refused": [
            request,
            {
                "waiver_id": "WVR-1",
                "task_id": "a",
                "states": [HARD, "task_fail"],
                "rules": ["forbidden_state", "expires_at_too_far"],
                "reason": "refused by the policy in force (release-gate): "
                "hard_constraint_fail is in waivers.forbidden_states; "
                "valid for 39 days, more than max_duration_days (30)",
            },
        ],
    }
    assert row(result, "a")["waiver_id"] is None
    assert row(result, "a")["effect"] == "hold"
    assert row(result, "b")["waiver_id"] == "WVR-3"
    assert result["reasons"] == [
        "a (noncritical_regression): task_fail -> hold; 1/1 trials failed (passRule all)"
    ]


def test_a_refused_waiver_is_refused_whatever_its_time() -> None:
    """Refused by the policy in force comes first: an expired or revoked waiver the policy
    forbids is listed as refused, not as expired or revoked."""
    waivers = [
        waiver("WVR-1", "a", [HARD], expires_at=AT),
        waiver("WVR-2", "a", [HARD], revoked_at="2026-11-30T00:00:00.000000Z"),
    ]
    result = evaluate(make_inputs([task("a", "quality_signal", [HARD])], waivers=waivers))
    accounting = result["waivers"]
    assert [r["waiver_id"] for r in accounting["refused"]] == ["WVR-1", "WVR-2"]
    assert accounting["expired"] == accounting["revoked"] == accounting["unused"] == []


def test_trials_that_are_not_evidence_are_summed_by_reason() -> None:
    """docs/gate.md: trials of other revisions, grader-set versions or an older profile are
    counted in `ignoredTrials`, by reason, per task and over the suite (keys sorted)."""
    a = task("a", "critical")
    a["ignoredTrials"] = {"other_revision": 2}
    b = task("b", "critical")
    b["ignoredTrials"] = {"other_revision": 1, "older_execution_digest": 3}
    result = evaluate(make_inputs([a, b, task("c", "critical")]))
    assert result["ignoredTrials"] == {"older_execution_digest": 3, "other_revision": 3}
    assert list(result["ignoredTrials"]) == ["older_execution_digest", "other_revision"]
    assert row(result, "b")["ignoredTrials"] == {"other_revision": 1, "older_execution_digest": 3}
    assert row(result, "c")["ignoredTrials"] == {}


def test_a_task_row_reads_its_effective_trials() -> None:
    """A rerun that stands in replaces its parent in every figure (n, scores, efficiency,
    fixture misses, trajectory); invalid runs and reruns are counted over every trial, and
    the first result of each original is kept."""
    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial("task_pass", "t1.0r", parent="t1.0", score=0.75),
        trial("task_pass", "t1.1", score=0.5),
        trial("grader_invalid", "t1.2"),
        trial("task_pass", "t1.2r", parent="t1.2"),  # grader_invalid: no rerun stands in
    ]
    trials[1]["efficiency"] = {
        "toolCallCount": 3, "modelCallCount": 1, "inputTokens": 100, "outputTokens": 10,
    }  # fmt: skip
    trials[2]["efficiency"] = {
        "toolCallCount": 5, "modelCallCount": 2, "inputTokens": 300, "outputTokens": 30,
    }  # fmt: skip
    trials[3]["efficiency"] = None
    trials[1]["fixture_misses"] = 2
    trials[2]["fixture_misses"] = 1
    trials[4]["fixture_misses"] = 7
    trials[3]["trajectory"] = {"ok": False}
    t = task("t1", "quality_signal", trials=trials, count=3)
    r = row(evaluate(make_inputs([t])), "t1")
    assert r["state"] == "grader_invalid"
    assert r["reason"] == "grader_invalid in t1.2"
    assert (r["n"], r["passedCount"]) == (3, 2)
    assert r["meanScore"] == pytest.approx((0.75 + 0.5 + 0.0) / 3)
    assert r["gatingScore"] == pytest.approx((0.75 + 0.5 + 0.0) / 3)
    assert r["efficiency"] == {
        "toolCallCount": 4.0, "modelCallCount": 1.5, "inputTokens": 200.0, "outputTokens": 20.0,
    }  # fmt: skip
    assert r["fixtureMissCount"] == 3
    assert r["trajectory"] == {"ok": False}
    assert r["invalidCount"] == 2
    assert r["rerunCount"] == 2
    assert r["rerunsNotPermitted"] == ["t1.2r"]
    assert r["firstResults"] == {
        "t1.0": "infrastructure_invalid",
        "t1.1": "task_pass",
        "t1.2": "grader_invalid",
    }


def test_no_efficiency_and_no_trials_read_as_null() -> None:
    t = task("t1", "critical", ["task_pass"])
    t["trials"][0]["efficiency"] = None
    r = row(evaluate(make_inputs([t, task("t2", "critical", [])])), "t1")
    assert r["efficiency"] == dict.fromkeys(ZERO_USAGE)
    empty = row(evaluate(make_inputs([task("t2", "critical", [])])), "t2")
    assert empty["trajectory"] is None
    assert (empty["n"], empty["passedCount"], empty["gatingScore"]) == (0, 0, None)
    assert empty["efficiency"] == dict.fromkeys(ZERO_USAGE)
    assert empty["rerunsNotPermitted"] == [] and empty["firstResults"] == {}


def test_a_missing_baseline_says_why_in_the_reasons() -> None:
    """docs/gate.md: `--baseline auto` with no stored pass is "no baseline, said in the
    reasons"; a required one holds."""
    members = [task("t1", "critical")]
    for required, note, reason, decision in (
        (
            True,
            None,
            "a baseline is required (critical_regressions.baseline) and none was found",
            "hold",
        ),
        (
            True,
            "no earlier pass",
            "a baseline is required (critical_regressions.baseline) and none was found "
            "(no earlier pass)",
            "hold",
        ),
        (False, "no earlier pass", "no baseline: no earlier pass", "pass"),
        (False, None, "no baseline: none given", "pass"),
    ):
        base = baseline(None, build=None, required=required, method="sign-test", alpha=0.1)
        if note is not None:
            base["note"] = note
        result = evaluate(make_inputs(members, base=base))
        assert result["decision"] == decision
        assert result["reasons"] == [reason]
        assert result["regression"] == {
            "baseline": None,
            "verdict": "inconclusive",
            "method": "sign-test",
            "alpha": 0.1,
            "pairedTaskCount": 0,
            "pValue": None,
            "reason": reason,
        }


def test_a_required_baseline_without_trials_names_the_build() -> None:
    base = baseline([task("t1", "critical", [])], required=True)
    result = evaluate(make_inputs([task("t1", "critical")], base=base))
    assert result["reasons"] == ["required baseline build-a has no trials for this suite"]
    optional = baseline([task("t1", "critical", [])], required=False)
    assert evaluate(make_inputs([task("t1", "critical")], base=optional))["reasons"] == []


def test_a_regressed_verdict_names_its_baseline_method_and_p_value() -> None:
    """Six tasks that passed on the baseline fail now: McNemar's exact p is 2 * (1/2)**6."""
    cand, base = _paired(["task_fail"] * 6, ["task_pass"] * 6)
    waivers = [waiver(f"WVR-{i}", f"t{i}") for i in range(6)]
    result = evaluate(make_inputs(cand, base=baseline(base, alpha=0.05), waivers=waivers))
    assert result["reasons"] == [
        "regressed against baseline build-a (mcnemar, p=0.03125, alpha=0.05)"
    ]
    regression = result["regression"]
    assert regression["baseline"] == "build-a"
    assert regression["baseline_execution_digest"] == fake_digest("execution:build-a")
    assert (regression["pValue"], regression["alpha"]) == (0.03125, 0.05)


def test_the_baseline_reads_its_own_trials_under_the_same_rules() -> None:
    """The baseline's tasks are summarized like the candidate's: its reruns and pass rules
    apply, and a task with trials in only one build is not paired."""
    base = [
        # An infrastructure_invalid trial stood in for by its passing rerun: a pass.
        task("t0", "quality_signal", trials=[
            trial("infrastructure_invalid", "b0"), trial("task_pass", "b0r", parent="b0"),
        ]),
        task("t1", "quality_signal", ["task_pass"]),
        task("t2", "quality_signal", ["task_pass"]),
        task("t3", "quality_signal", ["task_pass"]),
        task("t4", "quality_signal", ["task_pass"]),
        task("t5", "quality_signal", ["task_pass"]),
    ]  # fmt: skip
    cand = [task(f"t{i}", "quality_signal", ["task_fail"]) for i in range(6)]
    result = evaluate(make_inputs(cand, base=baseline(base, alpha=0.05)))
    assert result["regression"]["verdict"] == "regressed"
    assert result["regression"]["pairedTaskCount"] == 6
    assert result["regression"]["pValue"] == 0.03125


def test_the_baseline_seed_is_read_for_the_bootstrap() -> None:
    """A bootstrap verdict is a function of its seed (docs/gate.md): the seed in the inputs
    is the one the verdict reports, and the same seed gives the same verdict."""
    cand = [task(f"t{i}", "critical", ["task_pass"], scores=[0.5 + i / 20]) for i in range(8)]
    base = [task(f"t{i}", "critical", ["task_pass"], scores=[0.6 + i / 25]) for i in range(8)]
    inputs = make_inputs(cand, base=baseline(base, method="paired-bootstrap", seed=11))
    first = evaluate(inputs)["regression"]
    assert first["seed"] == 11
    assert evaluate(inputs)["regression"] == first


def test_a_task_row_has_every_documented_field() -> None:
    """docs/json.md: the fields of a task of `gate check --json`."""
    documented = {
        "task_id", "state", "effect", "risk", "n", "passedCount", "meanScore", "gatingScore",
        "passAtK", "passHatK", "invalidCount", "rerunCount", "waiver_id", "trajectory",
        "efficiency", "fixtureMissCount",
    }  # fmt: skip
    result = evaluate(make_inputs([task("t1", "critical"), task("t2", "critical", [])]))
    for r in result["tasks"]:
        assert set(r) >= documented, sorted(documented - set(r))


def test_a_crashed_or_hard_failed_trial_counts_zero_in_the_gating_score() -> None:
    """docs/gate.md: a trial classed hard_constraint_fail, evidence-blocked, agent_error or
    runtime_error has gating score 0 whatever its graders scored; meanScore keeps the trial
    scores."""
    for cls in (HARD, AMB, "agent_error", "runtime_error"):
        trials = [trial(cls, "t1.0", score=0.9), trial("task_pass", "t1.1", score=1.0)]
        r = row(evaluate(make_inputs([task("t1", "quality_signal", trials=trials, count=2)])), "t1")
        assert r["gatingScore"] == pytest.approx(0.5), cls
        assert r["meanScore"] == pytest.approx(0.95), cls
    trials = [trial("task_fail", "t1.0", score=0.25), trial("task_pass", "t1.1", score=1.0)]
    r = row(evaluate(make_inputs([task("t1", "quality_signal", trials=trials, count=2)])), "t1")
    assert r["gatingScore"] == pytest.approx(0.625)


def test_a_rerun_that_stands_in_counts_zero_in_the_gating_score_when_it_crashed() -> None:
    """The gating score of a rerun that stands in is read by its own class, as any trial's:
    a crashed rerun counts 0 whatever its graders scored (docs/gate.md)."""
    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial("runtime_error", "t1.0r", parent="t1.0", score=0.6),
        trial("task_pass", "t1.1", score=1.0),
    ]
    t = task("t1", "quality_signal", trials=trials, count=2, pass_rule="mean", pass_score=0.7)
    r = row(evaluate(make_inputs([t])), "t1")
    assert r["gatingScore"] == pytest.approx((0.0 + 1.0) / 2)
    assert r["meanScore"] == pytest.approx((0.6 + 1.0) / 2)
    # 0.5 < 0.7: the task fails by its crash, where the graders' 0.6 would have passed it.
    assert r["state"] == "runtime_error"


def test_invalid_runs_are_counted_in_and_outside_rerun_chains() -> None:
    """`invalidCount` counts every trial classed as an invalid run, whether or not it is
    part of a rerun chain: here one outside any chain and one that was rerun."""
    trials = [
        trial("grader_invalid", "t1.0"),
        trial("infrastructure_invalid", "t1.1"),
        trial("task_pass", "t1.1r", parent="t1.1"),
        trial("task_pass", "t1.2"),
    ]
    r = row(evaluate(make_inputs([task("t1", "quality_signal", trials=trials, count=3)])), "t1")
    assert r["invalidCount"] == 2
    assert r["rerunCount"] == 1
    assert r["state"] == "grader_invalid"


def test_summarize_task_reduces_the_effective_trials_for_suite_statistics() -> None:
    from evalops.domain.legacy.stats_v2 import TaskTrials
    from evalops.domain.specs import GatePolicy
    from tests.decide import summarize_task

    trials = [
        trial("infrastructure_invalid", "t1.0"),
        trial("task_pass", "t1.0r", parent="t1.0", score=0.75),
        trial("task_fail", "t1.1", score=0.25),
    ]
    t = task("t1", "quality_signal", trials=trials, count=2, k=1)
    s = summarize_task(t, GatePolicy.model_validate(POLICY))
    assert s.trials == TaskTrials("t1", 1, (True, False), (0.75, 0.25))
    assert s.failing == ("task_fail",)
    assert s.passed is False


@pytest.mark.parametrize("risk", RISKS)
@pytest.mark.parametrize("cls", CLASSES)
def test_verdict_effect_is_what_suite_coverage_shows(cls: str, risk: str) -> None:
    """docs/promotion.md: `suite coverage` shows the gate's effect of a failing verdict; a
    failure that holds can be waived (docs/gate.md), so it reads "hold unless waived"."""
    from evalops.domain.gate import verdict_effect

    effect = expected_effect(cls, risk)
    shown = "hold unless waived" if effect == "hold" and cls in FAILING else effect
    assert verdict_effect(cls, risk) == shown


def test_a_stored_decision_replays_under_the_evaluator_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision replays under the rules it was made under: `evaluator` names them, and a
    decision stored before the field existed was made by evaluator 1."""
    from evalops.domain import gate_compact
    from evalops.domain.gate import evaluate_stored
    from evalops.domain.legacy import gate_v1, gate_v2, gate_v3

    for module, name in (
        (gate_v1, "v1"),
        (gate_v2, "v2"),
        (gate_v3, "v3"),
        (gate_compact, "compact"),
    ):
        monkeypatch.setattr(
            module, "evaluate", lambda inputs, name=name: {"by": name, "inputs": inputs}
        )
    inputs = make_inputs([task("t1", "critical")])
    for version, name in ((1, "v1"), (2, "v2"), (3, "v3"), (4, "compact")):
        stored = {**inputs, "evaluator": version}
        assert evaluate_stored(stored) == {"by": name, "inputs": stored}
    assert evaluate_stored(inputs) == {"by": "v1", "inputs": inputs}
    for unknown in (0, 5):
        with pytest.raises(ValueError) as raised:
            evaluate_stored({**inputs, "evaluator": unknown})
        assert str(raised.value) == (
            f"decision made by evaluator {unknown}, unknown to this evalops"
        )


def test_inputs_without_ignored_trials_read_as_none_ignored() -> None:
    """Task inputs stored without `ignoredTrials` ignored nothing."""
    t = task("t1", "critical")
    del t["ignoredTrials"]
    result = evaluate(make_inputs([t]))
    assert row(result, "t1")["ignoredTrials"] == {}
    assert result["ignoredTrials"] == {}


def test_trial_stats_are_those_of_the_effective_trials() -> None:
    from evalops.domain.stats import TaskTrials, trial_stats

    tasks = [
        task("a", "critical", ["task_pass", "task_pass"], count=2, scores=[1.0, 0.5]),
        task("b", "critical", ["task_pass", "task_fail"], count=2, scores=[1.0, 0.0]),
        task("c", "critical", []),
    ]
    result = evaluate(make_inputs(tasks))
    assert result["trialStats"] == trial_stats(
        [
            TaskTrials("a", 2, (True, True), (1.0, 0.5)),
            TaskTrials("b", 2, (True, False), (1.0, 0.0)),
            TaskTrials("c", 1, (), ()),
        ]
    )
    assert result["trialStats"]["taskCount"] == 2


def test_a_trial_without_a_fixture_miss_count_missed_none() -> None:
    trials = [trial("task_pass", "t1.0"), trial("task_pass", "t1.1")]
    del trials[0]["fixture_misses"]
    trials[1]["fixture_misses"] = 2
    r = row(evaluate(make_inputs([task("t1", "critical", trials=trials, count=2)])), "t1")
    assert r["fixtureMissCount"] == 2


@pytest.mark.parametrize("method", ["sign-test", "paired-t"])
def test_a_baseline_mean_score_of_zero_is_a_score_of_zero(method: str) -> None:
    """The paired sign-test and paired-t read `meanScore` (docs/gate.md): a baseline whose
    tasks all scored 0 and a candidate scoring 0.5 on each, one more for the t-test's
    variance, improved."""
    base = [task(f"t{i}", "quality_signal", ["task_fail"], scores=[0.0]) for i in range(8)]
    cand = [
        task(f"t{i}", "quality_signal", ["task_pass"], scores=[0.5 + (0.25 if i == 0 else 0.0)])
        for i in range(8)
    ]
    result = evaluate(make_inputs(cand, base=baseline(base, method=method)))
    assert result["regression"]["verdict"] == "improved"
    reverse = evaluate(make_inputs(base, base=baseline(cand, method=method)))
    assert reverse["regression"]["verdict"] == "regressed"


def test_a_waiver_outside_the_suite_does_not_stop_the_policy_judging_the_next() -> None:
    waivers = [waiver("WVR-1", "not-a-member"), waiver("WVR-2", "a", [HARD])]
    result = evaluate(make_inputs([task("a", "quality_signal", [HARD])], waivers=waivers))
    assert [r["waiver_id"] for r in result["waivers"]["refused"]] == ["WVR-2"]
    assert result["waivers"]["unused"] == ["WVR-1"]


def test_a_baseline_without_a_seed_resamples_with_seed_zero() -> None:
    cand = [task(f"t{i}", "critical", ["task_pass"], scores=[0.5 + i / 20]) for i in range(10)]
    base = [task(f"t{i}", "critical", ["task_pass"], scores=[0.6 + i / 25]) for i in range(10)]
    unseeded = baseline(base, method="paired-bootstrap")
    del unseeded["seed"]
    result = evaluate(make_inputs(cand, base=unseeded))["regression"]
    seeded = evaluate(make_inputs(cand, base=baseline(base, method="paired-bootstrap", seed=0)))
    assert result["seed"] == 0
    assert result == seeded["regression"]
