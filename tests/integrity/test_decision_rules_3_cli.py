"""Decision rules, part 3, as a release manager meets them, on SQLite and PostgreSQL.

Every test starts from the finished `evalops demo` on the real clock (build-125 passes with
WVR-1, a two-week `task_fail` waiver for the non-critical support-refund-policy-explanation)
and does what a user would: tighten the gate policy after the grant, empty its
`allowed_layers`, retire with a blank approver, promote an open incident. Each ends in what
the rules demand and in a registry that still verifies.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cli, pg_holding
from tests.helpers import commit_all, copy_rows, real_clock_demo, write_yaml

SUITE = "regression/core"
WAIVED_TASK = "support-refund-policy-explanation"
POLICY_FILE = Path("registry") / "policies" / "gate-policy.yaml"
DB = Path(".evalops") / "registry.db"
ENGINES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    base = real_clock_demo(tmp_path_factory)
    return Path(shutil.copytree(base, tmp_path / "demo", symlinks=True))


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, demo: Path, cli: Cli) -> list[str]:
    """`--db` arguments: none for the demo's SQLite file, or a PostgreSQL database holding
    a copy of its rows."""
    if request.param == "sqlite":
        return []
    pg_url: str = request.getfixturevalue("pg_url")
    pg_holding(pg_url, demo)
    return ["--db", pg_url]


def change_policy(demo: Path, **waiver_rules: Any) -> None:
    """Edit the registered gate policy's `waivers` block (None removes a key), commit, sync."""
    path = demo / POLICY_FILE
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in waiver_rules.items():
        if value is None:
            doc["waivers"].pop(key, None)
        else:
            doc["waivers"][key] = value
    write_yaml(path, doc)
    commit_all(demo, "tighten the gate policy")


def sync_and_check(cli: Cli, demo: Path, db: list[str]) -> tuple[int, dict[str, Any], str]:
    synced = cli(*db, "sync", cwd=demo)
    assert synced.code == 0, synced.stdout + synced.stderr
    args = ("gate", "check", "--build", "build-125", "--suite", SUITE)
    human = cli(*db, *args, cwd=demo)
    data = cli(*db, "gate", "show", human_gate_id(human.stdout), "--json", cwd=demo)
    assert data.code == 0, data.stderr
    return human.code, json.loads(data.stdout), human.stdout


def human_gate_id(stdout: str) -> str:
    """`HOLD: build-125 on regression/core (GATE-4)` -> GATE-4 (the first id printed)."""
    found = re.search(r"\bGATE-\d+\b", stdout)
    assert found is not None, stdout
    return found.group(0)


def verify_ok(cli: Cli, demo: Path, db: list[str]) -> None:
    result = cli(*db, "verify", cwd=demo)
    assert result.code == 0, result.stdout + result.stderr


def policy_refusal(decision: dict[str, Any]) -> dict[str, Any]:
    found = [r for r in decision["waivers"]["refused"] if r.get("waiver_id") == "WVR-1"]
    assert len(found) == 1, decision["waivers"]
    return found[0]


# ------------------------------------------- item 2: a tightened policy refuses the waiver


TIGHTENINGS = [
    pytest.param(
        {
            "forbidden_states": [
                "hard_constraint_fail",
                "ambiguous_external_effect",
                "missing_required_evidence",
                "grader_invalid",
                "infrastructure_invalid",
                "task_fail",
            ]
        },
        "forbidden_state",
        id="state-forbidden",
    ),
    pytest.param({"allowed_layers": ["quality_signal"]}, "layer_not_allowed", id="layer-removed"),
    pytest.param({"max_duration_days": 7}, "expires_at_too_far", id="max-duration-shortened"),
]


@pytest.mark.parametrize(("tightening", "rule"), TIGHTENINGS)
def test_a_policy_tightened_after_the_grant_refuses_the_waiver_at_the_next_decision(
    demo: Path, db: list[str], cli: Cli, tightening: dict[str, Any], rule: str
) -> None:
    """Evaluator 2 kept applying WVR-1 (granted under the looser policy) and passed
    build-125; the policy in force now forbids it: hold, WVR-1 listed as refused."""
    change_policy(demo, **tightening)
    code, decision, stdout = sync_and_check(cli, demo, db)
    assert code == 3, stdout
    assert decision["decision"] == "hold"
    task = next(t for t in decision["tasks"] if t["task_id"] == WAIVED_TASK)
    assert task["effect"] == "hold" and task["waiver_id"] is None
    assert decision["waivers"]["applied"] == []
    refusal = policy_refusal(decision)
    assert rule in refusal["rules"]
    assert refusal["reason"].startswith("refused by the policy in force")
    assert "WVR-1" in stdout and "refused by the policy in force" in stdout
    verify_ok(cli, demo, db)


