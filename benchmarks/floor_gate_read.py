"""The floor of a gate check: a plain `sqlite3` read of the build's trial rows.

    python -m benchmarks.floor_gate_read DATABASE BUILD

Reads every trial of the execution profile whose system build is BUILD (the rows a gate
check loads), the columns the gate reads, with the same index, and nothing else.
"""

from __future__ import annotations

import json
import sqlite3
import sys


def main(database: str, build: str) -> int:
    con = sqlite3.connect(database)
    digest = con.execute(
        "SELECT execution_digest FROM execution_profile WHERE system_build = ? LIMIT 1", (build,)
    ).fetchone()[0]
    rows = con.execute(
        "SELECT id, trial_id, parent_trial_id, classification, score, gating_score, trajectory,"
        " efficiency, task_id, task_digest, grader_set_digest, ingest_batch_id FROM trial"
        " WHERE execution_digest = ? ORDER BY id",
        (digest,),
    ).fetchall()
    con.close()
    print(json.dumps({"rows": len(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
