"""`evalops estimate` end to end (docs/estimation.md).

A workspace with an estimation suite of 10 sampled tasks in three strata (weights 0.2 / 0.5 /
0.3), trials for two builds, one member without trials under the second build, and a
regression suite. The expected numbers are computed here from the outcomes this file wrote
(the stratified mean of task shares, its variance sum W^2 s^2 / n), not by evalops.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
import sqlite3
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.helpers import (
    EXAMPLE_REGISTRY,
    MINI_EXECUTION,
    MINI_TASK,
    commit_all,
    run_quiet,
    write_mini_registry,
    write_yaml,
)
from tests.trial_factory import eval_case, record, write_jsonl

ACTOR = "tester@example.com"
SUITE = "estimation/eu"
WEIGHTS = {"free": 0.2, "pro": 0.5, "enterprise": 0.3}
# Task -> (stratum, outcomes under build-1, outcomes under build-2): 1 pass, 0 fail.
OUTCOMES: dict[str, tuple[str, list[int], list[int]]] = {
    "s-free-1": ("free", [1, 1, 0], [1, 1, 1]),
    "s-free-2": ("free", [0, 0, 0], [0, 1, 0]),
    "s-free-3": ("free", [1, 0, 1], [1, 1, 0]),
    "s-pro-1": ("pro", [1, 1, 1], [1, 1, 1]),
    "s-pro-2": ("pro", [1, 0, 1], [1, 1, 1]),
    "s-pro-3": ("pro", [0, 1, 0], [1, 0, 1]),
    "s-pro-4": ("pro", [1, 1, 1], [1, 1, 0]),
    "s-ent-1": ("enterprise", [1, 1, 1], [1, 1, 1]),
    "s-ent-2": ("enterprise", [0, 1, 1], [1, 1, 1]),
    "s-ent-3": ("enterprise", [1, 1, 0], []),  # no trials under build-2
}
FAIL_RESULTS = [
    {"grader_id": "outcome", "grader_version": 1, "state": "task_fail", "score": 0.0},
    {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
]

ESTIMATION_SUITE: dict[str, Any] = {
    "spec_schema_version": "suite/v1",
    "id": SUITE,
    "kind": "estimation",
    "sampling_frame": {
        "source": "production-sessions",
        "period": "2026-10",
        "frozen_at": "2026-11-01T00:00:00Z",
    },
    "population": "sessions of paying tenants in the EU region",
    "weights": {"by": "tenant_tier", "values": WEIGHTS},
    "update_policy": "refreshed quarterly",
    "gate_policy": "release-gate",
    "suite_policy": "default-suite-policy",
}


def _task(task_id: str, stratum: str) -> dict[str, Any]:
    task = copy.deepcopy(MINI_TASK)
    task["id"] = task_id
    task["meta"]["stratum"] = {"tenant_tier": stratum}
    task["meta"]["sampled_at"] = "2026-10-12T08:00:00Z"
    # A distinct contract per task: identical contracts would be one eval case.
    task["contract"]["goal"] = f"handle session {task_id}"
    return task


def _run(root: Path, *args: str) -> str:
    code, output = run_quiet(*args, cwd=root, actor=ACTOR)
    assert code == 0, output
    return output


def _trials(root: Path, build: int) -> Path:
    reg = root / "registry"
    execution = reg / "executions" / f"mini-b{build}.json"
    records = []
    for task_id, (_, first, second) in OUTCOMES.items():
        case = eval_case(
            reg / "tasks" / f"{task_id}.yaml", execution, reg / "graders" / "mini-graders.yaml"
        )
        for i, passed in enumerate(first if build == 1 else second):
            records.append(
                record(
                    case,
                    trial_id=f"b{build}-{task_id}-{i}",
                    task_id=task_id,
                    trial_index=i,
                    grader_results=None if passed else FAIL_RESULTS,
                )
            )
    return write_jsonl(root / f"trials-b{build}.jsonl", records)


def _build(root: Path) -> None:
    reg = root / "registry"
    write_mini_registry(reg)
    (reg / "tasks" / "mini-task.yaml").unlink()
    for task_id, (stratum, _, _) in OUTCOMES.items():
        write_yaml(reg / "tasks" / f"{task_id}.yaml", _task(task_id, stratum))
    second = {**copy.deepcopy(MINI_EXECUTION), "id": "mini-b2", "system_build": "build-2"}
    (reg / "executions" / "mini-b2.json").write_text(json.dumps(second), encoding="utf-8")
    (reg / "policies").mkdir(parents=True)
    for name in ("suite-policy.yaml", "gate-policy.yaml"):
        shutil.copy(EXAMPLE_REGISTRY / "policies" / name, reg / "policies")
    write_yaml(reg / "suites" / "estimation.yaml", ESTIMATION_SUITE)
    write_yaml(
        reg / "suites" / "regression.yaml",
        {"spec_schema_version": "suite/v1", "id": "regression/x", "kind": "regression"},
    )
    commit_all(root, "estimation registry")
    _run(root, "init")
    _run(root, "sync")
    for task_id in OUTCOMES:
        _run(root, "promote", task_id, "--to", SUITE)
    for build in (1, 2):
        _run(root, "trials", "ingest", str(_trials(root, build)))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("estimate") / "ws"
    root.mkdir()
    _build(root)
    return root


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base, tmp_path / "ws", symlinks=True))


def by_hand(build: int) -> tuple[float, float]:
    """The stratified pass rate and its standard error, from the outcomes above."""
    estimate = variance = 0.0
    for stratum, w in WEIGHTS.items():
        shares = [
            sum(o) / len(o)
            for s, first, second in OUTCOMES.values()
            if s == stratum and (o := first if build == 1 else second)
        ]
        estimate += w * statistics.mean(shares)
        variance += w**2 * statistics.variance(shares) / len(shares)
    return estimate, math.sqrt(variance)


def estimate(cli: Cli, ws: Path, *args: str) -> dict[str, Any]:
    result = cli("estimate", "--suite", SUITE, *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    data: dict[str, Any] = result.json()
    return data


def audit_count(ws: Path) -> int:
    with sqlite3.connect(ws / ".evalops" / "registry.db") as db:
        return int(db.execute("SELECT count(*) FROM audit_event").fetchone()[0])


DOCUMENTED_KEYS = {
    "estimate_id", "suite", "build", "baseline", "evaluated_at", "confidence", "claims",
    "population", "frame", "task_count", "trial_count", "rates", "first_results",
    "invalid_rate", "rerun_count", "strata", "difference", "unavailable",
}  # fmt: skip


def test_estimate_is_stored_audited_and_its_numbers_are_the_stratified_ones(
    ws: Path, cli: Cli
) -> None:
    before = audit_count(ws)
    data = estimate(cli, ws, "--build", "build-1")
    assert set(data) - {"stored", "estimate_event"} == DOCUMENTED_KEYS
    assert data["estimate_id"] == "EST-1" and data["stored"] is True
    assert audit_count(ws) == before + 1
    assert data["claims"].startswith(
        "rates of sessions of paying tenants in the EU region, sampled from "
        "production-sessions 2026-10, frozen 2026-11-01T00:00:00Z; not of other traffic"
    )
    rate, se = by_hand(1)
    p = data["rates"]["pass"]
    assert p["rate"] == pytest.approx(rate)
    assert p["se"] == pytest.approx(se)
    assert 0 <= p["low"] < p["rate"] < p["high"] <= 1
    assert data["task_count"] == 10 and data["trial_count"] == 30
    assert data["rates"]["task_fail"]["rate"] == pytest.approx(1 - rate)
    # Strata in the order of the stored declaration (canonical JSON: sorted by name).
    assert [s["stratum"] for s in data["strata"]] == ["enterprise", "free", "pro"]
    assert [s["tasks"] for s in data["strata"]] == [3, 3, 4]
    assert [s["weight"] for s in data["strata"]] == [0.3, 0.2, 0.5]
    assert data["unavailable"] == []
    assert data["difference"] is None


def test_estimate_output_matches_the_shipped_schema(ws: Path, cli: Cli) -> None:
    import jsonschema  # type: ignore[import-untyped]

    from evalops.services.registry.schemas import schema_documents

    schema = schema_documents()["estimate.schema.json"]
    jsonschema.Draft202012Validator.check_schema(schema)
    for args in (("--build", "build-1"), ("--build", "build-2", "--baseline", "build-1")):
        jsonschema.validate(estimate(cli, ws, *args), schema)


def test_a_member_without_trials_is_named_never_dropped_silently(ws: Path, cli: Cli) -> None:
    data = estimate(cli, ws, "--build", "build-2")
    assert data["task_count"] == 9
    assert any(
        "s-ent-3" in r and "1 member has no trials under build build-2: not counted" in r
        for r in data["unavailable"]
    )
    rate, se = by_hand(2)
    assert data["rates"]["pass"]["rate"] == pytest.approx(rate)
    assert data["rates"]["pass"]["se"] == pytest.approx(se)


def test_voided_trials_are_left_out_and_said_so(ws: Path, cli: Cli) -> None:
    """docs/trials.md: statistics leave voided trials out and say so. Voiding build-1's
    batch leaves every member without trials under it: each is named as emptied by the
    void, not as never having run."""
    with sqlite3.connect(ws / ".evalops" / "registry.db") as db:
        batch = db.execute(
            "SELECT ingest_batch_id FROM trial WHERE trial_id = 'b1-s-pro-2-0'"
        ).fetchone()[0]
    done = cli("trials", "void", "--batch", str(batch), "--reason", "wrong build", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr
    data = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert data["task_count"] == 0 and data["trial_count"] == 0
    assert "30 trials under build build-1 voided: left out" in data["unavailable"][0]
    assert any("10 members have only voided trials under build build-1" in r
               for r in data["unavailable"])  # fmt: skip
    assert not any("have no trials under build build-1" in r for r in data["unavailable"])
    # As a baseline: the difference says what its voids left out too.
    data = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1", "--dry-run")
    assert any(r.startswith("30 trials under baseline build build-1 voided")
               for r in data["unavailable"])  # fmt: skip


def test_a_member_without_baseline_trials_is_named_not_dropped_from_the_difference(
    ws: Path, cli: Cli
) -> None:
    # s-ent-3 ran under build-1 only: as the candidate, it has no baseline trials.
    data = estimate(cli, ws, "--build", "build-1", "--baseline", "build-2", "--dry-run")
    assert data["difference"]["pass"]["paired_tasks"] == 9
    assert (
        "1 member has no trials under baseline build build-2: not in the difference: s-ent-3"
        in data["unavailable"]
    )


def test_members_sampled_after_a_frame_frozen_earlier_are_not_counted(ws: Path, cli: Cli) -> None:
    """The frame's frozen_at moved before the members' sampled_at (2026-10-12) after they
    were promoted: they are not samples of the frame the claim names."""
    suite = ws / "registry" / "suites" / "estimation.yaml"
    suite.write_text(
        suite.read_text().replace("2026-11-01T00:00:00Z", "2026-10-01T00:00:00Z"), "utf-8"
    )
    commit_all(ws, "the frame frozen earlier")
    done = cli("sync", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr
    data = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert "sampled from production-sessions 2026-10, frozen 2026-10-01" in data["claims"]
    assert data["task_count"] == 0 and data["rates"] == {}
    assert data["unavailable"][0].startswith(
        "10 members were sampled after the frame was frozen (2026-10-01T00:00:00Z): not "
        "counted: s-ent-1, s-ent-2"
    )


def test_an_estimate_stored_by_estimator_1_replays_under_its_rules(
    ws: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An estimate stored under version 1 (which gave differences that never vary an
    interval of no width, and named neither voids nor unpaired members) replays byte for
    byte under version 1's rules, and `verify` passes; so does one of version 2; a new one
    is version 3."""
    from evalops.services.estimation import inputs

    with monkeypatch.context() as old:
        old.setattr(inputs, "ESTIMATOR", 1)
        first = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    with monkeypatch.context() as old:
        old.setattr(inputs, "ESTIMATOR", 2)
        estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    second = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    with sqlite3.connect(ws / ".evalops" / "registry.db") as db:
        versions = [json.loads(text)["estimator"] for (text,) in db.execute(
            "SELECT inputs FROM estimate ORDER BY id"
        )]  # fmt: skip
    assert versions == [1, 2, 3]
    # Classes no trial had: version 1 stored [0, 0] for their difference; 2 names them.
    absent = first["difference"]["hard_constraint_fail"]
    assert (absent["low"], absent["high"]) == (0.0, 0.0)
    assert not any("difference interval unavailable" in r for r in first["unavailable"])
    assert second["difference"]["hard_constraint_fail"]["low"] is None
    assert any("difference interval unavailable for hard_constraint_fail" in r
               for r in second["unavailable"])  # fmt: skip
    for estimate_id in ("EST-1", "EST-2", "EST-3"):
        replayed = cli("estimate", "replay", estimate_id, "--json", cwd=ws)
        assert replayed.code == 0 and replayed.json()["identical"] is True, replayed.stdout
    assert cli("verify", cwd=ws).code == 0


