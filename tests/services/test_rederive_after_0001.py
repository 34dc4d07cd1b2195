"""A registry upgraded from schema 0001: its trials were ingested before evalops recorded the
calibration state a class was derived under, so their stored class may be stale.

DESIGN 8: "Wherever a decision needs a model grader's validity (the gate, ...), it is judged
for the config in the pinned grader set: the newest calibration of exactly that config
decides." The example grader set's model grader (reply-quality) "blocks only while its
calibration is valid; without one, trials are grader_invalid". DESIGN 9: `grader_invalid` is
an evidence-blocked class, so the task holds (no waiver covers it), and the decision holds.

The fixture is the real demo database made at schema 0001 (tests/fixtures/README.md), upgraded
with `evalops db upgrade`, nothing edited by hand: its ingest batches carry no calibration
state. Before the invalidation the gate passes (the demo's waiver in force); after it, every
member whose pinned grader set has reply-quality as a blocking model grader is
`grader_invalid`, and the release holds on both loaders (`gate check` and `verify`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.helpers import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "registry-0001-demo.db"
BUILD, SUITE, JUDGE = "build-125", "regression/core", "reply-quality"
# After the demo's waiver WVR-1 was granted (2026-11-30T22:43Z) and before it expires.
NOW = "2026-12-01T00:00:00Z"


def _query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, params).fetchall()


def _members_judged_by(db: Path, grader_id: str) -> set[str]:
    """Tasks of the suite's current membership whose pinned grader set has `grader_id` as a
    blocking model grader, read straight from the rows (not through evalops)."""
    pins: dict[str, tuple[str, str]] = {}
    for task, action, pinned in _query(
        db,
        "SELECT task_id, action, grader_set_digest FROM suite_membership "
        "WHERE suite_id = ? ORDER BY id",
        (SUITE,),
    ):
        pins[task] = (action, pinned)
    judged = set()
    for task, (action, pinned) in pins.items():
        if action == "remove":
            continue
        found = _query(
            db,
            "SELECT c.type, c.blocking FROM grader_config AS c JOIN grader_set AS s "
            "ON s.id = c.grader_set_row_id WHERE s.grader_set_digest = ? AND c.grader_id = ?",
            (pinned, grader_id),
        )
        if any(kind == "model" and bool(blocking) for kind, blocking in found):
            judged.add(task)
    return judged


def _tasks(check: Any) -> dict[str, tuple[str, str]]:
    return {t["task_id"]: (t["state"], t["effect"]) for t in check.json()["tasks"]}


@pytest.fixture
def upgraded(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVALOPS_NOW", NOW)
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURE, db)
    done = cli("--db", f"sqlite:///{db}", "db", "upgrade", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    return db


def test_invalidating_a_blocking_model_graders_calibration_holds_a_0001_registrys_release(
    upgraded: Path, tmp_path: Path, cli: Cli
) -> None:
    db, url = upgraded, f"sqlite:///{upgraded}"
    # The situation of the rule: every ingest batch predates recorded calibration state,
    # and the suite's build has trials carrying the model grader's results.
    payloads = [
        json.loads(p)
        for (p,) in _query(
            db,
            "SELECT e.payload FROM audit_event AS e JOIN ingest_batch AS b ON b.audit_seq = e.seq",
        )
    ]
    assert payloads and all("validity" not in p for p in payloads)
    judged = _members_judged_by(db, JUDGE)
    assert judged, "the demo's suite pins the model grader as blocking"
    with_results = {
        task
        for task, record in _query(db, "SELECT task_id, record FROM trial")
        if task in judged
        and any(r.get("grader_id") == JUDGE for r in json.loads(record)["grader_results"])
    }
    assert with_results == judged

    before = cli("--db", url, "gate", "check", "--build", BUILD, "--suite", SUITE, "--json",
                 cwd=tmp_path)  # fmt: skip
    assert before.code == 0, before.stdout + before.stderr
    assert before.json()["decision"] == "pass"
    states_before = _tasks(before)
    assert judged <= set(states_before)

    done = cli("--db", url, "calibration", "invalidate", JUDGE, "--reason", "label shift",
               cwd=tmp_path)  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr

    after = cli("--db", url, "gate", "check", "--build", BUILD, "--suite", SUITE, "--json",
                cwd=tmp_path)  # fmt: skip
    assert after.code == 3, after.stdout + after.stderr
    assert after.json()["decision"] == "hold"
    expected = {
        task: ("grader_invalid", "hold") if task in judged else state
        for task, state in states_before.items()
    }
    assert _tasks(after) == expected
    # verify rebuilds the decision's inputs over plain SQL and agrees with what was stored.
    verified = cli("--db", url, "verify", "--json", cwd=tmp_path)
    assert verified.code == 0, verified.stdout + verified.stderr
