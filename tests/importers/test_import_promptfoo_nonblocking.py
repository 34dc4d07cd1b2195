"""promptfoo imports with a non-blocking grader: a row promptfoo failed stays failed.

DESIGN 10.1: "A source's own failure verdict is never overruled into a pass. A promptfoo row
with `success: false` imports as a pass of no grader: when no mapped blocking assertion
failed ..., the map's `row_verdict` receives `task_fail`; a file with such rows and no
`row_verdict` is exit 2 naming the row." A failed assertion of a non-blocking grader only adds
a label (DESIGN 5), so it cannot carry the row's failure: the row is refused, or with
`row_verdict` it is `task_fail`. The example grader set is all-blocking, so here reply-quality
is made a diagnostic (blocking: false), as a team would, and one passing row is failed on its
reply_quality assertion alone, the way promptfoo writes such a row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.helpers import commit_all
from tests.import_support import (
    PF_BUILDS,
    copy_workspace,
    import_base,
    promptfoo_map_text,
    trials_of,
)
from tests.importers.test_import_promptfoo_identity import (
    document,
    provider,
    refused,
    rows,
    run_import,
    write,
    write_map,
)

MAP = "maps/promptfoo.yaml"
REASON = "Assertion failed: reply_quality"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path, cli: Cli) -> Path:
    """The import workspace with reply-quality non-blocking (grader set version 3)."""
    ws = copy_workspace(base, tmp_path / "ws")
    graders = ws / "registry" / "graders" / "support-graders.yaml"
    text = graders.read_text(encoding="utf-8")
    needle = "    blocking: true                   # blocks only while its calibration is valid"
    assert needle in text
    graders.write_text(
        text.replace(needle, "    blocking: false                  # a diagnostic only").replace(
            "version: 2\nmeta:", "version: 3\nmeta:", 1
        ),
        encoding="utf-8",
    )
    commit_all(ws, "reply-quality is a diagnostic")
    result = cli("sync", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return ws


def failed_on_reply_quality(doc: dict[str, Any]) -> dict[str, Any]:
    """The first row of `refund in order` on support-b125 that passed every assertion, failed
    by promptfoo on its reply_quality assertion only (every other assertion still passes)."""
    row = next(
        r
        for r in rows(doc)
        if r["success"]
        and provider(r) == "support-b125"
        and r["testCase"].get("description") == "refund in order"
    )
    components = row["gradingResult"]["componentResults"]
    assert all(c["pass"] for c in components)
    quality = [c for c in components if c["assertion"].get("metric") == "reply_quality"]
    assert len(quality) == 1
    quality[0].update({"pass": False, "score": 0, "reason": REASON})
    row.update(success=False, score=0.75, failureReason=1)
    row["gradingResult"].update({"pass": False, "score": 0.75, "reason": REASON})
    return row


def test_a_row_failed_only_by_a_non_blocking_assertion_is_refused_without_row_verdict(
    ws: Path, cli: Cli
) -> None:
    doc = document()
    failed_on_reply_quality(doc)
    results = write(ws, doc)
    # The only failing assertion maps to a non-blocking grader: it cannot fail the trial,
    # so importing the row would make promptfoo's failure a pass. Refused, naming the row,
    # the database untouched (refused() compares the counts).
    error = refused(cli, ws, results, "--map", MAP)
    assert error["file"] == results
    assert error["field"].startswith("refund in order/support-b125/")
    assert error["field"].endswith(": success")
    assert REASON in error["message"] and "row_verdict" in error["message"]
    assert refused(cli, ws, results, "--map", MAP, "--dry-run") == error


def test_with_row_verdict_that_row_is_task_fail(ws: Path, cli: Cli) -> None:
    doc = document()
    failed = failed_on_reply_quality(doc)
    results = write(ws, doc)
    # row_verdict names a blocking grader no scorer maps to: ticket-outcome, its assertion
    # (ticket_check) left unmapped. reply_quality stays mapped to the non-blocking grader.
    text = promptfoo_map_text()
    line = next(x for x in text.splitlines(keepends=True) if "ticket_check:" in x)
    text = text.replace(line, "") + "row_verdict: {grader_id: ticket-outcome, grader_version: 1}\n"
    data = run_import(cli, ws, results, "--map", write_map(ws, text), "--skip-unmapped")
    assert data["ingested"] == len(rows(doc))
    by_attempt = {
        t["record"]["attempt_id"]: t for b in PF_BUILDS.values() for t in trials_of(ws, b)
    }
    trial = by_attempt[failed["id"]]
    assert trial["class"] == "task_fail"
    states = {(r["grader_id"], r["state"]) for r in trial["record"]["grader_results"]}
    assert ("ticket-outcome", "task_fail") in states
    # The non-blocking grader's failure is no result of a blocking grader: its trace is the
    # row's verdict, never a pass of the rest.
    assert ("ticket-outcome", "task_pass") not in states
    # Every row promptfoo passed is a pass, every row it failed is not (the README table).
    for row in rows(doc):
        cls = by_attempt[row["id"]]["class"]
        assert (cls == "task_pass") == bool(row["success"]), (row["id"], cls)


def test_a_row_verdict_naming_a_non_blocking_grader_is_refused(ws: Path, cli: Cli) -> None:
    """Its task_fail would only label the trial: the row promptfoo failed would pass. The
    map is refused (exit 2, naming row_verdict), nothing stored."""
    doc = document()
    failed_on_reply_quality(doc)
    results = write(ws, doc)
    text = promptfoo_map_text()
    line = next(x for x in text.splitlines(keepends=True) if "reply_quality:" in x)
    text = text.replace(line, "") + "row_verdict: {grader_id: reply-quality, grader_version: 2}\n"
    error = refused(cli, ws, results, "--map", write_map(ws, text), "--skip-unmapped")
    assert error["field"] == "row_verdict.grader_id", error
    assert "is not blocking" in error["message"] and "reply-quality" in error["message"]
