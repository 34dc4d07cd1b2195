"""`evalops verify`: what the database holds is exactly what its audit chain recorded.

Checks, streaming (memory does not grow with the number of trials):
1. the chain: contiguous seqs, every hash re-computed, every payload re-hashed;
2. every row of lifecycle state, both directions: each event's rows exist and re-hash to the
   count and digest its payload recorded, and every row belongs to an event that recorded
   it (so an edited, deleted, inserted or re-pointed row is found);
3. every stored definition re-hashes to its identity digest, and every trial record to its
   stored digest;
4. every stored gate decision replays byte for byte, matches its event, and its inputs
   still match the registry rows they were loaded from;
5. every signed act re-verifies against the authority in force at its event (on a large
   registry, in worker processes running alongside the other checks);
6. optionally, anchors kept outside the database (`--anchor SEQ:HASH`, `--anchors FILE`):
   the chain must still hold each, which no rewrite of the tail can fake.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import String, Table, select, type_coerce
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col

from evalops.domain import audit_kinds
from evalops.domain.audit_chain import ChainEvent, first_chain_problem
from evalops.domain.canonical import canonical_text, sha256_digest
from evalops.domain.vocabulary import format_timestamp
from evalops.errors import VerificationError
from evalops.registry.definitions import spec_digest
from evalops.services.act_checks import ActPool, signed_acts_check
from evalops.services.anchors import Anchor, anchor_problem
from evalops.services.gate import verify_decisions
from evalops.store.audit import as_chain_event, carried_forward, rows_fully_covered_from
from evalops.store.engine import raw_rows, snapshot_session
from evalops.store.reader import ConnectionReader
from evalops.store.rowdigest import PLAIN, RowsDigest, cell, digest_plan, line_of, table_entry
from evalops.store.tables import (
    AuditEvent,
    ExecutionProfileRow,
    GraderSetRow,
    PolicyRow,
    SuiteRow,
    TaskRevision,
)

# table -> (kind in messages, its identity-digest column)
_DEFINITION_TABLES: tuple[tuple[type[Any], str, str], ...] = (
    (TaskRevision, "task", "task_digest"),
    (ExecutionProfileRow, "execution_profile", "execution_digest"),
    (GraderSetRow, "grader_set", "grader_set_digest"),
    (SuiteRow, "suite", ""),
    (PolicyRow, "", "policy_digest"),
)
STREAM = 2000
# How SQLite stores a timestamp (naive UTC, always with microseconds).
SQLITE_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f"
RowIds = dict[tuple[int, str], list[int]]


@dataclass
class VerifyReport:
    events: int
    rows: int
    definitions: int
    trials: int = 0
    decisions: int = 0
    legacy_decisions: int = 0
    anchors: list[dict[str, Any]] = field(default_factory=list)
    head: dict[str, Any] | None = None
    carried_forward: list[dict[str, Any]] = field(default_factory=list)

    @property
    def covered_from(self) -> int:
        return rows_fully_covered_from(self.carried_forward)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "events": self.events,
            "rows": self.rows,
            "definitions": self.definitions,
            "trials": self.trials,
            "decisions": self.decisions,
            "anchors": self.anchors,
            "audit_head": self.head,
            "rows_fully_covered_from": self.covered_from,
            "carried_forward": self.carried_forward,
        }


def _stream(session: Session, stmt: Any) -> Iterator[Any]:
    result = session.execute(stmt.execution_options(yield_per=STREAM))
    try:
        yield from result
    finally:
        result.close()


def _at_problem(seq: int, at: datetime, stored: Any, previous: datetime | None) -> str | None:
    """An `at` not in the one stored spelling (SQLite keeps text; readers that compare it
    would see another time) or earlier than its predecessor's (audit time is monotonic)."""
    if isinstance(stored, str) and stored != at.strftime(SQLITE_TIMESTAMP):
        return f"audit seq {seq}: at {stored!r} is not in its stored spelling"
    if previous is not None and at < previous:
        return (
            f"audit seq {seq}: at {format_timestamp(at)} is earlier than the previous "
            f"event's {format_timestamp(previous)} (audit time runs backwards)"
        )
    return None


def check_chain(session: Session) -> tuple[int, dict[str, Any] | None]:
    """The chain links, every payload re-hashes and audit time never runs backwards;
    returns (events, head)."""
    count = 0
    head: dict[str, Any] | None = None
    payload_problem: str | None = None
    at_problem: str | None = None
    previous: datetime | None = None
    # The stored `at` as the driver returns it: SQLite's text, PostgreSQL's timestamp.
    stored_at = type_coerce(AuditEvent.at, String).label("stored_at")

    def events() -> Generator[ChainEvent, None, None]:
        nonlocal count, payload_problem, at_problem, head, previous
        query = select(AuditEvent, stored_at).order_by(col(AuditEvent.seq))
        for row, stored in _stream(session, query):
            count += 1
            if payload_problem is None and (
                sha256_digest(row.payload.encode("utf-8")) != row.payload_digest
            ):
                payload_problem = f"audit seq {row.seq}: payload does not match payload_digest"
            if at_problem is None:
                at_problem = _at_problem(row.seq, row.at, stored, previous)
            previous = row.at
            head = {"seq": row.seq, "hash": row.hash}
            yield as_chain_event(row)

    stream = events()
    try:
        problem = first_chain_problem(stream)
    finally:
        stream.close()
    for found in (problem, payload_problem, at_problem):
        if found is not None:
            raise VerificationError(found)
    return count, head


