"""The hash-linked audit chain (docs/verify.md), as pure functions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evalops.domain.canonical import GENESIS_HASH, digest


@dataclass(frozen=True)
class ChainEvent:
    """What the chain hashes of one event, plus the hashes stored with it."""

    seq: int
    at: str
    actor: str
    kind: str
    subject: str
    payload_digest: str
    prev_hash: str
    hash: str


def event_hash(
    prev_hash: str, *, seq: int, at: str, actor: str, kind: str, subject: str, payload_digest: str
) -> str:
    """`sha256(canonical_json({"prev": prev_hash, "event": {...}}))`."""
    return digest(
        {
            "prev": prev_hash,
            "event": {
                "seq": seq,
                "at": at,
                "actor": actor,
                "kind": kind,
                "subject": subject,
                "payload_digest": payload_digest,
            },
        }
    )


def first_chain_problem(events: Iterable[ChainEvent]) -> str | None:
    """The first broken link of a chain read in stored `seq` order, or None."""
    prev = GENESIS_HASH
    expected_seq = 1
    for ev in events:
        if ev.seq != expected_seq:
            return f"audit seq {expected_seq}: missing (next stored seq is {ev.seq})"
        if ev.prev_hash != prev:
            return f"audit seq {ev.seq}: prev_hash does not link to seq {ev.seq - 1}"
        recomputed = event_hash(
            prev,
            seq=ev.seq,
            at=ev.at,
            actor=ev.actor,
            kind=ev.kind,
            subject=ev.subject,
            payload_digest=ev.payload_digest,
        )
        if recomputed != ev.hash:
            return f"audit seq {ev.seq}: hash mismatch (stored {ev.hash}, recomputed {recomputed})"
        prev = ev.hash
        expected_seq += 1
    return None
