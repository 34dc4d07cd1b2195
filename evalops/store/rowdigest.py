"""What an audit event commits to about the rows it recorded (docs/verify.md).

Every row of lifecycle state carries the `audit_seq` of the event written in the same
transaction, and that event's payload holds, per table, the count and digest of exactly
those rows: every column but `audit_seq`, the row id included (other rows refer to it).
`verify` recomputes the same digests from the stored rows and compares both directions:
an edited, deleted, inserted or re-pointed row anywhere changes a digest or a count.

How a row is hashed (its canonical line, each kind of cell) is evalops/store/rowlines.py,
which needs no SQLAlchemy; this module derives, from the table models, which columns a
table's digest covers and of which kind each is, and hashes ORM rows as they are written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Boolean, Table

from evalops.store.rowlines import BOOLEAN, PLAIN, TIMESTAMP, cell, line_of, table_entry
from evalops.store.types import UTCDateTime

# Bump only with a migration that re-records what older events committed to.
ROWS_VERSION = 1

# Columns a row digest leaves to a digest column beside them, which it covers and which
# `verify` re-computes from the column itself: a trial's stored record (`stored_digest`).
COVERED_ELSEWHERE = {("trial", "record")}

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