def test_paired_difference_with_a_baseline_over_tasks_both_builds_ran(ws: Path, cli: Cli) -> None:
    data = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    d = data["difference"]["pass"]
    assert d["paired_tasks"] == 9
    expected = variance = 0.0
    for stratum, w in WEIGHTS.items():
        diffs = [
            sum(b) / len(b) - sum(a) / len(a) for s, a, b in OUTCOMES.values() if s == stratum and b
        ]
        expected += w * statistics.mean(diffs)
        variance += w**2 * statistics.variance(diffs) / len(diffs)
    assert d["diff"] == pytest.approx(expected)
    assert d["se"] == pytest.approx(math.sqrt(variance))
    assert d["low"] < d["diff"] < d["high"]
    assert data["baseline"] == "build-1"


def test_replay_is_byte_identical_and_verify_covers_estimates(ws: Path, cli: Cli) -> None:
    estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    replayed = cli("estimate", "replay", "EST-1", "--json", cwd=ws)
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    assert replayed.json()["identical"] is True
    verified = cli("verify", "--json", cwd=ws)
    assert verified.code == 0, verified.stdout + verified.stderr
    assert verified.json()["estimates"] == 1
    shown = cli("estimate", "show", "EST-1", "--json", cwd=ws)
    assert shown.code == 0 and shown.json()["rates"]["pass"]["rate"] == pytest.approx(by_hand(2)[0])
    listed = cli("estimate", "list", "--json", cwd=ws)
    assert [r["estimate_id"] for r in listed.json()["estimates"]] == ["EST-1"]


