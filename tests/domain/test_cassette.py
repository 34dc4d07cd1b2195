"""Fail-closed fixture cassettes (RFC 0244 section D; docs/classification.md). Pure.

A spy stands in for the live tools: with `onMiss: fail` (or absent) a miss must never
reach it. The cassette's miss count, fed into a trial record, makes the trial task_fail
with score 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from evalops.cassette import Cassette, ToolError
from evalops.domain.calibration_validity import Validity
from evalops.domain.classify import classify
from evalops.domain.specs import EvalTaskSpec, GraderSet
from evalops.domain.trajectory import ObservedCall, grade
from evalops.domain.trial_record import TrialRecord

DIGEST = "sha256:" + "0" * 64

LOOKUP_RESPONSE = {"orderId": "A-1", "amountMinor": 4200, "refundable": True}
REFUND_RESPONSE = {"refundId": "RF-9001", "status": "committed"}


class LiveSpy:
    """Records every call that reached a live tool."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, tool: str, args: Mapping[str, Any]) -> Any:
        self.calls.append((tool, dict(args)))
        return {"live": tool}


def task(on_miss: str | None, responses: list[dict[str, Any]] | None = None) -> EvalTaskSpec:
    fixtures: dict[str, Any] = {
        "toolResponses": responses
        if responses is not None
        else [
            {
                "tool": "crm:lookup-order",
                "args": {"orderId": "A-1"},
                "argsMatch": "subset",
                "response": LOOKUP_RESPONSE,
            },
            {
                "tool": "billing:refund",
                "args": {"orderId": "A-1", "amountMinor": 4200},
                "argsMatch": "subset",
                "response": REFUND_RESPONSE,
            },
        ]
    }
    if on_miss is not None:
        fixtures["onMiss"] = on_miss
    return EvalTaskSpec.model_validate(
        {
            "spec_schema_version": "eval-task/v1",
            "id": "support-refund",
            "revision": 1,
            "meta": {"title": "Refund once", "risk": "critical"},
            "contract": {
                "goal": "refund_the_requested_order_once",
                "environment": {"network_policy": "deny"},
                "expected": {
                    "kind": "golden",
                    "match": {"strategy": "contains", "value": "refund approved"},
                    "trajectory": {
                        "match": "in-order",
                        "calls": [
                            {"tool": "crm:lookup-order"},
                            {"tool": "billing:refund"},
                        ],
                    },
                },
                "score_from": "refund-outcome",
            },
            "fixtures": fixtures,
            "grader_set": "support-graders",
        }
    )


GRADERS = GraderSet.model_validate(
    {
        "spec_schema_version": "grader-set/v1",
        "id": "support-graders",
        "version": 1,
        "graders": [
            {
                "id": "refund-outcome",
                "version": 1,
                "layer": "outcome",
                "type": "deterministic",
                "produces": ["task_pass", "task_fail"],
                "blocking": True,
            }
        ],
    }
)


def record_for(
    cassette: Cassette, calls: list[tuple[str, dict[str, Any]]], score: float = 1.0
) -> TrialRecord:
    """The harness's record of a trial whose output grader was perfectly happy."""
    return TrialRecord.model_validate(
        {
            "schema": "evalops.trial/v1",
            "trial_id": "trial-1",
            "task_id": "support-refund",
            "task_digest": DIGEST,
            "execution_digest": DIGEST,
            "grader_set_digest": DIGEST,
            "trial_index": 0,
            "started_at": "2026-11-29T10:00:00Z",
            "completed_at": "2026-11-29T10:03:12Z",
            "grader_results": [
                {
                    "grader_id": "refund-outcome",
                    "grader_version": 1,
                    "state": "task_pass",
                    "score": score,
                }
            ],
            "runtime": {"status": "ok"},
            "tool_calls": [{"tool": t, "args": a, "agent_id": "support"} for t, a in calls],
            "target_agent_id": "support",
            "fixture_misses": cassette.misses,
        }
    )