# --------------------------------------------- item 4: allowed_layers empty waives nothing


@pytest.mark.parametrize("layers", [[], None], ids=["empty", "omitted"])
def test_an_empty_or_omitted_allowed_layers_refuses_every_waiver(
    demo: Path, db: list[str], cli: Cli, layers: list[str] | None
) -> None:
    """A policy that lists no waivable layer waives nothing: the stored waiver is refused
    at the next decision, and a new grant is refused (exit 5) with nothing stored."""
    change_policy(demo, allowed_layers=layers)
    code, decision, _ = sync_and_check(cli, demo, db)
    assert code == 3 and decision["decision"] == "hold"
    assert "layer_not_allowed" in policy_refusal(decision)["rules"]

    from datetime import UTC, datetime, timedelta

    expires = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = cli(*db, "waiver", "list", "--all", "--json", cwd=demo).json()
    grant = cli(
        *db,
        "waiver",
        "grant",
        "--task",
        WAIVED_TASK,
        "--suite",
        SUITE,
        "--states",
        "task_fail",
        "--build",
        "build-125",
        "--owner",
        "support-lead@example.com",
        "--reason",
        "again",
        "--expires",
        expires,
        "--json",
        cwd=demo,
    )
    assert grant.code == 5, grant.stdout + grant.stderr
    assert "allowed_layers" in grant.stdout + grant.stderr
    assert cli(*db, "waiver", "list", "--all", "--json", cwd=demo).json() == before
    verify_ok(cli, demo, db)


# ------------------------------------ item 7: a hard-failed trial never shows a passing score

REFUND_TASK = "support-refund-in-order"
GUARD = "refund-effect-guard"


