"""The PostgreSQL floor of ingest: psycopg `COPY`, no evalops code.

    python -m benchmarks.floor_postgres RECORDS.jsonl DATABASE_URL

Parses the same JSONL with `json.loads` and copies the same rows (every column of the
`trial` table) into a database migrated by evalops, in one transaction, the way
benchmarks/floor_sqlite.py does for SQLite (see there for what is copied or constant).
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import UTC, datetime

import psycopg


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
                calls = record.get("tool_calls", [])
                stored = {k: v for k, v in record.items() if k != "tool_calls"}
                text = json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                whole = json.dumps(
                    record, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
                usage = record.get("usage") or {}
                values = {
                    "id": next_id,
                    "trial_id": record["trial_id"],
                    "run_id": record.get("run_id"),
                    "attempt_id": record.get("attempt_id"),
                    "task_id": record["task_id"],
                    "task_digest": record["task_digest"],
                    "execution_digest": record["execution_digest"],
                    "grader_set_digest": record["grader_set_digest"],
                    "eval_case_digest": record.get("eval_case_digest") or "",
                    "trial_index": record["trial_index"],
                    "started_at": datetime.fromisoformat(
                        record["started_at"].replace("Z", "+00:00")
                    ),
                    "completed_at": datetime.fromisoformat(
                        record["completed_at"].replace("Z", "+00:00")
                    ),
                    "record_digest": "sha256:" + hashlib.sha256(whole.encode()).hexdigest(),
                    "record": text,
                    "stored_digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
                    "classification": record.get("primary_classification") or "task_pass",
                    "secondary_labels": "[]",
                    "score": 1.0,
                    "gating_score": 1.0,
                    "trajectory": None,
                    "efficiency": json.dumps(
                        {
                            "toolCallCount": len(calls),
                            "inputTokens": usage.get("input_tokens", 0),
                        }
                    ),
                    "parent_trial_id": (record.get("rerun") or {}).get("parent_trial_id"),
                    "rerun_reason": (record.get("rerun") or {}).get("reason"),
                    "ingest_batch_id": batch,
                    "audit_seq": seq,
                }
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
