"""The PostgreSQL floor of ingest: psycopg `COPY`, no evalops code.

    python -m benchmarks.floor_postgres RECORDS.jsonl DATABASE_URL

Parses the same JSONL with `json.loads` and copies the same rows (every column of the
`trial` table) into a database migrated by evalops, in one transaction, the way
benchmarks/floor_sqlite.py does for SQLite (the row is `floor_rows.trial_values`'s).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

import psycopg

from benchmarks.floor_rows import trial_values


def _timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def main(path: str, url: str) -> int:
    with (
        psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SELECT coalesce(max(id), 0) + 1 FROM ingest_batch")
        batch = cur.fetchone()[0]  # type: ignore[index]
        cur.execute("SELECT coalesce(max(seq), 0) + 1 FROM audit_event")
        seq = cur.fetchone()[0]  # type: ignore[index]
        cur.execute("SELECT coalesce(max(id), 0) + 1 FROM trial")
        next_id = cur.fetchone()[0]  # type: ignore[index]
        cur.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'trial'"
            " ORDER BY ordinal_position"
        )
        columns = [r[0] for r in cur.fetchall()]
        cur.execute("SET CONSTRAINTS ALL DEFERRED")
        count = 0
        copy_sql = f"COPY trial ({', '.join(columns)}) FROM STDIN"
        with cur.copy(copy_sql) as copy, open(path, "rb") as stream:
            for line in stream:
                record = json.loads(line)
                values = trial_values(
                    record, row_id=next_id, batch=batch, seq=seq, timestamp=_timestamp
                )
                copy.write_row([values[c] for c in columns])
                next_id += 1
                count += 1
        now = datetime.now(UTC)
        cur.execute(
            "INSERT INTO audit_event (seq, at, actor, kind, subject, payload_digest, payload,"
            " prev_hash, hash) VALUES (%s, %s, 'floor', 'floor', 'floor', '', '{}', '', %s)",
            (seq, now, f"floor-{seq}"),
        )
        cur.execute(
            "INSERT INTO ingest_batch (id, files, ingested, skipped_identical, rejected, at,"
            " actor, audit_seq) VALUES (%s, %s, %s, 0, 0, %s, 'floor', %s)",
            (batch, json.dumps([path]), count, now, seq),
        )
    print(json.dumps({"rows": count}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
