"""`evalops gate check|show|list|replay` and `evalops compare`.

The store loads plain-JSON inputs (members and their pins, re-derived trials, waivers,
baseline), the pure `evaluate` decides, and the decision is stored with every input so
`gate replay` and `verify` can re-evaluate it byte for byte.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain.canonical import canonical_json, canonical_text, digest
from evalops.domain.gate import evaluate
from evalops.domain.regression import METHODS
from evalops.domain.specs import GatePolicy
from evalops.domain.vocabulary import format_timestamp
from evalops.errors import InputError, VerificationError
from evalops.registry.definitions import load_definition
from evalops.services.evidence import Definitions, rederive
from evalops.store import queries
from evalops.store.audit import append_event
from evalops.store.engine import read_session, write_session
from evalops.store.tables import (
    AuditEvent,
    ExecutionProfileRow,
    GateDecision,
    PolicyRow,
    Trial,
    Waiver,
    WaiverRevocation,
)

DEFAULT_SEED = 20261130


def gate_policy(session: Session, policy_file: Path | None) -> tuple[dict[str, Any], str]:
    """The policy document and its digest: from --policy FILE, else the newest registered."""
    if policy_file is not None:
        definition = load_definition(policy_file)
        if definition.kind != "gate_policy":
            raise InputError(f"{policy_file} is a {definition.kind}, not a gate policy")
        return definition.value, definition.digest
    row = session.exec(
        select(PolicyRow).where(PolicyRow.kind == "gate_policy").order_by(col(PolicyRow.id).desc())
    ).first()
    if row is None:
        raise InputError("no gate policy is registered (sync registry/policies/ or --policy)")
    return json.loads(row.document), row.policy_digest


def execution_for(session: Session, build: str, execution_id: str | None) -> ExecutionProfileRow:
    rows = session.exec(
        select(ExecutionProfileRow)
        .where(ExecutionProfileRow.system_build == build)
        .order_by(col(ExecutionProfileRow.id))
    ).all()
    latest: dict[str, ExecutionProfileRow] = {}
    for row in rows:
        latest[row.execution_id] = row
    if execution_id is not None:
        if execution_id not in latest:
            raise InputError(f"execution profile {execution_id!r} is not for build {build}")
        return latest[execution_id]
    if not latest:
        raise InputError(f"no execution profile has system_build {build!r}", field="--build")
    if len(latest) > 1:
        raise InputError(
            f"several execution profiles have system_build {build}: "
            f"{', '.join(sorted(latest))}; pick one with --execution",
            field="--execution",
        )
    return next(iter(latest.values()))


def _trial_input(defs: Definitions, trial: Trial) -> dict[str, Any]:
    current = rederive(defs, trial)
    return {
        "trial_id": trial.trial_id,
        "parent_trial_id": trial.parent_trial_id,
        "classification": current.primary if current else trial.classification,
        "score": current.score if current else trial.score,
        "gating_score": current.gating_score if current else trial.gating_score,
        "trajectory": json.loads(trial.trajectory) if trial.trajectory else None,
        "efficiency": json.loads(trial.efficiency),
        "fixture_misses": json.loads(trial.record).get("fixture_misses", 0),
    }


def _task_inputs(
    session: Session, defs: Definitions, members: list[queries.Member], execution_digest: str
) -> list[dict[str, Any]]:
    out = []
    for m in members:
        revision = queries.task_row(session, m.task_id)
        pinned = defs.task(m.task_id, m.task_digest)
        assert revision is not None and pinned is not None
        labels = queries.task_spec(revision).meta  # risk and protects are current labels
        plan = pinned.contract.trials
        trials = session.exec(
            select(Trial)
            .where(
                Trial.task_id == m.task_id,
                Trial.task_digest == m.task_digest,
                Trial.grader_set_digest == m.grader_set_digest,
                Trial.execution_digest == execution_digest,
            )
            .order_by(col(Trial.id))
        ).all()
        ignored = session.exec(
            select(func.count())
            .select_from(Trial)
            .where(
                Trial.task_id == m.task_id,
                Trial.execution_digest == execution_digest,
                (col(Trial.task_digest) != m.task_digest)
                | (col(Trial.grader_set_digest) != m.grader_set_digest),
            )
        ).one()
        out.append(
            {
                "task_id": m.task_id,
                "risk": labels.risk,
                "protects": list(labels.protects),
                "task_digest": m.task_digest,
                "grader_set_digest": m.grader_set_digest,
                "plan": {
                    "count": plan.count if plan else 1,
                    "k": (plan.k or plan.count) if plan else 1,
                    "passRule": plan.passRule if plan else "all",
                    "passScore": plan.passScore if plan else 1.0,
                },
                "trials": [_trial_input(defs, t) for t in trials],
                "ignoredTrials": int(ignored),
            }
        )
    return out


def waiver_facts(session: Session, build: str) -> list[dict[str, Any]]:
    rows = session.exec(select(Waiver).where(Waiver.build == build).order_by(col(Waiver.id))).all()
    out = []
    for w in rows:
        revoked = session.exec(
            select(WaiverRevocation)
            .where(WaiverRevocation.waiver_row_id == w.id)
            .order_by(col(WaiverRevocation.revoked_at))
        ).first()
        out.append(
            {
                "waiver_id": w.waiver_id,
                "task_id": w.task_id,
                "suite_id": w.suite_id,
                "build": w.build,
                "states": json.loads(w.states),
                "granted_at": format_timestamp(w.granted_at),
                "expires_at": format_timestamp(w.expires_at),
                "revoked_at": format_timestamp(revoked.revoked_at) if revoked else None,
            }
        )
    return out


def refused_waivers(session: Session, build: str, suite_id: str) -> list[dict[str, Any]]:
    rows = session.exec(
        select(AuditEvent).where(AuditEvent.kind == "waiver.refused").order_by(col(AuditEvent.seq))
    ).all()
    out = []
    for row in rows:
        payload = json.loads(row.payload)
        request = payload.get("request", {})
        if request.get("build") == build and request.get("suite_id") == suite_id:
            out.append(
                {
                    "seq": row.seq,
                    "task_id": request.get("task_id"),
                    "states": request.get("states"),
                    "rules": [r["rule"] for r in payload.get("refusals", [])],
                    "at": format_timestamp(row.at),
                }
            )
    return out


def _latest_pass_build(session: Session, suite_id: str) -> str | None:
    row = session.exec(
        select(GateDecision)
        .where(GateDecision.suite_id == suite_id, GateDecision.decision == "pass")
        .order_by(col(GateDecision.id).desc())
    ).first()
    return row.build if row else None


def build_inputs(
    session: Session,
    *,
    build: str,
    suite_id: str,
    at: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy_file: Path | None = None,
    method: str | None = None,
    alpha: float | None = None,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    suite = queries.suite_row(session, suite_id)
    if suite is None:
        raise InputError(f"suite {suite_id!r} is not registered (run `evalops sync`)")
    policy_doc, policy_digest = gate_policy(session, policy_file)
    policy = GatePolicy.model_validate(policy_doc)
    execution = execution_for(session, build, execution_id)
    members = queries.members(session, suite_id)
    defs = Definitions(session)
    rule = policy.critical_regressions
    baseline_block: dict[str, Any] | None = None
    if baseline == "auto":
        baseline = _latest_pass_build(session, suite_id)
        if baseline is None and rule.baseline != "required":
            baseline = None
    if baseline is not None or rule.baseline == "required":
        baseline_block = {
            "build": baseline,
            "required": rule.baseline == "required",
            "method": method or rule.method,
            "alpha": alpha if alpha is not None else rule.alpha,
            "seed": seed,
        }
        if baseline is not None:
            base_exec = execution_for(session, baseline, None)
            baseline_block["execution_digest"] = base_exec.execution_digest
            baseline_block["tasks"] = _task_inputs(
                session, defs, members, base_exec.execution_digest
            )
    return {
        "build": build,
        "suite": {
            "id": suite_id,
            "kind": suite.kind,
            "suite_digest": queries.current_suite_digest(session, suite),
        },
        "execution_digest": execution.execution_digest,
        "policy": policy_doc,
        "policy_digest": policy_digest,
        "evaluated_at": format_timestamp(at),
        "tasks": _task_inputs(session, defs, members, execution.execution_digest),
        "waivers": waiver_facts(session, build),
        "refused_waivers": refused_waivers(session, build, suite_id),
        "baseline": baseline_block,
    }


def check(
    engine: Engine,
    *,
    build: str,
    suite_id: str,
    at: datetime,
    actor: str,
    now: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy_file: Path | None = None,
) -> dict[str, Any]:
    """Evaluate, store and audit one gate decision; returns the decision."""
    with write_session(engine) as session:
        inputs = build_inputs(
            session,
            build=build,
            suite_id=suite_id,
            at=at,
            execution_id=execution_id,
            baseline=baseline,
            policy_file=policy_file,
        )
        number = (session.exec(select(func.max(GateDecision.number))).one() or 0) + 1
        inputs["gate_id"] = f"GATE-{number}"
        result = evaluate(inputs)
        inputs_text = canonical_text(inputs)
        result_text = canonical_text(result)
        event = append_event(
            session,
            at=now,
            actor=actor,
            kind="gate.decision",
            subject=inputs["gate_id"],
            payload={
                "gate_id": inputs["gate_id"],
                "decision": result["decision"],
                "build": build,
                "suite": suite_id,
                "inputs_digest": digest(inputs),
                "result_digest": digest(result),
            },
        )
        session.add(
            GateDecision(
                number=number,
                gate_id=inputs["gate_id"],
                build=build,
                suite_id=suite_id,
                execution_digest=inputs["execution_digest"],
                suite_digest=inputs["suite"]["suite_digest"],
                policy_digest=inputs["policy_digest"],
                evaluated_at=at,
                decision=result["decision"],
                inputs=inputs_text,
                inputs_digest=digest(inputs),
                result=result_text,
                result_digest=digest(result),
                at=now,
                actor=actor,
                audit_seq=event.seq,
            )
        )
        return result


def _decision(session: Session, gate_id: str) -> GateDecision:
    row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).first()
    if row is None:
        raise InputError(f"unknown gate decision {gate_id!r}", field="ID")
    return row


def show(engine: Engine, gate_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        row = _decision(session, gate_id)
        return {
            **json.loads(row.result),
            "decided_at": format_timestamp(row.at),
            "actor": row.actor,
        }


def list_decisions(engine: Engine, suite_id: str | None = None) -> list[dict[str, Any]]:
    with read_session(engine) as session:
        stmt = select(GateDecision).order_by(col(GateDecision.id))
        if suite_id:
            stmt = stmt.where(GateDecision.suite_id == suite_id)
        return [
            {
                "gate_id": r.gate_id,
                "decision": r.decision,
                "build": r.build,
                "suite": r.suite_id,
                "evaluated_at": format_timestamp(r.evaluated_at),
                "decided_at": format_timestamp(r.at),
                "actor": r.actor,
            }
            for r in session.exec(stmt)
        ]


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(a.keys() | b.keys()):
            out += _differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _differences(x, y, f"{path}[{i}]")
        ]
    return [] if canonical_json(a) == canonical_json(b) else [path or "(decision)"]


def replay_row(row: GateDecision) -> dict[str, Any]:
    """Re-evaluate a stored decision from its stored inputs; compare canonical JSON."""
    problems: list[str] = []
    inputs = json.loads(row.inputs)
    if digest(inputs) != row.inputs_digest or canonical_text(inputs) != row.inputs:
        problems.append("stored inputs do not match inputs_digest")
    stored = json.loads(row.result)
    if digest(stored) != row.result_digest or canonical_text(stored) != row.result:
        problems.append("stored decision does not match result_digest")
    fresh = evaluate(inputs)
    identical = canonical_json(fresh) == row.result.encode("utf-8")
    if not identical:
        problems += [f"differs at {p}" for p in _differences(stored, fresh)[:20]]
    return {
        "gate_id": row.gate_id,
        "identical": identical and not problems,
        "decision": fresh["decision"],
        "stored_decision": row.decision,
        "problems": problems,
    }


def _audit_mismatch(session: Session, row: GateDecision) -> str | None:
    event = session.get(AuditEvent, row.audit_seq)
    payload = json.loads(event.payload) if event else {}
    if (
        payload.get("inputs_digest") != row.inputs_digest
        or payload.get("result_digest") != row.result_digest
        or payload.get("decision") != row.decision
    ):
        return f"not the decision audit seq {row.audit_seq} recorded"
    return None


def replay(engine: Engine, gate_id: str) -> dict[str, Any]:
    """Replay, and check the stored row against the audit event that recorded it."""
    with read_session(engine) as session:
        row = _decision(session, gate_id)
        outcome = replay_row(row)
        mismatch = _audit_mismatch(session, row)
        if mismatch:
            outcome["problems"].append(mismatch)
            outcome["identical"] = False
        return outcome


def verify_decisions(session: Session) -> int:
    """`verify`: every stored decision replays identically and matches its audit event."""
    count = 0
    for row in session.exec(select(GateDecision).order_by(col(GateDecision.id))):
        count += 1
        outcome = replay_row(row)
        if not outcome["identical"]:
            raise VerificationError(
                f"gate decision {row.gate_id}: " + "; ".join(outcome["problems"] or ["differs"])
            )
        mismatch = _audit_mismatch(session, row)
        if mismatch:
            raise VerificationError(f"gate decision {row.gate_id}: {mismatch}")
    return count


def compare(
    engine: Engine,
    *,
    baseline: str,
    candidate: str,
    suite_id: str,
    method: str | None,
    alpha: float | None,
    seed: int = DEFAULT_SEED,
    at: datetime,
) -> dict[str, Any]:
    """The paired verdict alone (nothing stored)."""
    if method is not None and method not in METHODS:
        raise InputError(f"method {method!r} is not one of {', '.join(METHODS)}", field="--method")
    if alpha is not None and not 0 < alpha < 1:
        raise InputError("alpha must be between 0 and 1", field="--alpha")
    with read_session(engine) as session:
        inputs = build_inputs(
            session,
            build=candidate,
            suite_id=suite_id,
            at=at,
            baseline=baseline,
            method=method,
            alpha=alpha,
            seed=seed,
        )
    inputs["gate_id"] = "compare"
    result = evaluate(inputs)
    regression = result["regression"]
    assert regression is not None
    return {**regression, "candidate": candidate, "suite": suite_id}