@pytest.mark.tampers
def test_an_edited_stored_estimate_fails_replay_and_verify(ws: Path, cli: Cli) -> None:
    estimate(cli, ws, "--build", "build-1")
    with sqlite3.connect(ws / ".evalops" / "registry.db") as db:
        (result,) = db.execute("SELECT result FROM estimate").fetchone()
        db.execute("UPDATE estimate SET result = ?", (result.replace('"rate":', '"rate": ', 1),))
    replayed = cli("estimate", "replay", "EST-1", "--json", cwd=ws)
    assert replayed.code == 6
    assert replayed.json()["identical"] is False
    verified = cli("verify", cwd=ws)
    assert verified.code == 6, verified.stdout + verified.stderr


def test_dry_run_stores_nothing(ws: Path, cli: Cli) -> None:
    before = audit_count(ws)
    data = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert data["estimate_id"] == "dry-run" and data["stored"] is False
    assert audit_count(ws) == before
    listed = cli("estimate", "list", "--json", cwd=ws)
    assert listed.json()["estimates"] == []


def test_at_a_time_before_the_second_build_was_ingested(ws: Path, cli: Cli) -> None:
    with sqlite3.connect(ws / ".evalops" / "registry.db") as db:
        ats = [at.replace(" ", "T") + "Z" for (at,) in db.execute(
            "SELECT at FROM audit_event WHERE kind = 'trials.ingest' ORDER BY seq"
        )]  # fmt: skip
    # Between the two ingests, build-2 had no trials: every member is named as without.
    before_second = estimate(cli, ws, "--build", "build-2", "--at", ats[0], "--dry-run")
    assert before_second["task_count"] == 0
    assert before_second["rates"] == {}
    assert any("10 members have no trials" in r for r in before_second["unavailable"])
    after = estimate(cli, ws, "--build", "build-2", "--at", ats[1], "--dry-run")
    assert after["task_count"] == 9
    early = cli("estimate", "--suite", SUITE, "--build", "build-2", "--at",
                "2000-01-01T00:00:00Z", "--json", cwd=ws)  # fmt: skip
    assert early.code == 2
    assert "not in force" in early.stderr


