"""Decision rules, part 3, on the pure evaluator: waivers judged at every decision against
the policy it applies, a waiver covering only the failing classes it names, an empty
`allowed_layers` waiving nothing, and gating scores of 0 for crashed, hard-failed and
evidence-blocked trials. Evaluator 2 stays frozen: its stored decisions replay as made.

The CLI side (SQLite and PostgreSQL) is in `test_decision_rules_3_cli.py`.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from evalops.domain.free_text import has_visible_text
from evalops.domain.gate import EVALUATOR, evaluate_stored
from evalops.domain.gate_compact import compact_inputs
from evalops.domain.specs import GatePolicy
from evalops.domain.suite_policy import LinkedIncident, incident_subject_refusal
from evalops.domain.waivers import WaiverRequest, grant_refusals
from tests.decide import evaluate
from tests.domain.test_gate_evaluate import POLICY, make_inputs, row, task, trial, waiver

NONCRITICAL = "noncritical_regression"


def policy_with(**waiver_rules: Any) -> dict[str, Any]:
    """The example gate policy with its `waivers` block changed (None: key removed)."""
    doc = copy.deepcopy(POLICY)
    for key, value in waiver_rules.items():
        if value is None:
            doc["waivers"].pop(key, None)
        else:
            doc["waivers"][key] = value
    return doc


def refused_ids(result: dict[str, Any]) -> list[str]:
    return [r["waiver_id"] for r in result["waivers"]["refused"] if "waiver_id" in r]


# ------------------------------------------- item 2: waivers judged at every decision


TIGHTENED = [
    pytest.param(
        {"forbidden_states": [*POLICY["waivers"]["forbidden_states"], "task_fail"]},
        "forbidden_state",
        id="task_fail-now-forbidden",
    ),
    pytest.param({"allowed_layers": ["quality_signal"]}, "layer_not_allowed", id="layer-removed"),
    pytest.param({"max_duration_days": 7}, "expires_at_too_far", id="shorter-max-duration"),
]


@pytest.mark.parametrize(("tightening", "rule"), TIGHTENED)
def test_a_waiver_granted_under_a_looser_policy_is_refused_by_the_policy_in_force(
    tightening: dict[str, Any], rule: str
) -> None:
    """Granted for 15 days under the example policy (30 days, both layers, task_fail
    allowed); the release manager then tightens the policy. The next decision must refuse
    the waiver, say so, and hold."""
    tasks = [task("t1", NONCRITICAL, ["task_fail"])]
    waivers = [waiver("WVR-1", "t1")]  # 2026-11-25 .. 2026-12-10: 15 days
    loose = evaluate(make_inputs(tasks, waivers=waivers))
    assert loose["decision"] == "pass" and loose["waivers"]["applied"] == ["WVR-1"]

    tight = evaluate(make_inputs(tasks, waivers=waivers, policy=policy_with(**tightening)))
    assert tight["decision"] == "hold"
    assert row(tight, "t1")["effect"] == "hold" and row(tight, "t1")["waiver_id"] is None
    assert tight["waivers"]["applied"] == [] and tight["waivers"]["unused"] == []
    [refused] = tight["waivers"]["refused"]
    assert refused["waiver_id"] == "WVR-1" and refused["task_id"] == "t1"
    assert rule in refused["rules"]
    assert refused["reason"].startswith("refused by the policy in force (release-gate)")


def test_a_waiver_the_policy_forbids_is_refused_even_when_the_task_passes() -> None:
    """Nothing is dropped silently: the refusal is listed whatever the task's state."""
    tasks = [task("t1", NONCRITICAL, ["task_pass"])]
    result = evaluate(
        make_inputs(tasks, waivers=[waiver("WVR-1", "t1")], policy=policy_with(max_duration_days=3))
    )
    assert result["decision"] == "pass"
    assert refused_ids(result) == ["WVR-1"]


def test_a_waiver_for_a_task_whose_risk_ratcheted_to_critical_is_refused() -> None:
    """A later revision made the task critical: the block stands and the waiver is listed
    as refused (critical is never a waivable layer)."""
    tasks = [task("t1", "critical", ["task_fail"])]
    result = evaluate(make_inputs(tasks, waivers=[waiver("WVR-1", "t1")]))
    assert result["decision"] == "block"
    assert refused_ids(result) == ["WVR-1"]


