"""The stages of a stored `gate check` on the driver alone, timed in one process (the child
of `p4_parts.py`).

    python -m benchmarks.p4_stages DATABASE BUILD SUITE

Prints one JSON object: the CPU seconds of each stage, in the order a check on `sqlite3`
alone would run them, and whether SQLAlchemy was imported by then. The inputs are loaded
by the loader that already runs on a `Reader` (`services/verify/gate_inputs.py`): it is
what the check's reads would be without the ORM. Then the ORM's imports, and the
check's own loader (`services/gate/inputs.py`) on the same request, for comparison.
Nothing is written.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

_FLOOR_ROWS = (
    "SELECT id, trial_id, parent_trial_id, classification, score, gating_score, trajectory,"
    " efficiency, task_id, task_digest, grader_set_digest, ingest_batch_id FROM trial"
    " WHERE execution_digest = :digest ORDER BY id"
)


def main(database: str, build: str, suite: str) -> int:
    spent: dict[str, float] = {}

    def stage(name: str, work: Callable[[], Any]) -> Any:
        start = time.process_time()
        done = work()
        spent[name] = time.process_time() - start
        return done

    def imports() -> None:
        import evalops.cli.gate
        import evalops.cli.main
        import evalops.domain.canonical
        import evalops.domain.gate
        import evalops.services.verify.gate_inputs  # noqa: F401

    stage("imports, no SQLAlchemy", imports)
    sqlalchemy_before = "sqlalchemy" in sys.modules

    from evalops.domain.canonical import canonical_json_document, plain_floats, sha256_digest
    from evalops.domain.gate import EVALUATOR, evaluate_stored
    from evalops.services.gate.input_parts import GateRequest
    from evalops.services.verify.gate_inputs import rebuilt_inputs
    from evalops.store.reader import open_sqlite

    reader = open_sqlite(f"sqlite:///{database}", lock_timeout=5.0)
    assert reader is not None, f"{database} is not a SQLite registry at head"
    digest = reader.scalar(
        "SELECT execution_digest FROM execution_profile WHERE system_build = :build LIMIT 1",
        {"build": build},
    )
    stage("the floor's read", lambda: list(reader.tuples(_FLOOR_ROWS, {"digest": digest})))
    request = GateRequest(
        build=build,
        suite_id=suite,
        at="2026-12-07T00:00:00Z",
        cutoff=int(reader.scalar("SELECT max(seq) FROM audit_event") or 0),
    )
    inputs = stage("inputs (Reader loader)", lambda: rebuilt_inputs(reader, request, EVALUATOR))
    inputs["gate_id"] = "GATE-1"
    result = stage("evaluate", lambda: evaluate_stored(inputs))

    def stored_bytes() -> int:
        inputs_bytes = canonical_json_document(inputs)
        result_bytes = canonical_json_document(plain_floats(result))
        sha256_digest(inputs_bytes)
        sha256_digest(result_bytes)
        return len(inputs_bytes) + len(result_bytes)

    size = stage("stored bytes and digests", stored_bytes)

    def orm() -> None:
        import evalops.services.gate.check  # noqa: F401

    stage("the ORM's imports (SQLAlchemy, SQLModel, tables)", orm)
    from evalops.services.gate.inputs import build_inputs
    from evalops.store.engine import make_engine, read_session

    engine = make_engine(f"sqlite:///{database}")

    def orm_inputs() -> Any:
        with read_session(engine) as session:
            return build_inputs(session, request, evaluator=EVALUATOR)

    loaded = stage("inputs (the check's loader, on the ORM's session)", orm_inputs)
    same = {**loaded, "gate_id": inputs["gate_id"]} == inputs
    print(
        json.dumps(
            {
                "stages": spent,
                "sqlalchemy_before_orm": sqlalchemy_before,
                "loaders_agree": same,
                "tasks": len(inputs["tasks"]),
                "stored_bytes": size,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
