"""Audit reports and suite cards on the demo database: content, order, anchors, read-only."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import html5lib
import pytest
import rfc8785
from markdown_it import MarkdownIt

from tests.conftest import Cli
from tests.decide import listed_tasks
from tests.helpers import sqlite_fingerprint

ANCHOR = re.compile(r"evalops-audit-head:(\d+):(sha256:[0-9a-f]{64})")
COMMENT_LIMIT = 65_536


def db_of(demo: Path) -> Path:
    return demo / ".evalops" / "registry.db"


def query(demo: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db_of(demo))
    try:
        return list(con.execute(sql, args))
    finally:
        con.close()


def chain_head(demo: Path) -> dict[str, Any]:
    seq, hash_ = query(demo, "SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")[0]
    return {"seq": seq, "hash": hash_}


def strict_html(text: str) -> Any:
    """Parse as HTML5; any parse error fails the test."""
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)


def strict_fragment(text: str) -> Any:
    """Parse an HTML fragment (what a Markdown renderer produces); errors fail the test."""
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parseFragment(text)


def row_task_id(row: Any) -> str:
    """The task id in a task table row's first cell (in a span, or the cell's first text)."""
    cell = row.find("td")
    span = cell.find("span")
    # An id is a span of its own (class "id", with <wbr> where it may wrap): its whole text.
    return "".join((span if span is not None else cell).itertext()).strip().split("\n")[0]


def markdown_html(text: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


def render(cli: Cli, demo: Path, *args: str) -> str:
    result = cli(*args, "-o", "-", cwd=demo)
    assert result.code == 0, result.stderr
    return result.stdout


def test_reports_are_read_only(demo: Path, cli: Cli, tmp_path: Path) -> None:
    before = sqlite_fingerprint(db_of(demo))
    for fmt in ("html", "md", "json"):
        assert cli("report", "audit", "--gate", "GATE-1", "--format", fmt, cwd=demo).code == 0
    assert cli("report", "suite", "regression/core", "--format", "html", cwd=demo).code == 0
    for kind in ("junit", "otel", "summary", "attestation"):
        assert (
            cli("export", kind, "--gate", "GATE-2", "-o", str(tmp_path / kind), cwd=demo).code == 0
        )
    shown = cli(
        "gate",
        "show",
        "GATE-3",
        "--junit",
        str(tmp_path / "show.xml"),
        "--report",
        str(tmp_path / "show.html"),
        cwd=demo,
    )
    assert shown.code == 0, shown.stderr
    assert sqlite_fingerprint(db_of(demo)) == before
    assert (tmp_path / "show.xml").read_text(encoding="utf-8").startswith("<?xml")
    assert "<!DOCTYPE html>" in (tmp_path / "show.html").read_text(encoding="utf-8")


def test_json_report_is_the_stored_decision_plus_resolved_inputs(demo: Path, cli: Cli) -> None:
    doc = json.loads(render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "json"))
    (stored_result, result_digest, inputs_digest, audit_seq) = query(
        demo,
        "SELECT result, result_digest, inputs_digest, audit_seq FROM gate_decision "
        "WHERE gate_id = ?",
        "GATE-3",
    )[0]
    # Anyone can recompute the digests from the report alone (docs/digests.md).
    recomputed = "sha256:" + hashlib.sha256(rfc8785.dumps(doc["decision_document"])).hexdigest()
    assert recomputed == result_digest == doc["digests"]["result_digest"]
    assert doc["decision_document"] == json.loads(stored_result)
    inputs = "sha256:" + hashlib.sha256(rfc8785.dumps(doc["inputs"])).hexdigest()
    assert inputs == inputs_digest == doc["digests"]["inputs_digest"]
    assert doc["audit_head"] == chain_head(demo)
    event_hash = query(demo, "SELECT hash FROM audit_event WHERE seq = ?", audit_seq)[0][0]
    assert doc["decision_event"] == {"seq": audit_seq, "hash": event_hash}
    # Every eval case digest is the recipe over the pinned task and grader set.
    for case in doc["digests"]["eval_cases"]:
        expected = {
            "task_digest": case["task_digest"],
            "execution_digest": doc["digests"]["execution_digest"],
            "grader_set_digest": case["grader_set_digest"],
        }
        digest = "sha256:" + hashlib.sha256(rfc8785.dumps(expected)).hexdigest()
        assert case["eval_case_digest"] == digest
    # Every trial of the stored inputs is in the report, with its row's record digest.
    trials = {t["trial_id"]: t for t in doc["trials"]}
    listed = listed_tasks(demo / ".evalops" / "registry.db", doc["gate_id"])
    stored_ids = [t["trial_id"] for task in listed for t in task["trials"]]
    assert sorted(trials) == sorted(stored_ids)
    for trial_id in stored_ids:
        row_digest = query(demo, "SELECT record_digest FROM trial WHERE trial_id = ?", trial_id)
        assert trials[trial_id]["record_digest"] == row_digest[0][0]
    # The waiver that let the decision pass is resolved to its owner, reason and expiry.
    applied = doc["waivers"]["applied"]
    owner, reason, expires = query(
        demo, "SELECT owner, reason, expires_at FROM waiver WHERE waiver_id = 'WVR-1'"
    )[0]
    assert [w["waiver_id"] for w in applied] == ["WVR-1"]
    assert (applied[0]["owner"], applied[0]["reason"]) == (owner, reason)
    assert applied[0]["expires_at"].startswith(str(expires)[:19].replace(" ", "T"))
    # Git provenance: the commit of the demo's registry repository.
    commit = query(demo, "SELECT git_commit FROM sync_run ORDER BY id DESC LIMIT 1")[0][0]
    assert doc["provenance"]["in_force"]["git_commit"] == commit


def test_html_report_is_valid_self_contained_and_anchored(demo: Path, cli: Cli) -> None:
    text = render(cli, demo, "report", "audit", "--gate", "GATE-1", "--format", "html")
    tree = strict_html(text)
    assert not tree.findall(".//script")
    assert not tree.findall(".//link")
    assert not tree.findall(".//img") and not tree.findall(".//iframe")
    styles = tree.findall(".//style")
    assert len(styles) == 1
    csp = next(
        m.get("content")
        for m in tree.iter("meta")
        if (m.get("http-equiv") or "").lower() == "content-security-policy"
    )
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'none'"]
    assert "'unsafe-inline'" not in csp
    # The one stylesheet is allowed by its hash, and by nothing else.
    css_hash = base64.b64encode(hashlib.sha256(styles[0].text.encode("utf-8")).digest()).decode()
    assert directives["style-src"] == [f"'sha256-{css_hash}'"]
    assert not [e for e in tree.iter() if "style" in e.attrib]
    # The anchor: meta tag and visible token, equal to the chain head.
    head = chain_head(demo)
    meta = next(m for m in tree.iter("meta") if m.get("name") == "evalops-audit-head")
    assert meta.get("content") == f"{head['seq']}:{head['hash']}"
    visible = "".join(tree.find(".//body").itertext())
    assert f"evalops-audit-head:{head['seq']}:{head['hash']}" in visible
    assert "evalops gate replay GATE-1" in visible
    # The recompute line names the anchor itself (a pull-request comment has no file).
    assert f"evalops verify --anchor {head['seq']}:{head['hash']}" in visible


def test_html_report_says_first_what_was_decided_then_failing_tasks_first(
    demo: Path, cli: Cli
) -> None:
    doc = json.loads(render(cli, demo, "report", "audit", "--gate", "GATE-1", "--format", "json"))
    text = render(cli, demo, "report", "audit", "--gate", "GATE-1", "--format", "html")
    body = "".join(strict_html(text).find(".//body").itertext())
    # The decision and every reason come before the first section heading.
    first_section = body.index("Decision history")
    assert body.index("BLOCK") < first_section
    for reason in doc["reasons"]:
        assert body.index(reason) < first_section
    # Section order of the issue.
    order = [
        "Tasks",
        "Failure classes by grader layer",
        "Invalid trials, reruns and first results",
        "Waivers",
        "Calibration of model graders",
        "Paired regression verdict",
        "Efficiency (reported, never gated)",
        "Digests and provenance",
        "Audit chain anchor",
        "How to recompute",
    ]
    positions = [body.index(h) for h in order]
    assert positions == sorted(positions)
    # Blocked tasks, then held ones, then passing ones (collapsed).
    rank = {"block": 0, "hold": 1, "pass": 3}
    tasks = doc["tasks"]
    assert [rank[t["effect"]] for t in tasks] == sorted(rank[t["effect"]] for t in tasks)
    rows = [r for r in strict_html(text).iter("tr") if r.get("class", "").startswith("e-")]
    row_tasks = ["".join(r.find("td").find("span").itertext()) for r in rows]
    assert row_tasks == [t["task_id"] for t in tasks]
    # The passing tasks' details block (each failing row folds its rare columns into one too).
    found = [
        d
        for d in strict_html(text).iter("details")
        if "".join(d.find("summary").itertext()).startswith("Passing tasks")
    ]
    passing = [t["task_id"] for t in tasks if t["effect"] == "pass"]
    assert len(found) == (1 if passing else 0)  # an empty group is one line, not a block
    collapsed = [row_task_id(r) for d in found for r in d.iter("tr") if r.find("td") is not None]
    assert collapsed == passing


def test_a_waived_pass_says_which_failure_was_waived_by_whom_until_when(
    demo: Path, cli: Cli
) -> None:
    md = render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "md")
    assert "every member task passed with complete evidence" not in md
    assert len(md) <= COMMENT_LIMIT
    rendered = markdown_html(md)
    text = "".join(strict_fragment(rendered).itertext())
    owner, reason, expires = query(
        demo, "SELECT owner, reason, expires_at FROM waiver WHERE waiver_id = 'WVR-1'"
    )[0]
    waived_line = next(line for line in text.splitlines() if "waived by WVR-1" in line)
    assert "support-refund-policy-explanation" in waived_line
    assert owner in waived_line and reason in waived_line
    assert str(expires)[:10] in waived_line
    html = render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "html")
    body = "".join(strict_html(html).find(".//body").itertext())
    assert "Every member task passed with complete evidence" not in body
    assert "passed only by waiver" in body and "Waived by WVR-1" in body


def test_a_revocation_after_the_decision_is_shown_as_later_not_as_part_of_it(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WVR-1 let GATE-3 pass; it is revoked afterwards. The audit report of GATE-3 still
    shows the revocation (dated) beside the applied waiver, and says it came after the
    decision, in every format; a revocation the decision saw carries no such mark."""
    monkeypatch.setenv("EVALOPS_NOW", "2026-11-30T12:05:00Z")
    done = cli("waiver", "revoke", "WVR-1", "--reason", "fix slipped", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    later = "later, after this decision (which did not see it)"
    md = render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "md")
    [row] = [line for line in md.splitlines() if "`WVR-1`" in line and "applied" in line]
    assert f"revoked {later}, 2026-11-30T12:05:00" in row and "fix slipped" in row
    html = render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "html")
    assert later in "".join(strict_html(html).find(".//body").itertext())
    data = json.loads(render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "json"))
    [waiver] = [w for w in data["waivers"]["applied"] if w["waiver_id"] == "WVR-1"]
    assert waiver["revocation"]["after_decision"] is True
    # A decision made after the revocation saw it: no "later" there.
    checked = cli("gate", "check", "--build", "build-125", "--suite", "regression/core",
                  "--json", cwd=demo)  # fmt: skip
    gate_id = checked.json()["gate_id"]
    after = json.loads(render(cli, demo, "report", "audit", "--gate", gate_id, "--format", "json"))
    [seen] = [w for w in after["waivers"]["revoked"] if w["waiver_id"] == "WVR-1"]
    assert seen["revocation"]["after_decision"] is False


