"""The one-line errors for ids that name nothing: what exists, and the id probably meant."""

from __future__ import annotations

from sqlmodel import Session, select

from evalops.domain.suggestions import unknown_id, unknown_numbered
from evalops.store import queries

_NOUNS = {
    "task": ("task", "tasks"),
    "suite": ("suite", "suites"),
    "execution_profile": ("execution profile", "execution profiles"),
    "grader_set": ("grader set", "grader sets"),
}


def not_registered(
    session: Session, kind: str, given: str, cutoff: int | None = None, *, status: str = ""
) -> str:
    """`task 'frist-task' is not registered; did you mean ...? (tasks registered: ...)`.

    An execution profile named by its `system_build` (the build a gate check takes) says
    which profile has that build: the ids look alike and are easily swapped.
    """
    noun, nouns = _NOUNS[kind]
    if kind == "execution_profile":
        rows = queries.in_force_rows(session, kind, cutoff)
        with_build = [eid for eid, row in rows.items() if row.system_build == given]
        if with_build:
            named = " or ".join(repr(eid) for eid in with_build)
            return (
                f"execution profile {given!r} is not registered; {given} is the system_build "
                f"of execution profile {named}: give the profile's id"
            )
    known = queries.in_force_ids(session, kind, cutoff)
    if given not in known and queries.is_registered(session, kind, given, cutoff):
        # Registered all the same: "not registered" would be false. Either the tracked
        # branch dropped it, or only a sync off the tracked line (a branch's) ever read it.
        last = queries.last_in_force_run(session, kind, given)
        if last is not None:
            return (
                f"{noun} {given!r} is registered but no longer in force: it was in force up "
                f"to sync run {last}, and a later sync of the tracked branch no longer has "
                "it (renamed or deleted there)"
            )
        return (
            f"{noun} {given!r} is registered but not in force (a sync off the tracked line, "
            f"a branch's, registered it; only the tracked branch's syncs put definitions in "
            'force: docs/authority.md, "The tracked branch")'
        )
    if status:
        return unknown_id(noun, given, known, nouns=nouns, status=status)
    return unknown_id(noun, given, known, nouns=nouns)


def known_grader_ids(session: Session) -> list[str]:
    """Every grader id with a registered config, sorted."""
    from evalops.store.tables import GraderConfig

    return sorted(set(session.exec(select(GraderConfig.grader_id))))


def unknown_decision(session: Session, gate_id: str) -> str:
    """`unknown gate decision '2'; did you mean GATE-2?`"""
    from evalops.store.tables import GateDecision

    def exists(guess: str) -> bool:
        found = session.exec(select(GateDecision.id).where(GateDecision.gate_id == guess))
        return found.first() is not None

    return unknown_numbered("gate decision", gate_id, "GATE-", exists, "evalops gate list")


def unknown_incident(session: Session, incident_id: str) -> str:
    """`unknown incident '2'; did you mean INC-2?`"""
    return unknown_numbered(
        "incident",
        incident_id,
        "INC-",
        lambda guess: queries.incident(session, guess) is not None,
        "evalops incident list",
    )


def unknown_waiver(session: Session, waiver_id: str) -> str:
    """`unknown waiver '2'; did you mean WVR-2?`"""
    from evalops.store.tables import Waiver

    def exists(guess: str) -> bool:
        found = session.exec(select(Waiver.id).where(Waiver.waiver_id == guess))
        return found.first() is not None

    return unknown_numbered("waiver", waiver_id, "WVR-", exists, "evalops waiver list --all")
