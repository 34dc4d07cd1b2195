"""Evaluator 4, the only evaluator of new decisions, end to end (docs/gate.md, "Evaluator 4").

The demo's stored decisions (evaluator 4 now, one with a rerun chain) are decided alike by
the frozen evaluator 3 over their trials loaded again; a decision replays byte for byte,
`verify` rebuilds its summaries from the rows, a changed summary fails both, and the audit
report of a new decision lists every trial, first result and drill-down as the report of
the same decision made by the evalops of evaluator 3 (`tests/fixtures/
registry-evaluator3-demo.db`).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from evalops.domain.canonical import canonical_json_document, sha256_digest
from evalops.services.gate import check as gate_service
from evalops.store.engine import make_engine, read_session
from evalops.store.tables import GateDecision
from tests.conftest import Cli, compact_differences

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DB = Path(".evalops") / "registry.db"
EVALUATOR_3_DB = Path(__file__).parents[1] / "fixtures" / "registry-evaluator3-demo.db"


def _engine(demo: Path) -> Any:
    return make_engine(f"sqlite:///{demo / DB}")


def test_every_stored_demo_decision_is_decided_alike_by_evaluator_3(demo: Path) -> None:
    engine = _engine(demo)
    try:
        with read_session(engine) as session:
            rows = list(session.exec(select(GateDecision)))
            assert len(rows) == 3
            assert all(json.loads(r.inputs)["evaluator"] == 4 for r in rows)
            for row in rows:
                assert compact_differences(session, row) == []
    finally:
        engine.dispose()


def _stored_by_evaluator_4(demo: Path) -> dict[str, Any]:
    """A new decision of build-124 (evaluator 4: no choice is offered)."""
    engine = _engine(demo)
    try:
        return dict(
            gate_service.check(
                engine,
                build="build-124",
                suite_id="regression/core",
                at=None,
                now=NOW,
                actor="tester@example.com",
            )
        )
    finally:
        engine.dispose()


def _decision_only(result: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in result.items() if k not in ("gate_id", "stored", "audit_head")}
    keep.pop("decision_event", None)
    return keep


def test_a_decision_stored_by_evaluator_4_says_what_evaluator_3_says(demo: Path) -> None:
    stored = _stored_by_evaluator_4(demo)
    assert stored["gate_id"] == "GATE-4"
    assert stored["decision"] == "block"
    engine = _engine(demo)
    try:
        with read_session(engine) as session:
            row = session.exec(select(GateDecision).where(GateDecision.gate_id == "GATE-4")).one()
            assert json.loads(row.inputs)["evaluator"] == 4
            assert compact_differences(session, row) == []
    finally:
        engine.dispose()


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_new_decisions_offer_no_choice_of_evaluator(
    demo: Path, cli: Cli, dry_run: tuple[str, ...]
) -> None:
    """`--evaluator` is gone (a usage error, nothing stored); the default is evaluator 4."""
    args = ("gate", "check", "--build", "build-124", "--suite", "regression/core", *dry_run)
    for version in ("3", "4"):
        refused = cli(*args, "--evaluator", version, cwd=demo)
        assert refused.code == 2, refused.stdout + refused.stderr
        assert "--evaluator" in refused.stderr
    assert cli("gate", "show", "GATE-4", "--json", cwd=demo).code != 0  # nothing stored
    made = cli(*args, "--json", cwd=demo)
    assert made.code in (0, 3, 4), made.stderr
    if dry_run:
        assert made.json()["stored"] is False
    else:
        assert json.loads(_stored_row(demo, made.json()["gate_id"])[0])["evaluator"] == 4


def test_an_evaluator_4_decision_replays_and_verifies(demo: Path, cli: Cli) -> None:
    _stored_by_evaluator_4(demo)
    inputs = json.loads(_stored_row(demo, "GATE-4")[0])
    assert inputs["evaluator"] == 4
    assert all("trials" not in t and "single" in t for t in inputs["tasks"])
    replayed = cli("gate", "replay", "GATE-4", "--json", cwd=demo)
    assert replayed.code == 0, replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True
    verified = cli("verify", cwd=demo)
    assert verified.code == 0, verified.stderr


def _stored_row(demo: Path, gate_id: str) -> tuple[str, str]:
    with sqlite3.connect(demo / DB) as con:
        found = con.execute(
            "SELECT inputs, result FROM gate_decision WHERE gate_id = ?", (gate_id,)
        ).fetchone()
    return str(found[0]), str(found[1])


@pytest.mark.tampers
def test_a_changed_summary_fails_verify_even_when_its_digest_is_recomputed(
    demo: Path, cli: Cli
) -> None:
    """A summary that no longer matches the trial rows is found by `verify`'s rebuild,
    whatever digest is written beside it."""
    _stored_by_evaluator_4(demo)
    inputs = json.loads(_stored_row(demo, "GATE-4")[0])
    task = next(t for t in inputs["tasks"] if t["single"]["classes"].get("task_pass"))
    task["single"]["fixtureMisses"] += 1
    document = canonical_json_document(inputs)
    with sqlite3.connect(demo / DB) as con:
        con.execute(
            "UPDATE gate_decision SET inputs = ?, inputs_digest = ? WHERE gate_id = 'GATE-4'",
            (document.decode("utf-8"), sha256_digest(document)),
        )
    verified = cli("verify", cwd=demo)
    assert verified.code == 6
    assert "GATE-4" in verified.stderr


def test_the_audit_report_of_a_new_decision_lists_what_evaluator_3_s_listed(
    tmp_path: Path, cli: Cli
) -> None:
    """The registry the evalops of evaluator 3 made (its GATE-3: build-125, every trial
    listed in its inputs), and today's decision of the same build at the same moment: the
    two reports list the same trials, classes, first results, explanations and drill-downs,
    and the same first results per task."""
    (tmp_path / ".evalops").mkdir()
    shutil.copyfile(EVALUATOR_3_DB, tmp_path / DB)
    assert cli("db", "upgrade", cwd=tmp_path).code == 0
    made = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core",
        "--at", "2026-11-30T12:00:00Z", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert made.code == 0, made.stdout + made.stderr
    assert made.json()["gate_id"] == "GATE-4"
    docs = {}
    for gate_id in ("GATE-3", "GATE-4"):
        out = tmp_path / f"{gate_id}.json"
        done = cli(
            "report", "audit", "--gate", gate_id, "--format", "json", "-o", out, cwd=tmp_path
        )
        assert done.code == 0, done.stderr
        docs[gate_id] = json.loads(out.read_text(encoding="utf-8"))
    three, four = docs["GATE-3"], docs["GATE-4"]
    assert (three["inputs"]["evaluator"], four["inputs"]["evaluator"]) == (3, 4)
    assert "trials" in three["inputs"]["tasks"][0]
    assert "trials" not in four["inputs"]["tasks"][0]
    assert three["decision"] == four["decision"]

    def trials(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted(
            (
                t["trial_id"],
                t["classification"],
                t["first_result"],
                t["explanation"],
                t["parent_trial_id"],
                t["rerun_not_permitted"],
            )
            for t in doc["trials"]
        )

    assert trials(four) == trials(three)
    assert len(trials(four)) > 0
    assert [t["first_result"] for t in four["tasks"]] == [t["first_result"] for t in three["tasks"]]
    # Each task's first results, by trial in evaluator 3's document, counted by class here.
    for old, new in zip(three["tasks"], four["tasks"], strict=True):
        counts: dict[str, int] = {}
        for cls in old["firstResults"].values():
            counts[cls] = counts.get(cls, 0) + 1
        assert new["firstResultCounts"] == dict(sorted(counts.items()))
    assert three["failing_trials"], "the drill-downs compared must not be empty"
    for key in ("failing_trials", "failure_classes", "trialStats", "efficiency", "regression"):
        assert four[key] == three[key], key
    html = tmp_path / "GATE-4.html"
    done = cli("report", "audit", "--gate", "GATE-4", "--format", "html", "-o", html, cwd=tmp_path)
    assert done.code == 0, done.stderr