def hard_failed_refund(demo: Path) -> Path:
    """A sixth build-125 trial of the refund task: the effect guard saw the refund committed
    twice (hard_constraint_fail) while the outcome grader still scored the reply 1.0."""
    source = demo / "registry" / "trials" / "fix-b125.jsonl"
    for line in source.read_text(encoding="utf-8").splitlines():
        record: dict[str, Any] = json.loads(line)
        if record["task_id"] == REFUND_TASK and not (record.get("rerun") or {}).get(
            "parent_trial_id"
        ):
            break
    record["trial_id"], record["trial_index"] = "refund-twice", 5
    record.pop("primary_classification", None)
    results = [r for r in record["grader_results"] if r["grader_id"] != GUARD]
    record["grader_results"] = [
        *results,
        {"grader_id": GUARD, "grader_version": 2, "state": "hard_constraint_fail"},
    ]
    path = demo / ".evalops" / "refund-twice.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def test_a_trial_that_refunded_twice_shows_score_zero_and_lowers_its_task_score(
    demo: Path, cli: Cli
) -> None:
    """`trials list`, the gate JSON and the audit report show the hard-failed trial's gating
    score (0), not its grader's 1.0; the task's score is the mean gating score (5 of 6
    trials at 1.0), and the RFC's meanScore (1.0) stays, labelled as such."""
    assert cli("trials", "ingest", hard_failed_refund(demo), cwd=demo).code == 0
    trials = ("trials", "list", "--task", REFUND_TASK, "--build", "build-125")
    listed = cli(*trials, "--json", cwd=demo)
    assert listed.code == 0, listed.stderr
    row = next(t for t in listed.json() if t["trial_id"] == "refund-twice")
    assert (row["classification"], row["score"], row["gating_score"]) == (
        "hard_constraint_fail",
        1.0,
        0.0,
    )
    human = cli(*trials, cwd=demo)
    line = next(li for li in human.stdout.splitlines() if "refund-twice " in li)
    assert "0.00" in line and "1.00" not in line

    checked = cli("gate", "check", "--build", "build-125", "--suite", SUITE, "--json", cwd=demo)
    assert checked.code == 4, checked.stderr
    decision = checked.json()
    task = next(t for t in decision["tasks"] if t["task_id"] == REFUND_TASK)
    assert task["meanScore"] == 1.0
    assert task["gatingScore"] == pytest.approx(5 / 6)

    report = demo / "audit.md"
    made = cli(
        "report", "audit", "--gate", decision["gate_id"], "--format", "md", "-o", report, cwd=demo
    )
    assert made.code == 0, made.stderr
    text = report.read_text(encoding="utf-8")
    # The task table shows the gating score; meanScore is among the columns in details.
    header = next(li for li in text.splitlines() if li.startswith("| task | effect |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert "score" in cells and "mean" not in cells
    refund_row = next(li for li in text.splitlines() if li.startswith(f"| `{REFUND_TASK}`"))
    values = [c.strip() for c in refund_row.strip("|").split("|")]
    assert values[cells.index("score")] == "0.833"
    more = next(li for li in text.splitlines() if li.startswith(f"- `{REFUND_TASK}`: risk"))
    assert "; meanScore 1.000;" in more
    verify_ok(cli, demo, [])


# ------------------------------------------------------ item 5: the pass class is calibrated

JUDGE = "reply-quality"


def labels_without_passing_holdout(demo: Path) -> Path:
    """The example labels, with every holdout item whose humans say pass (or disagree)
    left out: 54 agreed task_fail items remain (enough holdout, perfect task_fail bounds,
    human agreement defined by the calibration split), so nobody ever checked the judge's
    task_pass verdicts on held-out data."""
    source = demo / "registry" / "calibration" / "reply-quality.jsonl"
    kept = []
    for line in source.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        humans = {h["label"] for h in item["human_labels"]}
        agreed_fail = humans == {"task_fail"} and item["model_label"] == "task_fail"
        if item["split"] == "calibration" or agreed_fail:
            kept.append(line)
    path = demo / ".evalops" / "no-passing-holdout.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def test_a_judge_whose_pass_verdicts_were_never_checked_is_failing(
    demo: Path, db: list[str], cli: Cli
) -> None:
    recorded = cli(
        *db, "calibration", "record", JUDGE, "--labels", labels_without_passing_holdout(demo),
        cwd=demo,
    )  # fmt: skip
    assert recorded.code == 0, recorded.stdout + recorded.stderr
    status = cli(*db, "calibration", "status", "--json", cwd=demo)
    assert status.code == 0, status.stderr
    judge = next(g for g in status.json() if g["grader_id"] == JUDGE)
    assert judge["state"] == "failing"
    assert any("task_pass" in r and "pass class" in r for r in judge["reasons"]), judge
    verify_ok(cli, demo, db)


# ------------------------------------------------ item 6: free text needs a visible character

BLANKS = ["   ", "\u2003", "\u200b", "\u2028", "\u3164\u200d"]


def members(cli: Cli, demo: Path, db: list[str]) -> list[str]:
    shown = cli(*db, "suite", "show", SUITE, "--all", "--json", cwd=demo)
    assert shown.code == 0, shown.stderr
    return sorted(m["task_id"] for m in shown.json()["members"])


def test_a_blank_approver_approves_no_retirement(demo: Path, db: list[str], cli: Cli) -> None:
    """Spaces, an em space, a zero-width space, a line separator, a Hangul filler: each
    looks like nobody on screen, so none is a risk-owner approval."""
    before = members(cli, demo, db)
    for blank in BLANKS:
        refused = cli(
            *db, "retire", WAIVED_TASK, "--from", SUITE, "--reason", "obsolete",
            "--approved-by", blank, "--json", cwd=demo,
        )  # fmt: skip
        assert refused.code == 5, (blank, refused.stdout + refused.stderr)
        unmet = [r for r in refused.json()["requirements"] if not r["met"]]
        assert [r["name"] for r in unmet] == ["risk_owner_approval"], (blank, unmet)
    assert members(cli, demo, db) == before
    verify_ok(cli, demo, db)


INVARIANT_TASK = "article-source-records-complete"


def test_an_invariant_of_one_em_space_is_no_invariant(demo: Path, db: list[str], cli: Cli) -> None:
    path = demo / "registry" / "tasks" / f"{INVARIANT_TASK}.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["meta"]["invariant"] = "\u2003"
    doc["revision"] = int(doc["revision"]) + 1
    write_yaml(path, doc)
    commit_all(demo, "an invariant nobody can read")
    assert cli(*db, "sync", cwd=demo).code == 0
    refused = cli(*db, "promote", INVARIANT_TASK, "--to", SUITE, "--json", cwd=demo)
    assert refused.code == 5, refused.stdout + refused.stderr
    unmet = [r["name"] for r in refused.json()["requirements"] if not r["met"]]
    assert unmet == ["confirmed_failure_or_invariant"]
    assert INVARIANT_TASK not in members(cli, demo, db)


# ------------------------------------- item 8: an incident is promoted only once confirmed


def open_incident(cli: Cli, demo: Path, db: list[str]) -> str:
    opened = cli(
        *db, "incident", "open", "--title", "a source record went missing in production",
        "--severity", "medium", "--observed-at", "2026-11-20T10:00:00Z",
        "--trace-uri", "trace://prod/articles/77", "--json", cwd=demo,
    )  # fmt: skip
    assert opened.code == 0, opened.stdout + opened.stderr
    incident_id: str = opened.json()["incident_id"]
    linked = cli(*db, "incident", "link", incident_id, "--task", INVARIANT_TASK, cwd=demo)
    assert linked.code == 0, linked.stderr
    return incident_id


def incident_state(cli: Cli, demo: Path, db: list[str], incident_id: str) -> str:
    shown = cli(*db, "incident", "show", incident_id, "--json", cwd=demo)
    assert shown.code == 0, shown.stderr
    state: str = shown.json()["state"]
    return state


def test_an_open_incident_is_not_promoted_on_its_tasks_invariant(
    demo: Path, db: list[str], cli: Cli
) -> None:
    """The task has a meta.invariant, so it may enter the suite by its own id; the open
    incident linked to it may not ride on that: refused (exit 5) with the fix, the incident
    stays open, nothing ever calls it confirmed, and it can still be confirmed later."""
    incident_id = open_incident(cli, demo, db)
    refused = cli(*db, "promote", incident_id, "--to", SUITE, cwd=demo)
    assert refused.code == 5, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert f"evalops incident confirm {incident_id}" in said
    assert f"evalops promote {INVARIANT_TASK} --to {SUITE}" in said
    assert INVARIANT_TASK not in members(cli, demo, db)
    assert incident_state(cli, demo, db, incident_id) == "open"

    by_task = cli(*db, "promote", INVARIANT_TASK, "--to", SUITE, cwd=demo)
    assert by_task.code == 0, by_task.stdout + by_task.stderr
    assert INVARIANT_TASK in members(cli, demo, db)
    assert incident_state(cli, demo, db, incident_id) == "open"
    again = cli(*db, "promote", INVARIANT_TASK, "--to", SUITE, "--dry-run", cwd=demo)
    for output in (by_task, again):
        assert f"confirmed incident {incident_id}" not in output.stdout + output.stderr

    confirmed = cli(*db, "incident", "confirm", incident_id, cwd=demo)
    assert confirmed.code == 0, confirmed.stdout + confirmed.stderr
    # Linked to a task that reproduces it, a confirmed incident is `reproduced`.
    assert incident_state(cli, demo, db, incident_id) == "reproduced"
    now_promotable = cli(*db, "promote", incident_id, "--to", SUITE, "--dry-run", cwd=demo)
    assert now_promotable.code == 0, now_promotable.stdout + now_promotable.stderr
    verify_ok(cli, demo, db)


# ------------------------------------ decisions made by evaluator 2 replay under evaluator 2

EVALUATOR_2_DB = Path(__file__).parents[1] / "fixtures" / "registry-evaluator2-demo.db"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_database_of_evaluator_2_decisions_replays_and_verifies(
    engine: str, tmp_path: Path, cli: Cli, request: pytest.FixtureRequest
) -> None:
    """The demo database made by the previous release: today's evalops replays each of its
    decisions with the frozen evaluator 2 (no `gatingScore` appears), and `verify` rebuilds
    their inputs under evaluator 2's rules (the old calibration rule included)."""
    (tmp_path / ".evalops").mkdir()
    db_file = tmp_path / DB
    shutil.copyfile(EVALUATOR_2_DB, db_file)
    db: list[str] = []
    if engine == "postgresql":
        pg_url: str = request.getfixturevalue("pg_url")
        assert cli("--db", pg_url, "init", cwd=tmp_path).code == 0
        # Rows move between databases of one schema: the old file is upgraded first.
        assert cli("db", "upgrade", cwd=tmp_path).code == 0
        copy_rows(f"sqlite:///{db_file}", pg_url)
        db = ["--db", pg_url]
    assert cli(*db, "db", "upgrade", cwd=tmp_path).code == 0
    for gate_id in ("GATE-1", "GATE-2", "GATE-3"):
        replayed = cli(*db, "gate", "replay", gate_id, "--json", cwd=tmp_path)
        assert replayed.code == 0, replayed.stdout + replayed.stderr
        assert replayed.json()["identical"] is True
        shown = cli(*db, "gate", "show", gate_id, "--json", cwd=tmp_path).json()
        assert all("gatingScore" not in t for t in shown["tasks"]), gate_id
    verify_ok(cli, tmp_path, db)
