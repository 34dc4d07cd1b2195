"""Bulk inserts straight through the driver: `executemany` on SQLite, `COPY` on PostgreSQL.

The ORM's per-row bookkeeping and type processing cost more than the database itself when
ingesting hundreds of thousands of trials; rows here are plain dicts whose values are
already what the column stores (timestamps aware, in UTC), converted once per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Table
from sqlmodel import Session

from evalops.store.types import UTCDateTime


@lru_cache(maxsize=8192)
def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        # The text UTCDateTime stores on SQLite (naive UTC, microseconds).
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def insert_rows(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert `rows` (each with every column of `table`) in one driver call."""
    if not rows:
        return
    columns = [c.name for c in table.columns]
    connection = session.connection()
    raw = connection.connection.driver_connection
    assert raw is not None
    if connection.dialect.name == "postgresql":
        names = ", ".join(f'"{c}"' for c in columns)
        with (
            raw.cursor() as cursor,
            cursor.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as copy,
        ):
            for row in rows:
                copy.write_row([row[c] for c in columns])
        return
    marks = ", ".join("?" for _ in columns)
    stamps = [c.name for c in table.columns if isinstance(c.type, UTCDateTime)]
    cursor = raw.cursor()
    try:
        values = []
        for row in rows:
            converted = {c: _sqlite_value(row[c]) for c in stamps}
            values.append([converted[c] if c in converted else row[c] for c in columns])
        cursor.executemany(
            f'INSERT INTO "{table.name}" ({", ".join(columns)}) VALUES ({marks})', values
        )
    finally:
        cursor.close()
