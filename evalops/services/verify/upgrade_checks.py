"""What `db upgrade` checks before it migrates a database of an older schema.

A migration carries the rows it finds forward and commits to their digests in the chain
(a `migration.rows` event), so from then on `verify` would vouch for them: an edit made
before the upgrade would be laundered. So the upgrade first runs every check the old
schema supports and refuses (exit 6, the database untouched) on any mismatch.

Schema 0001 recorded, per event, the hash-linked chain and a payload holding the content
of what changed, but no digest of the rows themselves. Checked against it:
- the chain: contiguous, every hash and payload digest recomputes, audit time canonical
  and never running backwards;
- every definition re-hashes and is the one its event recorded;
- every trial record re-hashes, each ingest batch holds the trials its event recorded, and
  each trial's columns that copy its record agree with it;
- every grader config is the entry of its stored grader set document;
- every row whose event recorded its content agrees with it, column by column, and every
  event that recorded a row still has one;
- every gate decision replays byte for byte and is the one its event recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import defer
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.canonical import sha256_digest
from evalops.domain.digests import grader_config_digest
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import VerificationError
from evalops.services.database import stored_revision
from evalops.services.verify.decision_checks import replay_row
from evalops.services.verify.reads import check_chain, check_definitions
from evalops.store.engine import snapshot_session
from evalops.store.reader import ConnectionReader
from evalops.store.rowlines import BOOLEAN, TIMESTAMP, cell
from evalops.store.schema import HEAD_REVISION
from evalops.store.tables import GateDecision

# Per table of schema 0001: the columns whose value the recording event's payload holds
# under the same key (read from the writers of that schema). Keys that name something else
# there (an ingest batch's `rejected` list, a suite's `kind`) are left out.
RECORDED_BY_0001: dict[str, tuple[str, ...]] = {
    "calibration": (
        "annotation_guide_version",
        "annotator_count",
        "calibration_split_digest",
        "grader_config_digest",
        "grader_id",
        "grader_version",
        "holdout_split_digest",
        "label_set_digest",
        "sampling_frame",
    ),
    "calibration_invalidation": ("reason",),
    "execution_profile": ("document_digest", "execution_digest", "system_build"),
    "gate_decision": ("build", "decision", "gate_id", "inputs_digest", "result_digest"),
    "grader_set": ("document_digest", "grader_set_digest", "version"),
    "incident": ("description", "incident_id", "observed_at", "severity", "title", "trace_uri"),
    "incident_event": ("action", "reason", "task_id"),
    "ingest_batch": ("files", "ingested", "skipped_identical"),
    "policy": ("document_digest", "kind", "policy_digest"),
    "promotion": ("reason", "requirements", "subject", "task_id"),
    "reconciliation": ("effect_key", "evidence_uri", "trial_id"),
    "review_result": ("grader_id", "reason", "state", "trial_id"),
    "suite": ("document_digest",),
    "suite_membership": ("action", "grader_set_digest", "reason", "task_digest", "task_id"),
    "task_revision": ("document_digest", "revision", "task_digest"),
    "waiver": (
        "build",
        "expires_at",
        "granted_at",
        "owner",
        "reason",
        "states",
        "suite_id",
        "task_id",
        "waiver_id",
    ),
    "waiver_revocation": ("reason", "revoked_at"),
}
TIMESTAMP_COLUMNS = {"observed_at", "granted_at", "expires_at", "revoked_at"}

# Event kinds of schema 0001 that always wrote a row of a table: a deleted row is missing.
ROW_OF_KIND_0001: dict[str, str] = {
    audit_kinds.CALIBRATION_INVALIDATE: "calibration_invalidation",
    audit_kinds.CALIBRATION_RECORD: "calibration",
    audit_kinds.GATE_DECISION: "gate_decision",
    audit_kinds.INCIDENT_ACTION["open"]: "incident",
    audit_kinds.PROMOTION_ACCEPTED: "promotion",
    audit_kinds.PROMOTION_REFUSED: "promotion",
    audit_kinds.REVIEW_RESOLVE: "review_result",
    audit_kinds.SYNC_DEFINITION["execution_profile"]: "execution_profile",
    audit_kinds.SYNC_DEFINITION["gate_policy"]: "policy",
    audit_kinds.SYNC_DEFINITION["grader_set"]: "grader_set",
    audit_kinds.SYNC_DEFINITION["suite"]: "suite",
    audit_kinds.SYNC_DEFINITION["suite_policy"]: "policy",
    audit_kinds.SYNC_DEFINITION["task"]: "task_revision",
    audit_kinds.TRIALS_INGEST: "ingest_batch",
    audit_kinds.TRIALS_RECONCILE: "reconciliation",
    audit_kinds.WAIVER_GRANT: "waiver",
    audit_kinds.WAIVER_REVOKE: "waiver_revocation",
}


def _payloads(session: Session) -> dict[int, tuple[str, dict[str, Any]]]:
    rows = session.execute(text("SELECT seq, kind, payload FROM audit_event"))
    return {int(seq): (kind, json.loads(payload)) for seq, kind, payload in rows}


def _as_recorded(column: str, value: Any, recorded: Any) -> Any:
    """A stored value as the payload spelled it: timestamps canonical, JSON parsed."""
    if value is None:
        return None
    if column in TIMESTAMP_COLUMNS:
        return cell(TIMESTAMP, value)
    if isinstance(value, str) and isinstance(recorded, list | dict):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _check_rows_against_payloads(session: Session, payloads: dict[int, Any]) -> None:
    holding: set[tuple[int, str]] = set()
    for table, columns in sorted(RECORDED_BY_0001.items()):
        names = ", ".join(f'"{c}"' for c in columns)
        query = f'SELECT id, audit_seq, {names} FROM "{table}" ORDER BY id'
        for row in session.execute(text(query)):
            row_id, seq, values = row[0], int(row[1]), row[2:]
            holding.add((seq, table))
            kind, payload = payloads.get(seq, ("", None))
            if payload is None:
                raise VerificationError(
                    f"{table} row {row_id} claims audit seq {seq}, which does not exist"
                )
            for column, value in zip(columns, values, strict=True):
                recorded = payload.get(column, value)
                if column in payload and _as_recorded(column, value, recorded) != recorded:
                    raise VerificationError(
                        f"audit seq {seq} ({kind}): {table} row {row_id} has a {column} "
                        "other than the one its event recorded"
                    )
    for seq, (event_kind, _) in sorted(payloads.items()):
        wrote = ROW_OF_KIND_0001.get(event_kind)
        if wrote is not None and (seq, wrote) not in holding:
            raise VerificationError(f"audit seq {seq} ({event_kind}): its {wrote} row is gone")


def _check_batches_0001(session: Session, payloads: dict[int, Any]) -> None:
    """Every trial re-hashes and each batch holds what its event recorded (the recipe of
    schema 0001: sha256 over `trial_id, record_digest, stored_digest` lines, in id order)."""
    batches = {
        int(batch_id): int(seq)
        for batch_id, seq in session.execute(text("SELECT id, audit_seq FROM ingest_batch"))
    }
    hashers = {batch_id: hashlib.sha256() for batch_id in batches}
    query = (
        "SELECT trial_id, record, record_digest, stored_digest, ingest_batch_id FROM trial "
        "ORDER BY ingest_batch_id, id"
    )
    for trial_id, record, record_digest, stored_digest, batch_id in session.execute(text(query)):
        if sha256_digest(record.encode("utf-8")) != stored_digest:
            raise VerificationError(f"trial {trial_id}: stored record was changed")
        hasher = hashers.get(batch_id)
        if hasher is None:
            raise VerificationError(f"trial {trial_id}: belongs to no recorded ingest batch")
        hasher.update(f"{trial_id}\n{record_digest}\n{stored_digest}\n".encode())
    for batch_id, seq in sorted(batches.items()):
        _, payload = payloads.get(seq, ("", {}))
        if payload.get("trials_digest") != "sha256:" + hashers[batch_id].hexdigest():
            raise VerificationError(
                f"ingest batch {batch_id}: its trials are not the ones audit seq {seq} recorded"
            )


# Trial columns that copy a field of the stored record (which its digest covers).
TRIAL_MIRRORS = (
    "trial_id",
    "run_id",
    "attempt_id",
    "task_id",
    "task_digest",
    "execution_digest",
    "grader_set_digest",
    "eval_case_digest",
    "trial_index",
)


def _check_trial_mirrors(session: Session) -> None:
    """Each trial's columns that copy its record, and its times, agree with the record."""
    names = ", ".join(f'"{c}"' for c in TRIAL_MIRRORS)
    query = f"SELECT id, record, started_at, completed_at, {names} FROM trial ORDER BY id"
    for row_id, record_text, started, completed, *values in session.execute(text(query)):
        record = json.loads(record_text)
        for column, value in zip(TRIAL_MIRRORS, values, strict=True):
            if record.get(column) != value:
                raise VerificationError(f"trial row {row_id}: {column} is not its record's")
        for column, stored in (("started_at", started), ("completed_at", completed)):
            if cell(TIMESTAMP, stored) != format_timestamp(parse_timestamp(record[column])):
                raise VerificationError(f"trial row {row_id}: {column} is not its record's")


