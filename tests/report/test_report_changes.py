"""The audit report's "changes since the baseline" section (docs/verify.md).

On the demo: GATE-1 decided build-124 against the baseline build-123; GATE-2 and GATE-3
decided build-125 without a baseline, so they compare with the suite's previous decision on
another build (GATE-1, never GATE-2, which is the same build). Expectations come from the
stored decisions themselves (each build's per-task blocks and the paired verdict's
discordant counts) and the flip rule in words, not from the report code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.integrity.test_report_xss import (
    PAYLOADS,
    assert_no_active_content,
    markdown_html,
    parse_fragment,
    parse_html,
)

BLOCK_KEYS = ("n", "passedCount", "passHatK")

# docs/cli.md: a decision without a baseline is compared with "the suite's previous decision
# on another build"; the terminal says which decision that is.
SINCE_GATE_1 = "changes since build-124 (GATE-1, the suite's previous decision on another build):"


def report(cli: Cli, demo: Path, gate_id: str, fmt: str) -> str:
    out = cli("report", "audit", "--gate", gate_id, "--format", fmt, cwd=demo)
    assert out.code == 0, out.stderr
    return out.stdout


def decision(cli: Cli, demo: Path, gate_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(report(cli, demo, gate_id, "json"))
    return doc


def expected_flip(base: dict[str, Any] | None, cand: dict[str, Any] | None) -> str:
    if base is None:
        return "new"
    if cand is None:
        return "missing"
    b, c = base["state"] == "task_pass", cand["state"] == "task_pass"
    return "regressed" if b and not c else "improved" if c and not b else "unchanged"


def test_changes_against_the_decisions_baseline(demo: Path, cli: Cli) -> None:
    doc = decision(cli, demo, "GATE-1")
    changes = doc["changes"]
    assert {"baseline_build", "tasks"} <= changes.keys()
    assert changes["baseline_build"] == "build-123"
    assert changes["source"] == "baseline"
    candidate = {t["task_id"]: t for t in doc["decision_document"]["tasks"] if t["n"]}
    for row in changes["tasks"]:
        assert set(row) == {"task_id", "baseline", "candidate", "flip"}
        assert row["candidate"] == {k: candidate[row["task_id"]][k] for k in BLOCK_KEYS}
        assert set(row["baseline"]) == set(BLOCK_KEYS)
    assert {r["task_id"] for r in changes["tasks"]} == set(candidate)
    # The regressed and improved flips are the paired verdict's discordant pairs.
    discordant = doc["decision_document"]["regression"]["discordant"]
    flips = [r["flip"] for r in changes["tasks"]]
    assert flips.count("regressed") == discordant["baselineOnlyPassed"] == 3
    assert flips.count("improved") == discordant["candidateOnlyPassed"]
    assert changes["paired"]["discordant"] == discordant
    # Three paired tasks: McNemar's best p-value is 2 * 0.5**3 = 0.25, never below 0.05.
    assert changes["alpha_note"] == (
        "with 3 paired tasks McNemar's smallest p-value is 0.25 > alpha 0.05"
    )


@pytest.mark.parametrize("gate_id", ["GATE-2", "GATE-3"])
def test_without_a_baseline_the_previous_decision_on_another_build(
    demo: Path, cli: Cli, gate_id: str
) -> None:
    doc = decision(cli, demo, gate_id)
    assert doc["decision_document"]["regression"] is None or (
        doc["decision_document"]["regression"].get("baseline") is None
    )
    changes = doc["changes"]
    assert changes["baseline_build"] == "build-124"
    assert changes["source"] == "previous_decision"
    assert changes["baseline_gate_id"] == "GATE-1"  # GATE-2 is the same build, skipped
    assert changes["paired"] is None and changes["alpha_note"] is None
    previous = {
        t["task_id"]: t for t in decision(cli, demo, "GATE-1")["decision_document"]["tasks"]
    }
    current = {t["task_id"]: t for t in doc["decision_document"]["tasks"]}
    rows = changes["tasks"]
    for row in rows:
        base, cand = previous.get(row["task_id"]), current.get(row["task_id"])
        assert row["flip"] == expected_flip(base, cand)
        assert row["baseline"] == {k: base[k] for k in BLOCK_KEYS} if base else None
        assert row["candidate"] == {k: cand[k] for k in BLOCK_KEYS} if cand else None
    regressed = [r for r in rows if r["flip"] == "regressed"]
    rest = [r for r in rows if r["flip"] != "regressed"]
    assert rows == regressed + rest
    assert [r["task_id"] for r in rest] == sorted(r["task_id"] for r in rest)
    assert changes["counts"]["improved"] == 2  # both critical tasks were fixed in build-125


def test_html_and_markdown_show_the_changes_and_the_alpha_sentence(demo: Path, cli: Cli) -> None:
    sentence = "with 3 paired tasks McNemar's smallest p-value is 0.25 > alpha 0.05"
    page = parse_html(report(cli, demo, "GATE-1", "html"))
    table = page.find(".//table[@class='changes']")
    assert table is not None
    cells = [["".join(td.itertext()) for td in tr.iter("td")] for tr in table.iter("tr")][1:]
    assert [c[1] for c in cells] == ["regressed"] * 3
    text = "".join(page.find(".//body").itertext())
    assert sentence in text and "3 passed only in the baseline" in text
    md = markdown_html(report(cli, demo, "GATE-1", "md"))
    assert "McNemar's smallest p-value is 0.25 &gt; alpha 0.05" in md
    later = "".join(parse_html(report(cli, demo, "GATE-3", "html")).find(".//body").itertext())
    # As the terminal says it (SINCE_GATE_1): the previous decision on another build, which
    # need not be the suite's previous decision.
    assert "the build of GATE-1, the suite's previous decision on another build" in later


def test_no_baseline_and_no_earlier_decision_says_so() -> None:
    from evalops.services.reports.changes import changes_since_baseline

    inputs = {"baseline": None, "tasks": [], "policy": {}}
    changes = changes_since_baseline({"regression": None}, inputs, None)
    assert changes["baseline_build"] is None and changes["tasks"] == []


@pytest.fixture(scope="module")
def gate1(demo_master: Path) -> dict[str, Any]:
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.reports.audit import audit_document
    from evalops.store.engine import make_engine

    engine = make_engine(f"sqlite:///{demo_master / '.evalops' / 'registry.db'}")
    try:
        return audit_document(engine, "GATE-1", now=parse_timestamp("2026-11-30T12:00:00Z"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_task_ids_in_the_changes_are_escaped(gate1: dict[str, Any], payload: str) -> None:
    from evalops.report.audit import html, markdown
    from evalops.report.text import visible

    doc = copy.deepcopy(gate1)
    doc["changes"]["tasks"][0]["task_id"] = payload
    doc["changes"]["baseline_build"] = payload
    tree = parse_html(html(doc))
    assert_no_active_content(tree)
    table = tree.find(".//table[@class='changes']")
    assert table is not None
    first = next(tr for tr in table.iter("tr") if tr.find("td") is not None)
    # The cell is the id as text (control characters shown as their pictures), not markup.
    assert "".join(first.find("td").itertext()) == visible(payload)
    plain = copy.deepcopy(gate1)
    plain["changes"]["tasks"][0]["task_id"] = "plain"
    plain["changes"]["baseline_build"] = "plain"
    bad, good = markdown(doc), markdown(plain)
    assert bad.count("\n") == good.count("\n"), "a task id added lines"
    fragment = parse_fragment(markdown_html(bad))
    assert_no_active_content(fragment)
    assert not fragment.findall(".//a")


def flip_lines(text: str) -> list[tuple[str, str]]:
    """(flip, task id) of each per-task line a command printed."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] in ("regressed", "improved", "new", "missing"):
            out.append((words[0], words[1].rstrip(":")))
    return out