def classify_trial(spec: EvalTaskSpec, record: TrialRecord) -> Any:
    assert spec.contract.expected is not None
    assert spec.contract.expected.trajectory is not None
    observed = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
    trajectory = grade(spec.contract.expected.trajectory, observed, record.target_agent_id)
    return classify(
        record, spec, GRADERS, validity={"refund-outcome": Validity("valid")}, trajectory=trajectory
    )


# ------------------------------------------------------- the RFC's negative behaviour example


@pytest.mark.parametrize("on_miss", ["fail", None])
def test_fail_closed_miss_never_reaches_a_live_tool(on_miss: str | None) -> None:
    spy = LiveSpy()
    spec = task(on_miss)
    cassette = Cassette(spec, live=spy)
    calls = [
        ("crm:lookup-order", {"orderId": "A-1"}),
        ("billing:refund", {"orderId": "A-1", "amountMinor": 999999}),  # no fixture covers it
    ]
    replies = [cassette.call(tool, args) for tool, args in calls]
    assert replies[0] == LOOKUP_RESPONSE
    assert isinstance(replies[1], ToolError)
    assert replies[1].tool == "billing:refund"
    assert spy.calls == []  # zero live calls
    assert cassette.misses == 1  # fixtureMissCount 1
    c = classify_trial(spec, record_for(cassette, calls))
    assert c.primary == "task_fail"
    assert not c.passed
    assert c.score == 0.0  # not the output grader's 1.0
    assert c.gating_score == 0.0


def test_served_trial_passes_with_its_output_score() -> None:
    spy = LiveSpy()
    spec = task("fail")
    cassette = Cassette(spec, live=spy)
    calls = [
        ("crm:lookup-order", {"orderId": "A-1"}),
        ("billing:refund", {"orderId": "A-1", "amountMinor": 4200, "currency": "EUR"}),
    ]
    replies = [cassette.call(tool, args) for tool, args in calls]
    assert replies == [LOOKUP_RESPONSE, REFUND_RESPONSE]
    assert cassette.misses == 0
    assert spy.calls == []
    c = classify_trial(spec, record_for(cassette, calls, score=0.75))
    assert c.primary == "task_pass"
    assert c.score == 0.75


def test_a_tool_without_any_fixture_is_a_miss() -> None:
    spy = LiveSpy()
    cassette = Cassette(task("fail"), live=spy)
    reply = cassette.call("billing:refund-all", {"customerId": "C-77"})
    assert isinstance(reply, ToolError)
    assert cassette.misses == 1
    assert spy.calls == []


def test_every_miss_is_counted() -> None:
    spy = LiveSpy()
    cassette = Cassette(task("fail"), live=spy)
    for _ in range(3):
        assert isinstance(cassette.call("billing:refund-all", {}), ToolError)
    assert cassette.misses == 3
    assert cassette.calls == 3
    assert spy.calls == []


# --------------------------------------------------------- first-unconsumed matching entry


SCRIPT = [
    {"tool": "queue:pop", "args": {"queue": "a"}, "argsMatch": "subset", "response": "a-first"},
    {"tool": "queue:pop", "args": {"queue": "b"}, "argsMatch": "exact", "response": "b-only"},
    {"tool": "queue:pop", "args": {"queue": "a"}, "argsMatch": "subset", "response": "a-second"},
    {"tool": "queue:pop", "response": "any-queue"},  # argsMatch absent => ignore
]


def test_repeated_calls_walk_a_scripted_sequence() -> None:
    spy = LiveSpy()
    cassette = Cassette(task("fail", SCRIPT), live=spy)
    assert cassette.call("queue:pop", {"queue": "a"}) == "a-first"
    assert cassette.call("queue:pop", {"queue": "a", "wait": 1}) == "a-second"
    # Both "a" entries are consumed: the catch-all serves the third call.
    assert cassette.call("queue:pop", {"queue": "a"}) == "any-queue"
    # The "b" entry was skipped, never consumed, and is still there.
    assert cassette.call("queue:pop", {"queue": "b"}) == "b-only"
    assert isinstance(cassette.call("queue:pop", {"queue": "b"}), ToolError)
    assert cassette.misses == 1
    assert spy.calls == []


