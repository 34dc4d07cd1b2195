"""`evalops verify`: re-hash the audit chain and every stored definition."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain.audit_chain import first_chain_problem
from evalops.domain.canonical import canonical_text, sha256_digest
from evalops.errors import VerificationError
from evalops.registry.definitions import spec_digest
from evalops.services.gate import verify_decisions
from evalops.store.audit import as_chain_event
from evalops.store.engine import read_session
from evalops.store.tables import (
    AuditEvent,
    ExecutionProfileRow,
    GraderSetRow,
    IngestBatch,
    PolicyRow,
    SuiteRow,
    TaskRevision,
    Trial,
)

# table -> (kind in the audit subject, how to name a row, its identity-digest column)
_DEFINITION_TABLES: tuple[tuple[type[Any], str, str], ...] = (
    (TaskRevision, "task", "task_digest"),
    (ExecutionProfileRow, "execution_profile", "execution_digest"),
    (GraderSetRow, "grader_set", "grader_set_digest"),
    (SuiteRow, "suite", ""),
    (PolicyRow, "", "policy_digest"),
)


@dataclass
class VerifyReport:
    events: int
    definitions: int
    decisions: int = 0
    trials: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "events": self.events,
            "definitions": self.definitions,
            "trials": self.trials,
            "decisions": self.decisions,
        }


def _events(session: Session) -> Iterator[AuditEvent]:
    """Stream the chain in seq order; the cursor is closed even when the caller stops early."""
    result = session.exec(
        select(AuditEvent).order_by(col(AuditEvent.seq)).execution_options(yield_per=1000)
    )
    try:
        yield from result
    finally:
        result.close()


def _check_chain(session: Session) -> int:
    count = 0
    payload_problem: str | None = None

    def rows() -> Generator[Any, None, None]:
        nonlocal count, payload_problem
        for row in _events(session):
            count += 1
            recomputed = sha256_digest(row.payload.encode("utf-8"))
            if payload_problem is None and recomputed != row.payload_digest:
                payload_problem = f"audit seq {row.seq}: payload does not match payload_digest"
            yield as_chain_event(row)

    stream = rows()
    try:
        problem = first_chain_problem(stream)
    finally:
        stream.close()
    if problem is not None:
        raise VerificationError(problem)
    if payload_problem is not None:
        raise VerificationError(payload_problem)
    return count


def _row_name(kind: str, row: Any) -> str:
    ident = next(
        getattr(row, a)
        for a in ("task_id", "execution_id", "grader_set_id", "suite_id", "policy_id")
        if hasattr(row, a)
    )
    version = getattr(row, "revision", None) or getattr(row, "version", None)
    return f"{kind} {ident}" + (f"@{version}" if version is not None else "") + f" (row {row.id})"


def _check_definitions(session: Session) -> int:
    count = 0
    for table, table_kind, digest_column in _DEFINITION_TABLES:
        for row in session.exec(select(table).order_by(col(table.id))):
            count += 1
            kind = table_kind or row.kind
            name = _row_name(kind, row)
            try:
                value = json.loads(row.document)
            except ValueError:
                raise VerificationError(f"{name}: stored document is not JSON") from None
            if canonical_text(value) != row.document:
                raise VerificationError(f"{name}: stored document is not canonical JSON")
            document_digest = sha256_digest(row.document.encode("utf-8"))
            if document_digest != row.document_digest:
                raise VerificationError(
                    f"{name}: document_digest {row.document_digest} does not match the stored "
                    f"document ({document_digest})"
                )
            if digest_column and getattr(row, digest_column) != spec_digest(kind, value):
                raise VerificationError(
                    f"{name}: {digest_column} {getattr(row, digest_column)} does not match the "
                    f"stored document ({spec_digest(kind, value)})"
                )
            event = session.get(AuditEvent, row.audit_seq)
            recorded = json.loads(event.payload) if event is not None else {}
            if event is None or recorded.get("document_digest") != row.document_digest:
                raise VerificationError(
                    f"{name}: not the definition its audit event seq {row.audit_seq} recorded"
                )
    registered = {
        seq for table, _, _ in _DEFINITION_TABLES for seq in session.exec(select(table.audit_seq))
    }
    for event in session.exec(select(AuditEvent).where(col(AuditEvent.kind).startswith("sync."))):
        if event.seq not in registered:
            raise VerificationError(
                f"audit seq {event.seq}: {event.subject} was registered but its row is gone"
            )
    return count


def _check_trials(session: Session) -> int:
    """Every stored trial re-hashes, and every ingest batch is the one its event recorded."""
    count = 0
    for batch in session.exec(select(IngestBatch).order_by(col(IngestBatch.id))):
        hasher = hashlib.sha256()
        rows = session.exec(
            select(Trial).where(Trial.ingest_batch_id == batch.id).order_by(col(Trial.id))
        )
        for trial in rows:
            count += 1
            if sha256_digest(trial.record.encode("utf-8")) != trial.stored_digest:
                raise VerificationError(f"trial {trial.trial_id}: stored record was changed")
            hasher.update(
                f"{trial.trial_id}\n{trial.record_digest}\n{trial.stored_digest}\n".encode()
            )
        event = session.get(AuditEvent, batch.audit_seq)
        recorded = json.loads(event.payload).get("trials_digest") if event else None
        if recorded != "sha256:" + hasher.hexdigest():
            raise VerificationError(
                f"ingest batch {batch.id}: its trials are not the ones audit seq "
                f"{batch.audit_seq} recorded"
            )
    orphans = session.exec(
        select(func.count())
        .select_from(Trial)
        .where(col(Trial.ingest_batch_id).not_in(select(IngestBatch.id)))
    ).one()
    if orphans:
        raise VerificationError(f"{orphans} trials belong to no recorded ingest batch")
    return count


def verify_database(engine: Engine) -> VerifyReport:
    """Raise VerificationError naming the first bad item; else say what was checked."""
    with read_session(engine) as session:
        events = _check_chain(session)
        definitions = _check_definitions(session)
        trials = _check_trials(session)
        decisions = verify_decisions(session)
    return VerifyReport(events, definitions, decisions, trials)