def audited_tables() -> list[Table]:
    """Every table whose rows carry the audit seq of the event that recorded them."""
    return sorted(
        (t for t in SQLModel.metadata.tables.values() if "audit_seq" in t.columns),
        key=lambda t: t.name,
    )


def _raw_rows(session: Session, sql: str) -> Iterator[tuple[Any, ...]]:
    """Stream rows straight from the driver (a server-side cursor on PostgreSQL), so memory
    stays flat and no ORM type processing runs per row."""
    return raw_rows(session, sql, "evalops_verify")


def _stored_rows(
    session: Session, tables: list[Table]
) -> tuple[dict[int, dict[str, Any]], RowIds, int]:
    """Per audit seq, per table: {count, digest} of the stored rows, and a few row ids."""
    computed: dict[int, dict[str, Any]] = {}
    ids: RowIds = {}
    total = 0
    for table in tables:
        plan = digest_plan(table)
        names = ", ".join(f'"{name}"' for name, _ in plan)
        sql = f'SELECT audit_seq, id, {names} FROM "{table.name}" ORDER BY audit_seq, id'
        kinds = [kind for _, kind in plan]
        # `cell` returns a plain column's value as it is: a table of plain columns only
        # (signed_act, one row per signed act) hashes the driver's row as it comes.
        plain = all(kind == PLAIN for kind in kinds)
        name = table.name
        # The rows of one seq as RowsDigest.add_line counts and hashes them, kept in
        # locals: most seqs have one row per table, so per-seq objects cost per row.
        current: int | None = None
        count, hasher = 0, hashlib.sha256()
        found: list[int] = []
        for raw in _raw_rows(session, sql):
            total += 1
            seq = raw[0]
            if seq != current:
                if current is not None:
                    computed.setdefault(current, {})[name] = table_entry(count, hasher)
                current, count, hasher, found = seq, 0, hashlib.sha256(), []
                ids[(seq, name)] = found
            count += 1
            if plain:
                hasher.update(line_of(raw[2:]))
            else:
                hasher.update(line_of([cell(k, v) for k, v in zip(kinds, raw[2:], strict=True)]))
            if len(found) < 5:
                found.append(raw[1])
        if current is not None:
            computed.setdefault(current, {})[name] = table_entry(count, hasher)
    return computed, ids, total


def _declared_rows(session: Session) -> Iterator[tuple[AuditEvent, dict[str, Any]]]:
    """Each event with the rows it recorded (legacy events: as a migration recorded them)."""
    legacy: dict[str, Any] = {}
    migrations = select(AuditEvent).where(col(AuditEvent.kind) == audit_kinds.MIGRATION_ROWS)
    for (event,) in _stream(session, migrations.order_by(col(AuditEvent.seq))):
        for seq, rows in json.loads(event.payload).get("legacy_rows", {}).items():
            # A migration vouches only for events before it, and the first one to vouch
            # for an event stands: a later event can never re-describe older rows.
            if int(seq) < event.seq and seq not in legacy:
                legacy[seq] = rows
    for (event,) in _stream(session, select(AuditEvent).order_by(col(AuditEvent.seq))):
        payload = json.loads(event.payload)
        if "rows" in payload:
            yield event, payload["rows"]
        else:
            yield event, legacy.get(str(event.seq), {})


def _row_names(table: str, seq: int, ids: RowIds) -> str:
    found = ids.get((seq, table), [])
    shown = ", ".join(str(i) for i in found)
    return f"{table} row{'s' if len(found) != 1 else ''} {shown}" if found else f"{table} rows"


def check_rows(session: Session, tables: list[Table] | None = None) -> int:
    """Both directions: every event's rows as recorded, every row under its event, over
    `tables` (default: every audited table of this schema; an upgrade check of an older
    schema names the tables that schema has)."""
    computed, ids, total = _stored_rows(session, audited_tables() if tables is None else tables)
    for event, declared in _declared_rows(session):
        stored = computed.pop(event.seq, {})
        what = f"audit seq {event.seq} ({event.kind} {event.subject})"
        for table in sorted(declared.keys() | stored.keys()):
            want = declared.get(table)
            have = stored.get(table)
            if want == have:
                continue
            if want is None:
                raise VerificationError(
                    f"{what}: {_row_names(table, event.seq, ids)} claim this event, which "
                    f"recorded no {table} row (inserted outside evalops)"
                )
            if have is None:
                raise VerificationError(
                    f"{what}: its {want['count']} {table} row(s) are gone (deleted outside evalops)"
                )
            if want["count"] != have["count"]:
                raise VerificationError(
                    f"{what}: recorded {want['count']} {table} row(s), "
                    f"{have['count']} are stored ({_row_names(table, event.seq, ids)})"
                )
            raise VerificationError(
                f"{what}: {_row_names(table, event.seq, ids)} changed since the event recorded them"
            )
    if computed:
        seq = min(computed)
        table = sorted(computed[seq])[0]
        raise VerificationError(
            f"{_row_names(table, seq, ids)} claim audit seq {seq}, which does not exist"
        )
    return total


