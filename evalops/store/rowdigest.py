"""What an audit event commits to about the rows it recorded (DESIGN.md section 10).

Every row of lifecycle state carries the `audit_seq` of the event written in the same
transaction, and that event's payload holds, per table, the count and digest of exactly
those rows: every column but `audit_seq`, the row id included (other rows refer to it).
`verify` recomputes the same digests from the stored rows and compares both directions:
an edited, deleted, inserted or re-pointed row anywhere changes a digest or a count.

A row's canonical content is the JSON list of its column values in sorted column-name
order, timestamps in the one UTC spelling, so the same row read back from SQLite or
PostgreSQL hashes the same.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Table

from evalops.domain.canonical import MAX_SAFE_INTEGER, canonical_json, encode_trusted
from evalops.domain.vocabulary import format_timestamp

# Bump only with a migration that re-records what older events committed to.
ROWS_VERSION = 1


_COLUMNS: dict[str, list[str]] = {}
# Columns a row digest leaves to a digest column beside them, which it covers and which
# `verify` re-computes from the column itself: a trial's stored record (`stored_digest`).
COVERED_ELSEWHERE = {("trial", "record")}


def digest_columns(table: Table) -> list[str]:
    """The columns a row digest covers, in their fixed order."""
    columns = _COLUMNS.get(table.name)
    if columns is None:
        columns = _COLUMNS[table.name] = sorted(
            c.name
            for c in table.columns
            if c.name != "audit_seq" and (table.name, c.name) not in COVERED_ELSEWHERE
        )
    return columns


class _Slow(Exception):
    pass


def _value(value: Any) -> Any:
    """A column value as its canonical JSON scalar, on the C encoder's fast path."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        if math.isfinite(value) and 1e-4 <= abs(value) < 1e16:
            return value
        raise _Slow
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise _Slow
    return value


def row_line(columns: list[str], row: Mapping[str, Any]) -> bytes:
    """One row's canonical content (RFC 8785 of the list of its values), newline-ended."""
    try:
        return encode_trusted([_value(row[name]) for name in columns]) + b"\n"
    except (_Slow, UnicodeEncodeError):
        return (
            canonical_json(
                [
                    format_timestamp(row[n]) if isinstance(row[n], datetime) else row[n]
                    for n in columns
                ]
            )
            + b"\n"
        )


class RowsDigest:
    """The per-table count and digest of the rows one event recorded, fed in id order."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[int, Any]] = {}

    def add(self, table: Table, row: Mapping[str, Any]) -> None:
        count, hasher = self._tables.get(table.name, (0, None))
        if hasher is None:
            hasher = hashlib.sha256()
        hasher.update(row_line(digest_columns(table), row))
        self._tables[table.name] = (count + 1, hasher)

    def add_line(self, table_name: str, line: bytes) -> None:
        """A row already rendered by `row_line` (bulk writers render once)."""
        count, hasher = self._tables.get(table_name, (0, None))
        if hasher is None:
            hasher = hashlib.sha256()
        hasher.update(line)
        self._tables[table_name] = (count + 1, hasher)

    def as_payload(self) -> dict[str, dict[str, Any]]:
        return {
            name: {"count": count, "digest": "sha256:" + hasher.hexdigest()}
            for name, (count, hasher) in sorted(self._tables.items())
        }


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