def test_a_regression_suite_is_refused_with_exit_2(ws: Path, cli: Cli) -> None:
    before = audit_count(ws)
    result = cli("estimate", "--suite", "regression/x", "--build", "build-1", cwd=ws)
    assert result.code == 2
    assert "regression suites are not representative cohorts" in result.stderr
    assert audit_count(ws) == before


@pytest.mark.parametrize("confidence", ["0", "1", "1.5", "-0.1"])
def test_a_confidence_outside_0_1_is_exit_2(ws: Path, cli: Cli, confidence: str) -> None:
    result = cli("estimate", "--suite", SUITE, "--build", "build-1", "--confidence",
                 confidence, cwd=ws)  # fmt: skip
    assert result.code == 2, result.stdout + result.stderr
    assert "--confidence" in result.stderr


def test_confidence_changes_the_interval_not_the_rate(ws: Path, cli: Cli) -> None:
    narrow = estimate(cli, ws, "--build", "build-1", "--confidence", "0.8", "--dry-run")
    wide = estimate(cli, ws, "--build", "build-1", "--confidence", "0.99", "--dry-run")
    assert narrow["rates"]["pass"]["rate"] == wide["rates"]["pass"]["rate"]
    assert wide["rates"]["pass"]["low"] < narrow["rates"]["pass"]["low"]
    assert wide["rates"]["pass"]["high"] > narrow["rates"]["pass"]["high"]


def test_human_output_leads_with_the_claims_sentence(ws: Path, cli: Cli) -> None:
    result = cli("estimate", "--suite", SUITE, "--build", "build-1", cwd=ws)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("rates of sessions of paying tenants")
    assert "EST-1" in result.stdout


def test_plan_measures_components_and_allocates(ws: Path, cli: Cli) -> None:
    result = cli("estimate", "plan", "--suite", SUITE, "--build", "build-1", "--half-width",
                 "0.05", "--detect", "0.1", "--json", cwd=ws)  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["build"] == "build-1"
    # Proportional allocation puts half the tasks in pro (weight 0.5), up to rounding.
    prop = data["allocation"]["proportional"]
    assert prop["half_width"] <= 0.05
    neyman = data["allocation"]["neyman"]
    assert neyman["half_width"] <= 0.05
    assert data["detect"]["tasks"] > 0
    assert data["detectable_difference"]["difference"] > 0
    assert all(s["within_task_variance"] is not None for s in data["strata"])


