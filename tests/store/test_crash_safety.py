"""kill -9 at random points leaves the registry whole (docs/troubleshooting.md).

`trials ingest`, `sync` and `gate check` are killed with SIGKILL at points drawn at random
(seeded) inside their write, on SQLite and PostgreSQL. After each kill: `verify` passes,
the killed work is either wholly there or wholly absent (never a part of a batch, a sync or
a decision), and running the command again succeeds, as a counted no-op when the killed run
had committed (ingest: every record `skipped_identical`; sync: no new definition).

Each command runs in a process of its own, forked from the test process (tests/forked.py:
a real process, without the interpreter start-up none of this is about). A kill point is
a CPU time of that process counted from the moment its writer lock is seen held: the points
are drawn over the CPU an unkilled run of the same command spends from that moment to its
end (and a little past it), so they land in the write whatever the machine's load, never
in start-up. `verify`, the re-runs and the counting need no process boundary: they run in
the test process.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests import forked
from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, copy_rows, write_yaml
from tests.trial_factory import mini_case, record, write_jsonl

KILLS = 3
DB = Path(".evalops") / "registry.db"


def _engine_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://")


def _start(cwd: Path, url: str, *args: str) -> forked.Forked:
    sqlite_db = cwd / DB if url.startswith("sqlite:///") else None
    return forked.start(list(args), cwd, forked.child_env(url, "crash@example.com"), sqlite_db)


def _count(url: str, sql: str) -> int:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def _verified(cli: Cli, cwd: Path, url: str) -> dict[str, object]:
    result = cli("--db", url, "--json", "verify", cwd=cwd)
    assert result.code == 0, result.stdout + result.stderr
    return dict(result.json())


@dataclass
class Scenario:
    """One command killed at random points: what to run, and how to count its work."""

    args: Callable[[int], list[str]]  # the command of kill point n (its own input)
    total: Callable[[str], int]  # the work in the database (rows of what it writes)
    whole: int  # the work of one completed run
    rerun_noop: Callable[[str], bool] | None  # re-run after a committed kill (None: a new act)


def _points(rng: random.Random, window: float) -> list[float]:
    # From the moment the write is seen begun to a little past the end of an unkilled run:
    # most land inside the write, some after its commit (the work must then be whole).
    return sorted(rng.uniform(0.0, 1.05 * window) for _ in range(KILLS))


def _exercise(cli: Cli, cwd: Path, url: str, scenario: Scenario, seed: int) -> None:
    rng = random.Random(seed)
    with forked.writer_lock_probe(url) as held:
        base = scenario.total(url)
        child = _start(cwd, url, *scenario.args(0))
        locked = forked.cpu_when_locked(child, held)
        result = child.wait()
        assert result.code in (0, 3, 4), result.stdout + result.stderr
        assert locked is not None, "the unkilled run ended before its write was seen"
        assert scenario.total(url) - base == scenario.whole
        window = child.cpu_total - locked  # CPU seconds from the write seen begun to the end
        landed = inside = 0
        for n, after in enumerate(_points(rng, window), start=1):
            base = scenario.total(url)
            child = _start(cwd, url, *scenario.args(n))
            locked = forked.cpu_when_locked(child, held)
            assert locked is not None, f"kill point {n}: the run ended before its write was seen"
            killed, result = forked.kill_after_cpu(child, locked + after)
            assert killed or result.code in (0, 3, 4), result.stdout + result.stderr
            _verified(cli, cwd, url)
            done = scenario.total(url) - base
            where = f"kill point {n} ({after:.3f} of {window:.3f} CPU s)"
            assert done in (0, scenario.whole), f"{where}: {done} stored"
            landed += killed
            inside += killed and done == 0  # killed inside the write, before its commit
            rerun = cli("--db", url, "--json", *scenario.args(n), cwd=cwd)
            assert rerun.code in (0, 3, 4), rerun.stdout + rerun.stderr
            if scenario.rerun_noop is None:
                assert scenario.total(url) - base == done + scenario.whole  # a new act, whole
            else:
                assert scenario.total(url) - base == scenario.whole
                if done:
                    assert scenario.rerun_noop(rerun.stdout), rerun.stdout  # nothing twice
            _verified(cli, cwd, url)
    assert landed, "no kill landed before its command finished"
    assert inside, "no kill landed inside a write"


ENGINES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _database(request: pytest.FixtureRequest, engine: str, cwd: Path, cli: Cli) -> str:
    """The database of `cwd` (SQLite), or its rows copied into a fresh PostgreSQL one."""
    sqlite = f"sqlite:///{cwd / DB}"
    if engine == "sqlite":
        return sqlite
    url: str = request.getfixturevalue("pg_url")
    assert cli("--db", url, "init", cwd=cwd).code == 0
    copy_rows(sqlite, url)
    return url


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_ingest_is_whole_or_absent(
    request: pytest.FixtureRequest, synced: Path, cli: Cli, engine: str
) -> None:
    url = _database(request, engine, synced, cli)
    case = mini_case(synced)
    size = 1500  # three chunks of the ingest's inserts (BATCH_SIZE 500)

    def args(n: int) -> list[str]:
        path = synced / f"batch-{n}.jsonl"
        if not path.exists():
            write_jsonl(
                path,
                (
                    record(case, trial_id=f"k{n}-{i}", run_id=f"run-k{n}", trial_index=i)
                    for i in range(size)
                ),
            )
        return ["trials", "ingest", str(path)]

    def total(db: str) -> int:
        return _count(db, "SELECT count(*) FROM trial")

    def noop(out: str) -> bool:
        report = json.loads(out)
        return bool(report["skipped_identical"] == size and report["ingested"] == 0)

    _exercise(cli, synced, url, Scenario(args, total, size, noop), seed=41)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_sync_is_whole_or_absent(
    request: pytest.FixtureRequest, synced: Path, cli: Cli, engine: str
) -> None:
    url = _database(request, engine, synced, cli)
    tasks_per_sync = 20

    def args(n: int) -> list[str]:
        marker = synced / "registry" / "tasks" / f"crash-{n}-0.yaml"
        if not marker.exists():
            for i in range(tasks_per_sync):
                task = copy.deepcopy(MINI_TASK)
                task["id"] = f"crash-{n}-{i}"
                write_yaml(synced / "registry" / "tasks" / f"crash-{n}-{i}.yaml", task)
            commit_all(synced, f"tasks of kill point {n}")
        return ["sync"]

    def total(db: str) -> int:
        return _count(db, "SELECT count(*) FROM task_revision")

    def noop(out: str) -> bool:
        report = json.loads(out)
        return bool(report["registered"] == [] and report["sync_run"] is None)

    _exercise(cli, synced, url, Scenario(args, total, tasks_per_sync, noop), seed=42)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_gate_check_is_whole_or_absent(
    request: pytest.FixtureRequest,
    demo: Path,
    cli: Cli,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real clock, as in the killed runs: a re-run at the demo's pinned instant would
    # record a decision earlier than theirs.
    monkeypatch.delenv("EVALOPS_NOW")
    url = _database(request, engine, demo, cli)

    def args(n: int) -> list[str]:
        return ["gate", "check", "--build", "build-125", "--suite", "regression/core"]

    def total(db: str) -> int:
        decisions = _count(db, "SELECT count(*) FROM gate_decision")
        events = _count(db, "SELECT count(*) FROM audit_event WHERE kind = 'gate.decision'")
        assert events == decisions  # never a decision without its event, nor one the other way
        return decisions

    _exercise(cli, demo, url, Scenario(args, total, 1, None), seed=43)
