"""Reruns (docs/classification.md): which trials count, without ever dropping one.

`max_attempts_by_class` counts **attempts, the first included** (as `retry_policy.max_attempts`
does): the original is attempt 1, its rerun attempt 2, and so on. A chain may reach attempt N
only when N is at most `max_attempts_by_class[c]` for the class c of every earlier attempt in
it (a class that is not listed allows 1: no rerun). So `{infrastructure_invalid: 2}` lets one
rerun stand in for a timed-out trial and no third attempt; `{grader_invalid: 1}` lets no rerun
stand in for a grader_invalid trial. The last attempt that stood in is the effective one.

Every other rerun (of a confirmed hard failure, of a task failure, a second rerun of one
trial, a rerun whose parent is not among the trials) is kept, labelled `rerun_not_permitted`,
and excluded; the trial it would have replaced keeps counting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

RERUN_NOT_PERMITTED = "rerun_not_permitted"
INVALID_RUN_CLASSES = ("infrastructure_invalid", "grader_invalid")


@dataclass(frozen=True)
class TrialNode:
    trial_id: str
    parent_trial_id: str | None
    classification: str


@dataclass(frozen=True)
class RerunOutcome:
    effective: tuple[str, ...]
    """Trial ids that count, one per original trial: the last permitted stand-in."""
    not_permitted: frozenset[str]
    """Reruns stored but excluded."""
    first_results: Mapping[str, str]
    """Original trial id -> its own classification (first results are always reported)."""
    rerun_count: int
    invalid_count: int
    """Originals whose first result was an invalid run (infrastructure or grader)."""


NO_RERUNS = RerunOutcome((), frozenset(), MappingProxyType({}), 0, 0)
"""`resolve_reruns` of no trials, whatever the limits: a task whose trials are in no rerun
chain (most of a suite's) needs nothing resolved."""


def attempt_allowed(
    attempt: int, earlier_classes: Sequence[str], limits: Mapping[str, int]
) -> bool:
    """May a chain whose earlier attempts had these classes reach attempt number `attempt`?"""
    return all(attempt <= limits.get(c, 1) for c in earlier_classes)


def resolve_reruns(
    trials: Sequence[TrialNode], max_attempts_by_class: Mapping[str, int]
) -> RerunOutcome:
    """Which trial stands for each original, given the policy's attempt limits.

    `trials` come in stored order; among several reruns of one trial the first stored one is
    the only candidate to stand in.
    """
    by_id = {t.trial_id: t for t in trials}
    children: dict[str, list[TrialNode]] = {}
    orphans: list[TrialNode] = []
    for t in trials:
        if t.parent_trial_id is None:
            continue
        if t.parent_trial_id in by_id:
            children.setdefault(t.parent_trial_id, []).append(t)
        else:
            # A rerun whose parent is not evidence here never becomes an extra original.
            orphans.append(t)
    originals = [t for t in trials if t.parent_trial_id is None]
    effective: list[str] = []
    not_permitted: set[str] = set()
    for orphan in orphans:
        not_permitted.update(_chain(orphan, children))
    for original in originals:
        current = original
        classes = [original.classification]
        while True:
            kids = children.get(current.trial_id, [])
            if not kids:
                break
            rerun, *others = kids
            for sibling in others:
                not_permitted.update(_chain(sibling, children))
            if not attempt_allowed(len(classes) + 1, classes, max_attempts_by_class):
                not_permitted.update(_chain(rerun, children))
                break
            current = rerun
            classes.append(rerun.classification)
        effective.append(current.trial_id)
    invalid = sum(1 for t in originals if t.classification in INVALID_RUN_CLASSES)
    return RerunOutcome(
        tuple(effective),
        frozenset(not_permitted),
        {t.trial_id: t.classification for t in originals},
        sum(1 for t in trials if t.parent_trial_id is not None),
        invalid,
    )


def _chain(start: TrialNode, children: Mapping[str, list[TrialNode]]) -> list[str]:
    out: list[str] = []
    stack = [start]
    while stack:
        node = stack.pop()
        out.append(node.trial_id)
        stack.extend(children.get(node.trial_id, []))
    return out
