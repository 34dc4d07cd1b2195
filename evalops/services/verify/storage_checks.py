"""The storage itself, checked before any row is read (docs/verify.md, "Storage").

`verify` reads tables by full scan and never an index, so a damaged index page (the unique
index on `trial(trial_id, record_digest)` that makes a re-ingest a no-op)
would pass every other check. So, inside the same snapshot:
- SQLite: `PRAGMA integrity_check` (every page, every index against its table), its first
  message reported; then every unique key of `store/unique_keys.py` backed by a unique
  index on exactly its columns;
- PostgreSQL: every unique key backed by a unique index that is valid and ready (a failed
  `CREATE UNIQUE INDEX CONCURRENTLY` leaves one marked invalid, which enforces nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from evalops.store.reader import Reader
from evalops.store.unique_keys import UNIQUE_KEYS

Key = tuple[str, tuple[str, ...]]


def storage_problem(reader: Reader) -> str | None:
    """What is wrong with the storage under the registry, or None."""
    if reader.backend == "sqlite":
        return _sqlite_integrity(reader) or _missing(_sqlite_unique_keys(reader), set())
    return _postgres_problem(reader)


def _sqlite_integrity(reader: Reader) -> str | None:
    # The first problem is enough to refuse, and stops SQLite from listing thousands.
    first = reader.scalar("PRAGMA integrity_check(1)")
    if first is None or str(first) == "ok":
        return None
    # SQLite heads its first message with a line naming the schema ("*** in database
    # main ***"); the message itself follows.
    lines = [line for line in str(first).splitlines() if not line.startswith("*** in database")]
    return f"SQLite integrity_check: {(lines or ['failed'])[0][:300]}"


def _sqlite_unique_keys(reader: Reader) -> set[Key]:
    found: set[Key] = set()
    for table in sorted({table for table, _ in UNIQUE_KEYS}):
        for index in reader.rows(f"PRAGMA index_list('{table}')"):
            if not index["unique"] or index.get("partial"):
                continue
            columns = reader.rows(f"PRAGMA index_info('{index['name']}')")
            ordered = sorted(columns, key=lambda c: int(c["seqno"]))
            found.add((table, tuple(str(c["name"]) for c in ordered)))
    return found


def _missing(found: set[Key], invalid: set[Key]) -> str | None:
    for table, columns in UNIQUE_KEYS:
        key = (table, columns)
        if key in found:
            continue
        where = f"{table}({', '.join(columns)})"
        if key in invalid:
            return (
                f"the unique index on {where} is invalid (a failed concurrent build?) and "
                "enforces nothing: rebuild it with REINDEX"
            )
        return f"the unique key on {where} that the rules rely on is missing"
    return None


_POSTGRES_UNIQUE = """
SELECT t.relname AS table_name,
       x.indisvalid AND x.indisready AS usable,
       x.indpred IS NOT NULL AS partial,
       ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
             ORDER BY k.n)::text[] AS columns
FROM pg_index x
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace s ON s.oid = t.relnamespace
WHERE x.indisunique AND s.nspname = current_schema()
"""


def _postgres_problem(reader: Reader) -> str | None:
    usable: set[Key] = set()
    invalid: set[Key] = set()
    for row in reader.rows(_POSTGRES_UNIQUE):
        if row["partial"]:
            continue
        key = (str(row["table_name"]), tuple(str(c) for c in _columns(row["columns"])))
        (usable if row["usable"] else invalid).add(key)
    return _missing(usable, invalid - usable)


def _columns(value: object) -> Iterable[str]:
    if isinstance(value, str):  # a driver that returns the array literal `{a,b}`
        return [c for c in value.strip("{}").split(",") if c]
    assert isinstance(value, (list, tuple))
    return [str(c) for c in value]