def test_compare_prints_the_flips_regressed_first(demo: Path, cli: Cli) -> None:
    args = ("compare", "--baseline", "build-123", "--candidate", "build-124")
    args += ("--suite", "regression/core")
    data = json.loads(cli("--json", *args, cwd=demo).stdout)
    text = cli(*args, cwd=demo).stdout
    lines = flip_lines(text)
    flips = [f for f, _ in lines]
    # The regressed and improved lines are the discordant pairs, regressed first.
    assert flips.count("regressed") == data["discordant"]["baselineOnlyPassed"] > 0
    assert flips.count("improved") == data["discordant"]["candidateOnlyPassed"]
    assert flips == sorted(flips, key=lambda f: f != "regressed")
    unchanged = data["pairedTaskCount"] - len(lines)
    assert f"{unchanged} task{'s' if unchanged != 1 else ''} unchanged" in text
    assert "McNemar's smallest p-value is 0.25 > alpha 0.05" in text
    assert [r["task_id"] for r in data["changes"]["tasks"] if r["flip"] != "unchanged"] == [
        t for _, t in lines
    ]


def test_gate_check_prints_the_flips_after_the_decision(demo: Path, cli: Cli) -> None:
    # A new decision on build-125 without a baseline: compared with the suite's previous
    # decision on another build (GATE-1 on build-124), whose stored tasks it reads.
    out = cli("gate", "check", "--build", "build-125", "--suite", "regression/core", cwd=demo)
    assert out.code in (0, 3), out.stderr
    text = out.stdout
    assert SINCE_GATE_1 in text
    previous = {
        t["task_id"]: t for t in decision(cli, demo, "GATE-1")["decision_document"]["tasks"]
    }
    current = json.loads(
        cli(
            "--json",
            "gate",
            "check",
            "--build",
            "build-125",
            "--suite",
            "regression/core",
            "--dry-run",
            cwd=demo,
        ).stdout
    )
    expected = sorted(
        (
            (expected_flip(previous.get(t), c), t)
            for t, c in {t["task_id"]: t for t in current["tasks"]}.items()
        ),
        key=lambda ft: (ft[0] != "regressed", ft[1]),
    )
    assert flip_lines(text) == [ft for ft in expected if ft[0] != "unchanged"]
    # After the decision: its verdict line comes first.
    assert text.splitlines()[0].startswith(("PASS:", "HOLD:"))
    # A dry run (nothing stored) compares with the same previous decision.
    dry = cli(
        "gate", "check", "--build", "build-125", "--suite", "regression/core", "--dry-run",
        cwd=demo,
    ).stdout  # fmt: skip
    assert flip_lines(dry) == flip_lines(text)
    assert SINCE_GATE_1 in dry