def test_a_clean_pass_says_so(demo: Path, cli: Cli) -> None:
    """Revoking the waiver makes build-125 hold; the waived decision GATE-3 still says what
    it was. A decision with no failure at all is the only one that says 'complete'."""
    from evalops.report.audit import markdown

    doc = json.loads(render(cli, demo, "report", "audit", "--gate", "GATE-3", "--format", "json"))
    for task in doc["tasks"]:
        task.update(outcome="pass", effect="pass", state="task_pass", waiver_id=None)
    doc["summary"].update(waived=0, block=0, hold=0, **{"pass": len(doc["tasks"])})
    doc["waivers"]["applied"] = []
    assert "every member task passed with complete evidence" in markdown(doc)


def test_markdown_report_is_a_pr_comment(demo: Path, cli: Cli) -> None:
    md = render(cli, demo, "report", "audit", "--gate", "GATE-1", "--format", "md")
    first = md.splitlines()[0]
    head = chain_head(demo)
    assert first == f"<!-- evalops-audit-head:{head['seq']}:{head['hash']} -->"
    assert md.splitlines()[1].startswith("## evalops gate: **BLOCK**")
    rendered = markdown_html(md)
    tree = strict_fragment(rendered)
    tables = tree.findall(".//table")
    assert tables, "the summary table renders as a table"
    header = [th.text for th in tables[0].iter("th")]
    assert header[:2] == ["decision", "tasks"]
    assert {d.tag for d in tree.iter()} >= {"details", "summary", "table"}


