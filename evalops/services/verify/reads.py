"""`evalops verify`'s checks of the chain, the definitions, the trials and the rows, through a
`Reader` (evalops/store/reader.py): plain SQL, the same text on both engines.

On a SQLite file they read through `sqlite3` itself: importing SQLAlchemy and the table
models would cost `verify` more than its whole budget, so nothing here imports them (a
test runs these checks in a fresh interpreter and looks). On PostgreSQL, and wherever an
ORM session is at hand (`db upgrade`'s checks, `export attestation`), they read through
`ConnectionReader(session.connection())`, in that session's transaction: there is one
implementation of each check.

Each streams what it reads (`Reader.tuples`: a server-side cursor on PostgreSQL), so memory
does not grow with the number of trials, events or rows. Each raises VerificationError
naming the first bad item (tests/integrity holds the tampering corpus that pins the
messages); what each checks is in evalops/services/verify/run.py's docstring.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterable, Iterator
from datetime import datetime
from typing import Any

from evalops.domain import audit_kinds
from evalops.domain.audit_chain import ChainEvent, first_chain_problem
from evalops.domain.canonical import canonical_text, sha256_digest
from evalops.domain.digests import spec_digest
from evalops.domain.timestamps import format_timestamp
from evalops.errors import VerificationError
from evalops.services.verify.anchors import Anchor
from evalops.store.audited_columns import AUDITED_COLUMNS
from evalops.store.reader import Reader, timestamp
from evalops.store.rowlines import PLAIN, cell, stored_line_of, table_entry

#: How SQLite stores a timestamp (naive UTC, always with microseconds).
SQLITE_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f"
#: The largest seq either engine can hold (a BIGINT): an anchor past it names no event.
MAX_SEQ = 2**63 - 1
#: Row ids shown per (seq, table) in a message.
SHOWN_IDS = 5

RowIds = dict[tuple[int, str], list[int]]


# -- 1. the chain ---------------------------------------------------------------------------


def _moment(stored: Any) -> datetime | None:
    """A stored `at` as the aware UTC datetime the tables read it as, or None when it is no
    timestamp at all (the hash of its event then cannot match)."""
    try:
        return timestamp(stored)
    except (TypeError, ValueError):
        return None


def _at_problem(
    seq: int, at: datetime | None, stored: Any, previous: datetime | None
) -> str | None:
    """An `at` not in the one stored spelling (SQLite keeps text; readers that compare it
    would see another time) or earlier than its predecessor's (audit time is monotonic)."""
    if at is None or (isinstance(stored, str) and stored != at.strftime(SQLITE_TIMESTAMP)):
        return f"audit seq {seq}: at {stored!r} is not in its stored spelling"
    if previous is not None and at < previous:
        return (
            f"audit seq {seq}: at {format_timestamp(at)} is earlier than the previous "
            f"event's {format_timestamp(previous)} (audit time runs backwards)"
        )
    return None


def _text(stored: Any) -> str:
    """A stored text column as the chain hashed it; anything but text (a blob) hashes as
    something no event was hashed with, so its event's hash no longer matches."""
    return stored if isinstance(stored, str) else f"not stored text: {stored!r}"


_EVENTS = (
    "SELECT seq, at, actor, kind, subject, payload_digest, payload, prev_hash, hash "
    "FROM audit_event ORDER BY seq"
)


def check_chain(reader: Reader) -> tuple[int, dict[str, Any] | None]:
    """The chain links, every payload re-hashes and audit time never runs backwards;
    returns (events, head)."""
    count = 0
    head: dict[str, Any] | None = None
    payload_problem: str | None = None
    at_problem: str | None = None
    previous: datetime | None = None

    def events() -> Generator[ChainEvent, None, None]:
        nonlocal count, payload_problem, at_problem, head, previous
        for seq, stored, actor, kind, subject, digest, payload, prev_hash, hash_ in reader.tuples(
            _EVENTS
        ):
            count += 1
            if payload_problem is None and (
                not isinstance(payload, str) or sha256_digest(payload.encode("utf-8")) != digest
            ):
                payload_problem = f"audit seq {seq}: payload does not match payload_digest"
            at = _moment(stored)
            if at_problem is None:
                at_problem = _at_problem(seq, at, stored, previous)
            if at is not None:
                previous = at
            head = {"seq": seq, "hash": hash_}
            yield ChainEvent(
                seq=seq,
                # As the chain hashed it (store/audit.py `append_event`): evalops's one spelling.
                at=format_timestamp(at) if at is not None else f"not a timestamp: {stored!r}",
                actor=_text(actor),
                kind=_text(kind),
                subject=_text(subject),
                payload_digest=_text(digest),
                prev_hash=prev_hash,
                hash=hash_,
            )

    stream = events()
    try:
        problem = first_chain_problem(stream)
    finally:
        stream.close()
    for found in (problem, payload_problem, at_problem):
        if found is not None:
            raise VerificationError(found)
    return count, head


