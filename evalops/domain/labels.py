"""The risk-label ratchet (docs/gate.md, "Risk labels ratchet"), apart from how task
revisions are read: the gate and waivers read a task's labels as the strictest among its
pinned revision and every later registered one (highest risk, union of `protects`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from evalops.domain.facts import TaskHeadFacts

RISK_RANK = {"critical": 0, "noncritical_regression": 1, "quality_signal": 2}


class RevisionRow(Protocol):
    """A registered task revision as the ratchet reads it (an ORM row or a plain one)."""

    @property
    def id(self) -> int | None: ...
    @property
    def revision(self) -> int: ...


Rev = TypeVar("Rev", bound=RevisionRow)


def strictest_labels(
    rows: Sequence[Rev],
    pinned_revision_id: int | None,
    spec_of: Callable[[Rev], TaskHeadFacts],
) -> tuple[str, list[str]]:
    """The ratchet over one task's registered rows, oldest first: with no pin (not a
    member), every registered revision counts."""
    pinned = next((r for r in rows if r.id == pinned_revision_id), None)
    floor = pinned.revision if pinned is not None else 0
    risk = "quality_signal"
    protects: set[str] = set()
    for row in rows:
        if row.revision < floor:
            continue
        meta = spec_of(row).meta
        if RISK_RANK[meta.risk] < RISK_RANK[risk]:
            risk = meta.risk
        protects.update(meta.protects)
    return risk, sorted(protects)
