"""Every kind of audit event evalops appends: one constant per kind (ARCHITECTURE.md, "Audit
event kinds").

A kind is `noun.verb`: the thing changed, a dot, what happened to it, each a lowercase word
or snake_case words (`waiver.grant`, `trials.ingest`, `calibration.invalidate`); a change
evalops refused is `noun.refused` (`waiver.refused`, `promotion.refused`). The kind is one
of the fields every event's hash covers (`domain/audit_chain.py` `event_hash`), so a kind
once stored is never renamed: an older kind that breaks the pattern stays as it is, listed
in `FROZEN_KINDS`, and the list may only shrink. `tests/contract/test_audit_kinds.py`
holds every kind appended to the pattern or to that list.

These are audit event kinds only. The kinds of signed acts (docs/authority.md: `retire`,
`waiver.grant`, `trials.import`...) are another vocabulary, signed and stored with their
act, and some share a spelling with an event kind.
"""

from __future__ import annotations

import re

AUTHORITY_REFUSED = "authority.refused"
CALIBRATION_INVALIDATE = "calibration.invalidate"
CALIBRATION_RECORD = "calibration.record"
CALIBRATION_REFUSED = "calibration.refused"
"""`calibration record --require-valid` of a calibration that would not be valid."""
ESTIMATE_RECORD = "estimate.record"
"""An estimate of an estimation suite's rates stored (`evalops estimate`)."""
GATE_DECISION = "gate.decision"
MIGRATION_ROWS = "migration.rows"
"""Rows of an older schema carried forward by a migration (`0002_tamper_evidence`)."""
PROMOTION_ACCEPTED = "promotion.accepted"
PROMOTION_NOOP = "promotion.noop"
PROMOTION_REFUSED = "promotion.refused"
RETIREMENT_ACCEPTED = "retirement.accepted"
RETIREMENT_REFUSED = "retirement.refused"
REVIEW_REFUSED = "review.refused"
REVIEW_RESOLVE = "review.resolve"
REGISTRY_TRACK = "registry.track"
"""The tracked branch and path of the registry changed (`evalops registry track`)."""
SYNC_IN_FORCE = "sync.in_force"
SYNC_REFUSED = "sync.refused"
SYNC_REGISTERED = "sync.registered"
"""A sync off the tracked branch or path: definitions registered, nothing in force changed."""
TRIALS_INGEST = "trials.ingest"
TRIALS_RECONCILE = "trials.reconcile"
TRIALS_VOID = "trials.void"
"""A void: trials ingested by mistake left out from here on (docs/trials.md)."""
VOID_REFUSED = "void.refused"
"""A void that would have hidden a hard failure without its confirmation."""
TRIALS_RECONCILE_REFUSED = "trials.reconcile_refused"
"""A refusal spelled before `noun.refused` was the rule: kept (see `FROZEN_KINDS`)."""
WAIVER_GRANT = "waiver.grant"
WAIVER_REFUSED = "waiver.refused"
WAIVER_REVOKE = "waiver.revoke"

SYNC_DEFINITION = {
    "task": "sync.task",
    "execution_profile": "sync.execution_profile",
    "grader_set": "sync.grader_set",
    "suite": "sync.suite",
    "suite_policy": "sync.suite_policy",
    "gate_policy": "sync.gate_policy",
    "authority": "sync.authority",
}
"""The event of a sync registering one definition, by the definition's kind."""

INCIDENT_ACTION = {
    "open": "incident.open",
    "confirm": "incident.confirm",
    "link": "incident.link",
    "promote": "incident.promote",
    "close": "incident.close",
}
"""The event of an incident's transition, by its action (`IncidentEvent.action`)."""


def sync_kind(definition_kind: str) -> str:
    """The kind of the event that registers a definition of `definition_kind`."""
    return SYNC_DEFINITION[definition_kind]


def incident_kind(action: str) -> str:
    """The kind of the event that records an incident's `action`."""
    return INCIDENT_ACTION[action]


ALL_KINDS = frozenset(
    {
        AUTHORITY_REFUSED,
        CALIBRATION_INVALIDATE,
        CALIBRATION_RECORD,
        CALIBRATION_REFUSED,
        ESTIMATE_RECORD,
        GATE_DECISION,
        MIGRATION_ROWS,
        PROMOTION_ACCEPTED,
        PROMOTION_NOOP,
        PROMOTION_REFUSED,
        RETIREMENT_ACCEPTED,
        RETIREMENT_REFUSED,
        REVIEW_REFUSED,
        REVIEW_RESOLVE,
        REGISTRY_TRACK,
        SYNC_IN_FORCE,
        SYNC_REFUSED,
        SYNC_REGISTERED,
        TRIALS_INGEST,
        TRIALS_RECONCILE,
        TRIALS_RECONCILE_REFUSED,
        TRIALS_VOID,
        VOID_REFUSED,
        WAIVER_GRANT,
        WAIVER_REFUSED,
        WAIVER_REVOKE,
        *SYNC_DEFINITION.values(),
        *INCIDENT_ACTION.values(),
    }
)
"""Every kind evalops appends."""

FROZEN_KINDS = frozenset({TRIALS_RECONCILE_REFUSED})
"""Older kinds that break the pattern, kept because the chain hashes them. Never add one:
a new kind follows the pattern."""

_WORD = r"[a-z]+(?:_[a-z]+)*"
_PATTERN = re.compile(rf"{_WORD}\.{_WORD}")


def follows_pattern(kind: str) -> bool:
    """`noun.verb` (lowercase, snake_case words, one dot); a refusal is `noun.refused`."""
    if _PATTERN.fullmatch(kind) is None:
        return False
    return "refused" not in kind or kind.split(".")[1] == "refused"
