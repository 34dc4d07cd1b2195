"""Waiver coverage as evaluators 1 and 2 judged it, frozen.

Those evaluators compared only the task's state (its highest failing class) with a waiver's
states, and never judged a granted waiver against the policy of the decision; evaluator 3
does both (see `domain.waivers`).
"""

from __future__ import annotations

from evalops.domain.waivers import WaiverFact


def covers(waiver: WaiverFact, *, task_id: str, suite_id: str, build: str, state: str) -> bool:
    """Scope only (one task, one suite, one build, listed states); time is checked apart."""
    return (
        waiver.task_id == task_id
        and waiver.suite_id == suite_id
        and waiver.build == build
        and state in waiver.states
    )
