"""Appending to and reading the audit chain (call inside `write_session`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from evalops.domain.audit_chain import event_hash
from evalops.domain.canonical import GENESIS_HASH, canonical_text, sha256_digest
from evalops.domain.timestamps import format_timestamp
from evalops.store.rowdigest import RowsDigest, rows_payload
from evalops.store.tables import AuditEvent


def chain_head(session: Session) -> AuditEvent | None:
    return session.exec(select(AuditEvent).order_by(col(AuditEvent.seq).desc()).limit(1)).first()


def registry_now(session: Session, now: datetime) -> datetime:
    """`store.reader.registry_present` in a session."""
    from evalops.store.reader import ConnectionReader, registry_present

    return registry_present(ConnectionReader(session.connection()), now)


def next_seq(session: Session) -> int:
    """The seq the next event will get: rows written before their event carry it."""
    head = chain_head(session)
    return head.seq + 1 if head else 1


def draw_registry_id() -> str:
    """A new registry's own name, which every signed act carries (docs/authority.md),
    recorded in its first audit event: drawn at random, so no two registries share it
    whatever their clocks and content."""
    return str(uuid.uuid4())


def append_event(
    session: Session,
    *,
    at: datetime,
    actor: str,
    kind: str,
    subject: str,
    payload: dict[str, Any],
    rows: Iterable[Any] = (),
    rows_digest: RowsDigest | None = None,
) -> AuditEvent:
    """Append one event after the current head. Writers are serialized by the session.

    `rows` are the ORM rows this change wrote (each with `audit_seq` = `next_seq(session)`);
    they are flushed and their digests go into the payload, so `verify` can tell an edited,
    deleted or inserted row from the ones the event recorded. Bulk writers pass the
    digest they accumulated as `rows_digest` instead.

    The event's `at` is `at`, or the head's when `at` is earlier: the chain's time never
    runs backwards, so "the registry as it stood at T" is a prefix of the chain.
    """
    head = chain_head(session)
    seq = head.seq + 1 if head else 1
    prev = head.hash if head else GENESIS_HASH
    # Audit time is monotonic: a writer whose clock is behind records its predecessor's.
    if head is not None and at < head.at:
        at = head.at
    objs = list(rows)
    if objs:
        session.flush()
        for obj in objs:
            if obj.audit_seq != seq:
                raise RuntimeError(f"{obj.__table__.name} row carries audit_seq {obj.audit_seq}")
    if head is None and "registry_id" not in payload:
        payload = {**payload, "registry_id": draw_registry_id()}
    digests = rows_payload(objs) if objs else {}
    if rows_digest is not None:
        digests.update(rows_digest.as_payload())
    if digests:
        payload = {**payload, "rows": digests}
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
