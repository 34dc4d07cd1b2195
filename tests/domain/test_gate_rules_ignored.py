"""The suite's `ignoredTrials`: the trials that are not evidence for the pins, summed by reason
over the tasks (DESIGN 9: "the output counts them (`ignoredTrials`, by reason) so nobody
wonders where they went"). Inputs stored before a task's `ignoredTrials` was recorded carry
none: such a task ignored nothing, and the others' counts are summed all the same."""

from __future__ import annotations

from typing import Any

from evalops.domain.gate_rules import ignored_by_reason


def test_ignored_trials_are_summed_by_reason_and_a_task_without_them_ignored_nothing() -> None:
    tasks: list[dict[str, Any]] = [
        {"task_id": "a", "ignoredTrials": {"other_task_revision": 2}},
        {"task_id": "b"},  # stored before ignoredTrials was recorded
        {
            "task_id": "c",
            "ignoredTrials": {"other_grader_set_version": 3, "other_task_revision": 1},
        },
        {"task_id": "d", "ignoredTrials": {}},
    ]
    # By hand: other_task_revision 2 + 1, other_grader_set_version 3; reasons in name order.
    got = ignored_by_reason(tasks)
    assert got == {"other_grader_set_version": 3, "other_task_revision": 3}
    assert list(got) == ["other_grader_set_version", "other_task_revision"]
    assert ignored_by_reason([{"task_id": "b"}]) == {}
