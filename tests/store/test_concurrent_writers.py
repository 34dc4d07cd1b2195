"""Serialized writers: concurrent syncs into one database never fork the audit chain."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import MINI_EXECUTION, MINI_GRADERS, MINI_TASK, write_yaml

WRITERS = 4


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


def _run_concurrently(url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_DATABASE_URL"] = url
    env["EVALOPS_ACTOR"] = "load@example.com"
    cmd = [sys.executable, "-m", "evalops"]
    assert subprocess.run([*cmd, "init"], env=env, cwd=tmp_path, check=False).returncode == 0
    procs = [
        subprocess.Popen(
            [*cmd, "sync", "--allow-dirty", str(_registry(tmp_path / f"reg-{n}", n))],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
    verified = subprocess.run(
        [*cmd, "--json", "verify"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
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
def test_concurrent_syncs_on_sqlite_keep_one_chain(tmp_path: Path) -> None:
    _run_concurrently(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path)


@pytest.mark.load
@pytest.mark.postgres
def test_concurrent_syncs_on_postgresql_keep_one_chain(tmp_path: Path, pg_url: str) -> None:
    _run_concurrently(pg_url, tmp_path)