def test_a_non_matching_earlier_entry_is_not_consumed() -> None:
    cassette = Cassette(task("fail", SCRIPT))
    # An exact "b" entry does not match extra arguments: the catch-all serves it.
    assert cassette.call("queue:pop", {"queue": "b", "wait": 1}) == "any-queue"
    assert cassette.call("queue:pop", {"queue": "b"}) == "b-only"
    assert cassette.misses == 0


def test_fixture_args_use_json_deep_equality() -> None:
    responses = [
        {"tool": "t", "args": {"flag": True}, "argsMatch": "exact", "response": "bool"},
        {"tool": "t", "args": {"n": 1}, "argsMatch": "subset", "response": "number"},
    ]
    cassette = Cassette(task("fail", responses))
    assert isinstance(cassette.call("t", {"flag": 1}), ToolError)  # true != 1
    assert cassette.call("t", {"n": 1.0, "m": 2}) == "number"  # 1 == 1.0
    assert cassette.call("t", {"flag": True}) == "bool"
    assert cassette.misses == 1


def test_a_cassette_accepts_the_task_as_plain_data() -> None:
    cassette = Cassette(task("fail").model_dump(exclude_none=True))
    assert cassette.call("crm:lookup-order", {"orderId": "A-1"}) == LOOKUP_RESPONSE
    assert isinstance(cassette.call("crm:lookup-order", {"orderId": "A-1"}), ToolError)


def test_a_task_without_fixtures_misses_every_call() -> None:
    spec = task("fail").model_copy(update={"fixtures": None})
    spy = LiveSpy()
    cassette = Cassette(spec, live=spy)
    assert isinstance(cassette.call("crm:lookup-order", {}), ToolError)
    assert cassette.misses == 1
    assert spy.calls == []


# -------------------------------------------------------------------------- fresh per trial


def test_fresh_resets_consumption_and_misses() -> None:
    spy = LiveSpy()
    first = Cassette(task("fail", SCRIPT), live=spy)
    assert first.call("queue:pop", {"queue": "a"}) == "a-first"
    assert first.call("queue:pop", {"queue": "b"}) == "b-only"
    assert first.call("queue:pop", {"queue": "b"}) == "any-queue"
    assert isinstance(first.call("queue:pop", {"queue": "b"}), ToolError)
    assert first.misses == 1

    second = first.fresh()
    assert second.misses == 0
    assert second.calls == 0
    assert second.call("queue:pop", {"queue": "a"}) == "a-first"
    assert second.call("queue:pop", {"queue": "b"}) == "b-only"
    assert second.misses == 0
    # The first trial's cassette is untouched by the second trial's calls.
    assert first.misses == 1
    assert first.call("queue:pop", {"queue": "a"}) == "a-second"
    assert spy.calls == []


def test_fresh_keeps_the_miss_policy() -> None:
    spy = LiveSpy()
    cassette = Cassette(task("live"), live=spy).fresh()
    assert cassette.call("billing:refund-all", {"x": 1}) == {"live": "billing:refund-all"}
    assert spy.calls == [("billing:refund-all", {"x": 1})]
    strict = Cassette(task("fail"), live=spy).fresh()
    assert isinstance(strict.call("billing:refund-all", {}), ToolError)
    assert len(spy.calls) == 1


# ------------------------------------------------------------------------------ onMiss live


def test_on_miss_live_calls_the_live_tool_and_counts_the_miss() -> None:
    spy = LiveSpy()
    spec = task("live")
    cassette = Cassette(spec, live=spy)
    calls = [
        ("crm:lookup-order", {"orderId": "A-1"}),
        ("billing:refund", {"orderId": "A-2", "amountMinor": 1999}),
    ]
    replies = [cassette.call(tool, args) for tool, args in calls]
    assert replies[0] == LOOKUP_RESPONSE  # a covered call is still served from the fixture
    assert replies[1] == {"live": "billing:refund"}
    assert spy.calls == [("billing:refund", {"orderId": "A-2", "amountMinor": 1999})]
    assert cassette.misses == 1
    c = classify_trial(spec, record_for(cassette, calls, score=0.9))
    assert c.primary == "task_pass"
    assert "fixture_miss_live" in c.secondary_labels
    assert c.score == 0.9
