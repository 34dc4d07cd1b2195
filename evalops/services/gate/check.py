"""`evalops gate check|show|list|replay` and `evalops compare`.

`gate_inputs` loads plain-JSON inputs (members and their pins, re-derived trials, waivers,
baseline) as the registry stood at one audit seq, the pure `evaluate` decides, and the
decision is stored with every input so `gate replay` and `verify` can re-evaluate it byte
for byte, and `verify` can rebuild the inputs and compare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from evalops.domain import audit_kinds
from evalops.domain.canonical import (
    canonical_json_document,
    plain_floats,
    sha256_digest,
)
from evalops.domain.gate import EVALUATOR, evaluate_stored
from evalops.domain.gate_documents import Anchor, AnyGateInputs, DryRunOutput, StoredOutput
from evalops.domain.regression import METHODS
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.gate.input_parts import DEFAULT_SEED, evaluated_at
from evalops.services.gate.inputs import (
    build_inputs,
    execution_for,
    policy_from_file,
    request_for,
)
from evalops.services.gate.policies import named_by_digest, named_in
from evalops.services.registry.unknown_ids import unknown_decision
from evalops.services.verify import decision_checks
from evalops.services.verify.decision_checks import replay_row
from evalops.store.audit import append_event, chain_head, next_seq
from evalops.store.engine import read_session, write_session
from evalops.store.reader import ConnectionReader
from evalops.store.tables import AuditEvent, GateDecision, Waiver


def _policy_choice(
    session: Session, policy: str | None, dry_run: bool
) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(registered ref, document, digest) for `--policy ID|DIGEST|FILE`.

    A stored decision uses only registered definitions (docs/gate.md): a file is
    read only with `--dry-run`, unless its content is a registered policy anyway.
    """
    if policy is None:
        return None, None, None
    path = Path(policy)
    if not path.is_file():
        if path.suffix.lower() in (".yaml", ".yml", ".json"):
            # A file name, not an id: saying "add --dry-run" to someone who did would mislead.
            raise InputError(f"policy file not found: {policy}", policy, field="--policy")
        return policy, None, None
    document, policy_digest, registered = policy_from_file(session, path)
    if registered:
        return policy_digest, None, None
    if not dry_run:
        raise InputError(
            f"{policy} is not a registered gate policy: a stored decision uses only registered "
            "definitions. Commit it to the registry and run `evalops sync` (then pass "
            "--policy ID), or add --dry-run to evaluate it without storing anything",
            field="--policy",
        )
    return None, document, policy_digest


def _head(session: Session) -> Anchor | None:
    head = chain_head(session)
    return {"seq": head.seq, "hash": head.hash} if head else None


def dry_run_check(
    engine: Engine,
    *,
    build: str,
    suite_id: str,
    at: datetime | None,
    now: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy: str | None = None,
) -> tuple[DryRunOutput, AnyGateInputs]:
    """Evaluate without storing anything (a policy FILE is allowed): (decision, inputs),
    under the current evaluator (`gate.EVALUATOR`: per-task summaries)."""
    with read_session(engine) as session:
        ref, document, policy_digest = _policy_choice(session, policy, dry_run=True)
        request = request_for(
            session,
            build=build,
            suite_id=suite_id,
            at=at,
            now=now,
            execution_id=execution_id,
            baseline=baseline,
            policy=ref,
        )
        inputs = build_inputs(
            session,
            request,
            policy_doc=document,
            policy_digest=policy_digest,
            dry_run=True,
            evaluator=EVALUATOR,
        )
        inputs["gate_id"] = "dry-run"
        result: DryRunOutput = {
            **evaluate_stored(inputs),
            "policy": named_in(inputs),
            "stored": False,
            "audit_head": _head(session),
        }
        return result, inputs


def check(
    engine: Engine,
    *,
    build: str,
    suite_id: str,
    at: datetime | None,
    actor: str,
    now: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy: str | None = None,
) -> StoredOutput:
    """Evaluate, store and audit one gate decision; returns the decision. New decisions are
    made by the current evaluator only (`gate.EVALUATOR`: per-task summaries; docs/gate.md,
    "Replay")."""
    return check_decided(
        engine,
        build=build,
        suite_id=suite_id,
        at=at,
        actor=actor,
        now=now,
        execution_id=execution_id,
        baseline=baseline,
        policy=policy,
    ).output


class Decided(NamedTuple):
    """A decision just stored, as `check` returns it, with the inputs it was evaluated from
    (still in memory: the terminal's lines need not parse the stored text again) and its
    number."""

    output: StoredOutput
    inputs: AnyGateInputs
    number: int