def _check_grader_configs(session: Session) -> None:
    """Each grader config row is the entry of its stored grader set document."""
    query = (
        "SELECT c.id, c.grader_id, c.grader_version, c.grader_config_digest, c.layer, c.type, "
        "c.blocking, s.document FROM grader_config c JOIN grader_set s "
        "ON s.id = c.grader_set_row_id ORDER BY c.id"
    )
    for row_id, grader_id, version, config, layer, kind, blocking, document in session.execute(
        text(query)
    ):
        entry = next(
            (g for g in json.loads(document).get("graders", []) if g.get("id") == grader_id), None
        )
        if entry is None or (
            version,
            config,
            layer,
            kind,
            cell(BOOLEAN, blocking),
        ) != (
            entry.get("version"),
            grader_config_digest(entry),
            entry.get("layer"),
            entry.get("type"),
            entry.get("blocking"),
        ):
            raise VerificationError(
                f"grader_config row {row_id}: not grader {grader_id} of its stored grader set"
            )


def _check_decisions_0001(session: Session) -> None:
    """Every decision replays under the evaluator it was made with (schema 0001 rows have
    no sync run: that column is left unread)."""
    query = select(GateDecision).options(defer(GateDecision.sync_run_id))  # type: ignore[arg-type]
    for (row,) in session.execute(query.order_by(col(GateDecision.id))):
        outcome = replay_row(row)
        if not outcome["identical"]:
            raise VerificationError(
                f"gate decision {row.gate_id}: " + "; ".join(outcome["problems"] or ["differs"])
            )