def chain_problem(reader: Reader) -> str | None:
    """The first broken link or payload of the whole chain, or None."""
    try:
        check_chain(reader)
    except VerificationError as exc:
        return exc.message
    return None


def anchor_problem(reader: Reader, anchor: Anchor) -> str | None:
    """Does the chain still hold `anchor` (docs/verify.md, evalops/services/verify/anchors.py)?"""
    held = None
    if 0 <= anchor.seq <= MAX_SEQ:
        held = reader.scalar("SELECT hash FROM audit_event WHERE seq = :seq", {"seq": anchor.seq})
    if held is None:
        return (
            f"anchor {anchor.seq}:{anchor.hash} from {anchor.source}: the chain has no event "
            f"{anchor.seq} any more (its tail was cut, unless the anchor is another "
            "registry's: check --db)"
        )
    if held != anchor.hash:
        return (
            f"anchor {anchor.seq}:{anchor.hash} from {anchor.source}: the chain holds "
            f"{held} at seq {anchor.seq} (rewritten since the anchor was taken, "
            "unless the anchor is another registry's: check --db)"
        )
    return None


def carried_forward(reader: Reader) -> list[dict[str, Any]]:
    """The migrations that carried rows of an older schema forward, oldest first: each
    vouches for the rows of every event before its own `seq`, checked at the upgrade only
    as far as that schema recorded them. Rows of events from the last one's `seq` on are
    fully covered by the digests their own events recorded."""
    sql = "SELECT seq, subject FROM audit_event WHERE kind = :kind ORDER BY seq"
    return [
        {"seq": seq, "migration": subject.partition(":")[2]}
        for seq, subject in reader.tuples(sql, {"kind": audit_kinds.MIGRATION_ROWS})
    ]


def rows_fully_covered_from(carried: list[dict[str, Any]]) -> int:
    """The first audit seq whose rows, and every later one's, are fully covered."""
    return max((c["seq"] for c in carried), default=1)


# -- 2. every stored definition and trial re-hashes ------------------------------------------

# Per definition table: the kind in messages (a policy's is its row's), its id column, the
# column of its version (if any) and its identity-digest column (a suite's is its document's).
_DEFINITIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("task_revision", "task", "task_id", "revision", "task_digest"),
    ("execution_profile", "execution_profile", "execution_id", "", "execution_digest"),
    ("grader_set", "grader_set", "grader_set_id", "version", "grader_set_digest"),
    ("suite", "suite", "suite_id", "", ""),
    ("policy", "", "policy_id", "", "policy_digest"),
)


def _definitions_sql(table: str, kind: str, ident: str, version: str, digest: str) -> str:
    columns = [
        "id",
        ident,
        version or "NULL",
        "kind" if not kind else "NULL",
        "document",
        "document_digest",
        digest or "NULL",
    ]
    return f'SELECT {", ".join(columns)} FROM "{table}" ORDER BY id'


def check_definitions(reader: Reader) -> int:
    """Every stored definition is canonical JSON whose digests match its columns."""
    count = 0
    for table, table_kind, ident_column, version_column, digest_column in _DEFINITIONS:
        sql = _definitions_sql(table, table_kind, ident_column, version_column, digest_column)
        for row in reader.tuples(sql):
            row_id, ident, version, row_kind, document, document_digest, identity = row
            count += 1
            kind = table_kind or row_kind
            # A version of 0 is left out of the name, like none (as messages always named it).
            name = f"{kind} {ident}" + (f"@{version}" if version else "") + f" (row {row_id})"
            try:
                value = json.loads(document)
            except ValueError:
                raise VerificationError(f"{name}: stored document is not JSON") from None
            if canonical_text(value) != document:
                raise VerificationError(f"{name}: stored document is not canonical JSON")
            recomputed = sha256_digest(document.encode("utf-8"))
            if recomputed != document_digest:
                raise VerificationError(
                    f"{name}: document_digest {document_digest} does not match the stored "
                    f"document ({recomputed})"
                )
            if digest_column and identity != spec_digest(kind, value):
                raise VerificationError(
                    f"{name}: {digest_column} {identity} does not match the "
                    f"stored document ({spec_digest(kind, value)})"
                )
    return count


