"""Voids: what a void of mistaken trials needs and how it is named (docs/trials.md,
"Voiding a mistaken record"). Pure: the service finds the trials and stores the void."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Classes whose void could hide a real failure: they need two signers under an authority
#: (threshold `trials.void_hard`), and `--confirm-hard-failure` without one.
HARD_CLASSES = ("hard_constraint_fail", "ambiguous_external_effect")
#: The thresholds key of a void that leaves out a trial of a hard class.
HARD_THRESHOLD = "trials.void_hard"
VOIDED = "voided"
"""The `ignoredTrials` key of trials a void left out of a decision."""


def is_hard(*classes: str | None) -> bool:
    """Does any of a trial's classes (stored at ingest, re-derived now) make its void hard?"""
    return any(c in HARD_CLASSES for c in classes if c is not None)


def who(void: Mapping[str, Any]) -> str:
    """The void's signers when it was signed, else the actor who recorded it."""
    signers: Sequence[Mapping[str, Any]] = void.get("signers") or []
    if signers:
        return " and ".join(str(s["principal"]) for s in signers)
    return str(void["actor"])


def void_line(void: Mapping[str, Any], trials: int | None = None) -> str:
    """`voided: 3 trials, VOID-1 by alice: ingested under the wrong build` (`trials`: how
    many of the void's trials the reader concerns, else all of them)."""
    n = int(void["trial_count"] if trials is None else trials)
    hard = int(void.get("hard_count") or 0)
    noun = "trial" if n == 1 else "trials"
    marked = f" ({hard} hard failure{'s' if hard != 1 else ''})" if hard and trials is None else ""
    return f"voided: {n} {noun}{marked}, {void['void_id']} by {who(void)}: {void['reason']}"