def _check_0001(session: Session) -> None:
    reader = ConnectionReader(session.connection())
    check_chain(reader)
    check_definitions(reader)
    payloads = _payloads(session)
    _check_batches_0001(session, payloads)
    _check_trial_mirrors(session)
    _check_grader_configs(session)
    _check_rows_against_payloads(session, payloads)
    _check_decisions_0001(session)


def _check_0002(session: Session) -> None:
    """Schema 0002 records each row's digest with its event: everything `verify` checks,
    over the tables that schema has (signed acts came with 0003)."""
    from sqlalchemy import inspect

    from evalops.services.verify.decision_checks import verify_decisions
    from evalops.services.verify.reads import check_rows, check_trials
    from evalops.store.audited_columns import AUDITED_COLUMNS

    reader = ConnectionReader(session.connection())
    check_chain(reader)
    check_definitions(reader)
    check_trials(reader)
    present = set(inspect(session.connection()).get_table_names())
    check_rows(reader, [name for name in AUDITED_COLUMNS if name in present])
    verify_decisions(reader)


def _check_0003(session: Session) -> None:
    """Schema 0003 adds signed acts: everything 0002 checks, and every act re-verified."""
    from evalops.services.verify.act_checks import verify_signed_acts

    _check_0002(session)
    verify_signed_acts(ConnectionReader(session.connection()))


def _check_0004(session: Session) -> None:
    """Schema 0004 adds voids: their rows are digested like every other row (check_rows
    covers the tables present) and both loaders leave voided trials out, so everything 0003
    checks is everything it lets be checked."""
    _check_0003(session)


# Per older schema, everything it lets be checked. A migration that moves the head on adds
# the checks of the schema it leaves (a test requires one entry per older revision).
CHECKS: dict[str, Callable[[Session], None]] = {
    "0001": _check_0001,
    "0002": _check_0002,
    "0003": _check_0003,
    "0004": _check_0004,
}


def check_before_upgrade(engine: Engine) -> str | None:
    """Raise VerificationError unless the database's rows are what its schema recorded;
    returns the revision checked (None: a new or current database, nothing to carry)."""
    revision = stored_revision(engine)
    if revision is None or revision == HEAD_REVISION:
        return None
    check = CHECKS.get(revision)
    if check is None:
        raise RuntimeError(f"no checks known for schema {revision} (add them to CHECKS)")
    with snapshot_session(engine) as session:
        try:
            check(session)
        except VerificationError as exc:
            raise VerificationError(
                f"refusing to upgrade from {revision}: {exc.message}; the database is unchanged"
            ) from None
    return revision
