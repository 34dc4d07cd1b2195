"""docs/verify.md's audit chain recipe, written out with `hashlib` and `rfc8785` alone.

Tests hold stored chains and the audit heads of reports to it, independently of evalops's
own canonical JSON and hashing code.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import rfc8785

GENESIS = "sha256:" + "0" * 64
EVENT_FIELDS = ("seq", "at", "actor", "kind", "subject", "payload_digest")


def recipe_hash(prev: str, event: dict[str, Any]) -> str:
    """docs/verify.md's recipe, written out with the reference libraries."""
    body = {"prev": prev, "event": {k: event[k] for k in EVENT_FIELDS}}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(body)).hexdigest()


def stored_at(value: str) -> str:
    """A stored `at` as the chain hashes it: UTC, microseconds, `Z` (docs/formats.md).

    SQLite keeps the UTC moment as `YYYY-MM-DD HH:MM:SS[.ffffff]`.
    """
    moment = datetime.fromisoformat(value).replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stored_events(db: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        rows = con.execute(
            "SELECT seq, at, actor, kind, subject, payload_digest, prev_hash, hash"
            " FROM audit_event ORDER BY seq"
        ).fetchall()
    finally:
        con.close()
    return [{**dict(r), "at": stored_at(r["at"])} for r in rows]


def recomputed_head(db: Path) -> tuple[int, str]:
    """Walk the stored chain with the recipe; every link and hash must hold."""
    prev = GENESIS
    events = stored_events(db)
    assert events, "an empty chain proves nothing"
    for expected_seq, event in enumerate(events, start=1):
        assert event["seq"] == expected_seq
        assert event["prev_hash"] == prev, f"seq {expected_seq} does not link"
        assert event["hash"] == recipe_hash(prev, event), f"seq {expected_seq} re-hashes"
        prev = event["hash"]
    return events[-1]["seq"], prev