@pytest.fixture(scope="module")
def huge_document() -> dict[str, Any]:
    """The report document of a synthetic decision of 10,000 tasks (1.7 CPU s to build),
    once per module: the tests below only render it (a render reads, and gives the same
    text every time)."""
    from benchmarks.report_scale import synthetic_document

    return synthetic_document(10_000)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_markdown_of_a_huge_decision_is_cut_to_the_comment_limit(
    huge_document: dict[str, Any],
) -> None:
    from evalops.report.audit import COMMENT_LIMIT as LIMIT
    from evalops.report.audit import markdown

    md = markdown(huge_document)
    assert len(md) <= LIMIT == COMMENT_LIMIT
    assert "Truncated to fit a pull-request comment" in md
    assert md.startswith("<!-- evalops-audit-head:")
    # Whole rows only: every table row still has all its cells (six columns at most).
    rows = [line for line in md.splitlines() if line.startswith("| `task-")]
    assert rows and all(line.count(" | ") == 5 for line in rows)
    assert "more not shown (comment size limit)" in md
    strict_fragment(markdown_html(md))


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_html_of_a_huge_decision_stays_small_and_valid(huge_document: dict[str, Any]) -> None:
    from evalops.report.audit import html

    doc = huge_document
    text = html(doc)
    assert len(text.encode("utf-8")) < 5 * 1024 * 1024
    tree = strict_html(text)
    rows = [
        r
        for table in tree.iter("table")
        if "tasks" in table.get("class", "")
        for r in table.iter("tr")
        if r.find("td") is not None
    ]
    assert sorted(row_task_id(r) for r in rows) == sorted(t["task_id"] for t in doc["tasks"])
    body = "".join(tree.find(".//body").itertext())
    assert "Passing tasks (" in body


