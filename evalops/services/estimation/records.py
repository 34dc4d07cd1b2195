"""`evalops estimate`, `estimate show|list|replay`: estimates stored, audited and replayed.

An estimate is stored with every input (`EST-n`, under an `estimate.record` audit event whose
row digests cover it), so `estimate replay` and `verify` recompute it from the stored inputs
and compare the bytes, as they do a gate decision. An estimate is never a gate decision and
no gate decision reads one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds
from evalops.domain.canonical import canonical_json_document, sha256_digest
from evalops.domain.estimate_documents import evaluate_estimate
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import InputError
from evalops.services.estimation.inputs import EstimateAsk, estimate_inputs
from evalops.services.verify.estimate_checks import estimate_event_mismatch, replay_estimate
from evalops.store.audit import append_event, chain_head, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.tables import Estimate


def estimate(
    engine: Engine, ask: EstimateAsk, *, now: datetime, actor: str = "", dry_run: bool = False
) -> dict[str, Any]:
    """Compute an estimate; store and audit it unless `dry_run`. Returns the document, with
    `stored` and (when stored) the audit event that recorded it."""
    if dry_run:
        with read_session(engine) as session:
            inputs = estimate_inputs(session, ask, now)
        inputs["estimate_id"] = "dry-run"
        return {**evaluate_estimate(inputs), "stored": False}
    with write_session(engine) as session:
        inputs = estimate_inputs(session, ask, now)
        number = (session.exec(select(func.max(Estimate.number))).one() or 0) + 1
        inputs["estimate_id"] = f"EST-{number}"
        result = evaluate_estimate(inputs)
        inputs_bytes = canonical_json_document(inputs)
        result_bytes = canonical_json_document(result)
        row = Estimate(
            number=number,
            estimate_id=inputs["estimate_id"],
            suite_id=ask.suite_id,
            build=ask.build,
            baseline=inputs["request"]["baseline"],
            suite_digest=inputs["suite"]["suite_digest"],
            execution_digest=inputs["execution_digest"],
            evaluated_at=parse_timestamp(inputs["request"]["at"]),
            inputs=inputs_bytes.decode("utf-8"),
            inputs_digest=sha256_digest(inputs_bytes),
            result=result_bytes.decode("utf-8"),
            result_digest=sha256_digest(result_bytes),
            at=now,
            actor=actor,
            audit_seq=next_seq(session),
        )
        session.add(row)
        event = append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.ESTIMATE_RECORD,
            subject=row.estimate_id,
            payload={
                "estimate_id": row.estimate_id,
                "suite": ask.suite_id,
                "build": ask.build,
                "baseline": row.baseline,
                "inputs_digest": row.inputs_digest,
                "result_digest": row.result_digest,
            },
            rows=[row],
        )
        return {**result, "stored": True, "estimate_event": {"seq": event.seq, "hash": event.hash}}


def _row(session: Session, estimate_id: str) -> Estimate:
    row = session.exec(select(Estimate).where(Estimate.estimate_id == estimate_id)).first()
    if row is None:
        from evalops.domain.suggestions import unknown_numbered

        def exists(guess: str) -> bool:
            found = session.exec(select(Estimate.id).where(Estimate.estimate_id == guess))
            return found.first() is not None

        raise InputError(
            unknown_numbered("estimate", estimate_id, "EST-", exists, "evalops estimate list"),
            field="ID",
        )
    return row


def show(engine: Engine, estimate_id: str) -> dict[str, Any]:
    """A stored estimate as it was recorded, with who recorded it and when."""
    with read_session(engine) as session:
        row = _row(session, estimate_id)
        return {
            **json.loads(row.result),
            "stored": True,
            "recorded_at": format_timestamp(row.at),
            "actor": row.actor,
            "estimate_event": {"seq": row.audit_seq},
        }


def stored_result(engine: Engine, estimate_id: str) -> dict[str, Any]:
    """The stored document alone (what reports render)."""
    with read_session(engine) as session:
        return dict(json.loads(_row(session, estimate_id).result))


def stored_result_and_head(
    engine: Engine, estimate_id: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The stored document and the audit chain's head when it is read: a rendered report
    carries the head (`evalops verify --anchors` finds it), the document stays as stored."""
    with read_session(engine) as session:
        doc = dict(json.loads(_row(session, estimate_id).result))
        event = chain_head(session)
    return doc, ({"seq": event.seq, "hash": event.hash} if event is not None else None)


def list_estimates(
    engine: Engine, suite_id: str | None = None, build: str | None = None
) -> list[dict[str, Any]]:
    """Stored estimates, oldest first: id, suite, build, baseline, the pass rate and interval."""
    with read_session(engine) as session:
        query = select(Estimate).order_by(col(Estimate.id))
        if suite_id is not None:
            query = query.where(Estimate.suite_id == suite_id)
        if build is not None:
            query = query.where(Estimate.build == build)
        out = []
        for row in session.exec(query):
            result = json.loads(row.result)
            out.append(
                {
                    "estimate_id": row.estimate_id,
                    "suite": row.suite_id,
                    "build": row.build,
                    "baseline": row.baseline,
                    "evaluated_at": result["evaluated_at"],
                    "task_count": result["task_count"],
                    "pass": result["rates"].get("pass"),
                }
            )
        return out


def estimates_of_suite(session: Session, suite_id: str) -> list[dict[str, Any]]:
    """The suite's stored estimates, oldest first, as the registry site charts them: the
    pass rate and its interval per estimate (its build), and what it claims."""
    out = []
    query = select(Estimate).where(Estimate.suite_id == suite_id).order_by(col(Estimate.id))
    for row in session.exec(query):
        result = json.loads(row.result)
        rate = result["rates"].get("pass")
        out.append(
            {
                "estimate_id": row.estimate_id,
                "build": row.build,
                "baseline": row.baseline,
                "evaluated_at": result["evaluated_at"],
                "task_count": result["task_count"],
                "claims": result["claims"],
                "pass": rate,
                "unavailable": result["unavailable"],
            }
        )
    return out


def replay(engine: Engine, estimate_id: str) -> dict[str, Any]:
    """Recompute a stored estimate from its stored inputs; compare bytes and its event."""
    with read_session(engine) as session:
        row = _row(session, estimate_id)
        outcome = replay_estimate(row)
        from evalops.store.reader import ConnectionReader

        mismatch = estimate_event_mismatch(ConnectionReader(session.connection()), row)
        if mismatch:
            outcome["problems"].append(mismatch)
            outcome["identical"] = False
        return outcome
