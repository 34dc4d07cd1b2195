"""The SQLite floor of ingest: plain `sqlite3`, no evalops code.

    python -m benchmarks.floor_sqlite RECORDS.jsonl DATABASE

Parses the same JSONL with `json.loads` and inserts the same rows (every column of the
`trial` table, one `ingest_batch` row) into the same tables and indexes of a database
migrated by evalops, with `executemany` in one transaction (the row is
`floor_rows.trial_values`'s). Prints the CPU seconds it used as JSON.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from datetime import UTC, datetime

from benchmarks.floor_rows import trial_values
from benchmarks.measure import own_peak_kib


def _ts(text: str) -> str:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def main(path: str, database: str) -> dict[str, float]:
    cpu = time.process_time()
    wall = time.perf_counter()
    con = sqlite3.connect(database, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA foreign_keys=ON")  # the schema's constraints, as evalops runs them
    con.execute("BEGIN IMMEDIATE")
    batch = (con.execute("SELECT coalesce(max(id), 0) + 1 FROM ingest_batch").fetchone())[0]
    seq = (con.execute("SELECT coalesce(max(seq), 0) + 1 FROM audit_event").fetchone())[0]
    columns = [row[1] for row in con.execute("PRAGMA table_info(trial)")]
    sql = f"INSERT INTO trial ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    next_id = (con.execute("SELECT coalesce(max(id), 0) + 1 FROM trial").fetchone())[0]
    rows: list[list[object]] = []
    count = 0
    with open(path, "rb") as stream:
        for line in stream:
            record = json.loads(line)
            values = trial_values(record, row_id=next_id, batch=batch, seq=seq, timestamp=_ts)
            rows.append([values[c] for c in columns])
            next_id += 1
            count += 1
            if len(rows) >= 500:
                con.executemany(sql, rows)
                rows = []
    con.executemany(sql, rows)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    con.execute(
        "INSERT INTO ingest_batch (id, files, ingested, skipped_identical, rejected, at, actor,"
        " audit_seq) VALUES (?, ?, ?, 0, 0, ?, 'floor', ?)",
        (batch, json.dumps([path]), count, now, seq),
    )
    con.execute(
        "INSERT INTO audit_event (seq, at, actor, kind, subject, payload_digest, payload,"
        " prev_hash, hash) VALUES (?, ?, 'floor', 'floor', 'floor', '', '{}', '', ?)",
        (seq, now, f"floor-{seq}"),
    )
    con.execute("COMMIT")
    con.close()
    return {
        "rows": count,
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "peak_kib": own_peak_kib(),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
