"""Suites: declarations, current (and past) members, and the coverage matrix."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain.act_roles import membership_act
from evalops.domain.classify import failing_verdict_class
from evalops.domain.gate_rules import verdict_effect
from evalops.domain.retirement_reason import read_stored
from evalops.domain.specs import EvalTaskSpec, Grader, GraderSet
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.authority.acts import signers_of
from evalops.services.registry.unknown_ids import not_registered
from evalops.store import queries
from evalops.store.engine import read_session
from evalops.store.tables import Promotion, SuiteMembership, SuiteRow, TaskRevision


def latest_suites(session: Session) -> list[SuiteRow]:
    rows = session.exec(select(SuiteRow).order_by(col(SuiteRow.id))).all()
    latest: dict[str, SuiteRow] = {}
    for row in rows:
        latest[row.suite_id] = row
    return sorted(latest.values(), key=lambda r: r.suite_id)


def list_suites(engine: Engine) -> list[dict[str, Any]]:
    with read_session(engine) as session:
        return [
            {
                "suite": row.suite_id,
                "kind": row.kind,
                "owner": queries.suite_spec(row).owner,
                "members": len(queries.members(session, row.suite_id)),
                "suite_digest": queries.current_suite_digest(session, row),
            }
            for row in latest_suites(session)
        ]


def _membership_view(session: Session, m: queries.Member) -> dict[str, Any]:
    added = m.added
    revision = session.get(TaskRevision, added.task_revision_id) if added.task_revision_id else None
    promotion = session.get(Promotion, added.promotion_id) if added.promotion_id else None
    out: dict[str, Any] = {
        "task_id": m.task_id,
        "revision": revision.revision if revision else None,
        "task_digest": m.task_digest,
        "grader_set_digest": m.grader_set_digest,
        "action": added.action,
        "added_at": format_timestamp(added.at),
        "added_by": added.actor,
        "promotion": {"id": promotion.id, "subject": promotion.subject} if promotion else None,
        "signers": signers_of(session, membership_act(added.action), added.audit_seq),
        "removed": None,
    }
    if m.removed is not None:
        out["removed"] = {
            "at": format_timestamp(m.removed.at),
            "by": m.removed.actor,
            **read_stored(m.removed.reason).as_dict(),
            "approved_by": m.removed.approved_by,
            "replaced_by": m.removed.replaced_by,
            "signers": signers_of(session, "retire", m.removed.audit_seq),
        }
    return out


def show_suite(engine: Engine, suite_id: str, *, include_removed: bool = False) -> dict[str, Any]:
    with read_session(engine) as session:
        row = queries.suite_row(session, suite_id)
        if row is None:
            raise InputError(not_registered(session, "suite", suite_id))
        spec = queries.suite_spec(row)
        members = queries.members(session, suite_id, include_removed=include_removed)
        history = session.exec(
            select(SuiteMembership)
            .where(SuiteMembership.suite_id == suite_id)
            .order_by(col(SuiteMembership.id))
        ).all()
        return {
            "suite": suite_id,
            "kind": row.kind,
            "owner": spec.owner,
            "description": spec.description,
            "suite_digest": queries.current_suite_digest(session, row),
            "members": [_membership_view(session, m) for m in members],
            "changes": len(history),
        }


def _gate_effect(grader: Grader, risk: str) -> str:
    """The gate's effect of this grader's failing verdict on a task of this risk: the same
    classification and effect functions the gate uses (docs/formats.md and docs/gate.md)."""
    cls = failing_verdict_class(grader)
    if cls is None:
        return "none (diagnostic label)" if not grader.blocking else "hold (evidence only)"
    effect = verdict_effect(cls, risk)
    if grader.type == "model":
        return f"{effect} (while calibrated; hold otherwise)"
    return effect


def coverage_rows(
    task: EvalTaskSpec, grader_set: GraderSet | None, risk: str
) -> list[dict[str, Any]]:
    """Per forbidden effect and success-state key: its primary grader and gate effect."""
    graders = grader_set.graders if grader_set else []
    rows: list[dict[str, Any]] = []
    items = [("forbidden_effect", e) for e in task.contract.forbidden_effects] + [
        ("success_state", k) for k in task.contract.success_state
    ]
    for kind, item in items:
        covering = [g for g in graders if item in g.covers]
        if kind == "forbidden_effect":
            primary = [g for g in covering if g.blocking and g.acts_as_hard_constraint]
        else:
            primary = [g for g in covering if g.blocking and g.layer == "outcome"]
        chosen = primary[0] if primary else (covering[0] if covering else None)
        rows.append(
            {
                "task_id": task.id,
                "kind": kind,
                "item": item,
                "primary_grader": chosen.id if chosen else None,
                "layer": chosen.layer if chosen else None,
                "evidence": list(chosen.evidence_required) if chosen else [],
                "gate_effect": _gate_effect(chosen, risk) if chosen else "none",
                "gap": not primary,
            }
        )
    return rows


def suite_coverage(engine: Engine, suite_id: str) -> dict[str, Any]:
    """Per member, per forbidden effect and success-state key: who guards it and how."""
    with read_session(engine) as session:
        if queries.suite_row(session, suite_id) is None:
            raise InputError(not_registered(session, "suite", suite_id))
        rows: list[dict[str, Any]] = []
        for m in queries.members(session, suite_id):
            revision = session.get(TaskRevision, m.added.task_revision_id)
            assert revision is not None
            gs_row = queries.grader_set_by_digest(session, m.grader_set_digest)
            risk, _ = queries.effective_labels(session, m.task_id, m.added.task_revision_id)
            rows.extend(
                coverage_rows(
                    queries.task_spec(revision),
                    GraderSet.model_validate(json.loads(gs_row.document)) if gs_row else None,
                    risk,
                )
            )
        return {"suite": suite_id, "rows": rows, "gaps": sum(1 for r in rows if r["gap"])}
