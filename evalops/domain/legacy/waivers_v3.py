"""Waivers as evaluator 3 judges them, frozen: `WaiverFact`, `validity_at`, `covers` and
`policy_refusals` (with the rule and number wording they need), copied from `domain.waivers`
and `domain.humanize` as they stood when evaluator 3 was frozen whole (ARCHITECTURE.md,
"Add an evaluator version"). Never edited afterwards: a change to the live rule must not
change how an old decision replays.

Evaluator 3 judges every granted waiver against the policy of the decision and covers a
task only when the waiver names every failing class among the task's trials.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from evalops.domain.legacy.specs_v2 import GatePolicy
from evalops.domain.legacy.vocabulary_v2 import parse_timestamp


@dataclass(frozen=True)
class Refusal:
    rule: str
    message: str


def _quantity(value: float | int) -> str:
    """A count or a duration for people: an integer without `.0` (`7`, `30`), else at
    most two decimals (`1.5`, `0.25`)."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(int(value))


def _layer_refusals(risk: str, policy: GatePolicy) -> list[Refusal]:
    """A layer may be waived only when the policy lists it: an empty or omitted
    `allowed_layers` waives nothing (it never falls open to every non-critical layer)."""
    allowed = policy.waivers.allowed_layers
    if not allowed:
        return [
            Refusal(
                "layer_not_allowed",
                "waivers.allowed_layers is empty or omitted: the gate policy lets no layer be "
                "waived",
            )
        ]
    if risk not in allowed:
        return [
            Refusal(
                "layer_not_allowed",
                f"risk {risk} is not in waivers.allowed_layers {list(allowed)}",
            )
        ]
    return []


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
    def from_dict(cls, d: Mapping[str, Any]) -> WaiverFact:
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


def policy_refusals(waiver: WaiverFact, *, risk: str, policy: GatePolicy) -> list[Refusal]:
    """What the gate policy of a decision forbids in a granted waiver: a state it forbids,
    the task's layer (`risk`, the ratcheted one) when the policy does not allow it, or a
    validity longer than `max_duration_days` (empty: the policy allows it)."""
    rules = policy.waivers
    out = [
        Refusal("forbidden_state", f"{state} is in waivers.forbidden_states")
        for state in waiver.states
        if state in rules.forbidden_states
    ]
    out.extend(_layer_refusals(risk, policy))
    duration = parse_timestamp(waiver.expires_at) - parse_timestamp(waiver.granted_at)
    if duration > timedelta(days=rules.max_duration_days):
        out.append(
            Refusal(
                "expires_at_too_far",
                f"valid for {_days(duration)}, more than max_duration_days "
                f"({rules.max_duration_days})",
            )
        )
    return out


def _days(duration: timedelta) -> str:
    days = duration / timedelta(days=1)
    return f"{_quantity(days)} day" + ("" if days == 1 else "s")


def covers(
    waiver: WaiverFact, *, task_id: str, suite_id: str, build: str, failing: Collection[str]
) -> bool:
    """Scope (one task, one suite, one build) and states: every failing class among the
    task's effective trials, and its state, must be in the waiver's `states`. Time is
    checked apart."""
    return (
        waiver.task_id == task_id
        and waiver.suite_id == suite_id
        and waiver.build == build
        and bool(failing)
        and all(state in waiver.states for state in failing)
    )
