"""The SQLite floor of ingest: plain `sqlite3`, no evalops code.

    python -m benchmarks.floor_sqlite RECORDS.jsonl DATABASE

Parses the same JSONL with `json.loads` and inserts the same rows (every column of the
`trial` table, one `ingest_batch` row) into the same tables and indexes of a database
migrated by evalops, with `executemany` in one transaction. Text columns are the record
without `tool_calls` as sorted compact JSON and sha256 digests of it; what evalops derives
(classification, scores, trajectory) is copied from the record or set to constants, since
the floor measures what parsing and storing cost, not what deciding costs. Prints the CPU
seconds it used as JSON.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sqlite3
import sys
import time
from datetime import UTC, datetime


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
            calls = record.get("tool_calls", [])
            stored = {k: v for k, v in record.items() if k != "tool_calls"}
            text = json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            whole = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
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
                "started_at": _ts(record["started_at"]),
                "completed_at": _ts(record["completed_at"]),
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
                        "inputTokens": usage.get("input_tokens", 0),
                        "modelCallCount": usage.get("model_calls", 0),
                        "outputTokens": usage.get("output_tokens", 0),
                        "toolCallCount": len(calls),
                    },
                    separators=(",", ":"),
                ),
                "parent_trial_id": (record.get("rerun") or {}).get("parent_trial_id"),
                "rerun_reason": (record.get("rerun") or {}).get("reason"),
                "ingest_batch_id": batch,
                "audit_seq": seq,
            }
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
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "rows": count,
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "peak_kib": usage.ru_maxrss,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
