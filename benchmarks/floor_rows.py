"""The trial row both ingest floors write (floor_sqlite.py, floor_postgres.py): plain
`json` and `hashlib`, no evalops code.

Text columns are the record without `tool_calls` as sorted compact JSON and sha256 digests
of it; what evalops derives (classification, scores, trajectory) is copied from the record
or set to constants, since the floors measure what parsing and storing cost, not what
deciding costs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any


def trial_values(
    record: dict[str, Any],
    *,
    row_id: int,
    batch: int,
    seq: int,
    timestamp: Callable[[str], Any],
) -> dict[str, Any]:
    """Every column of the `trial` table for one parsed record; `timestamp` turns the
    record's RFC 3339 text into what the driver stores."""
    calls = record.get("tool_calls", [])
    stored = {k: v for k, v in record.items() if k != "tool_calls"}
    text = json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    whole = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    usage = record.get("usage") or {}
    rerun = record.get("rerun") or {}
    return {
        "id": row_id,
        "trial_id": record["trial_id"],
        "run_id": record.get("run_id"),
        "attempt_id": record.get("attempt_id"),
        "task_id": record["task_id"],
        "task_digest": record["task_digest"],
        "execution_digest": record["execution_digest"],
        "grader_set_digest": record["grader_set_digest"],
        "eval_case_digest": record.get("eval_case_digest") or "",
        "trial_index": record["trial_index"],
        "started_at": timestamp(record["started_at"]),
        "completed_at": timestamp(record["completed_at"]),
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
        "parent_trial_id": rerun.get("parent_trial_id"),
        "rerun_reason": rerun.get("reason"),
        "ingest_batch_id": batch,
        "audit_seq": seq,
    }
