"""The terminal's "changes since" lines of a stored `gate check`, made from the decision in
memory, are the lines made from its stored text read back (as `gate show` and the audit
report read it): the same changes, byte for byte, and the same printed lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from evalops.cli.gate import change_lines
from evalops.domain.canonical import canonical_json_document
from evalops.services.gate.check import check_decided
from evalops.services.reports.changes import decision_changes, decision_cutoff
from evalops.store.engine import make_engine, read_session
from evalops.store.tables import GateDecision

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DB = Path(".evalops") / "registry.db"


def _engine(demo: Path) -> Any:
    return make_engine(f"sqlite:///{demo / DB}")


@pytest.mark.parametrize(
    ("build", "baseline", "source"),
    [
        # No baseline: against the suite's latest decision on another build (demo GATE-3).
        ("build-124", None, "previous_decision"),
        ("build-124", "build-123", "baseline"),
        ("build-125", "build-124", "baseline"),
    ],
)
def test_changes_in_memory_are_the_stored_decisions_changes(
    demo: Path, build: str, baseline: str | None, source: str
) -> None:
    engine = _engine(demo)
    try:
        decided = check_decided(
            engine,
            build=build,
            suite_id="regression/core",
            at=None,
            now=NOW,
            actor="tester@example.com",
            baseline=baseline,
        )
        # A later decision on another build must not become this one's "previous".
        check_decided(
            engine,
            build="build-123",
            suite_id="regression/core",
            at=None,
            now=NOW,
            actor="tester@example.com",
        )
        gate_id = decided.output["gate_id"]
        with read_session(engine) as session:
            row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).one()
        # What is in memory is what was stored.
        assert canonical_json_document(decided.inputs).decode("utf-8") == row.inputs
        assert json.loads(row.result)["decision"] == decided.output["decision"]
        assert decided.number == row.number
        # The voids are read as of the cutoff the inputs record, as for the stored row.
        assert decision_cutoff(decided.inputs, None) == json.loads(row.inputs)["request"]["cutoff"]

        in_memory = decision_changes(
            engine, unstored=(decided.output, decided.inputs), before=decided.number
        )
        read_back = decision_changes(engine, gate_id=gate_id)
    finally:
        engine.dispose()
    assert read_back["source"] == source
    assert read_back["tasks"], "a comparison with tasks on both sides"
    assert canonical_json_document(in_memory) == canonical_json_document(read_back)
    assert change_lines(in_memory) == change_lines(read_back)
    assert len(change_lines(read_back)) >= 2