def _a_build_like_build_1(ws: Path) -> None:
    """build-3: the same outcomes as build-1, task for task (a change that changed nothing)."""
    reg = ws / "registry"
    third = {**copy.deepcopy(MINI_EXECUTION), "id": "mini-b3", "system_build": "build-3"}
    (reg / "executions" / "mini-b3.json").write_text(json.dumps(third), encoding="utf-8")
    commit_all(ws, "build-3")
    _run(ws, "sync")
    records = []
    for task_id, (_, first, _) in OUTCOMES.items():
        case = eval_case(reg / "tasks" / f"{task_id}.yaml", reg / "executions" / "mini-b3.json",
                         reg / "graders" / "mini-graders.yaml")  # fmt: skip
        for i, passed in enumerate(first):
            failed = None if passed else FAIL_RESULTS
            records.append(record(case, trial_id=f"b3-{task_id}-{i}", task_id=task_id,
                                  trial_index=i, grader_results=failed))  # fmt: skip
    _run(ws, "trials", "ingest", str(write_jsonl(ws / "trials-b3.jsonl", records)))


def test_a_difference_that_never_varies_has_no_interval_and_plans_as_unpaired(
    ws: Path, cli: Cli
) -> None:
    """Two builds alike on every task: the difference is 0 with no interval (one of no
    width would claim the builds exactly equal), and planning does not promise that the
    fewest tasks detect any difference."""
    _a_build_like_build_1(ws)
    data = estimate(cli, ws, "--build", "build-3", "--baseline", "build-1", "--dry-run")
    d = data["difference"]["pass"]
    assert (d["diff"], d["low"], d["high"], d["se"]) == (0.0, None, None, 0.0)
    assert any(r.startswith("difference interval unavailable for pass, task_fail: the paired "
                            "tasks of each stratum (10 in all) differ by the same amount")
               for r in data["unavailable"])  # fmt: skip
    shown = cli("estimate", "--suite", SUITE, "--build", "build-3", "--baseline", "build-1",
                "--dry-run", cwd=ws)  # fmt: skip
    assert shown.code == 0, shown.stderr
    assert "(0.00 to 0.00)" not in shown.stdout
    planned = cli("estimate", "plan", "--suite", SUITE, "--build", "build-3", "--baseline",
                  "build-1", "--detect", "0.1", "--json", cwd=ws)  # fmt: skip
    assert planned.code == 0, planned.stdout + planned.stderr
    plan = planned.json()
    assert plan["detectable_difference"]["difference"] > 0
    assert plan["detect"]["tasks"] > 10
    assert any("every paired task's difference was the same" in a for a in plan["assumptions"])


