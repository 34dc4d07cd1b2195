"""Evaluator 4 end to end on the demo registry (docs/gate.md, "Evaluator 4").

The demo's stored decisions (evaluator 3, one with a rerun chain) are decided again by
evaluator 4 from its streaming loader and agree; a decision stored by evaluator 4 replays
byte for byte, `verify` rebuilds its summaries from the rows, a changed summary fails both,
and the audit report of an evaluator-4 decision lists every trial as for evaluator 3.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from evalops.domain.canonical import canonical_json, canonical_json_document, sha256_digest
from evalops.domain.gate_compact import same_decision_as_evaluator_3
from evalops.services.gate import check as gate_service
from evalops.store.engine import make_engine, read_session
from evalops.store.tables import GateDecision
from tests.conftest import Cli, compact_differences

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DB = Path(".evalops") / "registry.db"


def _engine(demo: Path) -> Any:
    return make_engine(f"sqlite:///{demo / DB}")


def test_every_stored_demo_decision_is_decided_alike_by_evaluator_4(demo: Path) -> None:
    engine = _engine(demo)
    try:
        with read_session(engine) as session:
            rows = list(session.exec(select(GateDecision)))
            assert len(rows) == 3
            assert any(json.loads(r.result)["tasks"][0]["rerunCount"] >= 0 for r in rows)
            for row in rows:
                assert compact_differences(session, row) == []
    finally:
        engine.dispose()


def _stored_by_evaluator_4(demo: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(evaluator-3 dry run, evaluator-4 stored decision) of build-124, at one moment."""
    engine = _engine(demo)
    try:
        options: dict[str, Any] = {
            "build": "build-124",
            "suite_id": "regression/core",
            "at": None,
            "now": NOW,
        }
        dry, _ = gate_service.dry_run_check(engine, **options)
        stored = gate_service.check(engine, actor="tester@example.com", evaluator=4, **options)
    finally:
        engine.dispose()
    return dry, stored


def _decision_only(result: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in result.items() if k not in ("gate_id", "stored", "audit_head")}
    keep.pop("decision_event", None)
    return keep


def test_a_decision_stored_by_evaluator_4_says_what_evaluator_3_says(demo: Path) -> None:
    dry, stored = _stored_by_evaluator_4(demo)
    assert stored["gate_id"] == "GATE-4"
    expected = same_decision_as_evaluator_3(_decision_only(dry))
    assert canonical_json(_decision_only(stored)) == canonical_json(expected)
    assert stored["decision"] == dry["decision"] == "block"


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


def test_the_audit_report_of_an_evaluator_4_decision_lists_every_trial(
    demo: Path, cli: Cli
) -> None:
    """Beside an evaluator-3 decision of the same build made at the same moment, its report
    lists the same trials, explanations and first results."""
    engine = _engine(demo)
    try:
        for evaluator in (3, 4):
            gate_service.check(
                engine,
                build="build-124",
                suite_id="regression/core",
                at=None,
                now=NOW,
                actor="tester@example.com",
                evaluator=evaluator,
            )
    finally:
        engine.dispose()
    docs = {}
    for gate_id in ("GATE-4", "GATE-5"):
        out = demo / f"{gate_id}.json"
        done = cli("report", "audit", "--gate", gate_id, "--format", "json", "-o", out, cwd=demo)
        assert done.code == 0, done.stderr
        docs[gate_id] = json.loads(out.read_text(encoding="utf-8"))
    three, four = docs["GATE-4"], docs["GATE-5"]
    assert (three["inputs"]["evaluator"], four["inputs"]["evaluator"]) == (3, 4)
    assert "trials" not in four["inputs"]["tasks"][0]

    def trials(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted(
            (t["trial_id"], t["classification"], t["first_result"], t["explanation"])
            for t in doc["trials"]
        )

    assert trials(four) == trials(three)
    assert [t["first_result"] for t in four["tasks"]] == [t["first_result"] for t in three["tasks"]]
    assert four["changes"] == three["changes"]
    html = demo / "GATE-5.html"
    done = cli("report", "audit", "--gate", "GATE-5", "--format", "html", "-o", html, cwd=demo)
    assert done.code == 0, done.stderr
