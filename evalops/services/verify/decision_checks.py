"""Checks of a stored gate decision, over a `Reader` (plain SQL; no SQLAlchemy on SQLite).

A stored decision must replay byte for byte from its stored inputs, say what the audit event
that recorded it says, and hold inputs that the registry rows still rebuild
(evalops/services/verify/gate_inputs.py). `verify` runs all three on every decision,
`export attestation` on the one it signs, `gate replay` the first two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from evalops.domain.canonical import canonical_json, canonical_json_document, sha256_digest
from evalops.errors import InputError, VerificationError
from evalops.store.reader import Reader


class DecisionRow(Protocol):
    """A stored decision's columns these checks read (an ORM row or `StoredDecision`)."""

    @property
    def gate_id(self) -> str: ...
    @property
    def inputs(self) -> str: ...
    @property
    def inputs_digest(self) -> str: ...
    @property
    def result(self) -> str: ...
    @property
    def result_digest(self) -> str: ...
    @property
    def decision(self) -> str: ...
    @property
    def audit_seq(self) -> int: ...


class StoredDecision(NamedTuple):
    gate_id: str
    inputs: str
    inputs_digest: str
    result: str
    result_digest: str
    decision: str
    audit_seq: int


_COLUMNS = "gate_id, inputs, inputs_digest, result, result_digest, decision, audit_seq"


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON documents differ, as dotted paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(a.keys() | b.keys()):
            out += differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if canonical_json(a) == canonical_json(b) else [path or "(decision)"]


def replay_row(row: DecisionRow) -> dict[str, Any]:
    """Re-evaluate a stored decision from its stored inputs; compare canonical JSON."""
    from evalops.domain.gate import evaluate_stored

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
        problems.append("stored decision does not match result_digest")
    fresh = evaluate_stored(inputs)
    identical = canonical_json_document(fresh) == row.result.encode("utf-8")
    if not identical:
        problems += [f"differs at {p}" for p in differences(stored, fresh)[:20]]
    return {
        "gate_id": row.gate_id,
        "identical": identical and not problems,
        "decision": fresh["decision"],
        "stored_decision": row.decision,
        "problems": problems,
    }


def decision_event_mismatch(reader: Reader, row: DecisionRow) -> str | None:
    """Does the stored row still say what the audit event that recorded it says?"""
    payload_text = reader.scalar(
        "SELECT payload FROM audit_event WHERE seq = :seq", {"seq": row.audit_seq}
    )
    try:
        payload = json.loads(payload_text) if payload_text is not None else {}
    except (TypeError, ValueError):
        payload = None
    if (
        not isinstance(payload, dict)
        or payload.get("inputs_digest") != row.inputs_digest
        or payload.get("result_digest") != row.result_digest
        or payload.get("decision") != row.decision
    ):
        return f"not the decision audit seq {row.audit_seq} recorded"
    return None


def rebuilt_inputs_problem(reader: Reader, row: DecisionRow) -> str | None:
    """Do the stored inputs still match the rows they were loaded from?

    The inputs are rebuilt from the registry as it stood at the decision's cutoff and
    compared canonically; a dry-run policy file is never stored, so every stored decision's
    policy is registered and can be rebuilt.
    """
    from evalops.services.gate.input_parts import GateRequest
    from evalops.services.verify.gate_inputs import rebuilt_inputs

    inputs = json.loads(row.inputs)
    if "request" not in inputs:
        return None  # decided before requests were recorded (migrated database)
    request = GateRequest.from_dict(inputs["request"])
    gate_id = inputs["gate_id"]
    evaluator = int(inputs.get("evaluator", 1))
    del inputs  # a large decision's parsed inputs are not held beside the rebuilt ones
    try:
        rebuilt = rebuilt_inputs(reader, request, evaluator)
    except InputError as exc:
        return f"its inputs can no longer be loaded: {exc.message}"
    rebuilt["gate_id"] = gate_id
    rebuilt_bytes = canonical_json_document(rebuilt)
    if rebuilt_bytes == row.inputs.encode("utf-8"):
        return None  # stored inputs are canonical JSON (replay checks it): equal bytes
    stored = json.loads(row.inputs)
    if rebuilt_bytes == canonical_json_document(stored):
        return None
    where = differences(stored, rebuilt)[:5]
    return (
        "stored inputs no longer match the registry rows they were loaded from ("
        + (", ".join(where) or "differs")
        + ")"
    )


def stored_decisions(reader: Reader) -> Iterator[StoredDecision]:
    """Every stored decision, one at a time: each carries its whole inputs document, so
    they are never all held together."""
    ids = [row_id for (row_id,) in reader.tuples("SELECT id FROM gate_decision ORDER BY id")]
    for row_id in ids:
        found = reader.first(f"SELECT {_COLUMNS} FROM gate_decision WHERE id = :id", {"id": row_id})
        if found is not None:
            decision = StoredDecision(**found)
            text = (
                decision.inputs,
                decision.result,
                decision.inputs_digest,
                decision.result_digest,
            )
            if not all(isinstance(value, str) for value in text):
                # a blob where a document is stored: no writer stores one
                raise VerificationError(
                    f"gate decision {decision.gate_id}: stored as other than text"
                )
            yield decision


def verify_decisions(reader: Reader) -> int:
    """`verify`: every stored decision replays identically, matches its audit event, and
    its inputs match the registry rows they were loaded from."""
    count = 0
    for row in stored_decisions(reader):
        count += 1
        outcome = replay_row(row)
        if not outcome["identical"]:
            raise VerificationError(
                f"gate decision {row.gate_id}: " + "; ".join(outcome["problems"] or ["differs"])
            )
        for problem in (decision_event_mismatch(reader, row), rebuilt_inputs_problem(reader, row)):
            if problem:
                raise VerificationError(f"gate decision {row.gate_id}: {problem}")
    return count