def test_plan_without_trials_says_what_it_assumes(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    reg = root / "registry"
    write_mini_registry(reg)
    (reg / "policies").mkdir(parents=True)
    for name in ("suite-policy.yaml", "gate-policy.yaml"):
        shutil.copy(EXAMPLE_REGISTRY / "policies" / name, reg / "policies")
    write_yaml(reg / "suites" / "estimation.yaml", ESTIMATION_SUITE)
    commit_all(root, "empty")
    _run(root, "init")
    _run(root, "sync")
    result = cli("estimate", "plan", "--suite", SUITE, "--half-width", "0.05", "--json", cwd=root)
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["build"] is None
    assert any(a.startswith("no trials yet") for a in data["assumptions"])
    # Worst case variance 0.25 everywhere: proportional n = 0.25 * (1.96 / 0.05)^2 = 384.1.
    assert data["allocation"]["proportional"]["tasks"] == pytest.approx(385, abs=3)


def test_validate_refuses_weights_that_do_not_sum_to_1(ws: Path, cli: Cli) -> None:
    path = ws / "registry" / "suites" / "estimation.yaml"
    suite = copy.deepcopy(ESTIMATION_SUITE)
    suite["weights"]["values"] = {"free": 0.2, "pro": 0.5, "enterprise": 0.4}
    write_yaml(path, suite)
    result = cli("validate", "registry", cwd=ws)
    assert result.code == 2
    assert "weights must sum to 1, not 1.1" in result.stderr


def test_report_estimate_renders_the_claim_and_draws_every_interval(ws: Path, cli: Cli) -> None:
    stored = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    html = cli("report", "estimate", "EST-1", "--format", "html", cwd=ws)
    assert html.code == 0, html.stderr
    assert f"<h1>{stored['claims']}</h1>" in html.stdout
    # One point per rate and one per stratum with tasks.
    assert html.stdout.count("<circle") == len(stored["rates"]) + len(stored["strata"])
    assert "s-ent-3" in html.stdout  # the member without trials is named
    md = cli("report", "estimate", "EST-1", "--format", "md", cwd=ws)
    # The first line anchors the audit head the report was rendered at, the heading follows.
    anchor, _, md_body = md.stdout.partition("\n")
    assert re.fullmatch(r"<!-- evalops-audit-head:\d+:sha256:[0-9a-f]{64} -->", anchor)
    assert md_body.startswith(f"## evalops estimate `EST-1`: {stored['claims']}")
    assert "| `pass` |" in md_body.splitlines()[6]  # pass first
    # Intervals bracketed (a dash would read as a minus sign beside a negative difference),
    # every one of them: the rates', the strata's and the differences'.
    bracketed = [
        f"[{r['low']:.3f}, {r['high']:.3f}]"
        for r in [*stored["rates"].values(), *stored["difference"].values()]
        if r["low"] is not None
    ]
    assert bracketed and all(b in md_body for b in bracketed), md_body
    assert "cannot tell the builds apart, not that they are equal" in md_body
    for text in (md_body, html.stdout):
        assert "se is the standard error; n_eff the number of independent sessions" in text
        assert "not a grader that is wrong" in text
    js = cli("report", "estimate", "EST-1", "--format", "json", cwd=ws)
    shown = json.loads(js.stdout)
    assert shown["rates"] == stored["rates"] and shown["difference"] == stored["difference"]
    missing = cli("report", "estimate", "EST-9", cwd=ws)
    assert missing.code == 2 and "unknown estimate 'EST-9'" in missing.stderr


def test_on_a_phone_each_estimate_table_row_is_a_card_naming_every_value(
    ws: Path, cli: Cli
) -> None:
    """templates/report.css shows a table inside `.scroll` one row a card on screens under
    40rem, each cell after its `data-label`: every table of the report is laid out so, and
    every cell is labelled with its column's header (a table of eight columns is wider than
    a phone)."""
    import html5lib

    estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    html = cli("report", "estimate", "EST-1", "--format", "html", cwd=ws)
    page = html5lib.parse(html.stdout, namespaceHTMLElements=False)
    tables = page.findall(".//table")
    assert len(tables) == 3  # rates, strata, the difference against the baseline
    parent = {child: node for node in page.iter() for child in node}
    assert [(parent[t].tag, parent[t].get("class")) for t in tables] == [("div", "scroll")] * 3
    for table in tables:
        headers = ["".join(th.itertext()) for th in table.findall("./thead/tr/th")]
        rows = table.findall("./tbody/tr")
        assert rows
        for row in rows:
            assert [td.get("data-label") for td in row.findall("td")] == headers


def test_the_eval_summary_carries_an_estimation_block(ws: Path, cli: Cli) -> None:
    import jsonschema  # type: ignore[import-untyped]

    from evalops.export.summary import schema

    stored = estimate(cli, ws, "--build", "build-2", "--baseline", "build-1")
    # A gate decision to export (any: the summary is of a decision, the block rides along).
    gated = cli("gate", "check", "--build", "build-2", "--suite", "regression/x", cwd=ws)
    assert gated.code in (0, 3, 4), gated.stderr
    result = cli("export", "summary", "--gate", "GATE-1", "--estimate", "EST-1", cwd=ws)
    assert result.code == 0, result.stderr
    summary = json.loads(result.stdout)
    jsonschema.validate(summary, schema())
    block = summary["estimation"]
    assert block["estimateId"] == "EST-1" and block["baseline"] == "build-1"
    assert block["rates"]["pass"]["rate"] == stored["rates"]["pass"]["rate"]
    assert block["passDifference"]["diff"] == stored["difference"]["pass"]["diff"]
    assert block["unavailableCount"] == len(stored["unavailable"]) == 2
    assert "s-ent-3" not in result.stdout  # no prose, no names


def test_the_site_page_of_an_estimation_suite_charts_its_estimates(ws: Path, cli: Cli) -> None:
    first = estimate(cli, ws, "--build", "build-1")
    second = estimate(cli, ws, "--build", "build-2")
    result = cli("report", "site", "site", "--suite", SUITE, cwd=ws)
    assert result.code == 0, result.stderr
    page = (ws / "site" / "suites" / "estimation_2feu.html").read_text(encoding="utf-8")
    assert "Estimates over builds" in page
    for doc in (first, second):
        p = doc["rates"]["pass"]
        assert f"{p['rate']:.3f} ({p['low']:.3f}-{p['high']:.3f})" in page
        assert doc["estimate_id"] in page
    assert second["claims"] in page
    # No gate decides an estimation suite here: no empty pass^k panel per member, but why.
    assert 'class="panel-chart"' not in page
    assert "No build of this suite has a gate decision yet" in page
    assert "measured by its estimates" in page
    # This registry's graders are all deterministic: no calibration is owed, and the index
    # does not claim model graders it does not have are calibrated.
    index = (ws / "site" / "index.html").read_text(encoding="utf-8")
    assert "No grader in force or pinned is a model grader" in index
    assert "is validly calibrated" not in index
    # The index's latest estimate links to its row, and each row is its own anchor.
    assert f'href="suites/estimation_2feu.html#{second["estimate_id"]}"' in index
    for doc in (first, second):
        assert f'<tr id="{doc["estimate_id"]}">' in page


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--half-width", "0"),
        ("--detect", "1.5"),
        ("--power", "1"),
        ("--task-cost", "-2"),
        ("--half-width", "1e-300"),
        ("--half-width", "1e-155"),
        ("--detect", "1e-300"),
    ],
)
def test_a_planning_option_out_of_range_names_itself_once(
    ws: Path, cli: Cli, option: str, value: str
) -> None:
    """`error: --half-width: must be ...`: the option is the error's field, so the message
    does not repeat it (it read `--half-width: --half-width must be ...`)."""
    args = ["estimate", "plan", "--suite", SUITE, "--half-width", "0.05", option, value]
    result = cli(*args, cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    assert result.stderr.count(option) == 1, result.stderr
    assert f"{option}: must be" in result.stderr


def _edit(ws: Path, cli: Cli, path: str, change: tuple[str, str]) -> None:
    """Replace one text in one file of the registry, commit it and sync."""
    old, new = change
    target = ws / "registry" / path
    text = target.read_text("utf-8")
    assert old in text, (path, old)
    target.write_text(text.replace(old, new), "utf-8")
    commit_all(ws, f"edit {path}")
    done = cli("sync", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr


def _by_hand_with(pro_too: set[str]) -> tuple[float, float]:
    """`by_hand(1)` with the tasks in `pro_too` counted in stratum pro."""
    expected = variance = 0.0
    for stratum, w in WEIGHTS.items():
        shares = [
            sum(first) / len(first)
            for task_id, (s, first, _) in OUTCOMES.items()
            if ("pro" if task_id in pro_too else s) == stratum
        ]
        expected += w * statistics.mean(shares)
        variance += w**2 * statistics.variance(shares) / len(shares)
    return expected, math.sqrt(variance)


def test_a_stratum_relabelled_after_promotion_counts_once_promoted_again(
    ws: Path, cli: Cli
) -> None:
    """`meta.stratum` is a label (not part of task_digest). A member is counted in the
    stratum it was promoted with (a risk owner's act under an authority); relabelled and
    synced afterwards, the estimate says the file in force differs and how to count it,
    and `promote` again records the new labels (a repin): then it counts as if relabelled
    before its first promotion, whichever order the two came in."""
    _edit(ws, cli, "tasks/s-ent-2.yaml", ("tenant_tier: enterprise", "tenant_tier: pro"))
    before = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert {s["stratum"]: s["tasks"] for s in before["strata"]} == {
        "enterprise": 3, "free": 3, "pro": 4,
    }  # fmt: skip
    assert before["rates"]["pass"]["rate"] == pytest.approx(by_hand(1)[0])
    assert (
        "s-ent-2: its file in force says tenant_tier=pro (promoted as enterprise): counted as "
        f"promoted until `evalops promote s-ent-2 --to {SUITE}` records the new labels"
    ) in before["unavailable"]
    again = cli("promote", "s-ent-2", "--to", SUITE, "--json", cwd=ws)
    assert again.code == 0 and again.json()["outcome"] == "accepted", again.stdout
    after = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert {s["stratum"]: s["tasks"] for s in after["strata"]} == {
        "enterprise": 2, "free": 3, "pro": 5,
    }  # fmt: skip
    rate, se = _by_hand_with({"s-ent-2"})
    assert after["rates"]["pass"]["rate"] == pytest.approx(rate)
    assert after["rates"]["pass"]["se"] == pytest.approx(se)
    assert not any("file in force" in r for r in after["unavailable"])
    # A third promotion has nothing to record.
    third = cli("promote", "s-ent-2", "--to", SUITE, "--json", cwd=ws)
    assert third.code == 0 and third.json()["outcome"] == "noop", third.stdout


def test_a_stratum_relabelled_on_another_branch_changes_no_estimate(ws: Path, cli: Cli) -> None:
    """A branch's sync registers its definitions and puts nothing in force: a relabel
    there is neither counted nor named by an estimate of the tracked registry."""
    import subprocess

    before = estimate(cli, ws, "--build", "build-1", "--dry-run")
    git = ["git", "-C", str(ws)]
    subprocess.run([*git, "checkout", "-q", "-b", "relabel"], check=True)
    task = ws / "registry" / "tasks" / "s-ent-2.yaml"
    task.write_text(task.read_text("utf-8").replace("enterprise", "pro"), "utf-8")
    commit_all(ws, "relabel on a branch")
    synced = cli("sync", cwd=ws)
    assert synced.code == 0 and "in force unchanged" in synced.stdout, synced.stdout
    subprocess.run([*git, "checkout", "-q", "-"], check=True)
    after = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert after["rates"] == before["rates"] and after["unavailable"] == before["unavailable"]


def test_trials_of_another_task_revision_are_named_not_dropped(ws: Path, cli: Cli) -> None:
    """s-free-1 gets a new revision and is re-pinned: its 3 trials of build-1 are of the old
    revision, which the gate does not count for the pin. The estimate says so, and does not
    call it a member without trials."""
    task = ws / "registry" / "tasks" / "s-free-1.yaml"
    text = task.read_text("utf-8").replace("revision: 1", "revision: 2")
    task.write_text(text.replace("handle session s-free-1", "handle it again"), "utf-8")
    commit_all(ws, "s-free-1 revision 2")
    synced = cli("sync", cwd=ws)
    assert synced.code == 0, synced.stdout + synced.stderr
    promoted = cli("promote", "s-free-1", "--to", SUITE, cwd=ws)
    assert promoted.code == 0, promoted.stdout + promoted.stderr
    data = estimate(cli, ws, "--build", "build-1", "--dry-run")
    assert data["task_count"] == 9
    assert (
        "3 trials under build build-1 of another task revision than the suite pins: not "
        "counted: s-free-1 (3)"
    ) in data["unavailable"]
    assert (
        "1 member has no counted trials under build build-1: not counted: s-free-1"
        in (data["unavailable"])
    )
    assert not any("no trials under build" in r for r in data["unavailable"])


@pytest.mark.parametrize("command", [("estimate",), ("estimate", "plan")])
def test_a_confidence_too_close_to_0_or_1_for_a_quantile_is_a_usage_error(
    ws: Path, cli: Cli, command: tuple[str, ...]
) -> None:
    """1e-16 makes the quantile's probability 0.5 in floats (a quantile of 0: the plan
    divided by it); 1 - 1e-16 makes it 1 (no quantile)."""
    for confidence, side in (("1e-16", "0"), ("0.9999999999999999", "1")):
        extra = ["--half-width", "0.05"] if command[-1] == "plan" else ["--build", "build-1"]
        args = [*command, "--suite", SUITE, *extra, "--confidence", confidence]
        result = cli(*args, cwd=ws)
        assert result.code == 2, result.stdout + result.stderr
        assert f"is too close to {side} for an interval to be computed" in result.stderr
        assert "internal error" not in result.stderr


def test_plan_totals_are_the_sums_of_their_strata_and_no_stratum_exceeds_its_frame(
    ws: Path, cli: Cli
) -> None:
    """`--detect`'s total is what its strata are given (each at least 2); with
    `sampling_frame.sizes`, no stratum is planned more tasks than its frame holds: such a
    stratum is sampled whole, and the plan says so."""
    plan = cli("estimate", "plan", "--suite", SUITE, "--detect", "0.05", "--json", cwd=ws)
    assert plan.code == 0, plan.stdout + plan.stderr
    detect = plan.json()["detect"]
    assert detect["tasks"] == sum(detect["by_stratum"].values())
    sizes = {"free": 40, "pro": 4, "enterprise": 3}
    frozen = "frozen_at: '2026-11-01T00:00:00Z'"
    sized = f"{frozen}\n  sizes: {{free: 40, pro: 4, enterprise: 3}}"
    _edit(ws, cli, "suites/estimation.yaml", (frozen, sized))
    args = ["estimate", "plan", "--suite", SUITE, "--half-width", "0.05", "--detect", "0.05"]
    plan = cli(*args, "--json", cwd=ws)
    assert plan.code == 0, plan.stdout + plan.stderr
    data = plan.json()
    planned = [a["by_stratum"] for a in data["allocation"].values()] + [
        data["detect"]["by_stratum"]
    ]
    for by in planned:
        assert all(by[s] <= n for s, n in sizes.items()), by
    assert any(by["pro"] == 4 for by in planned)
    assert any("stratum pro: its frame holds 4 tasks" in a for a in data["assumptions"])


def test_plan_leaves_out_members_sampled_after_the_frame_and_says_why_nothing_is_detectable(
    ws: Path, cli: Cli
) -> None:
    """The estimate counts no member sampled after `frozen_at`; the plan measures the same
    tasks: none. With a stratum empty, no paired difference is detectable, and it says why
    instead of printing a dash."""
    _edit(ws, cli, "suites/estimation.yaml", ("2026-11-01T00:00:00Z", "2026-10-01T00:00:00Z"))
    plan = cli("estimate", "plan", "--suite", SUITE, "--build", "build-1", "--json", cwd=ws)
    assert plan.code == 0, plan.stdout + plan.stderr
    data = plan.json()
    assert all(s["tasks"] == 0 for s in data["strata"])
    mde = data["detectable_difference"]
    assert mde["difference"] is None
    assert mde["why"].startswith("no paired difference is detectable yet: stratum ")
    text = cli("estimate", "plan", "--suite", SUITE, "--build", "build-1", cwd=ws)
    assert "today's tasks: no paired difference is detectable yet" in text.stdout
    assert "difference of -" not in text.stdout