def check_decided(
    engine: Engine,
    *,
    build: str,
    suite_id: str,
    at: datetime | None,
    actor: str,
    now: datetime,
    execution_id: str | None = None,
    baseline: str | None = None,
    policy: str | None = None,
) -> Decided:
    """`check`, keeping the inputs the decision was evaluated from."""
    with write_session(engine) as session:
        ref, document, policy_digest = _policy_choice(session, policy, dry_run=False)
        request = request_for(
            session,
            build=build,
            suite_id=suite_id,
            at=at,
            now=now,
            execution_id=execution_id,
            baseline=baseline,
            policy=ref,
        )
        inputs = build_inputs(
            session, request, policy_doc=document, policy_digest=policy_digest, evaluator=EVALUATOR
        )
        number = (session.exec(select(func.max(GateDecision.number))).one() or 0) + 1
        inputs["gate_id"] = f"GATE-{number}"
        result = evaluate_stored(inputs)
        inputs_bytes = canonical_json_document(inputs)
        # The result's rates and means are floats (1.0 in `--json`); written as ints they
        # are the same canonical bytes, made on the encoder's first path.
        result_bytes = canonical_json_document(plain_floats(result))
        row = GateDecision(
            number=number,
            gate_id=inputs["gate_id"],
            build=build,
            suite_id=suite_id,
            execution_digest=inputs["execution_digest"],
            suite_digest=inputs["suite"]["suite_digest"],
            policy_digest=inputs["policy_digest"],
            sync_run_id=inputs["sync"]["sync_run"] if inputs["sync"] else None,
            evaluated_at=evaluated_at(request),
            decision=result["decision"],
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
            kind=audit_kinds.GATE_DECISION,
            subject=inputs["gate_id"],
            payload={
                "gate_id": inputs["gate_id"],
                "decision": result["decision"],
                "build": build,
                "suite": suite_id,
                "inputs_digest": row.inputs_digest,
                "result_digest": row.result_digest,
            },
            rows=[row],
        )
        anchor: Anchor = {"seq": event.seq, "hash": event.hash}
        output: StoredOutput = {
            **result,
            "policy": named_in(inputs),
            "audit_head": anchor,
            "decision_event": anchor,
        }
        return Decided(output, inputs, number)


def _decision(session: Session, gate_id: str) -> GateDecision:
    row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).first()
    if row is None:
        raise InputError(unknown_decision(session, gate_id))
    return row


def waiver_signers(session: Session, accounting: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Who signed each waiver a decision names (applied, expired, unused, revoked): the
    principals and key fingerprints, [] for an unsigned one (docs/authority.md)."""
    from evalops.services.authority.acts import signers_of

    out: dict[str, list[Any]] = {}
    for kind in ("applied", "expired", "unused", "revoked"):
        for waiver_id in accounting.get(kind) or []:
            row = session.exec(select(Waiver).where(Waiver.waiver_id == waiver_id)).first()
            if row is not None and waiver_id not in out:
                out[waiver_id] = signers_of(session, "waiver.grant", row.audit_seq)
    return out


def show(engine: Engine, gate_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        row = _decision(session, gate_id)
        event = session.get(AuditEvent, row.audit_seq)
        result = json.loads(row.result)
        return {
            **result,
            "waiver_signers": waiver_signers(session, result.get("waivers") or {}),
            "policy": named_by_digest(session, row.policy_digest),
            "decided_at": format_timestamp(row.at),
            "actor": row.actor,
            "decision_event": {"seq": row.audit_seq, "hash": event.hash if event else None},
            "audit_head": _head(session),
        }


def decision_event_mismatch(session: Session, row: GateDecision) -> str | None:
    """Does the stored row still say what the audit event that recorded it says?"""
    return decision_checks.decision_event_mismatch(_reader(session), row)


def rebuilt_inputs_problem(session: Session, row: GateDecision) -> str | None:
    """Do the stored inputs still match the registry rows they were loaded from?"""
    return decision_checks.rebuilt_inputs_problem(_reader(session), row)


def _reader(session: Session) -> ConnectionReader:
    """The session's own connection as a `Reader` (the decision checks are plain SQL)."""
    return ConnectionReader(session.connection())


def replay(engine: Engine, gate_id: str) -> dict[str, Any]:
    """Replay, and check the stored row against the audit event that recorded it."""
    with read_session(engine) as session:
        row = _decision(session, gate_id)
        outcome = replay_row(row)
        mismatch = decision_event_mismatch(session, row)
        if mismatch:
            outcome["problems"].append(mismatch)
            outcome["identical"] = False
        return outcome


def compare(
    engine: Engine,
    *,
    baseline: str,
    candidate: str,
    suite_id: str,
    method: str | None,
    alpha: float | None,
    seed: int = DEFAULT_SEED,
    at: datetime | None = None,
    now: datetime,
    policy: str | None = None,
) -> dict[str, Any]:
    """The paired verdict alone (nothing stored), under registered definitions only."""
    if method is not None and method not in METHODS:
        raise InputError(f"method {method!r} is not one of {', '.join(METHODS)}", field="--method")
    if alpha is not None and not 0 < alpha < 1:
        raise InputError("alpha must be between 0 and 1", field="--alpha")
    if baseline == candidate:
        raise InputError("the baseline and the candidate are the same build", field="--baseline")
    with read_session(engine) as session:
        ref, _, _ = _policy_choice(session, policy, dry_run=False)
        request = request_for(
            session,
            build=candidate,
            suite_id=suite_id,
            at=at,
            now=now,
            baseline=baseline,
            policy=ref,
            method=method,
            alpha=alpha,
            seed=seed,
        )
        # Each build is named by its own option here (there is no --build to blame).
        execution_for(session, candidate, None, request.cutoff, field="--candidate")
        execution_for(session, baseline, None, request.cutoff, field="--baseline")
        # Nothing is stored: any registered policy may be asked for, as in a dry run.
        inputs = build_inputs(session, request, dry_run=True, evaluator=EVALUATOR)
    inputs["gate_id"] = "compare"
    result = evaluate_stored(inputs)
    regression = result["regression"]
    assert regression is not None
    from evalops.services.reports.changes import changes_since_baseline

    changes = changes_since_baseline(result, inputs, None)
    return {
        **regression,
        "candidate": candidate,
        "suite": suite_id,
        "changes": {k: changes[k] for k in ("tasks", "counts", "alpha_note")},
    }