def check_trials(reader: Reader) -> int:
    """Every stored trial record re-hashes to its stored digest (names the trial)."""
    count = 0
    sql = 'SELECT trial_id, record, stored_digest FROM "trial" ORDER BY id'
    for trial_id, record, stored_digest in reader.tuples(sql):
        count += 1
        if not isinstance(record, str) or sha256_digest(record.encode("utf-8")) != stored_digest:
            raise VerificationError(f"trial {trial_id}: stored record was changed")
    return count


# -- 3. every row against the event that recorded it, both directions -----------------------


def _table_rows_sql(table: str, where: str = "") -> str:
    names = ", ".join(f'"{name}"' for name, _ in AUDITED_COLUMNS[table])
    return f'SELECT audit_seq, id, {names} FROM "{table}"{where} ORDER BY audit_seq, id'


def _stored_rows(
    reader: Reader, tables: Iterable[str]
) -> tuple[dict[int, dict[str, Any]], RowIds, int]:
    """Per audit seq, per table: {count, digest} of the stored rows, and a few row ids."""
    computed: dict[int, dict[str, Any]] = {}
    ids: RowIds = {}
    total = 0
    for name in tables:
        kinds = [kind for _, kind in AUDITED_COLUMNS[name]]
        # `cell` returns a plain column's value as it is: a table of plain columns only
        # (signed_act, one row per signed act) hashes the driver's row as it comes.
        plain = all(kind == PLAIN for kind in kinds)
        # The rows of one seq as an event's `rows` block counts and hashes them, kept in
        # locals: most seqs have one row per table, so per-seq objects cost per row.
        current: int | None = None
        count, hasher = 0, hashlib.sha256()
        found: list[int] = []
        for raw in reader.tuples(_table_rows_sql(name)):
            total += 1
            seq = raw[0]
            if seq != current:
                if current is not None:
                    computed.setdefault(current, {})[name] = table_entry(count, hasher)
                current, count, hasher, found = seq, 0, hashlib.sha256(), []
                ids[(seq, name)] = found
            count += 1
            if plain:
                hasher.update(stored_line_of(raw[2:]))
            else:
                hasher.update(
                    stored_line_of([cell(k, v) for k, v in zip(kinds, raw[2:], strict=True)])
                )
            if len(found) < SHOWN_IDS:
                found.append(raw[1])
        if current is not None:
            computed.setdefault(current, {})[name] = table_entry(count, hasher)
    return computed, ids, total


def _legacy_rows_of(reader: Reader, seq: int) -> dict[str, Any]:
    """The rows a migration recorded for legacy event `seq` (the first to vouch for it)."""
    migrations = (
        "SELECT seq, payload FROM audit_event WHERE kind = :kind AND seq > :seq ORDER BY seq"
    )
    for migration_seq, payload in reader.tuples(
        migrations, {"kind": audit_kinds.MIGRATION_ROWS, "seq": seq}
    ):
        legacy_rows = _payload(migration_seq, payload).get("legacy_rows", {})
        if isinstance(legacy_rows, dict) and str(seq) in legacy_rows:
            rows: dict[str, Any] = legacy_rows[str(seq)]
            return rows
    return {}


def _declared_rows(reader: Reader) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """Each event (seq, kind, subject) with the rows it recorded (legacy events: as a
    migration recorded them)."""
    legacy: dict[str, Any] = {}
    migrations = "SELECT seq, payload FROM audit_event WHERE kind = :kind ORDER BY seq"
    for migration_seq, payload in reader.tuples(migrations, {"kind": audit_kinds.MIGRATION_ROWS}):
        recorded = _payload(migration_seq, payload)
        legacy_rows = recorded.get("legacy_rows", {})
        if not isinstance(legacy_rows, dict):
            raise VerificationError(_not_a_payload(migration_seq))
        for seq, rows in legacy_rows.items():
            # A migration vouches only for events before it, and the first one to vouch
            # for an event stands: a later event can never re-describe older rows.
            if int(seq) < migration_seq and seq not in legacy:
                legacy[seq] = rows
    events = "SELECT seq, kind, subject, payload FROM audit_event ORDER BY seq"
    for seq, kind, subject, payload in reader.tuples(events):
        recorded = _payload(seq, payload)
        rows = recorded["rows"] if "rows" in recorded else legacy.get(str(seq), {})
        if not _is_rows_block(rows):
            raise VerificationError(_not_a_payload(seq))
        yield seq, kind, subject, rows


