"""The gate's rules that do not depend on how a decision holds its trials
(`evalops.domain.gate_rules`; DESIGN 6.2 and 9, docs/gate.md), each on its own: the class of
highest precedence, what a state does to a task of each layer, the waivers the policy in
force refuses and the accounting of every waiver a decision considered, and the
`regression` entry's baseline fields.

Expectations are the contract's: the precedence "hard_constraint_fail >
ambiguous_external_effect > missing_required_evidence > grader_invalid >
infrastructure_invalid > agent_error > runtime_error > task_fail > task_pass"; a hard failure
blocks, an evidence-blocked state holds, a failure blocks a critical task and holds any other
("hold unless waived"); "Every decision lists the waivers applied, expired, unused, revoked
and refused (refused holds both the waivers the policy in force refuses, by id, and the grant
requests refused earlier, by audit event)".
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from evalops.domain.gate_rules import (
    highest,
    refused_by_policy,
    task_effect,
    verdict_effect,
    waiver_accounting,
    with_baseline,
)
from evalops.domain.specs import GatePolicy
from evalops.domain.waivers import WaiverFact
from tests.helpers import EXAMPLE_REGISTRY

PRECEDENCE = [
    "hard_constraint_fail",
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
    "agent_error",
    "runtime_error",
    "task_fail",
    "task_pass",
]
EVIDENCE_BLOCKED = PRECEDENCE[1:5]
FAILING = ("agent_error", "runtime_error", "task_fail")
RISKS = ("critical", "noncritical_regression", "quality_signal")
AT = datetime(2026, 12, 1, tzinfo=UTC)


def _policy(**waivers: Any) -> GatePolicy:
    document = yaml.safe_load(
        (EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text(encoding="utf-8")
    )
    document["waivers"].update(waivers)
    return GatePolicy.model_validate(document)


# ------------------------------------------------------------------------------ states


def test_the_class_of_highest_precedence_wins() -> None:
    for size in (1, 2, 3):
        for classes in itertools.permutations(PRECEDENCE, size):
            expected = min(classes, key=PRECEDENCE.index)
            assert highest(list(classes)) == expected
    assert highest(["task_pass", "task_fail", "task_pass"]) == "task_fail"


@pytest.mark.parametrize("risk", RISKS)
@pytest.mark.parametrize("state", PRECEDENCE)
def test_what_each_state_does_to_a_task_of_each_layer(state: str, risk: str) -> None:
    if state == "hard_constraint_fail":
        expected = "block"
    elif state in EVIDENCE_BLOCKED:
        expected = "hold"
    elif state in FAILING:
        expected = "block" if risk == "critical" else "hold"
    else:
        expected = "pass"
    assert task_effect(state, risk) == expected
    # As `suite coverage` words it: a failure that holds may be waived; nothing else may.
    worded = "hold unless waived" if expected == "hold" and state in FAILING else expected
    assert verdict_effect(state, risk) == worded


def test_a_state_that_is_no_failure_passes() -> None:
    assert task_effect("task_pass", "critical") == "pass"
    assert verdict_effect("task_pass", "quality_signal") == "pass"


# ------------------------------------------------------------------------------ baseline


def test_the_regression_entry_names_its_baseline() -> None:
    verdict = {"verdict": "no_regression", "method": "mcnemar", "pValue": 0.5}
    with_digest = with_baseline(verdict, {"build": "b-1", "execution_digest": "sha256:e"})  # type: ignore[arg-type]
    assert with_digest == {
        "verdict": "no_regression",
        "method": "mcnemar",
        "pValue": 0.5,
        "baseline": "b-1",
        "baseline_execution_digest": "sha256:e",
    }
    # A baseline stored before its execution digest was recorded: null.
    assert with_baseline(verdict, {"build": "b-2"})["baseline_execution_digest"] is None  # type: ignore[arg-type]
    assert verdict == {"verdict": "no_regression", "method": "mcnemar", "pValue": 0.5}


# ------------------------------------------------------------------------------ waivers


def _waiver(  # noqa: PLR0913 (each field of a waiver fact can be varied)
    waiver_id: str,
    task_id: str = "t1",
    *,
    states: tuple[str, ...] = ("task_fail",),
    granted: str = "2026-11-25T00:00:00Z",
    expires: str = "2026-12-10T00:00:00Z",
    revoked: str | None = None,
) -> WaiverFact:
    return WaiverFact(waiver_id, task_id, "regression/core", "b", states, granted, expires, revoked)


def test_the_policy_in_force_refuses_what_it_forbids_and_names_each_rule() -> None:
    policy = _policy()
    waivers = [
        _waiver("W-ok"),
        _waiver("W-state", states=("task_fail", "grader_invalid", "infrastructure_invalid")),
        _waiver("W-layer", "t-critical"),
        _waiver("W-long", expires="2026-12-26T00:00:01Z"),  # 31 days and a second
        _waiver("W-30", expires="2026-12-25T00:00:00Z"),  # exactly 30 days: allowed
        _waiver("W-outside", "t-not-in-the-suite", states=("hard_constraint_fail",)),
        _waiver(
            "W-all", "t-critical", states=("hard_constraint_fail",), expires="2027-06-01T00:00:00Z"
        ),
    ]
    risks = {"t1": "quality_signal", "t-critical": "critical"}
    refused = refused_by_policy(waivers, risks, policy)
    assert list(refused) == ["W-state", "W-layer", "W-long", "W-all"]
    prefix = "refused by the policy in force (release-gate): "
    assert refused["W-state"] == {
        "waiver_id": "W-state",
        "task_id": "t1",
        "states": ["task_fail", "grader_invalid", "infrastructure_invalid"],
        "rules": ["forbidden_state", "forbidden_state"],
        "reason": prefix + "grader_invalid is in waivers.forbidden_states; "
        "infrastructure_invalid is in waivers.forbidden_states",
    }
    layer = (
        "risk critical is not in waivers.allowed_layers "
        "['quality_signal', 'noncritical_regression']"
    )
    assert refused["W-layer"]["rules"] == ["layer_not_allowed"]
    assert refused["W-layer"]["reason"] == prefix + layer
    assert refused["W-layer"]["task_id"] == "t-critical"
    assert refused["W-long"]["rules"] == ["expires_at_too_far"]
    assert refused["W-long"]["reason"].startswith(prefix + "valid for 31")
    assert refused["W-all"]["rules"] == [
        "forbidden_state",
        "layer_not_allowed",
        "expires_at_too_far",
    ]
    assert refused["W-all"]["reason"].startswith(
        prefix + "hard_constraint_fail is in waivers.forbidden_states; " + layer + "; valid for "
    )
    # The policy's id is the one named.
    other = GatePolicy.model_validate({**_policy().model_dump(mode="json"), "id": "strict"})
    assert refused_by_policy(waivers[1:2], risks, other)["W-state"]["reason"].startswith(
        "refused by the policy in force (strict): "
    )
    assert refused_by_policy([], risks, policy) == {}


def test_accounting_lists_each_waiver_once_refused_first_then_applied_expired_revoked_unused() -> (
    None
):
    at = AT
    waivers = [
        _waiver("W-9-applied"),
        _waiver("W-2-expired", expires="2026-12-01T00:00:00Z"),  # expires at `at`: expired
        _waiver("W-3-revoked", revoked="2026-11-30T00:00:00Z"),
        _waiver("W-4-unused"),
        _waiver("W-5-not-yet", granted="2026-12-02T00:00:00Z"),  # not yet valid: unused
        _waiver("W-6-revoked-later", revoked="2026-12-05T00:00:00Z"),  # valid at `at`: unused
        # Refused by the policy whatever its time: even expired, revoked or applied.
        _waiver("W-1-refused-expired", expires="2026-11-30T00:00:00Z"),
        _waiver("W-7-refused-applied"),
        _waiver("W-0-refused-revoked", revoked="2026-11-26T00:00:00Z"),
    ]
    by_policy: dict[str, Any] = {
        w: {
            "waiver_id": w,
            "task_id": "t1",
            "states": ["task_fail"],
            "rules": ["forbidden_state"],
            "reason": f"refused by the policy in force (p): {w}",
        }
        for w in ("W-7-refused-applied", "W-1-refused-expired", "W-0-refused-revoked")
    }
    at_grant: list[Any] = [
        {"audit_seq": 4, "task_id": "t2", "rules": ["expires_at"], "reason": "r4"},
        {"audit_seq": 2, "task_id": "t3", "rules": ["owner"], "reason": "r2"},
    ]
    out = waiver_accounting(
        waivers, ["W-9-applied", "W-7-refused-applied"], at, at_grant, by_policy
    )
    assert out == {
        "applied": ["W-9-applied"],
        "expired": ["W-2-expired"],
        "unused": ["W-4-unused", "W-5-not-yet", "W-6-revoked-later"],
        "revoked": ["W-3-revoked"],
        # Requests refused at grant first, in their order, then the policy's, by id.
        "refused": [
            at_grant[0],
            at_grant[1],
            by_policy["W-0-refused-revoked"],
            by_policy["W-1-refused-expired"],
            by_policy["W-7-refused-applied"],
        ],
    }
    assert list(out) == ["applied", "expired", "unused", "revoked", "refused"]
    # Copies: the decision's lists do not share the inputs' dicts.
    assert out["refused"][0] is not at_grant[0]
    assert out["refused"][2] is not by_policy["W-0-refused-revoked"]


def test_accounting_of_no_waivers_is_five_empty_lists() -> None:
    assert waiver_accounting([], [], AT, [], {}) == {
        "applied": [],
        "expired": [],
        "unused": [],
        "revoked": [],
        "refused": [],
    }


def test_a_revoked_waiver_that_also_expired_is_revoked() -> None:
    w = _waiver("W", expires="2026-11-28T00:00:00Z", revoked="2026-11-27T00:00:00Z")
    assert waiver_accounting([w], [], AT, [], {})["revoked"] == ["W"]