# ---------------------------------- item 3: every failing class must be in the states


@pytest.mark.parametrize(
    ("classes", "states", "waived"),
    [
        (["agent_error", "task_fail", "task_pass"], ["agent_error"], False),
        (["agent_error", "task_fail", "task_pass"], ["task_fail"], False),
        (["agent_error", "task_fail", "task_pass"], ["agent_error", "task_fail"], True),
        (["runtime_error", "runtime_error", "task_pass"], ["runtime_error"], True),
        (["task_fail", "task_fail", "task_pass"], ["agent_error", "runtime_error"], False),
    ],
)
def test_a_waiver_covers_a_task_only_when_it_names_every_failing_class(
    classes: list[str], states: list[str], waived: bool
) -> None:
    """An `agent_error` waiver granted for a flaky crash must not pass the same task's
    real `task_fail` trials (the old rule compared only the highest failing class)."""
    tasks = [task("t1", NONCRITICAL, classes, count=3)]
    result = evaluate(make_inputs(tasks, waivers=[waiver("WVR-1", "t1", states)]))
    assert (result["decision"] == "pass") is waived
    assert row(result, "t1")["waiver_id"] == ("WVR-1" if waived else None)
    listed = result["waivers"]["applied"] if waived else result["waivers"]["unused"]
    assert listed == ["WVR-1"]


# ------------------------------------------ item 4: empty allowed_layers waives nothing