def _not_a_payload(seq: int) -> str:
    return f"audit seq {seq}: payload is not an evalops event payload"


def _payload(seq: int, payload: str) -> dict[str, Any]:
    """An event's payload as a JSON object. One that re-hashes yet is not one was written
    with its digest and the chain after it re-hashed (an anchor shows where); it is
    reported, not let to stop the check."""
    try:
        recorded = json.loads(payload)
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        raise VerificationError(_not_a_payload(seq))
    return recorded


def _is_rows_block(rows: Any) -> bool:
    """{table: {"count": int, "digest": str}}, as `table_entry` writes each entry."""
    return isinstance(rows, dict) and all(
        isinstance(entry, dict) and set(entry) == {"count", "digest"} for entry in rows.values()
    )


def _row_names(table: str, seq: int, ids: RowIds) -> str:
    found = ids.get((seq, table), [])
    shown = ", ".join(str(i) for i in found)
    return f"{table} row{'s' if len(found) != 1 else ''} {shown}" if found else f"{table} rows"


def check_rows(reader: Reader, tables: Iterable[str] | None = None) -> int:
    """Both directions: every event's rows as recorded, every row under its event, over
    `tables` (default: every audited table of this schema; an upgrade check of an older
    schema names the tables that schema has, in AUDITED_COLUMNS's order)."""
    computed, ids, total = _stored_rows(reader, AUDITED_COLUMNS if tables is None else tables)
    for seq, kind, subject, declared in _declared_rows(reader):
        stored = computed.pop(seq, {})
        what = f"audit seq {seq} ({kind} {subject})"
        for table in sorted(declared.keys() | stored.keys()):
            want = declared.get(table)
            have = stored.get(table)
            if want == have:
                continue
            if want is None:
                raise VerificationError(
                    f"{what}: {_row_names(table, seq, ids)} claim this event, which "
                    f"recorded no {table} row (inserted outside evalops)"
                )
            if have is None:
                raise VerificationError(
                    f"{what}: its {want['count']} {table} row(s) are gone (deleted outside "
                    "evalops, or dropped by a forced `db downgrade`)"
                )
            if want["count"] != have["count"]:
                raise VerificationError(
                    f"{what}: recorded {want['count']} {table} row(s), "
                    f"{have['count']} are stored ({_row_names(table, seq, ids)})"
                )
            raise VerificationError(
                f"{what}: {_row_names(table, seq, ids)} changed since the event recorded them"
            )
    if computed:
        seq = min(computed)
        table = sorted(computed[seq])[0]
        raise VerificationError(
            f"{_row_names(table, seq, ids)} claim audit seq {seq}, which does not exist"
        )
    return total


def event_rows_problem(reader: Reader, seq: int) -> str | None:
    """Do the rows that claim event `seq` still re-hash to what it recorded? (One event's
    share of the both-directions check `verify` runs over every event.) None also when
    there is no such event: whoever names the event says so."""
    event = reader.first(
        "SELECT kind, subject, payload FROM audit_event WHERE seq = :seq", {"seq": seq}
    )
    if event is None:
        return None
    declared = json.loads(event["payload"]).get("rows")
    if declared is None:
        # A legacy event: the first migration after it that recorded its rows vouches for
        # them (as `_declared_rows` reads them for `verify`); none: it recorded no row.
        declared = _legacy_rows_of(reader, seq)
    stored: dict[str, Any] = {}
    for name, plan in AUDITED_COLUMNS.items():
        kinds = [kind for _, kind in plan]
        count, hasher = 0, hashlib.sha256()
        for raw in reader.tuples(_table_rows_sql(name, " WHERE audit_seq = :seq"), {"seq": seq}):
            count += 1
            hasher.update(stored_line_of([cell(k, v) for k, v in zip(kinds, raw[2:], strict=True)]))
        if count:
            stored[name] = table_entry(count, hasher)
    if stored != declared:
        return f"rows of audit seq {seq} ({event['kind']} {event['subject']}) changed since"
    return None
