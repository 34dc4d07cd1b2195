"""Evaluator 4 (`evalops.domain.gate_compact`, the only evaluator of new decisions) decides
exactly as evaluator 3 (`evalops.domain.legacy.gate_v3`, frozen), (docs/gate.md).

Differential: the same trials, given to evaluator 3 as per-trial inputs and to evaluator 4
as per-task summaries (`compact_inputs`), give the same decision document, except that a
task's `firstResults` is counted by class (`firstResultCounts`). The corpus is generated:
rerun chains (permitted, not permitted, orphaned, several reruns of one trial), every
class, arbitrary float scores, trials with and without efficiency counts, trajectories,
baselines under every method, waivers, and policies with other rerun limits.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalops.domain.canonical import canonical_json
from evalops.domain.gate import evaluate_stored
from evalops.domain.gate_compact import (
    CompactTrials,
    compact_inputs,
    compact_task,
    same_decision_as_evaluator_3,
)
from evalops.domain.gate_compact import evaluate as evaluate_compact
from evalops.domain.legacy.gate_v3 import evaluate
from tests.domain.test_gate_evaluate import (
    BUILD,
    CLASSES,
    POLICY,
    RISKS,
    TIMES,
    baseline,
    make_inputs,
    task,
    waiver_facts,
)

TASK_IDS = ("t1", "t2", "t3", "t4")
RERUN_CLASSES = ("infrastructure_invalid", "grader_invalid", "missing_required_evidence")
SCORES = st.one_of(
    st.sampled_from([0, 1, 0.5, 0.1, 0.2, 0.3, 1e-300, 0.7]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False),
)
EFFICIENCY = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {
            "toolCallCount": st.integers(min_value=0, max_value=50),
            "modelCallCount": st.integers(min_value=0, max_value=50),
            "inputTokens": st.integers(min_value=0, max_value=10**9),
            "outputTokens": st.one_of(
                st.integers(min_value=0, max_value=10**6),
                st.floats(min_value=0, max_value=1e6, allow_nan=False),
            ),
        }
    ),
)


@st.composite
def trials(draw: st.DrawFn, task_id: str) -> list[dict[str, Any]]:
    """Stored-order trials of one task: originals and reruns of earlier trials (or of a
    trial that is not evidence here: an orphan)."""
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(min_value=0, max_value=9))):
        parent = None
        if out and draw(st.integers(min_value=0, max_value=2)) == 0:
            parent = draw(st.sampled_from([t["trial_id"] for t in out]))
        elif draw(st.integers(min_value=0, max_value=12)) == 0:
            parent = f"{task_id}.gone"
        score = draw(SCORES)
        out.append(
            {
                "trial_id": f"{task_id}.{i}",
                "parent_trial_id": parent,
                "classification": draw(st.sampled_from(CLASSES)),
                "score": score,
                "gating_score": draw(st.sampled_from([score, 0, 1])),
                "trajectory": draw(st.none() | st.just({"matched": i, "expected": i + 1})),
                "efficiency": draw(EFFICIENCY),
                "fixture_misses": draw(st.integers(min_value=0, max_value=3)),
            }
        )
    return out


@st.composite
def compact_task_inputs(draw: st.DrawFn, task_id: str) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=5))
    return task(
        task_id,
        draw(st.sampled_from(RISKS)),
        count=count,
        k=draw(st.integers(min_value=1, max_value=count)),
        pass_rule=draw(st.sampled_from(["all", "any", "mean"])),
        pass_score=draw(st.sampled_from([0.0, 0.3, 0.5, 1.0])),
        trials=draw(trials(task_id)),
    )


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(POLICY)
    limits = {
        cls: draw(st.integers(min_value=1, max_value=3))
        for cls in draw(st.lists(st.sampled_from(RERUN_CLASSES), max_size=3, unique=True))
    }
    doc["reruns"]["max_attempts_by_class"] = limits
    return doc


@st.composite
def corpus(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.sampled_from(TASK_IDS), min_size=0, max_size=4, unique=True))
    tasks = [draw(compact_task_inputs(t)) for t in ids]
    base = None
    if draw(st.booleans()):
        base_tasks = [draw(compact_task_inputs(t)) for t in TASK_IDS]
        base = baseline(
            base_tasks,
            build=draw(st.sampled_from(["build-a", None])),
            required=draw(st.booleans()),
            method=draw(st.sampled_from(["mcnemar", "sign-test", "paired-t", "paired-bootstrap"])),
        )
    return make_inputs(
        tasks,
        waivers=draw(waiver_facts(BUILD, "WVR-B")),
        at=draw(st.sampled_from(TIMES)),
        base=base,
        policy=draw(policies()),
    )


def _differs(inputs: dict[str, Any]) -> tuple[bytes, bytes]:
    expected = canonical_json(same_decision_as_evaluator_3(evaluate(inputs)))
    compact = compact_inputs(inputs)
    return expected, canonical_json(evaluate_compact(compact))


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus())
def test_evaluator_4_decides_as_evaluator_3_on_a_generated_corpus(inputs: dict[str, Any]) -> None:
    expected, got = _differs(inputs)
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(corpus())
def test_a_compact_inputs_document_replays_under_evaluator_4(inputs: dict[str, Any]) -> None:
    """`evaluate_stored` sends evaluator-4 inputs to the compact evaluator, and the
    document round-trips through canonical JSON unchanged (exact sums are text)."""
    import json

    compact = compact_inputs(inputs)
    stored = json.loads(canonical_json(compact))
    assert canonical_json(evaluate_stored(stored)) == canonical_json(evaluate_compact(compact))


def test_a_summary_does_not_grow_with_trials_outside_rerun_chains() -> None:
    """1,000 and 100,000 trials of one task give summaries of the same size."""

    def size(n: int) -> int:
        summary = CompactTrials()
        for i in range(n):
            summary.add(
                {
                    "trial_id": f"t.{i}",
                    "parent_trial_id": None,
                    "classification": "task_pass" if i % 3 else "task_fail",
                    "score": 0.5,
                    "gating_score": 0.5,
                    "trajectory": None,
                    "efficiency": {
                        "toolCallCount": 1,
                        "modelCallCount": 2,
                        "inputTokens": 3,
                        "outputTokens": 4,
                    },
                    "fixture_misses": 0,
                }
            )
        return len(canonical_json(summary.document()))

    small, big = size(1_000), size(100_000)
    assert big <= small + 64  # only the digits of counts and sums grow


def test_reruns_keep_their_trials_and_the_rest_is_counted() -> None:
    t = task(
        "t1",
        "quality_signal",
        trials=[
            _trial("t1.0", "infrastructure_invalid"),
            _trial("t1.1", "task_pass"),
            _trial("t1.2", "task_pass", parent="t1.0"),
            _trial("t1.3", "task_fail"),
        ],
        count=3,
    )
    summary = compact_task(t)
    assert [c["trial_id"] for c in summary["chained"]] == ["t1.0", "t1.2"]
    assert [c["position"] for c in summary["chained"]] == [0, 2]
    assert summary["single"]["classes"] == {"task_fail": 1, "task_pass": 1}
    assert summary["single"]["first"] == {"task_fail": [3, "t1.3"], "task_pass": [1, "t1.1"]}
    assert summary["trialCount"] == 4
    result = evaluate_compact(compact_inputs(make_inputs([t])))
    row = result["tasks"][0]
    # The rerun stands in for the timed-out original (two attempts allowed): 2 of 3 passed.
    assert (row["n"], row["passedCount"], row["rerunCount"]) == (3, 2, 1)
    assert row["firstResultCounts"] == {"infrastructure_invalid": 1, "task_fail": 1, "task_pass": 1}
    assert Counter(row["firstResultCounts"]).total() == 3


def _trial(trial_id: str, cls: str, *, parent: str | None = None) -> dict[str, Any]:
    value = 1.0 if cls == "task_pass" else 0.0
    return {
        "trial_id": trial_id,
        "parent_trial_id": parent,
        "classification": cls,
        "score": value,
        "gating_score": value,
        "trajectory": None,
        "efficiency": {},
        "fixture_misses": 0,
    }
