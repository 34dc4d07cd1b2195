"""What an audit event commits to about the rows it recorded (docs/verify.md).

Every row of lifecycle state carries the `audit_seq` of the event written in the same
transaction, and that event's payload holds, per table, the count and digest of exactly
those rows: every column but `audit_seq`, the row id included (other rows refer to it).
`verify` recomputes the same digests from the stored rows and compares both directions:
an edited, deleted, inserted or re-pointed row anywhere changes a digest or a count.

A row's canonical content is the RFC 8785 JSON list of its column values in sorted
column-name order, timestamps in the one UTC spelling and booleans as booleans, so the same
row written from Python or read back raw from SQLite or PostgreSQL hashes the same.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from sqlalchemy import Boolean, Table

from evalops.domain.canonical import MAX_SAFE_INTEGER, canonical_json, encode_trusted
from evalops.domain.vocabulary import format_timestamp
from evalops.store.types import UTCDateTime

# Bump only with a migration that re-records what older events committed to.
ROWS_VERSION = 1

# Columns a row digest leaves to a digest column beside them, which it covers and which
# `verify` re-computes from the column itself: a trial's stored record (`stored_digest`).
COVERED_ELSEWHERE = {("trial", "record")}

TIMESTAMP, BOOLEAN, PLAIN = "timestamp", "boolean", "plain"
_PLANS: dict[str, list[tuple[str, str]]] = {}


def digest_plan(table: Table) -> list[tuple[str, str]]:
    """(column, kind) of every column a row digest covers, in their fixed (sorted) order."""
    plan = _PLANS.get(table.name)
    if plan is None:
        plan = _PLANS[table.name] = [
            (
                c.name,
                TIMESTAMP
                if isinstance(c.type, UTCDateTime)
                else BOOLEAN
                if isinstance(c.type, Boolean)
                else PLAIN,
            )
            for c in sorted(table.columns, key=lambda c: c.name)
            if c.name != "audit_seq" and (table.name, c.name) not in COVERED_ELSEWHERE
        ]
    return plan


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return format_timestamp(value)
    text = str(value)
    # SQLite's one stored spelling (naive UTC with microseconds) -> the canonical one. Any
    # other spelling, even of the same moment ('T' for the space, no fraction), hashes as
    # itself: readers that compare the stored text would see a different time.
    if len(text) == 26 and text[10] == " " and text[19] == ".":
        return f"{text[:10]}T{text[11:]}Z"
    return f"not a stored timestamp: {text}"


def _boolean(value: Any) -> Any:
    # SQLite keeps booleans as the integers 0 and 1; 2, 'false' or 0.5 read back as True
    # through the driver, so anything else hashes as itself and no longer matches.
    if value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    return f"not a stored boolean: {value!r}"


def cell(kind: str, value: Any) -> Any:
    """A stored value as the row digest reads it, whatever the driver returned."""
    if value is None:
        return None
    if kind == TIMESTAMP:
        return _timestamp(value)
    if kind == BOOLEAN:
        return _boolean(value)
    return value


class _Slow(Exception):
    pass


def _fast(value: Any) -> Any:
    """A scalar on the C encoder's RFC 8785 fast path, or _Slow."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        if math.isfinite(value) and 1e-4 <= abs(value) < 1e16:
            return value
        raise _Slow
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        raise _Slow
    return value


#: The C encoder's own writer of a `str` when it does not escape to ASCII (what
#: `encode_trusted` calls for each string): the same bytes, without building an encoder.
_encode_string = encode_basestring


def line_of(cells: Sequence[Any]) -> bytes:
    """One row's canonical content (RFC 8785 of the list of its cells), newline-ended.

    Cells that are all strings, None or safe integers (most rows) are written here as the
    C encoder writes them (each string by its own writer, an int by `int.__repr__`); any
    other cell takes `encode_trusted` or the reference. tests/services/test_fast_paths.py
    holds every path to `rfc8785`."""
    parts = []
    for value in cells:
        kind = type(value)
        if kind is str:
            parts.append(_encode_string(value))
        elif value is None:
            parts.append("null")
        elif kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            parts.append(int.__repr__(value))
        else:
            return _line_of_any(cells)
    try:
        return ("[" + ",".join(parts) + "]\n").encode("utf-8")
    except UnicodeEncodeError:
        return _line_of_any(cells)


def _line_of_any(cells: Sequence[Any]) -> bytes:
    try:
        return encode_trusted([_fast(v) for v in cells]) + b"\n"
    except (_Slow, UnicodeEncodeError):
        return canonical_json(list(cells)) + b"\n"


def row_line(table: Table, row: Mapping[str, Any]) -> bytes:
    """The canonical line of a row given as a mapping of column name to value."""
    return line_of([cell(kind, row[name]) for name, kind in digest_plan(table)])


class RowsDigest:
    """The per-table count and digest of the rows one event recorded, fed in id order."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[int, Any]] = {}

    def add_line(self, table_name: str, line: bytes) -> None:
        count, hasher = self._tables.get(table_name, (0, None))
        if hasher is None:
            hasher = hashlib.sha256()
        hasher.update(line)
        self._tables[table_name] = (count + 1, hasher)

    def add(self, table: Table, row: Mapping[str, Any]) -> None:
        self.add_line(table.name, row_line(table, row))

    def as_payload(self) -> dict[str, dict[str, Any]]:
        return {
            name: table_entry(count, hasher)
            for name, (count, hasher) in sorted(self._tables.items())
        }


def table_entry(count: int, hasher: Any) -> dict[str, Any]:
    """One table's entry in an event's `rows` block: its count of rows and the sha256 of
    their lines (fed to `hasher` in id order)."""
    return {"count": count, "digest": "sha256:" + hasher.hexdigest()}


def orm_row(obj: Any) -> dict[str, Any]:
    """The column values of a flushed ORM object, by column name."""
    table: Table = obj.__table__
    return {c.name: getattr(obj, c.key) for c in table.columns}


def rows_payload(objs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The `rows` block of an event for flushed ORM objects (sorted by table, then id)."""
    out = RowsDigest()
    for obj in sorted(objs, key=lambda o: (o.__table__.name, o.id)):
        out.add(obj.__table__, orm_row(obj))
    return out.as_payload()