@pytest.mark.parametrize("layers", [[], None], ids=["empty", "omitted"])
@pytest.mark.parametrize("risk", ["noncritical_regression", "quality_signal"])
def test_an_empty_or_omitted_allowed_layers_waives_nothing(
    layers: list[str] | None, risk: str
) -> None:
    doc = policy_with(allowed_layers=layers)
    tasks = [task("t1", risk, ["task_fail"])]
    result = evaluate(make_inputs(tasks, waivers=[waiver("WVR-1", "t1")], policy=doc))
    assert result["decision"] == "hold"
    assert refused_ids(result) == ["WVR-1"]

    request = WaiverRequest(
        "t1", "regression/core", ("task_fail",), "build-b", "o@example.com", "r", None
    )
    refusals = grant_refusals(
        request,
        risk=risk,
        protects=[],
        policy=GatePolicy.model_validate(doc),
        now=datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert "layer_not_allowed" in {r.rule for r in refusals}


# ----------------------------------------- item 7: crashed and hard-failed trials score 0


@pytest.mark.parametrize(
    "cls",
    [
        "hard_constraint_fail",
        "ambiguous_external_effect",
        "missing_required_evidence",
        "grader_invalid",
        "infrastructure_invalid",
        "agent_error",
        "runtime_error",
    ],
)
def test_a_crashed_or_blocked_trial_has_gating_score_zero(cls: str) -> None:
    """Its judge scored it 1.0; it still counts 0 in the task's shown score."""
    tasks = [task("t1", NONCRITICAL, trials=[trial(cls, "t1.0", score=1.0)])]
    result = evaluate(make_inputs(tasks))
    assert row(result, "t1")["gatingScore"] == 0.0
    assert row(result, "t1")["meanScore"] == 1.0  # the RFC's mean of trial scores stays


def test_agent_errors_with_judge_scores_do_not_lift_pass_rule_mean() -> None:
    """Under `passRule: mean` (passScore 0.6), two crashed trials the judge scored 1.0 and
    one task_fail at 0.0 must not pass: their gating scores are 0, the mean is 0."""
    trials = [
        trial("agent_error", "t1.0", score=1.0),
        trial("agent_error", "t1.1", score=1.0),
        trial("task_fail", "t1.2", score=0.0),
    ]
    tasks = [task("t1", NONCRITICAL, count=3, pass_rule="mean", pass_score=0.6, trials=trials)]
    result = evaluate(make_inputs(tasks))
    assert row(result, "t1")["state"] == "agent_error"
    assert row(result, "t1")["effect"] == "hold"
    assert row(result, "t1")["gatingScore"] == 0.0


def test_the_gating_score_of_passing_and_failing_trials_is_their_own() -> None:
    trials = [trial("task_pass", "t1.0", score=0.9), trial("task_fail", "t1.1", score=0.3)]
    tasks = [task("t1", NONCRITICAL, count=2, pass_rule="mean", pass_score=0.5, trials=trials)]
    result = evaluate(make_inputs(tasks))
    assert row(result, "t1")["gatingScore"] == pytest.approx(0.6)
    assert row(result, "t1")["state"] == "task_pass"


# ----------------------------------------- evaluator 2 decisions replay as they were made


def _stored_by_evaluator_2() -> dict[str, Any]:
    """Inputs as evaluator 2 stored them: an `agent_error` waiver over a task whose trials
    also failed as task_fail, an agent_error judged 1.0, and a policy since tightened to
    3 days (the waiver runs 15)."""
    trials = [
        trial("agent_error", "t1.0", score=1.0),
        trial("task_fail", "t1.1", score=0.0),
        trial("task_pass", "t1.2", score=1.0),
    ]
    tasks = [task("t1", NONCRITICAL, count=3, trials=trials)]
    inputs = make_inputs(
        tasks,
        waivers=[waiver("WVR-1", "t1", ["agent_error"])],
        policy=policy_with(max_duration_days=3, allowed_layers=[]),
    )
    inputs["evaluator"] = 2
    return inputs


def test_a_decision_stored_by_evaluator_2_replays_under_evaluator_2() -> None:
    """Evaluator 2 passed this build (highest class agent_error, waived; no judgement of the
    waiver against the policy): the stored decision must replay to exactly that."""
    inputs = _stored_by_evaluator_2()
    replayed = evaluate_stored(inputs)
    assert replayed["decision"] == "pass"
    assert row(replayed, "t1")["waiver_id"] == "WVR-1"
    assert row(replayed, "t1")["state"] == "agent_error"
    assert "gatingScore" not in row(replayed, "t1")
    assert replayed["waivers"]["applied"] == ["WVR-1"]
    assert replayed["waivers"]["refused"] == []

    from evalops.domain.legacy.gate_v2 import evaluate as frozen_v2

    assert replayed == frozen_v2(inputs)


def test_the_same_inputs_under_evaluators_3_and_4_hold() -> None:
    inputs = _stored_by_evaluator_2()
    inputs["evaluator"] = 3
    decided = evaluate_stored(inputs)
    assert decided == evaluate(inputs)
    assert decided["decision"] == "hold"
    assert refused_ids(decided) == ["WVR-1"]
    # The evaluator of new decisions, over the same trials summarized.
    assert EVALUATOR == 4
    current = evaluate_stored(compact_inputs(inputs))  # type: ignore[arg-type]
    assert current["decision"] == "hold"
    assert refused_ids(current) == ["WVR-1"]


# ------------------------------------------- item 6: free text needs a visible character


@pytest.mark.parametrize(
    "value",
    [None, "", " ", "\t\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\u200d", "\ufeff",
     "\u2028", "\u2029", "\u202e", "\u3164", "\u2800", "\u0301", "\x00\x1b"],
)  # fmt: skip
def test_blank_and_invisible_text_says_nothing(value: str | None) -> None:
    assert has_visible_text(value) is False


@pytest.mark.parametrize("value", ["a", " ops@example.com ", "\u2003x", "é", "\u0301e", "-"])
def test_one_visible_character_is_enough(value: str) -> None:
    assert has_visible_text(value) is True


# ---------------------------------------- item 8: promoting an incident needs it confirmed


@pytest.mark.parametrize(
    ("state", "was_confirmed", "allowed"),
    [
        ("open", False, False),
        ("confirmed", True, True),
        ("reproduced", True, True),
        ("promoted", True, True),  # a new pin through an incident confirmed before
        ("promoted", False, False),  # promoted on an invariant by an older evalops
        ("closed", True, False),
    ],
)
def test_only_a_confirmed_or_reproduced_incident_may_be_promoted(
    state: str, was_confirmed: bool, allowed: bool
) -> None:
    refusal = incident_subject_refusal(
        LinkedIncident("INC-7", state, was_confirmed), "t1", "regression/core"
    )
    assert (refusal is None) is allowed
    if refusal is not None:
        assert refusal.met is False
        assert "evalops incident confirm INC-7" in (refusal.fix or "")
        assert "evalops promote t1 --to regression/core" in (refusal.fix or "")
