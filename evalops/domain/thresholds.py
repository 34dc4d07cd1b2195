"""Thresholds validated against scope (docs/authority.md, "Thresholds"): a threshold no set
of principals holding the role in the act's scope can meet is an error of the authority
file (exit 2 at `validate` and `sync`), not a lock found at the first act.

An act names a suite and a task (waivers, retirements, promotions), a task only (reviews)
or neither (calibrations, ingests and imports); a grant scoped to suites covers no act that
names no suite, and one scoped to tasks no act that names no task (`_grant_covers` in
evalops/domain/authority.py fails closed). So a threshold counts, in the best scope any
grant names, the principals whose grants cover it. `AuthoritySpec` and the stored view of
evalops/domain/stored_authority.py both ask this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, Protocol

from evalops.domain.act_roles import ACT_ROLES

#: What each act's scope names (an act kind not listed names both, as waivers do).
ACT_SCOPES: dict[str, tuple[str, ...]] = {
    "review.resolve": ("task",),
    "calibration.record": (),
    "calibration.invalidate": (),
    "trials.ingest": (),
    "trials.import": (),
    "registry.track": (),
}


class Grant(Protocol):
    @property
    def principal(self) -> str: ...
    @property
    def suites(self) -> Sequence[str]: ...
    @property
    def tasks(self) -> Sequence[str]: ...


def _covers(globs: Sequence[str], probe: str | None) -> bool:
    """Does a grant's glob list cover every name the probe stands for? (None: a name no
    glob of the authority matches; a probe glob is covered by a glob that matches its text.)"""
    if not globs:
        return True
    if probe is None:
        return False
    return any(probe == g or fnmatchcase(probe, g) for g in globs)


def signers_possible(act: str, grants: Sequence[Grant]) -> int:
    """The most distinct principals whose grants cover one scope an act of `act` can name."""
    names = ACT_SCOPES.get(act, ("suite", "task"))
    usable = [
        g for g in grants if (not g.suites or "suite" in names) and (not g.tasks or "task" in names)
    ]
    suites = {None, *(s for g in usable for s in g.suites)}
    tasks = {None, *(t for g in usable for t in g.tasks)}
    best = 0
    for suite in suites:
        for task in tasks:
            holders = {
                g.principal for g in usable if _covers(g.suites, suite) and _covers(g.tasks, task)
            }
            best = max(best, len(holders))
    return best


def threshold_problem(
    roles: Mapping[Any, Sequence[Grant]], thresholds: Mapping[Any, int]
) -> tuple[str, str] | None:
    """(the act, why) for the first threshold no scope lets enough principals meet."""
    for act, needed in thresholds.items():
        role = ACT_ROLES[act]
        possible = signers_possible(act, roles.get(role, ()))
        if needed > possible:
            names = ACT_SCOPES.get(act, ("suite", "task"))
            scope = " and ".join(names) or "no suite or task: scoped grants do not count"
            return act, (
                f"{act} needs {needed} distinct signers but at most {possible} principal(s) "
                f"hold {role} for one scope (its acts name {scope})"
            )
    return None
