"""The acts an authority governs and the role that signs each: plain constants, so that
checking stored signatures (`verify`) needs no spec models (evalops/domain/specs.py, which
uses them to validate an authority file, names them too)."""

from __future__ import annotations

from typing import Literal

Role = Literal["risk_owner", "reviewer", "calibrator", "policy_owner", "ingester"]
ActKind = Literal[
    "waiver.grant",
    "waiver.revoke",
    "retire",
    "review.resolve",
    "calibration.record",
    "calibration.invalidate",
    "trials.ingest",
    "trials.import",
    "suite.promote",
    "registry.track",
    "trials.void",
    "trials.void_hard",
    "trials.reconcile",
]
#: The role whose holders may sign each act.
ACT_ROLES: dict[str, Role] = {
    "waiver.grant": "risk_owner",
    "waiver.revoke": "risk_owner",
    "retire": "risk_owner",
    "review.resolve": "reviewer",
    "calibration.record": "calibrator",
    # Withdrawing a calibration holds every release its grader judges: the same trust.
    "calibration.invalidate": "calibrator",
    "trials.ingest": "ingester",
    "trials.import": "ingester",
    # A new member or a new pin decides what the suite blocks on: the suite's risk owners.
    "suite.promote": "risk_owner",
    # Which branch and path the rules in force follow is itself a rule.
    "registry.track": "policy_owner",
    # Voiding evidence changes what every decision on the suite rests on: its risk owners'.
    "trials.void": "risk_owner",
    # Not an act of its own: the threshold of a `trials.void` that leaves out a hard
    # failure or an ambiguous external effect (docs/trials.md, "Voiding a mistaken record").
    "trials.void_hard": "risk_owner",
    # Settling an ambiguous effect lifts the hold it causes (voiding the trial would need
    # two signers): the suite's risk owners, as for a void.
    "trials.reconcile": "risk_owner",
}
#: Thresholds that are not 1 when an authority does not declare them.
DEFAULT_THRESHOLDS: dict[str, int] = {"trials.void_hard": 2}
#: The separations of duties an authority may declare.
SeparationRule = Literal["no_self_waiver", "no_self_review"]


def membership_act(action: str) -> str:
    """The signed act behind a suite membership row: its retirement is a `retire`, a new
    member or a new pin (`added`, `repinned`) a `suite.promote`."""
    return "retire" if action == "retired" else "suite.promote"