def test_counts_in_the_report_agree_with_their_noun() -> None:
    """One member task and one trial read in the singular, as everywhere people read counts
    (evalops/domain/humanize.py `plural`)."""
    from benchmarks.report_scale import synthetic_document
    from evalops.report.audit import html

    doc = synthetic_document(1)
    doc["trials"] = doc["trials"][:1]
    doc["summary"] = {**doc["summary"], "tasks": 1, "trials": 1}
    summary = next(
        "".join(p.itertext())
        for p in strict_html(html(doc)).iter("p")
        if "member task" in "".join(p.itertext())
    )
    assert summary.startswith("1 member task: ") and summary.endswith("· 1 trial"), summary
    notable = next(
        "".join(p.itertext())
        for p in strict_html(html(doc)).iter("p")
        if "did not pass, were rerun" in "".join(p.itertext())
    )
    assert " of 1 trial did not pass" in notable, notable


def test_a_task_without_first_results_says_so_in_words() -> None:
    """No original trial: the details show the report's mark for an absent value, never an
    empty field before the next semicolon."""
    from benchmarks.report_scale import synthetic_document
    from evalops.report.audit import html, markdown

    doc = synthetic_document(1)
    doc["tasks"][0]["first_result"] = ""
    details = [line for line in markdown(doc).splitlines() if "; first results " in line]
    assert len(details) == 1 and "first results –; invalid" in details[0], details
    assert "first results ;" not in markdown(doc)
    # A task row's last cell: risk · meanScore · first results · invalid · reruns.
    assert "critical · 1.000 · – · 0 · 0" in html(doc)