def _row_name(kind: str, row: Any) -> str:
    ident = next(
        getattr(row, a)
        for a in ("task_id", "execution_id", "grader_set_id", "suite_id", "policy_id")
        if hasattr(row, a)
    )
    version = getattr(row, "revision", None) or getattr(row, "version", None)
    return f"{kind} {ident}" + (f"@{version}" if version is not None else "") + f" (row {row.id})"


def check_definitions(session: Session) -> int:
    """Every stored definition is canonical JSON whose digests match its columns."""
    count = 0
    for table, table_kind, digest_column in _DEFINITION_TABLES:
        for (row,) in _stream(session, select(table).order_by(col(table.id))):
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
    return count


def check_trials(session: Session) -> int:
    """Every stored trial record re-hashes to its stored digest (names the trial)."""
    count = 0
    sql = 'SELECT trial_id, record, stored_digest FROM "trial" ORDER BY id'
    for trial_id, record, stored_digest in _raw_rows(session, sql):
        count += 1
        if sha256_digest(record.encode("utf-8")) != stored_digest:
            raise VerificationError(f"trial {trial_id}: stored record was changed")
    return count


def verify_database(
    engine: Engine,
    anchors: list[Anchor] | None = None,
    on_stage: Callable[[str], None] | None = None,
    act_pool: ActPool | None = None,
) -> VerifyReport:
    """Raise VerificationError naming the first bad item; else say what was checked.

    `on_stage` hears the name of each stage as it starts (a progress display). `act_pool`
    says how the signatures of signed acts are checked (default: on the other CPUs when
    there are enough acts); the first problem reported is the same either way.
    """

    def stage(name: str) -> None:
        if on_stage is not None:
            on_stage(name)

    # One snapshot for every check: a writer committing meanwhile must not make the rows
    # read by one check disagree with the events read by another. The signed acts are read
    # first, so that worker processes check their signatures while this one goes through
    # the other stages; their verdict is taken where the stage always stood.
    with (
        snapshot_session(engine) as session,
        signed_acts_check(ConnectionReader(session.connection()), act_pool) as acts,
    ):
        stage("audit chain")
        events, head = check_chain(session)
        checked_anchors = []
        for anchor in anchors or []:
            problem = anchor_problem(session, anchor)
            if problem is not None:
                raise VerificationError(problem)
            checked_anchors.append(anchor.as_dict())
        # Self-consistency of each row first (it names the row), then every row against
        # the event that recorded it, then the signed acts, then the decisions.
        stage("definitions")
        definitions = check_definitions(session)
        stage("trials")
        trials = check_trials(session)
        stage("rows")
        rows = check_rows(session)
        if not acts.pooled:
            stage("signed acts")
            acts.finish()
        stage("gate decisions")
        try:
            decisions = verify_decisions(session)
        except Exception:
            if acts.pooled:
                acts.finish()  # a bad act comes before a bad decision, as inline
            raise
        if acts.pooled:
            stage("signed acts")
            acts.finish()
        carried = carried_forward(session)
    return VerifyReport(
        events,
        rows,
        definitions,
        trials,
        decisions,
        anchors=checked_anchors,
        head=head,
        carried_forward=carried,
    )


def chain_problem(session: Session) -> str | None:
    """The first broken link or payload of the whole chain, or None."""
    try:
        check_chain(session)
    except VerificationError as exc:
        return exc.message
    return None


def event_rows_problem(session: Session, event: AuditEvent) -> str | None:
    """Do the rows that claim `event` still re-hash to what it recorded? (One event's share
    of the both-directions check `verify` runs over every event.)"""
    declared = json.loads(event.payload).get("rows")
    if declared is None:
        return None  # a legacy event: its migration vouches for its rows, `verify` checks that
    stored = RowsDigest()
    for table in audited_tables():
        plan = digest_plan(table)
        names = ", ".join(f'"{name}"' for name, _ in plan)
        sql = f'SELECT {names} FROM "{table.name}" WHERE audit_seq = {int(event.seq)} ORDER BY id'
        kinds = [kind for _, kind in plan]
        for raw in _raw_rows(session, sql):
            cells = [cell(k, v) for k, v in zip(kinds, raw, strict=True)]
            stored.add_line(table.name, line_of(cells))
    if stored.as_payload() != declared:
        return f"rows of audit seq {event.seq} ({event.kind} {event.subject}) changed since"
    return None
