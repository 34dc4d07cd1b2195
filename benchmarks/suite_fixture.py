"""A registry of thousands of tasks in one regression suite, for the gate benchmarks.

Tasks, grader set, execution profile and policies are real files synced by evalops; the
trials are real records ingested by evalops. Only the memberships are written in bulk (one
audited promotion event for all of them, through the store's own API) because promoting
10,000 tasks one command at a time measures promotion, not the gate. `add_other_builds`
copies the trial rows under other builds with plain SQL: those rows are load, never
evidence, and that database is used for timing only (it would not verify).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.workload import EXAMPLE, evalops_here

GRADERS: dict[str, Any] = {
    "spec_schema_version": "grader-set/v1",
    "id": "bench-graders",
    "version": 1,
    "graders": [
        {
            "id": "outcome",
            "version": 1,
            "layer": "outcome",
            "type": "deterministic",
            "produces": ["task_pass", "task_fail"],
            "blocking": True,
            "covers": ["done"],
        },
        {
            "id": "guard",
            "version": 1,
            "layer": "hard_constraint",
            "type": "deterministic",
            "produces": ["hard_constraint_fail", "pass"],
            "blocking": True,
            "covers": ["twice"],
        },
    ],
}
EXECUTION = {
    "spec_schema_version": "execution-profile/v1",
    "id": "bench-b1",
    "system_build": "build-1",
    "model": {"provider": "example", "name": "model-1"},
}


STRATA = ("free", "pro", "enterprise")
ESTIMATION_SUITE = {
    "spec_schema_version": "suite/v1",
    "id": "estimation/bench",
    "kind": "estimation",
    "sampling_frame": {
        "source": "production-sessions",
        "period": "2026-10",
        "frozen_at": "2026-11-01T00:00:00Z",
    },
    "population": "benchmark sessions",
    "weights": {"by": "tier", "values": {"free": 0.2, "pro": 0.5, "enterprise": 0.3}},
    "update_policy": "never",
}


def _task(i: int, trials: int = 5) -> dict[str, Any]:
    return {
        "spec_schema_version": "eval-task/v1",
        "id": f"task-{i:05d}",
        "revision": 1,
        "meta": {
            "title": f"Task {i}",
            "owner": "o@example.com",
            "risk": "critical",
            "protects": ["external_effect"],
            "invariant": "it holds",
            "failure_owner": "team",
            # Read only by the estimation benchmark (members of estimation/bench).
            "stratum": {"tier": STRATA[i % len(STRATA)]},
            "sampled_at": "2026-10-01T00:00:00Z",
        },
        "contract": {
            "goal": f"goal_{i}",
            "environment": {"network_policy": "deny"},
            "success_state": {"done": True},
            "forbidden_effects": ["twice"],
            "trials": {"count": trials, "k": min(3, trials)},
        },
        "fixtures": {"onMiss": "fail", "toolResponses": []},
        "grader_set": "bench-graders",
    }


def build_suite(ws: Path, tasks: int, trials: int = 5, *, estimation: bool = False) -> None:
    """`tasks` tasks of `trials` trials each in `regression/bench`; with `estimation`, the
    same tasks are also the members of `estimation/bench` (three strata)."""
    import git

    from evalops.domain import digests
    from evalops.registry.definitions import load_definition

    if ws.exists():
        shutil.rmtree(ws)
    reg = ws / "registry"
    for sub in ("tasks", "graders", "executions", "suites", "policies"):
        (reg / sub).mkdir(parents=True)
    for i in range(tasks):
        (reg / "tasks" / f"task-{i:05d}.json").write_text(
            json.dumps(_task(i, trials)), encoding="utf-8"
        )
    (reg / "graders" / "bench-graders.json").write_text(json.dumps(GRADERS), encoding="utf-8")
    (reg / "executions" / "bench-b1.json").write_text(json.dumps(EXECUTION), encoding="utf-8")
    (reg / "suites" / "bench.json").write_text(
        json.dumps(
            {"spec_schema_version": "suite/v1", "id": "regression/bench", "kind": "regression"}
        ),
        encoding="utf-8",
    )
    if estimation:
        (reg / "suites" / "estimation.json").write_text(
            json.dumps(ESTIMATION_SUITE), encoding="utf-8"
        )
    for name in ("gate-policy.yaml", "suite-policy.yaml"):
        shutil.copy(EXAMPLE / "policies" / name, reg / "policies" / name)
    repo = git.Repo.init(ws)
    with repo.config_writer() as config:
        config.set_value("user", "name", "bench")
        config.set_value("user", "email", "bench@evalops.invalid")
    (ws / ".gitignore").write_text(".evalops/\n*.jsonl\n", encoding="utf-8")
    repo.git.add(A=True)
    repo.index.commit("bench registry")
    repo.close()
    # Setup in this process (what the benchmarks measure runs in a fresh one).
    evalops_here("init", cwd=ws)
    evalops_here("sync", cwd=ws)
    _bulk_members(ws, tasks)
    if estimation:
        _bulk_members(ws, tasks, "estimation/bench")
    graders = load_definition(reg / "graders" / "bench-graders.json").digest
    execution = load_definition(reg / "executions" / "bench-b1.json").digest
    records = ws / "trials.jsonl"
    with records.open("w", encoding="utf-8") as out:
        for i in range(tasks):
            task = load_definition(reg / "tasks" / f"task-{i:05d}.json").digest
            case = digests.eval_case_digest(task, execution, graders)
            for j in range(trials):
                failing = i % 97 == 3 and j == min(1, trials - 1)
                # For the estimate, unequal task rates: its intervals have variance to compute.
                failing = failing or (estimation and (i * 7 + j) % 11 == 0)
                out.write(
                    json.dumps(
                        {
                            "schema": "evalops.trial/v1",
                            "trial_id": f"t-{i:05d}-{j}",
                            "run_id": "run-1",
                            "task_id": f"task-{i:05d}",
                            "task_digest": task,
                            "execution_digest": execution,
                            "grader_set_digest": graders,
                            "eval_case_digest": case,
                            "trial_index": j,
                            "started_at": "2026-11-29T10:00:00Z",
                            "completed_at": "2026-11-29T10:01:00Z",
                            "grader_results": [
                                {
                                    "grader_id": "outcome",
                                    "grader_version": 1,
                                    "state": "task_fail" if failing else "task_pass",
                                    "score": 0.9,
                                },
                                {"grader_id": "guard", "grader_version": 1, "state": "pass"},
                            ],
                            "runtime": {"status": "ok"},
                            "usage": {"model_calls": 3, "input_tokens": 1200, "output_tokens": 300},
                        }
                    )
                    + "\n"
                )
    evalops_here("trials", "ingest", str(records), cwd=ws)


def _bulk_members(ws: Path, tasks: int, suite: str = "regression/bench") -> None:
    from sqlmodel import select

    from evalops.store.audit import append_event, next_seq
    from evalops.store.engine import make_engine, write_session
    from evalops.store.tables import GraderSetRow, SuiteMembership, TaskRevision

    engine = make_engine(f"sqlite:///{ws / '.evalops' / 'registry.db'}")
    now = datetime.now(UTC)
    with write_session(engine) as session:
        graders = session.exec(select(GraderSetRow)).one()
        seq = next_seq(session)
        rows = [
            SuiteMembership(
                suite_id=suite,
                task_id=t.task_id,
                action="added",
                task_digest=t.task_digest,
                grader_set_digest=graders.grader_set_digest,
                task_revision_id=t.id,
                reason="benchmark fixture",
                at=now,
                actor="bench",
                audit_seq=seq,
            )
            for t in session.exec(select(TaskRevision))
        ]
        session.add_all(rows)
        append_event(
            session,
            at=now,
            actor="bench",
            kind="promotion.accepted",
            subject=f"{suite}:*",
            payload={"bulk": len(rows)},
            rows=rows,
        )
    engine.dispose()


def add_other_builds(ws: Path, total: int) -> None:
    """`total` trial rows of other builds, copied from the suite's own with plain SQL."""
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    columns = [r[1] for r in con.execute("PRAGMA table_info(trial)")]
    have = con.execute("SELECT count(*) FROM trial").fetchone()[0]
    copies = -(-total // have)
    for n in range(copies):
        picked = ", ".join(
            f"'sha256:other-build-{n}'"
            if c == "execution_digest"
            else f"trial_id || '-o{n}'"
            if c == "trial_id"
            else "NULL"
            if c == "id"
            else f"'other-{n}'"
            if c == "run_id"
            else c
            for c in columns
        )
        con.execute(
            f"INSERT INTO trial ({', '.join(columns)}) SELECT {picked} FROM trial"
            f" WHERE execution_digest NOT LIKE 'sha256:other-build-%' LIMIT {have}"
        )
    con.commit()
    con.close()
