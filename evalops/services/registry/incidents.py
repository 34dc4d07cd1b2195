"""Incidents: real failures, from first report to a promoted regression task.

States move forward only, `open -> confirmed -> reproduced -> promoted -> closed`, by the
incident commands and by promotion. Every move is an `incident_event` row and an audit
event; nothing is updated in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from evalops.domain import audit_kinds
from evalops.domain.free_text import has_visible_text
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import InputError
from evalops.services.registry.unknown_ids import not_registered, unknown_incident
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.tables import Incident, IncidentEvent

Severity = Literal["critical", "high", "medium", "low"]
SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low")
STATES = ("open", "confirmed", "reproduced", "promoted", "closed")


CONFIRMED_STATES = ("confirmed", "reproduced")


@dataclass(frozen=True)
class IncidentView:
    row: Incident
    events: list[IncidentEvent]

    @property
    def state(self) -> str:
        return self.events[-1].state if self.events else "open"

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(e.task_id for e in self.events if e.task_id))

    @property
    def was_confirmed(self) -> bool:
        """Whether someone confirmed it (or saw it reproduced). A promotion is not a
        confirmation: evalops before 0.x could promote an open incident on its task's
        invariant, and such an incident was never confirmed."""
        return any(e.state in CONFIRMED_STATES for e in self.events)

    def as_dict(self, *, history: bool = False) -> dict[str, Any]:
        row = self.row
        out: dict[str, Any] = {
            "incident_id": row.incident_id,
            "state": self.state,
            "title": row.title,
            "severity": row.severity,
            "observed_at": format_timestamp(row.observed_at),
            "trace_uri": row.trace_uri,
            "description": row.description,
            "tasks": self.tasks,
            "opened_at": format_timestamp(row.opened_at),
            "opened_by": row.opened_by,
        }
        if history:
            out["history"] = [
                {
                    "action": e.action,
                    "state": e.state,
                    "task_id": e.task_id,
                    "reason": e.reason,
                    "at": format_timestamp(e.at),
                    "actor": e.actor,
                }
                for e in self.events
            ]
        return out


def view(session: Session, incident: Incident) -> IncidentView:
    return IncidentView(incident, queries.incident_events(session, incident))


def _load(session: Session, incident_id: str) -> IncidentView:
    row = queries.incident(session, incident_id)
    if row is None:
        raise InputError(unknown_incident(session, incident_id))
    return view(session, row)


OBSERVED_AHEAD = timedelta(minutes=5)
"""How far past this machine's clock an observation may be: the clocks of the system that
failed and of this one differ by seconds, not by days (a typo in the year is refused)."""


def open_incident(
    engine: Engine,
    *,
    title: str,
    severity: str,
    observed_at: str,
    trace_uri: str,
    description: str | None,
    actor: str,
    now: datetime,
) -> dict[str, Any]:
    if severity not in SEVERITIES:
        raise InputError(
            f"severity {severity!r} is not one of {', '.join(SEVERITIES)}", field="--severity"
        )
    try:
        observed = parse_timestamp(observed_at)
    except ValueError as exc:
        raise InputError(str(exc), field="--observed-at") from None
    if observed > now + OBSERVED_AHEAD:
        raise InputError(
            f"{format_timestamp(observed)} is in the future (now is {format_timestamp(now)}): "
            "give the time the failure was observed",
            field="--observed-at",
        )
    if not has_visible_text(title):
        raise InputError("title is empty", field="--title")
    if not trace_uri.strip():
        raise InputError("trace URI is empty", field="--trace-uri")
    with write_session(engine) as session:
        # Numbers are unique because writers are serialized; the unique index is a backstop.
        number = (session.exec(select(func.max(Incident.number))).one() or 0) + 1
        incident_id = f"INC-{number}"
        payload = {
            "incident_id": incident_id,
            "title": title,
            "severity": severity,
            "observed_at": format_timestamp(observed),
            "trace_uri": trace_uri,
            "description": description,
        }
        seq = next_seq(session)
        row = Incident(
            number=number,
            incident_id=incident_id,
            title=title,
            severity=severity,
            observed_at=observed,
            trace_uri=trace_uri,
            description=description,
            opened_at=now,
            opened_by=actor,
            audit_seq=seq,
        )
        session.add(row)
        session.flush()
        assert row.id is not None
        opened = IncidentEvent(
            incident_row_id=row.id,
            action="open",
            state="open",
            at=now,
            actor=actor,
            audit_seq=seq,
        )
        session.add(opened)
        append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.incident_kind("open"),
            subject=incident_id,
            payload=payload,
            rows=[row, opened],
        )
        return view(session, row).as_dict()


def move(
    session: Session,
    current: IncidentView,
    *,
    action: str,
    state: str,
    actor: str,
    now: datetime,
    task_id: str | None = None,
    reason: str | None = None,
) -> None:
    """Append one incident event (and its audit event) inside the caller's transaction."""
    assert current.row.id is not None
    payload = {"action": action, "from": current.state, "to": state, "task_id": task_id}
    if reason is not None:
        payload["reason"] = reason
    moved = IncidentEvent(
        incident_row_id=current.row.id,
        action=action,
        state=state,
        task_id=task_id,
        reason=reason,
        at=now,
        actor=actor,
        audit_seq=next_seq(session),
    )
    session.add(moved)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.incident_kind(action),
        subject=current.row.incident_id,
        payload=payload,
        rows=[moved],
    )


def confirm(engine: Engine, incident_id: str, *, actor: str, now: datetime) -> dict[str, Any]:
    with write_session(engine) as session:
        current = _load(session, incident_id)
        if current.state != "open":
            raise InputError(
                f"{incident_id} is {current.state}; only an open incident can be confirmed"
            )
        # A task already linked reproduces it: confirmed and reproduced at once.
        state = "reproduced" if current.tasks else "confirmed"
        move(session, current, action="confirm", state=state, actor=actor, now=now)
        return _load(session, incident_id).as_dict()


def link(
    engine: Engine, incident_id: str, task_id: str, *, actor: str, now: datetime
) -> dict[str, Any]:
    with write_session(engine) as session:
        current = _load(session, incident_id)
        if current.state in ("promoted", "closed"):
            raise InputError(f"{incident_id} is {current.state}; link a task before promotion")
        if queries.task_row(session, task_id) is None:
            raise InputError(not_registered(session, "task", task_id))
        state = "reproduced" if current.state in ("confirmed", "reproduced") else current.state
        move(session, current, action="link", state=state, task_id=task_id, actor=actor, now=now)
        return _load(session, incident_id).as_dict()


def close(
    engine: Engine, incident_id: str, *, reason: str, actor: str, now: datetime
) -> dict[str, Any]:
    if not has_visible_text(reason):
        raise InputError("closing an incident needs a reason", field="--reason")
    with write_session(engine) as session:
        current = _load(session, incident_id)
        if current.state == "closed":
            raise InputError(f"{incident_id} is already closed")
        move(session, current, action="close", state="closed", reason=reason, actor=actor, now=now)
        return _load(session, incident_id).as_dict()


def show(engine: Engine, incident_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        return _load(session, incident_id).as_dict(history=True)