def test_report_format_follows_the_suffix_and_errors_are_usage_errors(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "nested" / "r.json"
    written = cli("--json", "report", "audit", "--gate", "GATE-2", "-o", str(out), cwd=demo)
    assert written.code == 0
    assert written.json()["path"] == str(out) and written.json()["format"] == "json"
    assert json.loads(out.read_text(encoding="utf-8"))["decision"] == "hold"
    missing = cli("--json", "report", "audit", "--gate", "GATE-99", cwd=demo)
    assert missing.code == 2
    assert "GATE-99" in missing.json()["error"]["message"]
    bad = cli("report", "audit", "--gate", "GATE-1", "--format", "pdf", cwd=demo)
    assert bad.code == 2


@pytest.mark.parametrize("command", [("audit", "--gate", "GATE-2"), ("suite", "regression/core")])
@pytest.mark.parametrize("name", ["x.pdf", "report"])
def test_a_suffix_that_names_no_format_is_an_input_error(
    demo: Path, cli: Cli, command: tuple[str, ...], name: str
) -> None:
    """The format follows the -o suffix (docs/cli.md): a suffix naming none is a bad option
    (exit 2, nothing written) that says which suffixes work and that --format exists."""
    result = cli("report", *command, "-o", name, cwd=demo)
    assert result.code == 2, result.stderr
    assert not (demo / name).exists(), "nothing written"
    message = result.stderr
    assert all(suffix in message for suffix in (".html", ".md", ".json")), message
    assert "--format" in message and "wrote" not in message
    chosen = cli("report", *command, "-o", name, "--format", "md", cwd=demo)
    assert chosen.code == 0 and (demo / name).read_text(encoding="utf-8").strip()


def test_gate_check_writes_reports_with_the_exporters(demo: Path, cli: Cli, tmp_path: Path) -> None:
    junit, report = tmp_path / "check.xml", tmp_path / "check.md"
    result = cli(
        "gate",
        "check",
        "--build",
        "build-125",
        "--suite",
        "regression/core",
        "--junit",
        str(junit),
        "--report",
        str(report),
        cwd=demo,
    )
    assert result.code == 0, result.stderr
    assert 'name="gate-decision"' in junit.read_text(encoding="utf-8")
    text = report.read_text(encoding="utf-8")
    assert text.splitlines()[1].startswith("## evalops gate: **PASS**")
    assert "(`GATE-4`)" in text


def test_suite_card(demo: Path, cli: Cli) -> None:
    card = json.loads(render(cli, demo, "report", "suite", "regression/core", "--format", "json"))
    members = query(
        demo,
        "SELECT DISTINCT task_id FROM suite_membership WHERE suite_id = 'regression/core'",
    )
    assert sorted(m["task_id"] for m in card["members"]) == sorted(r[0] for r in members)
    assert card["audit_head"] == chain_head(demo)
    # pass^k per task per build, straight from the stored decisions (latest per build).
    assert [b["build"] for b in card["builds"]] == ["build-124", "build-125"]
    for series in card["pass_hat_k"]:
        for point in series["points"]:
            stored = json.loads(
                query(demo, "SELECT result FROM gate_decision WHERE gate_id = ?", point["gate_id"])[
                    0
                ][0]
            )
            task = next(t for t in stored["tasks"] if t["task_id"] == series["task_id"])
            assert point["passHatK"] == task["passHatK"]
    # Flaky: pass@k high and pass^k low in some shown build (the rule, computed here).
    expected = sorted(
        s["task_id"]
        for s in card["pass_hat_k"]
        if any(
            p["passAtK"] is not None
            and p["passAtK"] >= 0.8
            and p["passHatK"] is not None
            and p["passHatK"] <= 0.5
            # A miss that was a hard-constraint failure is not noise (listed apart).
            and p["state"] != "hard_constraint_fail"
            for p in s["points"]
        )
    )
    assert expected, "the demo has a flaky task"
    assert sorted(f["task_id"] for f in card["flaky"]) == expected
    html = render(cli, demo, "report", "suite", "regression/core", "--format", "html")
    tree = strict_html(html)
    body = "".join(tree.find(".//body").itertext())
    assert "Flaky tasks" in body and all(t in body for t in expected)
    assert tree.findall(".//svg") or tree.findall(".//{http://www.w3.org/2000/svg}svg")
    md = render(cli, demo, "report", "suite", "regression/core", "--format", "md")
    assert md.startswith("<!-- evalops-audit-head:")
    strict_fragment(markdown_html(md))


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_every_anchor_is_the_same_head(demo: Path, cli: Cli, gate_id: str) -> None:
    head = chain_head(demo)
    token = f"{head['seq']}:{head['hash']}"
    for fmt in ("html", "md"):
        text = render(cli, demo, "report", "audit", "--gate", gate_id, "--format", fmt)
        # As a reader copies it: <wbr> marks where the shown token may wrap, nothing more.
        text = text.replace("<wbr>", "")
        assert {f"{s}:{h}" for s, h in ANCHOR.findall(text)} == {token}


def test_an_unstored_decision_renders_as_not_stored(demo: Path) -> None:
    """A dry run's decision (evaluated, never stored) can be rendered, and says so."""
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.report.audit import html, markdown
    from evalops.services.gate.check import dry_run_check
    from evalops.services.reports.audit import unstored_document
    from evalops.store.engine import make_engine

    before = sqlite_fingerprint(db_of(demo))
    now = parse_timestamp("2026-11-30T12:00:00Z")
    engine = make_engine(f"sqlite:///{db_of(demo)}")
    try:
        result, inputs = dry_run_check(
            engine, build="build-124", suite_id="regression/core", at=None, now=now
        )
        doc = unstored_document(engine, result=result, inputs=inputs, now=now)
    finally:
        engine.dispose()
    assert doc["stored"] is False and doc["decision_event"] is None
    assert doc["audit_head"] == chain_head(demo)
    assert doc["decision"] == "block"
    body = "".join(strict_html(html(doc)).find(".//body").itertext())
    assert "NOT STORED (dry run)" in body
    assert "**Not stored** (dry run)" in markdown(doc)
    assert sqlite_fingerprint(db_of(demo)) == before
