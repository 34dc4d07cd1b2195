"""The audit report of a decision of any size is built and written in bounded memory.

The rule (target P9, benchmarks/RESULTS.md): when the gated build grows tenfold, the peak memory of
`report audit` stays within 1.5x. The report lists every trial; what keeps it bounded is
that the trials are read a chunk at a time, rows past the first few go to disk
(`report/rows.py`), the HTML shows a bounded number and the JSON is written as it is
encoded. Here those bounds are made small (a few rows) so that a decision of a few hundred
trials is already past them; a report that held every trial again would grow with them.
"""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalops.report import audit as audit_module
from evalops.report import rows as rows_module
from evalops.report.audit import audit_chunks
from evalops.services.gate import check as gate_service
from evalops.services.reports import audit as reports_module
from evalops.services.reports.audit import audit_document
from evalops.store.engine import make_engine
from tests.conftest import Cli

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SMALL = 300
"""Copies of build-124's records in the small decision; the big one has ten times as many."""


def _copies(demo: Path, start: int, count: int) -> Path:
    """`count` more records of build-124: its original records again, each copy in its
    own run and attempt."""
    source = demo / "registry" / "trials" / "candidate-b124.jsonl"
    base = [
        record
        for record in map(json.loads, source.read_text(encoding="utf-8").splitlines())
        if not (record.get("rerun") or {}).get("parent_trial_id")
    ]
    path = demo / f"copies-{start}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(start, start + count):
            record = dict(base[i % len(base)])
            record.pop("primary_classification", None)
            record["trial_id"] = f"copy-{i:06d}"
            record["run_id"] = f"copy-run-{i // len(base)}"
            record["attempt_id"] = f"copy-attempt-{i}"
            out.write(json.dumps(record) + "\n")
    return path


def _decide(demo: Path) -> str:
    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        stored = gate_service.check(
            engine,
            build="build-124",
            suite_id="regression/core",
            at=None,
            now=NOW,
            actor="tester@example.com",
        )
    finally:
        engine.dispose()
    return str(stored["gate_id"])


def _report(engine: Any, gate_id: str, directory: Path) -> tuple[int, int]:
    """(trials listed, peak bytes traced) of building the report and writing it as HTML
    and as JSON."""
    tracemalloc.start()
    try:
        doc = audit_document(engine, gate_id, now=NOW)
        listed = len(doc["trials"])
        for fmt in ("html", "json"):
            with (directory / f"{gate_id}.{fmt}").open("w", encoding="utf-8") as out:
                for piece in audit_chunks(doc, fmt):
                    out.write(piece)
        del doc
        return listed, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_tenfold_decision_is_reported_within_one_and_a_half_times_the_memory(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rows_module, "MEMORY_ROWS", 10)
    monkeypatch.setattr(rows_module, "_BATCH", 10)
    monkeypatch.setattr(reports_module, "_CHUNK", 10)
    monkeypatch.setattr(audit_module, "HTML_TRIAL_ROWS", 5)
    done = cli("trials", "ingest", _copies(demo, 0, SMALL), cwd=demo)
    assert done.code == 0, done.stderr
    small = _decide(demo)
    done = cli("trials", "ingest", _copies(demo, SMALL, 9 * SMALL), cwd=demo)
    assert done.code == 0, done.stderr
    big = _decide(demo)
    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        _report(engine, small, demo)  # templates compiled, caches filled: not measured
        small_trials, small_peak = _report(engine, small, demo)
        big_trials, big_peak = _report(engine, big, demo)
    finally:
        engine.dispose()
    # The big decision lists about ten times the trials, every one of them in its JSON.
    assert big_trials >= 9 * small_trials > 9 * 10
    written = json.loads((demo / f"{big}.json").read_text(encoding="utf-8"))
    assert len(written["trials"]) == big_trials
    assert big_peak <= 1.5 * small_peak, (small_peak, big_peak)
