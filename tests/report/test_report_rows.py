"""Rows of a report read back from disk (`report/rows.py`) are the rows that were listed.

A report of a large decision keeps its first trials in memory and the rest on disk; it
must not change by a byte. The spool is checked against a plain list (the reference) for
every way the renderers read it, and the demo's golden reports are rendered again with
every trial but the first on disk.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from evalops.report import rows as rows_module
from evalops.report.audit import audit_chunks, render_audit
from evalops.report.rows import RowSpool, mapped, selected
from evalops.services.reports import audit as reports_module
from evalops.store.engine import make_engine
from tests.conftest import Cli
from tests.golden_reports import GATE, GOLDEN, render_all

EVALUATOR_3_DB = Path(__file__).parents[1] / "fixtures" / "registry-evaluator3-demo.db"


def _rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "trial_id": f"t-{i}",
            "notable": rng.random() < 0.3,
            "score": rng.choice([None, 0.0, 1.0, rng.random()]),
            "text": rng.choice(["", "plain", "ünïcode", "\ud800 lone", "a\nb"]),
            "nested": {"list": [i, (i, "x")], "none": None},
        }
        for i in range(n)
    ]


@pytest.mark.parametrize(("n", "memory", "batch"), [(0, 3, 2), (3, 3, 2), (4, 3, 2), (57, 5, 4)])
def test_a_spool_reads_back_the_rows_appended(
    n: int, memory: int, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rows_module, "_BATCH", batch)
    reference = _rows(n, seed=n)
    spool: RowSpool[dict[str, Any]] = RowSpool(memory)
    for row in reference:
        spool.append(row)
    assert spool.spilled == (n > memory)
    # Twice, and interleaved: every iteration reads its own batches.
    assert list(spool) == reference
    assert list(spool) == reference
    assert [(a, b) for a, b in zip(spool, spool, strict=True)] == list(
        zip(reference, reference, strict=True)
    )
    assert len(spool) == n and bool(spool) == bool(n)
    for i in range(-n, n):
        assert spool[i] == reference[i]
    with pytest.raises(IndexError):
        spool[n]
    for start in (None, 0, 1, memory, n):
        for stop in (None, 0, 2, memory + 1, n, n + 5):
            assert spool[start:stop] == reference[start:stop]
    assert spool[::2] == reference[::2]
    with pytest.raises(ValueError, match="before the spool is read"):
        spool.append({})


@pytest.mark.parametrize("n", [0, 2, 40])
def test_selected_and_mapped_rows_are_those_of_the_list(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rows_module, "_BATCH", 3)
    reference = _rows(n, seed=7)
    spool: RowSpool[dict[str, Any]] = RowSpool(2)
    for row in reference:
        spool.append(row)
    rows = spool.finished()
    notable = [r for r in reference if r["notable"]]
    for view in (selected(rows, "notable"), selected(reference, "notable")):
        assert len(view) == len(notable) and bool(view) == bool(notable)
        assert list(view) == notable
        for stop in (0, 1, 5, len(notable) + 3):
            assert view[:stop] == notable[:stop]
        assert view[1:3] == notable[1:3]
    ids = [r["trial_id"] for r in reference]
    for view in (mapped(rows, lambda r: r["trial_id"]), mapped(reference, lambda r: r["trial_id"])):
        assert list(view) == ids and len(view) == n and bool(view) == bool(n)
        assert view[:4] == ids[:4]
        if n:
            assert view[-1] == ids[-1]


def test_a_spool_that_fits_in_memory_is_a_plain_list() -> None:
    spool: RowSpool[int] = RowSpool(5)
    for i in range(5):
        spool.append(i)
    assert spool.finished() == [0, 1, 2, 3, 4] and type(spool.finished()) is list


def test_the_golden_reports_are_the_same_with_their_trials_read_back_from_disk(
    demo_master: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalops.domain.vocabulary import parse_timestamp
    from tests.conftest import PINNED_NOW

    monkeypatch.setattr(rows_module, "MEMORY_ROWS", 1)
    monkeypatch.setattr(rows_module, "_BATCH", 2)
    monkeypatch.setattr(reports_module, "_CHUNK", 3)
    rendered = render_all(demo_master)
    for fmt in ("html", "md", "json"):
        name = f"audit-{GATE}.{fmt}"
        assert rendered[name] == (GOLDEN / name).read_text(encoding="utf-8"), name
    engine = make_engine(f"sqlite:///{demo_master / '.evalops' / 'registry.db'}")
    try:
        doc = reports_module.audit_document(engine, GATE, now=parse_timestamp(PINNED_NOW))
        assert isinstance(doc["trials"], RowSpool) and len(doc["trials"]) > 2
        assert not isinstance(doc["failing_trials"], list) and len(doc["failing_trials"]) > 1
        for fmt in ("html", "md", "json"):
            name = f"audit-{GATE}.{fmt}"
            written = "".join(audit_chunks(doc, fmt))
            assert written == render_audit(doc, fmt) == (GOLDEN / name).read_text("utf-8")
    finally:
        engine.dispose()


def test_a_new_decision_s_report_lists_what_evaluator_3_s_listed_row_for_row(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry the evalops of evaluator 3 made (GATE-3: build-125, every trial in its
    inputs) and today's decision of the same build at the same moment (evaluator 4, which
    stores no trials: its report reads them again a task at a time): every trial row and
    drill-down is the same, in the same order, read back from disk or not."""
    import shutil

    (tmp_path / ".evalops").mkdir()
    shutil.copyfile(EVALUATOR_3_DB, tmp_path / ".evalops" / "registry.db")
    assert cli("db", "upgrade", cwd=tmp_path).code == 0
    made = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core",
        "--at", "2026-11-30T12:00:00Z", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert made.code == 0 and made.json()["gate_id"] == "GATE-4", made.stderr
    listed: dict[tuple[str, int], dict[str, Any]] = {}
    for memory in (10**6, 1):
        monkeypatch.setattr(rows_module, "MEMORY_ROWS", memory)
        monkeypatch.setattr(reports_module, "_CHUNK", 2 if memory == 1 else 500)
        for gate_id in ("GATE-3", "GATE-4"):
            out = tmp_path / f"{gate_id}-{memory}.json"
            done = cli(
                "report", "audit", "--gate", gate_id, "--format", "json", "-o", out, cwd=tmp_path
            )
            assert done.code == 0, done.stderr
            listed[gate_id, memory] = json.loads(out.read_text(encoding="utf-8"))
    three, four = listed["GATE-3", 1], listed["GATE-4", 1]
    assert (three["inputs"]["evaluator"], four["inputs"]["evaluator"]) == (3, 4)
    assert len(four["trials"]) > 2
    for key in ("trials", "failing_trials", "failure_classes", "trialStats"):
        assert four[key] == three[key], key
        assert listed["GATE-4", 10**6][key] == four[key], key
        assert listed["GATE-3", 10**6][key] == three[key], key
