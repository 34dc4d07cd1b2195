"""Serialized writers: concurrent syncs into one database never fork the audit chain.

The syncs are processes of their own, forked from the test process (tests/forked.py) and
released together, so that their transactions overlap; `init` and `verify` run in the test
process.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import Cli
from tests.helpers import MINI_EXECUTION, MINI_GRADERS, MINI_TASK, write_yaml

#: Enough that the race is real: with the writer lock removed, 8 forked syncs released
#: together failed 6 runs of 6 on each engine, 4 of them only 4 of 6, 2 only 1 of 6.
WRITERS = 8


def _registry(root: Path, n: int) -> Path:
    """A small registry whose ids are unique to writer `n`."""
    task = copy.deepcopy(MINI_TASK)
    task["id"] = f"task-{n}"
    task["grader_set"] = f"graders-{n}"
    task["contract"]["goal"] = f"goal_{n}"
    graders = copy.deepcopy(MINI_GRADERS)
    graders["id"] = f"graders-{n}"
    execution = copy.deepcopy(MINI_EXECUTION)
    execution["id"] = f"exec-{n}"
    execution["system_build"] = f"build-{n}"
    write_yaml(root / "tasks" / f"task-{n}.yaml", task)
    write_yaml(root / "graders" / f"graders-{n}.yaml", graders)
    write_yaml(root / "executions" / f"exec-{n}.yaml", execution)
    return root


def _run_concurrently(cli: Cli, url: str, tmp_path: Path) -> None:
    assert cli("--db", url, "init", cwd=tmp_path).code == 0
    env = forked.child_env(url, "load@example.com")
    sqlite_db = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    go = tmp_path / "go"
    procs = [
        forked.start(
            ["sync", "--allow-dirty", str(_registry(tmp_path / f"reg-{n}", n))],
            tmp_path,
            env,
            sqlite_db,
            forked.released_by(go),
        )
        for n in range(WRITERS)
    ]
    go.touch()
    for proc in procs:
        result = proc.wait(300)
        assert result.code == 0, result.stdout + result.stderr
    verified = cli("--db", url, "--json", "verify", cwd=tmp_path)
    assert verified.code == 0, verified.stderr
    report = verified.json()
    # Each sync appends one event per definition plus one for the in-force set it records
    # (docs/verify.md: every change appends one event); one chain, no fork, no loss.
    assert {k: report[k] for k in ("ok", "events", "definitions", "trials", "decisions")} == {
        "ok": True,
        "events": 4 * WRITERS,
        "definitions": 3 * WRITERS,
        "trials": 0,
        "decisions": 0,
    }
    assert report["audit_head"]["seq"] == 4 * WRITERS


@pytest.mark.load
def test_concurrent_syncs_on_sqlite_keep_one_chain(tmp_path: Path, cli: Cli) -> None:
    _run_concurrently(cli, f"sqlite:///{tmp_path / 'registry.db'}", tmp_path)


@pytest.mark.load
@pytest.mark.postgres
def test_concurrent_syncs_on_postgresql_keep_one_chain(
    tmp_path: Path, pg_url: str, cli: Cli
) -> None:
    _run_concurrently(cli, pg_url, tmp_path)
