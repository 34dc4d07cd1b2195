"""The drill-down of every failing trial in the audit report (docs/verify.md).

The demo's GATE-1 has a hard-constraint failure (a refund committed twice, rerun without
permission) and a trial with an unmatched trajectory and a fixture miss. On a copy of the
demo, trials of build-125 are added for the other kinds: a trajectory with an out-of-order
call and a forbidden tool, an infrastructure error with its rerun, a blocking model grader
that abstained (awaiting review), and an ambiguous effect reconciled before the decision.
Expectations come from the records written here and the rules in docs/classification.md,
never from the report code.
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.specs import ExpectedCall, TrajectoryExpectation
from evalops.domain.trajectory import ObservedCall, grade
from tests.conftest import PINNED_NOW, Cli
from tests.integrity.test_report_xss import OFFSETS
from tests.integrity.test_report_xss import (
    test_html_never_carries_injected_markup as html_injection_checks,
)
from tests.integrity.test_report_xss import (
    test_markdown_never_carries_injected_markup as markdown_injection_checks,
)

TASK = "support-refund-in-order"
INSPECT_LOCATION = "eval-Drill9#A-1/2"


def report(cli: Cli, where: Path, gate_id: str, fmt: str) -> str:
    out = cli("report", "audit", "--gate", gate_id, "--format", fmt, cwd=where)
    assert out.code == 0, out.stderr
    return out.stdout


def drills(cli: Cli, where: Path, gate_id: str) -> dict[str, dict[str, Any]]:
    doc = json.loads(report(cli, where, gate_id, "json"))
    return {f["trial_id"]: f for f in doc["failing_trials"]}


def stored_record(demo: Path, trial_id: str) -> dict[str, Any]:
    con = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        (text,) = con.execute("SELECT record FROM trial WHERE trial_id = ?", (trial_id,)).fetchone()
    finally:
        con.close()
    record: dict[str, Any] = json.loads(text)
    return record


# --- the per-call states, from the trajectory rules --------------------------------------


def expectation(mode: str) -> TrajectoryExpectation:
    return TrajectoryExpectation(
        match=mode,
        calls=[ExpectedCall(tool="a"), ExpectedCall(tool="b"), ExpectedCall(tool="c")],
        forbidden=["x"],
    )


def calls(*tools: str) -> list[ObservedCall]:
    return [ObservedCall(t, {}) for t in tools]


@pytest.mark.parametrize(
    ("mode", "observed", "states", "forbidden"),
    [
        # b is made before a: a distinct call matches it, not after a.
        ("in-order", ("b", "a", "c"), ("matched", "out_of_order", "matched"), ()),
        ("in-order", ("a", "c", "x", "x"), ("matched", "missing", "matched"), ("x",)),
        # exact: position by position.
        ("exact", ("a", "c", "b"), ("matched", "out_of_order", "out_of_order"), ()),
        ("exact", ("a", "b"), ("matched", "matched", "missing"), ()),
        # any-order has no order to miss.
        ("any-order", ("c", "b", "x"), ("missing", "matched", "matched"), ("x",)),
    ],
)
def test_each_expected_call_is_matched_out_of_order_or_missing(
    mode: str, observed: tuple[str, ...], states: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    result = grade(expectation(mode), calls(*observed))
    assert result.calls == tuple(zip("abc", states, strict=True))
    assert result.forbidden_called == forbidden
    stored = result.stored()
    pairs = zip("abc", states, strict=True)
    assert stored["expected"] == [{"tool": t, "state": s} for t, s in pairs]
    assert stored["forbiddenCalled"] == list(forbidden)
    assert not result.matched


# --- the demo's own failing trials ------------------------------------------------------


def test_hard_constraint_failure_with_a_rerun_not_permitted(demo: Path, cli: Cli) -> None:
    trial_id = "trial-b124-support-refund-in-order-2"
    record = stored_record(demo, trial_id)
    f = drills(cli, demo, "GATE-1")[trial_id]
    assert f["class"] == "hard_constraint_fail"
    verdicts = {g["grader_id"]: g["state"] for g in f["graders"]}
    assert verdicts == {r["grader_id"]: r["state"] for r in record["grader_results"]}
    guard = next(g for g in f["graders"] if g["grader_id"] == "refund-effect-guard")
    assert guard["layer"] == "hard_constraint" and guard["blocking"] is True
    committed = [e for e in record["external_effects"] if e["status"] == "committed"]
    assert [(e["effect_key"], e["status"]) for e in f["effects"]] == [
        (e["effect_key"], e["status"]) for e in record["external_effects"]
    ]
    assert len(committed) == 2  # the built-in "committed twice" hard failure
    # A confirmed hard failure may not be rerun away (max_attempts_by_class has no entry).
    assert [(r["trial_id"], r["permitted"]) for r in f["reruns"]] == [
        (f"{trial_id}-rerun-1", False)
    ]
    usage = record["usage"]
    assert f["usage"]["input_tokens"] == usage["input_tokens"]
    assert f["usage"]["output_tokens"] == usage["output_tokens"]
    assert f["runtime_status"] == record["runtime"]["status"]
    assert f["trace"]["uri"] == record["trace_uri"]
    trace = f["trace"]
    assert (trace["link"], trace["open_with"], trace["source"]) == (False, None, None)


def test_unmatched_trajectory_and_fixture_miss(demo: Path, cli: Cli) -> None:
    trial_id = "trial-b124-support-refund-policy-explanation-2"
    record = stored_record(demo, trial_id)
    f = drills(cli, demo, "GATE-1")[trial_id]
    assert f["class"] == "task_fail"
    assert f["fixture_misses"] == record["fixture_misses"] == 1
    trajectory = f["trajectory"]
    assert trajectory["matched"] is False and trajectory["per_call"] is True
    assert trajectory["expected"] == [
        {"tool": "crm:lookup-order", "matched": False, "state": "missing"}
    ]
    assert trajectory["forbidden_called"] == []
    md = report(cli, demo, "GATE-1", "md")
    assert "`crm:lookup-order` missing" in md
    html = report(cli, demo, "GATE-1", "html")
    # The tool name is an id: it may wrap only after its separator (<wbr>).
    assert (
        '<li class="c-missing"><span class="mono"><span class="id">crm:<wbr>lookup-<wbr>order'
        "</span></span>: missing</li>"
    ) in html


# --- the other kinds, added to a copy of the demo ---------------------------------------


def _b125_template(demo: Path) -> dict[str, Any]:
    record = stored_record(demo, "trial-b125-support-refund-in-order-0")
    record.pop("primary_classification", None)
    return record


def _trial(base: dict[str, Any], name: str, index: int, **changes: Any) -> dict[str, Any]:
    record = copy.deepcopy(base)
    record.update(
        trial_id=f"drill-{name}",
        attempt_id=f"attempt-drill-{name}",
        run_id="run-drill",
        trial_index=index,
        trace_uri=f"trace://run-drill/{name}",
        rerun={"parent_trial_id": None, "reason": None},
        tool_calls=[
            {"agent_id": "support", "args": {"orderId": "A-1"}, "tool": "crm:lookup-order"},
            {"agent_id": "support", "args": {"amountMinor": 4200}, "tool": "billing:refund"},
        ],
    )
    record.update(changes)
    return record


def _results(base: dict[str, Any], **states: tuple[str, float | None]) -> list[dict[str, Any]]:
    out = copy.deepcopy(base["grader_results"])
    for result in out:
        if result["grader_id"] in states:
            state, score = states[result["grader_id"]]
            result["state"] = state
            result.pop("score", None)
            if score is not None:
                result["score"] = score
    return out


@pytest.fixture(scope="module")
def drilled(tmp_path_factory: pytest.TempPathFactory, demo_master: Path) -> Path:
    """The demo, plus build-125 trials of every other failing kind, and a new decision."""
    import os

    from tests.helpers import run_quiet

    # A copy of the run's one demo (pinned clock), not a demo of its own: seconds of CPU.
    where = Path(
        shutil.copytree(demo_master, tmp_path_factory.mktemp("drill") / "demo", symlinks=True)
    )
    base = _b125_template(where)
    refund = {"agent_id": "support", "args": {"amountMinor": 4200}, "tool": "billing:refund"}
    lookup = {"agent_id": "support", "args": {"orderId": "A-1"}, "tool": "crm:lookup-order"}
    forbidden = {"agent_id": "support", "args": {}, "tool": "billing:refund-all"}
    records = [
        _trial(
            base,
            "trajectory",
            0,
            tool_calls=[refund, lookup, forbidden],
            trace_uri="https://traces.example/run-drill/trajectory",
        ),
        _trial(base, "infra", 1, runtime={"status": "infrastructure_error"}, grader_results=[]),
        _trial(
            base,
            "infra-rerun",
            1,
            attempt_id="attempt-drill-infra-2",
            rerun={"parent_trial_id": "drill-infra", "reason": "runner lost its node"},
        ),
        _trial(
            base,
            "abstain",
            2,
            grader_results=_results(base, **{"reply-quality": ("abstain", None)}),
            artifact_manifest={
                "artifacts": [
                    {
                        "kind": "source_log",
                        "digest": "sha256:" + "ab" * 32,
                        "producer": "inspect-ai 0.3.285",
                        "location": INSPECT_LOCATION,
                    }
                ]
            },
        ),
        _trial(
            base,
            "effect",
            3,
            external_effects=[{"effect_key": "refund:A-9", "status": "unknown"}],
            grader_results=_results(base, **{"ticket-outcome": ("task_fail", 0.0)}),
        ),
    ]
    path = where / "logs" / "drill.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    saved = os.environ.get("EVALOPS_NOW")
    os.environ["EVALOPS_NOW"] = PINNED_NOW
    try:
        steps = [
            ("trials", "ingest", "logs/drill.jsonl"),
            (
                *("trials", "reconcile", "drill-effect", "--effect", "refund:A-9"),
                *("--status", "committed", "--evidence", "receipt://refund/A-9"),
            ),
        ]
        for args in steps:
            code, out = run_quiet(*args, cwd=where, actor="drill@example.com")
            assert code == 0, out
        code, out = run_quiet(
            "gate", "check", "--build", "build-125", "--suite", "regression/core",
            cwd=where, actor="drill@example.com",
        )  # fmt: skip
        assert code in (3, 4), out
    finally:
        os.environ.pop("EVALOPS_NOW", None)
        if saved is not None:
            os.environ["EVALOPS_NOW"] = saved
    return where


GATE = "GATE-4"


def test_forbidden_tool_and_out_of_order_call(drilled: Path, cli: Cli) -> None:
    f = drills(cli, drilled, GATE)["drill-trajectory"]
    assert f["class"] == "task_fail"
    # in-order: the refund came before the lookup, so only the lookup is in its place.
    assert f["trajectory"]["expected"] == [
        {"tool": "crm:lookup-order", "matched": True, "state": "matched"},
        {"tool": "billing:refund", "matched": False, "state": "out_of_order"},
    ]
    assert f["trajectory"]["forbidden_called"] == ["billing:refund-all"]
    assert f["trace"]["link"] is True
    html = report(cli, drilled, GATE, "html")
    assert 'href="https://traces.example/run-drill/trajectory"' in html
    # Names only: the stored row has no argument of any call.
    con = sqlite3.connect(drilled / ".evalops" / "registry.db")
    try:
        row = con.execute(
            "SELECT record, trajectory FROM trial WHERE trial_id = 'drill-trajectory'"
        ).fetchone()
    finally:
        con.close()
    assert "4200" not in row[1] and "tool_calls" not in json.loads(row[0])


def test_error_with_its_rerun(drilled: Path, cli: Cli) -> None:
    found = drills(cli, drilled, GATE)
    f = found["drill-infra"]
    assert f["class"] == "infrastructure_invalid"
    assert f["runtime_status"] == "infrastructure_error"
    # One rerun may stand in for an infrastructure-invalid trial (attempt 2 of 2).
    assert f["reruns"] == [
        {
            "trial_id": "drill-infra-rerun",
            "class": "task_pass",
            "rerun_reason": "runner lost its node",
            "permitted": True,
        }
    ]
    assert "drill-infra-rerun" not in found  # it passed
    md = report(cli, drilled, GATE, "md")
    assert "reruns: `drill-infra-rerun` task\\_pass" in md


def test_awaiting_review_and_an_inspect_trace(drilled: Path, cli: Cli) -> None:
    f = drills(cli, drilled, GATE)["drill-abstain"]
    assert f["class"] == "missing_required_evidence"
    judge = next(g for g in f["graders"] if g["grader_id"] == "reply-quality")
    assert judge["state"] == "abstain" and judge["awaiting_review"] is True
    assert judge["calibration"] == "valid"
    assert not any(g["awaiting_review"] for g in f["graders"] if g is not judge)
    source = f["trace"]["source"]
    assert source["tool"] == "inspect"
    assert (source["eval_id"], source["sample_id"], source["epoch"]) == ("eval-Drill9", "A-1", 2)
    assert source["log_files"] == ["logs/drill.jsonl"]
    assert f["trace"]["open_with"] == "inspect view --log-dir logs"
    html = report(cli, drilled, GATE, "html")
    assert "(awaiting review)" in html
    assert "<code>inspect view --log-dir logs</code>" in html


def test_a_reconciled_effect_is_shown_with_its_evidence(drilled: Path, cli: Cli) -> None:
    f = drills(cli, drilled, GATE)["drill-effect"]
    assert f["class"] == "task_fail"  # the effect is settled; the ticket still failed
    (effect,) = f["effects"]
    assert (effect["effect_key"], effect["status"]) == ("refund:A-9", "unknown")
    (recon,) = effect["reconciliations"]
    assert (recon["status"], recon["evidence_uri"], recon["actor"]) == (
        "committed",
        "receipt://refund/A-9",
        "drill@example.com",
    )


def test_durations_are_exact_in_json_and_seconds_for_people(drilled: Path, cli: Cli) -> None:
    from datetime import datetime

    record = stored_record(drilled, "drill-effect")
    start = datetime.fromisoformat(record["started_at"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(record["completed_at"].replace("Z", "+00:00"))
    f = drills(cli, drilled, GATE)["drill-effect"]
    assert f["duration_s"] == (end - start).total_seconds() == 41
    assert "41 s" in report(cli, drilled, GATE, "md")


def test_the_json_carries_the_contract_keys(drilled: Path, cli: Cli) -> None:
    keys = {
        "trial_id", "task_id", "class", "graders", "trajectory", "fixture_misses", "effects",
        "runtime_status", "usage", "duration_s", "trace",
    }  # fmt: skip
    for f in drills(cli, drilled, GATE).values():
        assert keys <= set(f)
        for g in f["graders"]:
            assert {"grader_id", "version", "state", "score", "layer", "blocking"} <= set(g)
        assert {"uri", "open_with"} <= set(f["trace"])
        if f["trajectory"]:
            assert {"matched", "expected", "forbidden_called"} <= set(f["trajectory"])


@pytest.fixture(scope="module")
def drilled_documents(drilled: Path) -> list[dict[str, Any]]:
    from evalops.domain.vocabulary import parse_timestamp
    from evalops.services.reports.audit import audit_document
    from evalops.store.engine import make_engine

    engine = make_engine(f"sqlite:///{drilled / '.evalops' / 'registry.db'}")
    try:
        return [audit_document(engine, GATE, now=parse_timestamp(PINNED_NOW))]
    finally:
        engine.dispose()


@pytest.mark.parametrize("offset", OFFSETS)
def test_hostile_strings_in_every_drill_down_field_are_escaped(
    drilled_documents: list[dict[str, Any]], offset: int
) -> None:
    (doc,) = drilled_documents
    # Every kind of value the drill-down shows is present, so every field gets a payload.
    kinds = doc["failing_trials"]
    assert any(f["trace"]["source"] for f in kinds)
    assert any(e["reconciliations"] for f in kinds for e in f["effects"])
    assert any(f["reruns"] for f in kinds) and any(f["trajectory"] for f in kinds)
    html_injection_checks(drilled_documents, offset)
    markdown_injection_checks(drilled_documents, offset)


# --- trials stored by an earlier release ------------------------------------------------


def test_a_counts_only_block_from_an_earlier_release_says_so() -> None:
    from evalops.services.reports.drilldown import _trajectory

    old = {
        "mode": "in-order",
        "matched": False,
        "expectedCount": 2,
        "observedCount": 1,
        "matchedCount": 1,
        "forbiddenCount": 0,
    }
    shown = _trajectory(json.dumps(old))
    assert shown is not None
    assert shown["per_call"] is False and shown["expected"] == []
    assert {k: shown[k] for k in old} == old


def test_reimporting_a_trial_stored_with_counts_only_is_the_same_claim() -> None:
    from evalops.services.ingest.records import _same_trajectory

    result = grade(expectation("in-order"), calls("a", "c"))
    counts, stored = json.dumps(result.block()), json.dumps(result.stored())
    assert _same_trajectory(counts, stored)  # stored by an earlier release
    other = json.dumps(grade(expectation("in-order"), calls("a", "b", "c")).stored())
    assert not _same_trajectory(counts, other)  # different counts: a different claim
    assert not _same_trajectory(stored, other)
    assert _same_trajectory(None, None) and not _same_trajectory(None, stored)