def test_changes_read_the_stored_inputs_not_todays_trial_rows(demo: Path, cli: Cli) -> None:
    # Someone rewrites every trial row after the decisions: what each decision compared
    # (its baseline's trials, the previous decision's) was stored with it and stays.
    import sqlite3

    before = {g: decision(cli, demo, g)["changes"] for g in ("GATE-1", "GATE-3")}
    with sqlite3.connect(demo / ".evalops" / "registry.db") as db:
        assert db.execute("UPDATE trial SET classification = 'task_fail'").rowcount > 0
    assert {g: decision(cli, demo, g)["changes"] for g in ("GATE-1", "GATE-3")} == before


def test_report_audit_takes_the_decision_as_gate_show_does(demo: Path, cli: Cli) -> None:
    """`report audit GATE-3`, as `gate show GATE-3`, is `report audit --gate GATE-3`; a
    newcomer got "Missing option '--gate'". Neither, or two different ones, is exit 2."""
    as_option = report(cli, demo, "GATE-3", "md")
    named = cli("report", "audit", "GATE-3", "--format", "md", cwd=demo)
    assert named.code == 0, named.stderr
    assert named.stdout == as_option
    both = cli("report", "audit", "GATE-3", "--gate", "GATE-3", "--format", "md", cwd=demo)
    assert both.code == 0 and both.stdout == as_option
    neither = cli("--json", "report", "audit", "--format", "md", cwd=demo)
    assert neither.code == 2
    assert neither.json()["error"]["message"] == (
        "name the decision: evalops report audit GATE-3 (or --gate GATE-3); "
        "`evalops gate list` lists them"
    )
    two = cli("--json", "report", "audit", "GATE-1", "--gate", "GATE-3", cwd=demo)
    assert two.code == 2
    message = two.json()["error"]["message"]
    assert message == "two decisions named: GATE-1 and --gate GATE-3; name one"
