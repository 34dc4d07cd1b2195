"""Waivers as evaluators 1 and 2 judged them, frozen.

Those evaluators compared only the task's state (its highest failing class) with a waiver's
states, and never judged a granted waiver against the policy of the decision; evaluator 3
does both (see `domain.waivers`). `WaiverFact` and `validity_at` are copied from
`domain.waivers` as they stood when these evaluators were frozen whole (ARCHITECTURE.md,
"Add an evaluator version").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from evalops.domain.legacy.vocabulary_v2 import parse_timestamp


@dataclass(frozen=True)
class WaiverFact:
    """A granted waiver as the gate sees it (JSON-friendly, times in canonical UTC text)."""

    waiver_id: str
    task_id: str
    suite_id: str
    build: str
    states: tuple[str, ...]
    granted_at: str
    expires_at: str
    revoked_at: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WaiverFact:
        return cls(
            d["waiver_id"],
            d["task_id"],
            d["suite_id"],
            d["build"],
            tuple(d["states"]),
            d["granted_at"],
            d["expires_at"],
            d.get("revoked_at"),
        )


def validity_at(waiver: WaiverFact, at: datetime) -> str:
    """`valid`, `not_yet_valid`, `expired` or `revoked` at time `at`."""
    if waiver.revoked_at is not None and parse_timestamp(waiver.revoked_at) <= at:
        return "revoked"
    if at < parse_timestamp(waiver.granted_at):
        return "not_yet_valid"
    if at >= parse_timestamp(waiver.expires_at):
        return "expired"
    return "valid"


def covers(waiver: WaiverFact, *, task_id: str, suite_id: str, build: str, state: str) -> bool:
    """Scope only (one task, one suite, one build, listed states); time is checked apart."""
    return (
        waiver.task_id == task_id
        and waiver.suite_id == suite_id
        and waiver.build == build
        and state in waiver.states
    )
