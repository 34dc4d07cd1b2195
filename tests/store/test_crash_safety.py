"""kill -9 at random points leaves the registry whole (docs/troubleshooting.md).

`trials ingest`, `sync` and `gate check` are killed with SIGKILL at points drawn at random
(seeded) over the time an unkilled run of the same command takes, on SQLite and PostgreSQL.
After each kill: `verify` passes, the killed work is either wholly there or wholly absent
(never a part of a batch, a sync or a decision), and running the command again succeeds,
as a counted no-op when the killed run had committed (ingest: every record
`skipped_identical`; sync: no new definition).
"""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, copy_rows, write_yaml
from tests.trial_factory import mini_case, record, write_jsonl

KILLS = 3
DB = Path(".evalops") / "registry.db"


def _engine_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://")


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_DATABASE_URL"] = url
    env["EVALOPS_ACTOR"] = "crash@example.com"
    return env


def _start(cwd: Path, url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evalops", *args],
        cwd=cwd,
        env=_env(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(cwd: Path, url: str, *args: str) -> tuple[int, str, str, float]:
    started = time.monotonic()
    proc = _start(cwd, url, *args)
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err, time.monotonic() - started


def _killed(cwd: Path, url: str, after: float, *args: str) -> bool:
    """Run, SIGKILL after `after` seconds; True when the kill landed before it finished."""
    proc = _start(cwd, url, *args)
    try:
        proc.wait(timeout=after)
        proc.communicate(timeout=60)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        return True


def _count(url: str, sql: str) -> int:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def _verified(cwd: Path, url: str) -> dict[str, object]:
    code, out, err, _ = _run(cwd, url, "--json", "verify")
    assert code == 0, out + err
    return dict(json.loads(out))


@dataclass
class Scenario:
    """One command killed at random points: what to run, and how to count its work."""

    args: Callable[[int], list[str]]  # the command of kill point n (its own input)
    total: Callable[[str], int]  # the work in the database (rows of what it writes)
    whole: int  # the work of one completed run
    rerun_noop: Callable[[str], bool] | None  # re-run after a committed kill (None: a new act)


def _points(rng: random.Random, duration: float) -> list[float]:
    # Past interpreter start-up, up to the end of an unkilled run.
    return sorted(rng.uniform(0.35 * duration, 1.05 * duration) for _ in range(KILLS))


def _exercise(cwd: Path, url: str, scenario: Scenario, seed: int) -> None:
    rng = random.Random(seed)
    base = scenario.total(url)
    code, out, err, duration = _run(cwd, url, *scenario.args(0))
    assert code in (0, 3, 4), out + err
    assert scenario.total(url) - base == scenario.whole
    landed = 0
    for n, after in enumerate(_points(rng, duration), start=1):
        base = scenario.total(url)
        landed += _killed(cwd, url, after, *scenario.args(n))
        _verified(cwd, url)
        done = scenario.total(url) - base
        assert done in (0, scenario.whole), f"kill point {n} ({after:.2f}s): {done} stored"
        code, out, err, _ = _run(cwd, url, "--json", *scenario.args(n))
        assert code in (0, 3, 4), out + err
        if scenario.rerun_noop is None:
            assert scenario.total(url) - base == done + scenario.whole  # a new act, whole
        else:
            assert scenario.total(url) - base == scenario.whole
            if done:
                assert scenario.rerun_noop(out), out  # counted, nothing written twice
        _verified(cwd, url)
    assert landed, "no kill landed before its command finished"


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
    size = 4000

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

    _exercise(synced, url, Scenario(args, total, size, noop), seed=41)


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

    _exercise(synced, url, Scenario(args, total, tasks_per_sync, noop), seed=42)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_gate_check_is_whole_or_absent(
    request: pytest.FixtureRequest, demo: Path, cli: Cli, engine: str
) -> None:
    url = _database(request, engine, demo, cli)

    def args(n: int) -> list[str]:
        return ["gate", "check", "--build", "build-125", "--suite", "regression/core"]

    def total(db: str) -> int:
        decisions = _count(db, "SELECT count(*) FROM gate_decision")
        events = _count(db, "SELECT count(*) FROM audit_event WHERE kind = 'gate.decision'")
        assert events == decisions  # never a decision without its event, nor one the other way
        return decisions

    _exercise(demo, url, Scenario(args, total, 1, None), seed=43)
