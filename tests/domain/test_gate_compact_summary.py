"""An evaluator-4 task summary written out by hand (docs/gate.md, "Evaluator 4: per-task
summaries"), field by field: `trialCount`; `single` (the trials in no rerun chain: `n`,
`classes`, `first` by position, exact sums as fraction text, `efficiencyCount` and
`efficiencySums`, `fixtureMisses`, `last`); `chained` (every trial of a rerun chain, in full,
with its position). tests/domain/test_gate_compact.py holds the decisions to evaluator 3's.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from evalops.domain.gate_compact import (
    EVALUATOR_COMPACT,
    CompactTrials,
    ExactSum,
    TrialCounts,
    compact_inputs,
    compact_task,
    same_decision_as_evaluator_3,
    trial_counts,
)
from evalops.domain.specs import GatePolicy
from tests.domain.test_gate_evaluate import POLICY


def _trial(  # noqa: PLR0913 (every field of a trial input can be varied)
    trial_id: str,
    cls: str,
    *,
    parent: str | None = None,
    score: float = 0.0,
    gating: float | None = None,
    efficiency: dict[str, Any] | None = None,
    misses: int = 0,
    trajectory: Any = None,
) -> dict[str, Any]:
    return {
        "trial_id": trial_id,
        "parent_trial_id": parent,
        "classification": cls,
        "score": score,
        "gating_score": score if gating is None else gating,
        "trajectory": trajectory,
        "efficiency": efficiency or {},
        "fixture_misses": misses,
    }


USAGE = {"toolCallCount": 1, "modelCallCount": 2, "inputTokens": 30, "outputTokens": 4.5}


def _trials() -> list[dict[str, Any]]:
    return [
        _trial("a", "task_pass", score=0.1, efficiency=USAGE, trajectory={"matched": True}),
        _trial("b", "task_fail", score=0.2, gating=0.0, misses=2),
        _trial("c", "infrastructure_invalid", score=0.7),  # the parent of a rerun
        _trial("d", "task_pass", parent="c", score=1.0, efficiency=USAGE),
        _trial("e", "runtime_error", score=0.3, efficiency=USAGE, misses=1),
        _trial("f", "task_pass", score=0.3, trajectory={"matched": False}),
    ]


def test_a_summary_counts_the_trials_outside_chains_and_keeps_the_chained_ones() -> None:
    summary = CompactTrials(["c"])
    for t in _trials():
        summary.add(t)  # type: ignore[arg-type]
    single = {
        "n": 4,
        "classes": {"runtime_error": 1, "task_fail": 1, "task_pass": 2},
        "first": {"runtime_error": [4, "e"], "task_fail": [1, "b"], "task_pass": [0, "a"]},
        # Exact sums: 0.1 + 0.2 + 0.3 + 0.3 as the floats are, not as decimals.
        "scoreSum": str(Fraction(0.1) + Fraction(0.2) + Fraction(0.3) + Fraction(0.3)),
        # A runtime error counts 0 whatever it scored; the fail's gating score is 0 here.
        "gatingSum": str(Fraction(0.1) + Fraction(0.0) + Fraction(0.3)),
        "efficiencyCount": 2,
        "efficiencySums": {
            "toolCallCount": "2",
            "modelCallCount": "4",
            "inputTokens": "60",
            "outputTokens": "9",
        },
        "fixtureMisses": 3,
        "last": {"position": 5, "trajectory": {"matched": False}},
    }
    chained = [
        {**_trials()[2], "position": 2},
        {**_trials()[3], "position": 3},
    ]
    assert summary.document() == {"trialCount": 6, "single": single, "chained": chained}


def test_an_empty_summary() -> None:
    assert CompactTrials().document() == {
        "trialCount": 0,
        "single": {
            "n": 0,
            "classes": {},
            "first": {},
            "scoreSum": "0",
            "gatingSum": "0",
            "efficiencyCount": 0,
            "efficiencySums": {
                "toolCallCount": "0",
                "modelCallCount": "0",
                "inputTokens": "0",
                "outputTokens": "0",
            },
            "fixtureMisses": 0,
            "last": None,
        },
        "chained": [],
    }


def test_an_exact_sum_is_the_fraction_sum() -> None:
    values = [0.1, 0.2, 0.3, 1e-300, 2.5, 7, 1 / 3, 0.0]
    total = ExactSum()
    for v in values:
        total.add(v)
    assert total.total() == sum((Fraction(v) for v in values), Fraction(0))
    assert ExactSum().total() == Fraction(0)


def test_compact_task_keeps_the_task_fields_and_summarizes_its_trials() -> None:
    task: dict[str, Any] = {
        "task_id": "t",
        "risk": "quality_signal",
        "protects": ["x"],
        "task_digest": "sha256:t",
        "grader_set_digest": "sha256:g",
        "plan": {"count": 3, "k": 3, "passRule": "all", "passScore": 1.0},
        "trials": _trials(),
        "ignoredTrials": {"other_task_revision": 2},
    }
    summary = compact_task(task)  # type: ignore[arg-type]
    expected = CompactTrials(["c"])
    for t in _trials():
        expected.add(t)  # type: ignore[arg-type]
    assert summary == {
        "task_id": "t",
        "risk": "quality_signal",
        "protects": ["x"],
        "task_digest": "sha256:t",
        "grader_set_digest": "sha256:g",
        "plan": task["plan"],
        "ignoredTrials": {"other_task_revision": 2},
        **expected.document(),
    }
    del task["ignoredTrials"]  # stored before ignoredTrials was recorded: nothing ignored
    assert compact_task(task)["ignoredTrials"] == {}  # type: ignore[arg-type]


def test_compact_inputs_summarize_the_tasks_and_the_baselines() -> None:
    task: dict[str, Any] = {
        "task_id": "t",
        "risk": "critical",
        "protects": [],
        "task_digest": "d",
        "grader_set_digest": "g",
        "plan": {},
        "trials": [_trial("a", "task_pass")],
    }
    inputs: dict[str, Any] = {
        "evaluator": 3,
        "gate_id": "G-1",
        "tasks": [task],
        "baseline": {"build": "b0", "method": "mcnemar", "tasks": [task]},
    }
    out = compact_inputs(inputs)  # type: ignore[arg-type]
    assert out["evaluator"] == EVALUATOR_COMPACT == 4
    assert out["gate_id"] == "G-1"
    assert out["tasks"] == [compact_task(task)]  # type: ignore[arg-type]
    assert out["baseline"] == {
        "build": "b0",
        "method": "mcnemar",
        "tasks": [compact_task(task)],  # type: ignore[arg-type]
    }
    assert inputs["evaluator"] == 3 and inputs["tasks"] == [task]  # the inputs are left alone
    no_trials = {**inputs, "baseline": {"build": None, "note": "none"}}
    assert compact_inputs(no_trials)["baseline"] == {"build": None, "note": "none"}  # type: ignore[arg-type,comparison-overlap]
    assert "baseline" not in compact_inputs({"tasks": []})  # type: ignore[typeddict-item]


def test_an_evaluator_3_decision_counts_its_first_results_by_class() -> None:
    decision: dict[str, Any] = {
        "decision": "hold",
        "tasks": [
            {
                "task_id": "t",
                "firstResults": {"a": "task_pass", "b": "task_fail", "c": "task_pass"},
            },
            {"task_id": "u"},
        ],
    }
    assert same_decision_as_evaluator_3(decision) == {  # type: ignore[arg-type,comparison-overlap]
        "decision": "hold",
        "tasks": [
            {"task_id": "t", "firstResultCounts": {"task_fail": 1, "task_pass": 2}},
            {"task_id": "u", "firstResultCounts": {}},
        ],
    }
    assert "firstResults" in decision["tasks"][0]  # the decision itself is left alone


def test_trial_counts_are_the_effective_trials_and_the_originals_by_class() -> None:
    """What an estimate reads of a task: the trials that count once reruns are resolved
    under the policy's limits, and each original by its own first result. In `_trials()`,
    `d` reruns the infrastructure_invalid `c`; the example policy lets an
    infrastructure_invalid trial have 2 attempts, so `d` stands in for `c`."""
    task: dict[str, Any] = {
        "task_id": "t",
        "risk": "quality_signal",
        "protects": [],
        "task_digest": "sha256:t",
        "grader_set_digest": "sha256:g",
        "plan": {"count": 5, "k": 5, "passRule": "all", "passScore": 1.0},
        "trials": _trials(),
    }
    summary = compact_task(task)  # type: ignore[arg-type]
    assert trial_counts(summary, GatePolicy.model_validate(POLICY)) == TrialCounts(
        effective={"runtime_error": 1, "task_fail": 1, "task_pass": 3},  # a, d, f pass
        first={"infrastructure_invalid": 1, "runtime_error": 1, "task_fail": 1, "task_pass": 2},
        rerun_count=1,
    )
    # A policy that lets no rerun stand in: `c` counts as it is; `d` is still a stored rerun.
    no_reruns = {**POLICY, "reruns": {**POLICY["reruns"], "max_attempts_by_class": {}}}
    assert trial_counts(summary, GatePolicy.model_validate(no_reruns)) == TrialCounts(
        effective={"infrastructure_invalid": 1, "runtime_error": 1, "task_fail": 1, "task_pass": 2},
        first={"infrastructure_invalid": 1, "runtime_error": 1, "task_fail": 1, "task_pass": 2},
        rerun_count=1,
    )


def test_efficiency_counts_of_another_length_are_refused_not_cut_short() -> None:
    """`add_single` takes a trial's counts in `EFFICIENCY_KEYS` order: a tuple of another
    length is a caller's mistake, refused when the summary is made, never paired with the
    keys as far as it goes (a missing count would read as 0 in a mean)."""
    summary = CompactTrials()
    summary.add_single("a", "task_pass", 1.0, 1.0, (1.0, 2.0, 3.0), 0, None)
    with pytest.raises(ValueError, match="zip"):
        summary.document()
