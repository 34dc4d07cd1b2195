"""Evaluator 1, frozen (decisions stored before migration 0002 replay with it).

Reruns (docs/classification.md): which trials count, without ever dropping one.

A rerun stands in for its parent only when the parent's class is listed in
`reruns.max_attempts_by_class` and the chain of reruns is within that count. Any other rerun
(of a confirmed hard failure, of a task failure, ...) is kept, labelled
`rerun_not_permitted`, and excluded; its parent keeps counting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RERUN_NOT_PERMITTED = "rerun_not_permitted"


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


def resolve_reruns(
    trials: Sequence[TrialNode], max_attempts_by_class: Mapping[str, int]
) -> RerunOutcome:
    by_id = {t.trial_id: t for t in trials}
    children: dict[str, list[TrialNode]] = {}
    for t in trials:
        if t.parent_trial_id is not None and t.parent_trial_id in by_id:
            children.setdefault(t.parent_trial_id, []).append(t)
    originals = [t for t in trials if t.parent_trial_id is None or t.parent_trial_id not in by_id]
    effective: list[str] = []
    not_permitted: set[str] = set()
    for original in originals:
        current = original
        reruns_so_far = 0
        while True:
            kids = children.get(current.trial_id, [])
            if not kids:
                break
            allowed = max_attempts_by_class.get(current.classification, 0)
            rerun, *others = kids
            # Only one rerun of a trial may stand in for it; any further rerun is excluded.
            for sibling in others:
                not_permitted.update(_chain(sibling, children))
            if reruns_so_far >= allowed:
                not_permitted.update(_chain(rerun, children))
                break
            reruns_so_far += 1
            current = rerun
        effective.append(current.trial_id)
    invalid = sum(
        1 for t in originals if t.classification in ("infrastructure_invalid", "grader_invalid")
    )
    return RerunOutcome(
        tuple(effective),
        frozenset(not_permitted),
        {t.trial_id: t.classification for t in originals},
        sum(1 for t in trials if t.parent_trial_id is not None),
        invalid,
    )


def _chain(start: TrialNode, children: Mapping[str, list[TrialNode]]) -> list[str]:
    out = [start.trial_id]
    for kid in children.get(start.trial_id, []):
        out += _chain(kid, children)
    return out
