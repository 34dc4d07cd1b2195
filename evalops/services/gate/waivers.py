"""`evalops waiver grant|list|revoke`: build-scoped, expiring acceptance of failures."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds
from evalops.domain.authority import Scope
from evalops.domain.canonical import canonical_text
from evalops.domain.free_text import has_visible_text
from evalops.domain.policy_rules import read_policy
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.domain.waivers import WaiverFact, WaiverRequest, grant_refusals, validity_at
from evalops.errors import InputError
from evalops.services.authority.acts import (
    UNSIGNED,
    Signing,
    authorize,
    record_refusal,
    separation_refusal,
    signers_of,
)
from evalops.services.gate.policies import gate_policy_for
from evalops.services.placeholders import refuse_placeholder
from evalops.services.registry.unknown_ids import not_registered, unknown_waiver
from evalops.store import queries
from evalops.store.audit import append_event, next_seq, registry_now
from evalops.store.engine import write_session
from evalops.store.tables import Waiver, WaiverRevocation


def _revocation(session: Session, waiver: Waiver) -> WaiverRevocation | None:
    return session.exec(
        select(WaiverRevocation)
        .where(WaiverRevocation.waiver_row_id == waiver.id)
        .order_by(col(WaiverRevocation.revoked_at))
    ).first()


def waiver_view(session: Session, w: Waiver, now: datetime) -> dict[str, Any]:
    """A waiver as listings show it, its status at the registry's present (`registry_now`:
    a revocation recorded by a clock ahead of this one is in force here too)."""
    now = registry_now(session, now)
    revoked = _revocation(session, w)
    fact = WaiverFact(
        w.waiver_id,
        w.task_id,
        w.suite_id,
        w.build,
        tuple(json.loads(w.states)),
        format_timestamp(w.granted_at),
        format_timestamp(w.expires_at),
        format_timestamp(revoked.revoked_at) if revoked else None,
    )
    return {
        **fact.as_dict(),
        "owner": w.owner,
        "reason": w.reason,
        "granted_by": w.granted_by,
        "status": validity_at(fact, now),
        "revocation_reason": revoked.reason if revoked else None,
        "signers": signers_of(session, "waiver.grant", w.audit_seq),
        "revocation_signers": (
            signers_of(session, "waiver.revoke", revoked.audit_seq) if revoked else []
        ),
    }


def _normalized(expires: str | None) -> str | None:
    try:
        return format_timestamp(parse_timestamp(expires)) if expires else expires
    except ValueError:
        return expires  # refused below by the expiry rules, with their message


def grant(
    engine: Engine,
    request: WaiverRequest,
    *,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
) -> tuple[bool, dict[str, Any]]:
    """(granted, waiver or refusal). A refusal is audited and changes nothing else.

    With an authority in force the grant is a signed act of a risk owner of the suite
    (docs/authority.md); `signing` says how it is signed.
    """
    refuse_placeholder("--owner", request.owner, "the risk owner (an email address)")
    refuse_placeholder("--reason", request.reason, "why the risk is acceptable")
    with write_session(engine) as session:
        # Judged at the registry's present, where every check will read it: a waiver that
        # would be expired there is refused now rather than granted dead.
        clock, now = now, registry_now(session, now)
        suite = queries.suite_row(session, request.suite_id)
        if suite is None:
            raise InputError(not_registered(session, "suite", request.suite_id), field="--suite")
        if has_visible_text(request.build) and not any(
            row.system_build == request.build
            for row in queries.in_force_rows(session, "execution_profile").values()
        ):
            raise InputError(
                f"no execution profile in force has system_build {request.build!r}: a waiver "
                "covers one build that evalops knows",
                field="--build",
            )
        member = {m.task_id for m in queries.members(session, request.suite_id)}
        if request.task_id not in member:
            raise InputError(
                f"task {request.task_id!r} is not a member of {request.suite_id}", field="--task"
            )
        pinned = {m.task_id: m for m in queries.members(session, request.suite_id)}[request.task_id]
        # The strictest labels among the pinned revision and every later one (risk ratchet).
        risk, protects = queries.effective_labels(
            session, request.task_id, pinned.added.task_revision_id
        )
        policy_doc = gate_policy_for(session, suite).document
        refusals = grant_refusals(
            request,
            risk=risk,
            protects=protects,
            policy=read_policy(policy_doc),
            now=now,
        )
        request_json = {
            "task_id": request.task_id,
            "suite_id": request.suite_id,
            "states": list(request.states),
            "build": request.build,
            "owner": request.owner,
            "reason": request.reason,
            "expires_at": request.expires,
        }
        if refusals:
            listed = [
                {
                    "rule": r.rule,
                    "message": r.message + (_behind(clock, now) if r.rule in _TIMED else ""),
                }
                for r in refusals
            ]
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.WAIVER_REFUSED,
                subject=f"{request.suite_id}:{request.task_id}",
                payload={"request": request_json, "refusals": listed},
            )
            return False, {"granted": False, "refusals": listed, "request": request_json}
        # The act is what is stored: the request with its expiry in the stored spelling.
        authorized = authorize(
            session,
            kind="waiver.grant",
            body={**request_json, "expires_at": _normalized(request.expires)},
            scope=Scope(suite=request.suite_id, task=request.task_id),
            signing=signing,
            now=now,
        )
        separation_refusal(session, authorized, "no_self_waiver", build=request.build)
        subject = f"{request.suite_id}:{request.task_id}"
        if authorized.refused:
            refusal = record_refusal(
                session, authorized, subject=subject, actor=actor, now=now, request=request_json
            )
            return False, {"granted": False, "refusals": [refusal], "request": request_json}
        number = (session.exec(select(func.max(Waiver.number))).one() or 0) + 1
        waiver_id = f"WVR-{number}"
        assert request.expires is not None and request.build and request.owner and request.reason
        expires = parse_timestamp(request.expires)
        row = Waiver(
            number=number,
            waiver_id=waiver_id,
            task_id=request.task_id,
            suite_id=request.suite_id,
            build=request.build,
            states=canonical_text(list(request.states)),
            owner=request.owner,
            reason=request.reason,
            granted_at=now,
            expires_at=expires,
            granted_by=actor,
            audit_seq=next_seq(session),
        )
        session.add(row)
        act_row = authorized.add_row(session, waiver_id, row.audit_seq)
        append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.WAIVER_GRANT,
            subject=waiver_id,
            payload={
                **request_json,
                "waiver_id": waiver_id,
                "granted_at": format_timestamp(now),
                "expires_at": format_timestamp(expires),
                **authorized.payload(),
            },
            rows=[row] if act_row is None else [row, act_row],
        )
        return True, {**waiver_view(session, row, now), "overlaps": _overlapping(session, row, now)}


# The refusals that compare the expiry with the present.
_TIMED = frozenset({"expires_at_past", "expires_at_too_far"})


def _behind(clock: datetime, present: datetime) -> str:
    """What a refusal adds when this machine's clock is behind the registry's present."""
    if present <= clock:
        return ""
    return (
        f" (the registry's present is {format_timestamp(present)}, its newest event's time, "
        f"later than this machine's clock {format_timestamp(clock)}: a writer's clock ran "
        "ahead; give --expires as a time after the present)"
    )


def _overlapping(session: Session, new: Waiver, now: datetime) -> list[str]:
    """Waivers already valid now for the same task, suite and build that cover one of the
    new waiver's states: granting again is allowed (a longer expiry, another owner), but
    said, so that a second grant is never made unawares."""
    states = set(json.loads(new.states))
    out = []
    for w in session.exec(
        select(Waiver).where(
            Waiver.task_id == new.task_id,
            Waiver.suite_id == new.suite_id,
            Waiver.build == new.build,
            Waiver.id != new.id,
        )
    ):
        view = waiver_view(session, w, now)
        if view["status"] == "valid" and states & set(view["states"]):
            out.append(w.waiver_id)
    return out


def revoke(
    engine: Engine,
    waiver_id: str,
    *,
    reason: str,
    actor: str,
    now: datetime,
    signing: Signing = UNSIGNED,
) -> tuple[bool, dict[str, Any]]:
    """(revoked, waiver or refusal); with an authority in force a risk owner's signed act."""
    if not has_visible_text(reason):
        raise InputError("revoking a waiver needs a reason", field="--reason")
    with write_session(engine) as session:
        row = session.exec(select(Waiver).where(Waiver.waiver_id == waiver_id)).first()
        if row is None:
            raise InputError(unknown_waiver(session, waiver_id))
        if _revocation(session, row) is not None:
            raise InputError(f"{waiver_id} is already revoked")
        assert row.id is not None
        authorized = authorize(
            session,
            kind="waiver.revoke",
            body={"waiver_id": waiver_id, "reason": reason},
            scope=Scope(suite=row.suite_id, task=row.task_id),
            signing=signing,
            now=now,
        )
        if authorized.refused:
            refusal = record_refusal(session, authorized, subject=waiver_id, actor=actor, now=now)
            return False, {"revoked": False, "refusals": [refusal], "waiver_id": waiver_id}
        revocation = WaiverRevocation(
            waiver_row_id=row.id,
            revoked_at=now,
            reason=reason,
            actor=actor,
            audit_seq=next_seq(session),
        )
        session.add(revocation)
        act_row = authorized.add_row(session, waiver_id, revocation.audit_seq)
        append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.WAIVER_REVOKE,
            subject=waiver_id,
            payload={
                "waiver_id": waiver_id,
                "reason": reason,
                "revoked_at": format_timestamp(now),
                **authorized.payload(),
            },
            rows=[revocation] if act_row is None else [revocation, act_row],
        )
        return True, waiver_view(session, row, now)
