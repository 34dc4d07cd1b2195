"""Waivers (docs/gate.md): who may accept which failure, for which build, until when.

A waiver is owner-signed, scoped to one task and one build, lists the states it accepts,
and expires. It is valid at time T iff `granted_at <= T < expires_at` and it was not
revoked at or before T. Time is always a parameter and always carries an offset.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from evalops.domain.free_text import has_visible_text
from evalops.domain.humanize import quantity
from evalops.domain.timestamps import format_timestamp, parse_timestamp

if TYPE_CHECKING:  # the spec models (pydantic) are not needed to list waivers
    from evalops.domain.gate_documents import WaiverFactDocument
    from evalops.domain.policy_rules import PolicyRules


@dataclass(frozen=True)
class WaiverRequest:
    task_id: str
    suite_id: str
    states: tuple[str, ...]
    build: str | None
    owner: str | None
    reason: str | None
    expires: str | None
    """As given: RFC 3339 with an offset, or None."""


@dataclass(frozen=True)
class Refusal:
    rule: str
    message: str


def grant_refusals(
    request: WaiverRequest,
    *,
    risk: str,
    protects: Sequence[str],
    policy: PolicyRules,
    now: datetime,
) -> list[Refusal]:
    """Every rule of section 9 the request breaks (empty: it may be granted)."""
    from evalops.domain.classes import CANONICAL_PRECEDENCE

    out: list[Refusal] = []
    rules = policy.waivers
    if risk == "critical":
        out.append(Refusal("critical_task", f"task {request.task_id} is critical"))
    if protects:
        out.append(
            Refusal("protected_task", f"task {request.task_id} protects {', '.join(protects)}")
        )
    if risk != "critical":
        out.extend(_layer_refusals(risk, policy))
    if not request.states:
        out.append(Refusal("states", "no states listed"))
    for state in request.states:
        if state not in CANONICAL_PRECEDENCE or state == "task_pass":
            out.append(Refusal("unknown_state", f"{state!r} is not a failing class"))
        elif state in rules.forbidden_states:
            out.append(Refusal("forbidden_state", f"{state} is in waivers.forbidden_states"))
    for name, value in (("owner", request.owner), ("reason", request.reason)):
        if not has_visible_text(value):
            out.append(Refusal(name, f"{name} is missing"))
    if not has_visible_text(request.build):
        out.append(Refusal("build_scope", "build is missing (a waiver covers one build)"))
    out.extend(_expiry_refusals(request.expires, rules.max_duration_days, now))
    return out


def _layer_refusals(risk: str, policy: PolicyRules) -> list[Refusal]:
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


def _expiry_refusals(expires: str | None, max_days: int, now: datetime) -> list[Refusal]:
    if not expires:
        return [Refusal("expires_at", "expires_at is missing")]
    try:
        moment = parse_timestamp(expires)
    except ValueError as exc:
        rule = "expires_at_naive" if "no offset" in str(exc) else "expires_at"
        return [Refusal(rule, str(exc))]
    if moment <= now:
        return [
            Refusal(
                "expires_at_past", f"expires_at {format_timestamp(moment)} is not in the future"
            )
        ]
    if moment - now > timedelta(days=max_days):
        return [
            Refusal(
                "expires_at_too_far",
                f"expires_at {format_timestamp(moment)} is more than max_duration_days "
                f"({max_days}) away",
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

    def as_dict(self) -> WaiverFactDocument:
        return {
            "waiver_id": self.waiver_id,
            "task_id": self.task_id,
            "suite_id": self.suite_id,
            "build": self.build,
            "states": list(self.states),
            "granted_at": self.granted_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }

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


def policy_refusals(waiver: WaiverFact, *, risk: str, policy: PolicyRules) -> list[Refusal]:
    """What the gate policy of a decision forbids in a granted waiver: a state it forbids,
    the task's layer (`risk`, the ratcheted one) when the policy does not allow it, or a
    validity longer than `max_duration_days`. A waiver is judged again at every decision,
    so a policy tightened after the grant refuses it (empty: the policy allows it)."""
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
    return f"{quantity(days)} day" + ("" if days == 1 else "s")


def covers(
    waiver: WaiverFact, *, task_id: str, suite_id: str, build: str, failing: Collection[str]
) -> bool:
    """Scope (one task, one suite, one build) and states: every failing class among the
    task's effective trials, and its state, must be in the waiver's `states` (a waiver for
    `agent_error` never passes a task whose trials also failed as `task_fail`). Time is
    checked apart."""
    return (
        waiver.task_id == task_id
        and waiver.suite_id == suite_id
        and waiver.build == build
        and bool(failing)
        and all(state in waiver.states for state in failing)
    )
