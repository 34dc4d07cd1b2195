"""Checks of a stored estimate, over a `Reader` (plain SQL; no SQLAlchemy on SQLite).

A stored estimate must recompute byte for byte from its stored inputs and say what the audit
event that recorded it says. `verify` runs both on every estimate, `estimate replay` on one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from evalops.domain.canonical import canonical_json_document, sha256_digest
from evalops.errors import VerificationError
from evalops.services.verify.decision_checks import differences
from evalops.store.reader import Reader


class EstimateRow(Protocol):
    """A stored estimate's columns these checks read (an ORM row or `StoredEstimate`)."""

    @property
    def estimate_id(self) -> str: ...
    @property
    def inputs(self) -> str: ...
    @property
    def inputs_digest(self) -> str: ...
    @property
    def result(self) -> str: ...
    @property
    def result_digest(self) -> str: ...
    @property
    def audit_seq(self) -> int: ...


class StoredEstimate(NamedTuple):
    estimate_id: str
    inputs: str
    inputs_digest: str
    result: str
    result_digest: str
    audit_seq: int


_COLUMNS = "estimate_id, inputs, inputs_digest, result, result_digest, audit_seq"


def replay_estimate(row: EstimateRow) -> dict[str, Any]:
    """Recompute a stored estimate from its stored inputs; compare canonical JSON."""
    from evalops.domain.estimate_documents import evaluate_estimate

    problems: list[str] = []
    inputs = json.loads(row.inputs)
    inputs_bytes = canonical_json_document(inputs)
    if sha256_digest(inputs_bytes) != row.inputs_digest or inputs_bytes != row.inputs.encode(
        "utf-8"
    ):
        problems.append("stored inputs do not match inputs_digest")
    stored = json.loads(row.result)
    result_bytes = canonical_json_document(stored)
    if sha256_digest(result_bytes) != row.result_digest or result_bytes != row.result.encode(
        "utf-8"
    ):
        problems.append("stored estimate does not match result_digest")
    fresh = evaluate_estimate(inputs)
    identical = canonical_json_document(fresh) == row.result.encode("utf-8")
    if not identical:
        problems += [f"differs at {p}" for p in differences(stored, fresh)[:20]]
    return {
        "estimate_id": row.estimate_id,
        "identical": identical and not problems,
        "problems": problems,
    }


def estimate_event_mismatch(reader: Reader, row: EstimateRow) -> str | None:
    """Does the stored row still say what the audit event that recorded it says?"""
    found = reader.first(
        "SELECT kind, payload FROM audit_event WHERE seq = :seq", {"seq": row.audit_seq}
    )
    try:
        payload = json.loads(found["payload"]) if found is not None else {}
    except (TypeError, ValueError):
        payload = None
    if (
        found is None
        or found["kind"] != "estimate.record"
        or not isinstance(payload, dict)
        or payload.get("estimate_id") != row.estimate_id
        or payload.get("inputs_digest") != row.inputs_digest
        or payload.get("result_digest") != row.result_digest
    ):
        return f"not the estimate audit seq {row.audit_seq} recorded"
    return None


def stored_estimates(reader: Reader) -> Iterator[StoredEstimate]:
    """Every stored estimate, one at a time (each carries its whole inputs document)."""
    ids = [row_id for (row_id,) in reader.tuples("SELECT id FROM estimate ORDER BY id")]
    for row_id in ids:
        found = reader.first(f"SELECT {_COLUMNS} FROM estimate WHERE id = :id", {"id": row_id})
        if found is not None:
            stored = StoredEstimate(**found)
            text = (stored.inputs, stored.result, stored.inputs_digest, stored.result_digest)
            if not all(isinstance(value, str) for value in text):
                raise VerificationError(f"estimate {stored.estimate_id}: stored as other than text")
            yield stored


def verify_estimates(reader: Reader) -> int:
    """`verify`: every stored estimate recomputes identically and matches its audit event."""
    count = 0
    for row in stored_estimates(reader):
        count += 1
        outcome = replay_estimate(row)
        if not outcome["identical"]:
            raise VerificationError(
                f"estimate {row.estimate_id}: " + "; ".join(outcome["problems"] or ["differs"])
            )
        problem = estimate_event_mismatch(reader, row)
        if problem:
            raise VerificationError(f"estimate {row.estimate_id}: {problem}")
    return count
