"""Appending to and reading the audit chain (call inside `write_session`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from evalops.domain.audit_chain import ChainEvent, event_hash
from evalops.domain.canonical import GENESIS_HASH, canonical_text, sha256_digest
from evalops.domain.vocabulary import format_timestamp
from evalops.store.tables import AuditEvent


def chain_head(session: Session) -> AuditEvent | None:
    return session.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()


def append_event(
    session: Session, *, at: datetime, actor: str, kind: str, subject: str, payload: Any
) -> AuditEvent:
    """Append one event after the current head. Writers are serialized by the session."""
    head = chain_head(session)
    seq = head.seq + 1 if head else 1
    prev = head.hash if head else GENESIS_HASH
    payload_text = canonical_text(payload)
    payload_digest = sha256_digest(payload_text.encode("utf-8"))
    at_text = format_timestamp(at)
    row = AuditEvent(
        seq=seq,
        at=at,
        actor=actor,
        kind=kind,
        subject=subject,
        payload_digest=payload_digest,
        payload=payload_text,
        prev_hash=prev,
        hash=event_hash(
            prev,
            seq=seq,
            at=at_text,
            actor=actor,
            kind=kind,
            subject=subject,
            payload_digest=payload_digest,
        ),
    )
    session.add(row)
    session.flush()
    return row


def as_chain_event(row: AuditEvent) -> ChainEvent:
    return ChainEvent(
        seq=row.seq,
        at=format_timestamp(row.at),
        actor=row.actor,
        kind=row.kind,
        subject=row.subject,
        payload_digest=row.payload_digest,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )
