"""Human output is written for people.

- Numbers are rounded for people (`0.2875`, never `0.2875000000000001`); `--json` keeps the
  exact value.
- Nothing prints `None`: a missing p-value reads "no p-value", a missing value `-`.
- Counts agree with their noun ("1 paired task", "3 paired tasks").
- Tables off a terminal are as wide as they need (no fixed 200 columns): every id and digest
  stays whole on its line; on a narrow terminal a long cell folds, it is never cut with an
  ellipsis; every column has a label.
- The gate shows its task table for every decision, a pass included, and names every
  waiver it considered, refused requests by their audit event.

Most tests run on a private copy of the demo database (tests/conftest.py `demo`).
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from evalops.cli.context import new_table
from evalops.cli.gate import _regression_line, _render_decision
from evalops.domain.humanize import number, plural, quantity, text
from evalops.domain.vocabulary import parse_timestamp
from tests.conftest import Cli

ELLIPSIS = ("…", "...")
FULL_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def ok(cli: Cli, demo: Path, *args: str) -> str:
    result = cli(*args, cwd=demo)
    assert result.code == 0, result.stdout + result.stderr
    return result.stdout


def ok_json(cli: Cli, demo: Path, *args: str) -> Any:
    result = cli(*args, "--json", cwd=demo)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def header_labels(output: str) -> list[str]:
    """The labels of a rich table's header row (the line drawn with heavy verticals)."""
    header = next(line for line in output.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in header.strip("┃").split("┃")]


# --------------------------------------------------------------------------- numbers


def test_number_rounds_for_people() -> None:
    """One format for a measure: two decimals or more, never float noise."""
    assert number(0.2875000000000001) == "0.2875"
    assert number(0.8999999999999999) == "0.90"
    assert number(0.25) == "0.25"
    assert number(0.4) == "0.40"
    assert number(0.05) == "0.05"
    assert number(1.0) == "1.00"
    assert number(0.0) == "0.00"
    assert number(-0.125) == "-0.125"
    assert number(1234.5678) == "1234.57"
    assert number(0.0012) == "0.0012"
    assert number(3.2e-07) == "3.2e-07"
    assert number(7) == "7"
    assert number(None) == "-"
    assert text(None) == "-"
    assert text("") == "-"
    assert text(0.30000000000000004) == "0.30"


def test_a_count_or_duration_has_no_point_zero() -> None:
    assert quantity(7.0) == "7"
    assert quantity(30) == "30"
    assert quantity(1.5) == "1.5"
    assert quantity(0.25) == "0.25"


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "paired task") == "1 paired task"
    assert plural(0, "paired task") == "0 paired tasks"
    assert plural(3, "paired task") == "3 paired tasks"


def _noun(count: int, singular: str) -> str:
    """The reference: English's regular plural, written out here."""
    return f"{count} {singular}" if count == 1 else f"{count} {singular}s"


def test_counts_in_a_refused_downgrade_and_a_written_site_agree_with_their_nouns(
    demo: Path, cli: Cli
) -> None:
    """The demo holds 1 waiver and 1 incident; each count is read from the database."""
    with sqlite3.connect(demo / ".evalops" / "registry.db") as con:
        counts = {
            noun: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table, noun in (
                ("audit_event", "audit event"), ("trial", "trial"),
                ("gate_decision", "gate decision"), ("waiver", "waiver"),
                ("calibration", "calibration"), ("incident", "incident"),
                ("estimate", "estimate"),
            )
        }  # fmt: skip
    assert counts["waiver"] == 1 and counts["incident"] == 1
    refused = cli("db", "downgrade", "base", cwd=demo)
    assert refused.code == 5
    expected = ", ".join(_noun(n, noun) for noun, n in counts.items())
    assert f"would be lost: {expected}\n" in refused.stderr
    first = cli("report", "site", "another-site", cwd=demo)
    pages = len(list((demo / "another-site").rglob("*.html")))
    assert f": {_noun(pages, 'page')} written, 0 unchanged;" in first.stdout + first.stderr
    (demo / "another-site" / "index.html").unlink()
    again = cli("report", "site", "another-site", cwd=demo)
    assert f": 1 page written, {pages - 1} unchanged;" in again.stdout + again.stderr


def test_calibration_is_rounded_for_people_and_exact_in_json(demo: Path, cli: Cli) -> None:
    # The demo's disputed label set, recorded again: the newest calibration, failing.
    labels = "registry/calibration/reply-quality-disputed.jsonl"
    recorded = ok_json(cli, demo, "calibration", "record", "reply-quality", "--labels", labels)
    exact = recorded["human_agreement"]["overall"]
    # The reference: scikit-learn's Cohen's kappa over the two annotators' labels.
    reference = _sklearn_kappa(demo / labels)
    assert reference == pytest.approx(0.2875, abs=1e-12)
    assert exact == pytest.approx(reference, rel=1e-9)  # --json keeps the value as computed

    shown = ok(cli, demo, "calibration", "show", recorded["calibration_id"])

    # Rounded for people: no digits beyond the four places (the computed float may carry
    # representation noise such as 0.2875000000000001).
    assert re.search(r"human agreement \(cohen, 2 annotators\): 0\.2875(?![0-9])", shown)
    assert "human agreement 0.2875 is below min_human_agreement 0.60" in shown
    # No float artefact of 16 digits anywhere in the human output.
    assert not re.search(r"\d\.\d{9,}", shown), shown


def _sklearn_kappa(labels: Path) -> float:
    from sklearn.metrics import cohen_kappa_score

    first: list[str] = []
    second: list[str] = []
    for line in labels.read_text(encoding="utf-8").splitlines():
        by = {h["annotator"]: h["label"] for h in json.loads(line)["human_labels"]}
        first.append(by["annotator-a"])
        second.append(by["annotator-b"])
    return float(cohen_kappa_score(first, second))


def test_a_verdict_without_a_p_value_says_so(demo: Path, cli: Cli) -> None:
    args = ("compare", "--baseline", "build-123", "--candidate", "build-124")
    args += ("--suite", "regression/core", "--method", "paired-bootstrap")
    data = ok_json(cli, demo, *args)
    assert data["pValue"] is None and data["pairedTaskCount"] == 3

    shown = ok(cli, demo, *args)

    assert "None" not in shown
    assert "3 paired tasks, no p-value" in shown
    assert "at least 10 paired tasks" in shown  # the reason is given


def test_one_paired_task_is_singular_and_a_missing_p_value_is_not_none() -> None:
    line = _regression_line(
        {"verdict": "inconclusive", "method": "mcnemar", "pairedTaskCount": 1, "pValue": None}
    )
    assert line == "inconclusive (mcnemar, 1 paired task, no p-value)"
    line = _regression_line(
        {"verdict": "unchanged", "method": "sign-test", "pairedTaskCount": 2, "pValue": 1.0}
    )
    assert line == "unchanged (sign-test, 2 paired tasks, p=1.00)"


# ---------------------------------------------------------------------------- tables


def test_tables_off_a_terminal_keep_every_digest_whole_on_one_line(demo: Path, cli: Cli) -> None:
    """`calibration status` is wider than 200 columns: it used to wrap its digests there."""
    rows = ok_json(cli, demo, "calibration", "status")
    shown = ok(cli, demo, "calibration", "status")

    for row in rows:
        line = next((ln for ln in shown.splitlines() if row["grader_config_digest"] in ln), None)
        assert line is not None, f"{row['grader_config_digest']} is not whole on a line"
        assert row["grader_id"] in line
    assert max(len(line) for line in shown.splitlines()) > 200  # no fixed width
    assert not any(mark in shown for mark in ELLIPSIS)


def test_listings_show_ids_and_digests_uncut(demo: Path, cli: Cli) -> None:
    tasks = ok_json(cli, demo, "task", "list")
    shown = ok(cli, demo, "task", "list")
    for t in tasks:
        assert t["task_digest"] in shown
    members = ok_json(cli, demo, "suite", "show", "regression/core")["members"]
    shown = ok(cli, demo, "suite", "show", "regression/core")
    for m in members:
        assert m["task_digest"] in shown
    assert not any(mark in shown for mark in ELLIPSIS)


def test_a_narrow_terminal_folds_a_long_id_instead_of_cutting_it() -> None:
    long_id = "support-refund-policy-explanation-for-enterprise-tenants"
    digest = "sha256:" + "0123456789abcdef" * 4
    table = new_table("task", "digest")
    table.add_row(long_id, digest)
    out = io.StringIO()
    Console(file=out, width=40, force_terminal=False, color_system=None).print(table)
    rendered = out.getvalue()

    assert not any(mark in rendered for mark in ELLIPSIS)
    cells: dict[int, str] = {0: "", 1: ""}
    for line in rendered.splitlines():
        if line.startswith("│"):
            parts = line.strip("│").split("│")
            for i, part in enumerate(parts):
                cells[i] += part.strip()
    assert cells == {0: long_id, 1: digest}


def test_every_column_of_suite_coverage_is_labelled(demo: Path, cli: Cli) -> None:
    shown = ok(cli, demo, "suite", "coverage", "regression/core")

    labels = header_labels(shown)
    assert all(labels), labels
    assert labels[-1] == "gap"
    assert "regression/core: 0 gaps" in shown


def test_a_table_column_without_a_label_is_refused() -> None:
    try:
        new_table("task", "")
    except ValueError:
        return
    raise AssertionError("an unlabelled column was accepted")


# ------------------------------------------------------------------------------ gate


def test_a_pass_shows_the_task_table_with_every_task(demo: Path, cli: Cli) -> None:
    data = ok_json(cli, demo, "gate", "show", "GATE-3")
    assert data["decision"] == "pass"

    shown = ok(cli, demo, "gate", "show", "GATE-3")

    assert shown.startswith("PASS: build-125 on regression/core (GATE-3)")
    assert header_labels(shown)[:4] == ["task", "risk", "state", "effect"]
    table_rows = [line for line in shown.splitlines() if line.startswith("│")]
    assert len(table_rows) == len(data["tasks"]) == 3
    for t in data["tasks"]:
        row = next(line for line in table_rows if f"│ {t['task_id']} " in line)
        assert f"│ {t['effect']} " in row and f"│ {t['state']} " in row


def test_every_decision_shows_every_task() -> None:
    """Rendering a stored pass with no waiver at all: the table is there all the same."""
    tasks = [
        {
            "task_id": f"task-{i}",
            "risk": "critical",
            "state": "task_pass",
            "effect": "pass",
            "n": 5,
            "passedCount": 5,
            "passAtK": 1.0,
            "passHatK": 0.9999999999999999,
            "waiver_id": None,
        }
        for i in range(4)
    ]
    decision = {
        "decision": "pass",
        "build": "b",
        "suite": "s",
        "gate_id": "GATE-9",
        "reasons": [],
        "tasks": tasks,
        "waivers": {"applied": [], "expired": [], "unused": [], "revoked": [], "refused": []},
        "regression": None,
        "evaluated_at": "2026-11-30T12:00:00.000000Z",
        "suite_digest": "sha256:" + "0" * 64,
    }
    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        _render_decision(decision)
    shown = out.getvalue()
    for t in tasks:
        assert f"│ {t['task_id']} " in shown
    assert "0.9999999999999999" not in shown and "None" not in shown
    assert "waivers:" not in shown  # nothing considered, nothing to list


def test_a_large_suite_shows_a_compact_table_with_every_task_that_is_not_a_plain_pass() -> None:
    """10,000 tasks: the terminal shows every failing or waived task and passing ones up to
    the cap, then says how many it left out and where they all are."""
    from evalops.cli.gate import TASK_ROWS, _render_decision

    def task(i: int, state: str, effect: str, waiver: str | None = None) -> dict[str, Any]:
        return {
            "task_id": f"task-{i:05d}", "risk": "critical", "state": state, "effect": effect,
            "n": 5, "passedCount": 5 if effect == "pass" else 0, "passAtK": 1.0,
            "passHatK": 1.0, "waiver_id": waiver,
        }  # fmt: skip

    tasks = [task(i, "task_pass", "pass") for i in range(10_000)]
    failing = {7: "block", 4_242: "hold", 9_999: "hold"}
    for i, effect in failing.items():
        tasks[i] = task(i, "task_fail", effect)
    tasks[5_000] = task(5_000, "task_fail", "pass", waiver="WVR-1")  # waived: worth a row
    decision = {
        "decision": "block", "build": "b", "suite": "s", "gate_id": "GATE-9", "reasons": [],
        "tasks": tasks, "regression": None, "evaluated_at": "2026-11-30T12:00:00.000000Z",
        "waivers": {"applied": ["WVR-1"], "expired": [], "unused": [], "revoked": [],
                    "refused": []},
        "suite_digest": "sha256:" + "0" * 64,
    }  # fmt: skip
    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        _render_decision(decision)
    shown = out.getvalue()
    rows = [line for line in shown.splitlines() if line.startswith("│")]
    assert len(rows) == TASK_ROWS
    for i in [*failing, 5_000]:
        assert f"│ task-{i:05d} " in shown
    left = 10_000 - TASK_ROWS
    assert f"... and {left:,} more tasks ({left:,} task_pass)" in shown
    assert "evalops report audit --gate GATE-9" in shown


def test_the_gate_names_the_refused_waivers(demo: Path, cli: Cli) -> None:
    """A refused request never gets a WVR id: the gate names it by its audit event."""
    refused = cli(
        "waiver", "grant", "--task", "support-refund-in-order", "--suite", "regression/core",
        "--states", "task_fail", "--build", "build-125", "--owner", "o@example.com",
        "--reason", "try", "--expires", "7d", cwd=demo,
    )  # fmt: skip
    assert refused.code == 5, refused.stdout + refused.stderr

    result = cli("gate", "check", "--build", "build-125", "--suite", "regression/core", cwd=demo)
    assert result.code == 0, result.stdout + result.stderr
    gate_id = re.search(r"\((GATE-\d+)\)", result.stdout)
    assert gate_id is not None
    data = ok_json(cli, demo, "gate", "show", gate_id.group(1))
    [entry] = data["waivers"]["refused"]

    assert (
        f"refused 1: audit #{entry['seq']} support-refund-in-order "
        f"({', '.join(entry['rules'])})" in result.stdout
    )
    assert "applied 1: WVR-1" in result.stdout


def test_an_import_dry_run_rounds_the_source_reduction() -> None:
    from evalops.cli.imports_text import _reduction

    shown = _reduction({"reply_judge": {"mean": 0.8333333333333334, "pass_at_3": 1.0}})

    assert shown == "reply_judge: mean 0.8333, pass_at_3 1.00"


def test_the_markdown_report_says_1_paired_task(demo: Path) -> None:
    """The PR-comment report agrees its count with its noun too (GATE-1 has a baseline)."""
    from evalops.report.audit import render_audit
    from evalops.services.reports.audit import audit_document
    from evalops.store.engine import make_engine
    from tests.conftest import PINNED_NOW

    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        doc = audit_document(engine, "GATE-1", now=parse_timestamp(PINNED_NOW))
    finally:
        engine.dispose()
    assert doc["regression"]["pairedTaskCount"] == 3
    assert "3 paired tasks," in render_audit(doc, "md")

    doc["regression"] = {**doc["regression"], "pairedTaskCount": 1}

    assert "1 paired task," in render_audit(doc, "md")
