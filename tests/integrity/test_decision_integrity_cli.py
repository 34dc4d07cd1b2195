"""Decision integrity through the CLI, on a copy of the example registry.

Every test starts from the finished `evalops demo` (build-124 blocked, build-125 passing
with a waiver), tries one of the attacks the reviewers found, and ends in the exit code the
contract demands. Each would end in exit 0 (or an accepted change) on the code before the
decision-integrity rulings (CHANGELOG.md).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from evalops.domain import digests
from evalops.domain.vocabulary import format_timestamp
from tests.conftest import Cli
from tests.helpers import (
    EXAMPLE_REGISTRY,
    commit_all,
    real_clock_demo,
    sqlite_fingerprint,
    write_yaml,
)
from tests.trial_factory import write_jsonl

SUITE = "regression/core"
CRITICAL = "support-refund-in-order"
NONCRITICAL = "support-refund-policy-explanation"
GUARD = "refund-effect-guard"
DOUBLE_COMMIT = "trial-b124-support-refund-in-order-2"


def _demo_base(factory: pytest.TempPathFactory) -> Path:
    """The finished demo (real clock), built once per run (copy it before changing it)."""
    return real_clock_demo(factory)


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return Path(shutil.copytree(_demo_base(tmp_path_factory), tmp_path / "demo", symlinks=True))


def gate_code(cli: Cli, demo: Path, build: str, *extra: str) -> int:
    return cli("gate", "check", "--build", build, "--suite", SUITE, *extra, cwd=demo).code


def gate_json(cli: Cli, demo: Path, build: str, *extra: str) -> dict[str, Any]:
    result = cli("gate", "check", "--build", build, "--suite", SUITE, *extra, "--json", cwd=demo)
    assert result.code in (0, 3, 4), result.stdout + result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def verify_ok(cli: Cli, demo: Path) -> None:
    result = cli("verify", cwd=demo)
    assert result.code == 0, result.stdout + result.stderr


def fix_record(demo: Path, task_id: str, index: int = 0) -> dict[str, Any]:
    """A stored-format record of the fix build (build-125) to derive attacks from."""
    path = demo / "registry" / "trials" / "fix-b125.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        record: dict[str, Any] = json.loads(line)
        original = not (record.get("rerun") or {}).get("parent_trial_id")
        if record["task_id"] == task_id and record["trial_index"] == index and original:
            return record
    raise AssertionError(f"no fix-build record of {task_id} #{index}")


def with_guard(record: dict[str, Any], *states: str, trial_id: str, index: int) -> dict[str, Any]:
    out = copy.deepcopy(record)
    out["trial_id"] = trial_id
    out["trial_index"] = index
    out.pop("primary_classification", None)
    results = [r for r in out["grader_results"] if r["grader_id"] != GUARD]
    out["grader_results"] = results + [
        {"grader_id": GUARD, "grader_version": 2, "state": s} for s in states
    ]
    return out


def ingest(cli: Cli, demo: Path, name: str, *records: dict[str, Any]) -> Any:
    path = write_jsonl(demo / ".evalops" / f"{name}.jsonl", records)
    return cli("trials", "ingest", str(path), "--json", cwd=demo)


def edit_registry(demo: Path, relative: str, change: Any, message: str) -> None:
    path = demo / "registry" / relative
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(doc)
    write_yaml(path, doc)
    commit_all(demo, message)


def audit_kinds(cli: Cli, demo: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        return [k for (k,) in con.execute("SELECT kind FROM audit_event ORDER BY seq")]
    finally:
        con.close()


# ------------------------------------------------------------------ 9.1 one result per grader


def test_a_second_result_from_a_hard_constraint_grader_is_refused_and_the_gate_blocks(
    demo: Path, cli: Cli
) -> None:
    base = fix_record(demo, CRITICAL)
    hidden = with_guard(base, "hard_constraint_fail", "pass", trial_id="attack-1", index=5)
    refused = ingest(cli, demo, "hidden", hidden)
    assert refused.code == 2, refused.stdout
    error = json.loads(refused.stdout)["error"]
    assert (error["line"], error["field"]) == (1, "grader_results[4].grader_id")
    assert GUARD in error["message"] and "at most one result per grader" in error["message"]
    assert gate_code(cli, demo, "build-125") == 0  # nothing was stored
    honest = with_guard(base, "hard_constraint_fail", trial_id="attack-1", index=5)
    assert ingest(cli, demo, "honest", honest).code == 0
    assert gate_code(cli, demo, "build-125") == 4


# --------------------------------------------------------- 9.2 the review queue is the door


def test_a_review_cannot_lift_a_deterministic_hard_constraint_verdict(demo: Path, cli: Cli) -> None:
    record = with_guard(
        fix_record(demo, CRITICAL), "hard_constraint_fail", trial_id="attack-2", index=5
    )
    assert ingest(cli, demo, "guard", record).code == 0
    assert gate_code(cli, demo, "build-125") == 4
    review = cli(
        "review", "resolve", "attack-2", "--grader", GUARD, "--state", "pass",
        "--reason", "looks fine to me", "--json", cwd=demo,
    )  # fmt: skip
    assert review.code == 5, review.stdout
    message = json.loads(review.stdout)["error"]["message"]
    assert "not in the review queue" in message and "deterministic" in message
    assert audit_kinds(cli, demo)[-1] == "review.refused"
    assert gate_code(cli, demo, "build-125") == 4
    verify_ok(cli, demo)


# ------------------------------------------- 9.3 a calibration belongs to one grader config


def test_calibrating_a_new_unpromoted_judge_config_leaves_the_pinned_one_invalid(
    demo: Path, cli: Cli
) -> None:
    assert (
        cli("calibration", "invalidate", "reply-quality", "--reason", "drift", cwd=demo).code == 0
    )
    assert gate_code(cli, demo, "build-125") == 3  # the pinned judge is no longer valid

    def looser(doc: dict[str, Any]) -> None:
        doc["version"] += 1
        judge = next(g for g in doc["graders"] if g["id"] == "reply-quality")
        judge["model"]["prompt_hash"] = "sha256:" + "e" * 64

    edit_registry(demo, "graders/support-graders.yaml", looser, "a new, unpromoted judge")
    assert cli("sync", cwd=demo).code == 0
    labels = str(EXAMPLE_REGISTRY / "calibration" / "reply-quality.jsonl")
    recorded = cli("calibration", "record", "reply-quality", "--labels", labels, "--json", cwd=demo)
    assert recorded.code == 0, recorded.stderr
    assert json.loads(recorded.stdout)["state"] == "valid"  # valid for the new config only
    assert gate_code(cli, demo, "build-125") == 3
    verify_ok(cli, demo)


def test_calibration_record_config_names_the_config(demo: Path, cli: Cli) -> None:
    status = json.loads(cli("calibration", "status", "--json", cwd=demo).stdout)
    (pinned,) = [s for s in status if s["grader_id"] == "reply-quality"]
    labels = str(EXAMPLE_REGISTRY / "calibration" / "reply-quality.jsonl")
    recorded = cli(
        "calibration", "record", "reply-quality", "--labels", labels,
        "--config", pinned["grader_config_digest"], "--json", cwd=demo,
    )  # fmt: skip
    assert json.loads(recorded.stdout)["grader_config_digest"] == pinned["grader_config_digest"]
    wrong = cli(
        "calibration", "record", "reply-quality", "--labels", labels,
        "--config", "sha256:" + "0" * 64, "--json", cwd=demo,
    )  # fmt: skip
    assert wrong.code == 2
    assert json.loads(wrong.stdout)["error"]["field"] == "--config"


# ------------------------------------------------------------- 9.5 risk labels ratchet


def _lower_risk(doc: dict[str, Any]) -> None:
    doc["meta"]["risk"] = "noncritical_regression"
    doc["meta"]["protects"] = []


def test_lowering_risk_in_place_is_refused_and_a_waiver_stays_refused(demo: Path, cli: Cli) -> None:
    edit_registry(demo, f"tasks/{CRITICAL}.yaml", _lower_risk, "relabel in place")
    synced = cli("sync", "--json", cwd=demo)
    assert synced.code == 2, synced.stdout
    error = json.loads(synced.stdout)["error"]
    assert error["field"] == "meta.risk"
    assert "critical" in error["message"] and "noncritical_regression" in error["message"]
    waiver = _waive(cli, demo, "build-124")
    assert waiver.code == 5, waiver.stdout
    assert gate_code(cli, demo, "build-124") == 4


def _waive(cli: Cli, demo: Path, build: str, task: str = CRITICAL) -> Any:
    expires = format_timestamp(datetime.now(UTC) + timedelta(days=7))
    return cli(
        "waiver", "grant", "--task", task, "--suite", SUITE, "--states", "task_fail",
        "--build", build, "--owner", "o@example.com", "--reason", "r",
        "--expires", expires, "--json", cwd=demo,
    )  # fmt: skip


def test_a_lower_risk_revision_takes_effect_only_when_promoted(demo: Path, cli: Cli) -> None:
    def revision_two(doc: dict[str, Any]) -> None:
        _lower_risk(doc)
        doc["revision"] = 2  # same task_digest: only labels change

    edit_registry(demo, f"tasks/{CRITICAL}.yaml", revision_two, "revision 2, lower risk")
    assert cli("sync", cwd=demo).code == 0
    assert _waive(cli, demo, "build-124").code == 5
    data = gate_json(cli, demo, "build-124")
    assert data["decision"] == "block"
    row = next(t for t in data["tasks"] if t["task_id"] == CRITICAL)
    assert row["risk"] == "critical"
    # Promoting the lower-risk revision is the one way to lower it.
    promoted = cli("promote", CRITICAL, "--to", SUITE, "--json", cwd=demo)
    assert promoted.code == 0, promoted.stdout
    after = gate_json(cli, demo, "build-124")
    assert next(t for t in after["tasks"] if t["task_id"] == CRITICAL)["risk"] == (
        "noncritical_regression"
    )
    assert after["decision"] == "block"  # the double commit is a hard failure all the same


# ------------------------------------------------------- 9.8 --baseline auto; 9.9 --at T


def test_baseline_auto_never_picks_the_candidate(demo: Path, cli: Cli) -> None:
    data = gate_json(cli, demo, "build-125", "--baseline", "auto")
    assert data["decision"] == "pass"
    assert data["regression"]["baseline"] is None
    assert any("other than build-125" in r for r in data["reasons"]), data["reasons"]
    assert cli("compare", "--baseline", "build-125", "--candidate", "build-125",
               "--suite", SUITE, cwd=demo).code == 2  # fmt: skip


def test_gate_at_t_reads_the_registry_as_it_stood_then(demo: Path, cli: Cli) -> None:
    before = format_timestamp(datetime.now(UTC))
    time.sleep(0.01)
    record = with_guard(
        fix_record(demo, CRITICAL), "hard_constraint_fail", trial_id="late", index=5
    )
    assert ingest(cli, demo, "late", record).code == 0
    assert gate_code(cli, demo, "build-125") == 4
    then = gate_json(cli, demo, "build-125", "--at", before)
    assert then["decision"] == "pass", then["reasons"]
    assert then["evaluated_at"] == before
    replayed = cli("gate", "replay", then["gate_id"], "--json", cwd=demo)
    assert json.loads(replayed.stdout)["identical"] is True
    verify_ok(cli, demo)  # verify rebuilds the --at decision's inputs at its cutoff


# ------------------------------------------------------ 9.10 an absent rule refuses


def test_retire_without_a_removal_rule_is_refused(demo: Path, cli: Cli) -> None:
    edit_registry(demo, "policies/suite-policy.yaml", lambda d: d.pop("removal"), "no removal rule")
    assert cli("sync", cwd=demo).code == 0
    retired = cli(
        "retire", NONCRITICAL, "--from", SUITE, "--reason", "obsolete", "--json", cwd=demo
    )
    assert retired.code == 5, retired.stdout
    text = json.dumps(json.loads(retired.stdout))
    assert "the suite policy has no removal rule" in text
    members = json.loads(cli("suite", "show", SUITE, "--json", cwd=demo).stdout)["members"]
    assert NONCRITICAL in [m["task_id"] for m in members]


# ------------------------------------------- 6.1 originals unique; reruns in their eval case


def test_a_duplicate_original_trial_index_is_refused(demo: Path, cli: Cli) -> None:
    record = copy.deepcopy(fix_record(demo, CRITICAL, 1))
    record["trial_id"] = "second-index-1"
    result = ingest(cli, demo, "dup", record)
    assert result.code == 2
    error = json.loads(result.stdout)["error"]
    assert error["field"] == "trial_index" and "already taken" in error["message"]


def test_a_rerun_whose_parent_is_of_another_build_is_refused(demo: Path, cli: Cli) -> None:
    record = copy.deepcopy(fix_record(demo, CRITICAL, 1))
    record["trial_id"] = "cross-build-rerun"
    record["rerun"] = {"parent_trial_id": "trial-b124-support-refund-in-order-1"}
    result = ingest(cli, demo, "cross", record)
    assert result.code == 2
    error = json.loads(result.stdout)["error"]
    assert error["field"] == "rerun.parent_trial_id" and "another eval case" in error["message"]


def test_a_rerun_keeps_its_parents_trial_index(demo: Path, cli: Cli) -> None:
    parent = fix_record(demo, CRITICAL, 1)
    record = copy.deepcopy(parent)
    record["trial_id"] = "moved-rerun"
    record["trial_index"] = 7
    record["rerun"] = {"parent_trial_id": parent["trial_id"]}
    result = ingest(cli, demo, "moved", record)
    assert result.code == 2
    assert json.loads(result.stdout)["error"]["field"] == "trial_index"


# ------------------------------------------------- 15 only registered definitions are stored


def _lax_policy(path: Path) -> Path:
    doc = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text())
    doc["reruns"]["max_attempts_by_class"] = {"grader_invalid": 9, "infrastructure_invalid": 9}
    doc["waivers"]["max_duration_days"] = 365
    return write_yaml(path, doc)


def test_an_unregistered_policy_file_is_refused_without_dry_run(demo: Path, cli: Cli) -> None:
    lax = _lax_policy(demo / "lax.yaml")
    db = demo / ".evalops" / "registry.db"
    before = sqlite_fingerprint(db)
    result = cli(
        "gate", "check", "--build", "build-125", "--suite", SUITE, "--policy", str(lax),
        "--json", cwd=demo,
    )  # fmt: skip
    assert result.code == 2
    message = json.loads(result.stdout)["error"]["message"]
    assert "evalops sync" in message and "--dry-run" in message
    assert sqlite_fingerprint(db) == before


def test_dry_run_prints_the_decision_and_stores_nothing(demo: Path, cli: Cli) -> None:
    lax = _lax_policy(demo / "lax.yaml")
    db = demo / ".evalops" / "registry.db"
    before = sqlite_fingerprint(db)
    for extra in ((), ("--json",)):
        result = cli(
            "gate", "check", "--build", "build-124", "--suite", SUITE, "--policy", str(lax),
            "--dry-run", *extra, cwd=demo,
        )  # fmt: skip
        assert result.code == 4, result.stdout + result.stderr
        if extra:
            data = json.loads(result.stdout)
            assert data["stored"] is False and data["decision"] == "block"
        else:
            assert result.stdout.startswith("BLOCK")
    assert sqlite_fingerprint(db) == before
    listed = json.loads(cli("gate", "list", "--json", cwd=demo).stdout)
    assert [d["gate_id"] for d in listed] == ["GATE-1", "GATE-2", "GATE-3"]


def test_a_registered_policy_other_than_the_one_in_force_decides_only_a_dry_run(
    demo: Path, cli: Cli
) -> None:
    older = json.loads(
        cli("digest", "registry/policies/gate-policy.yaml", "--json", cwd=demo).stdout
    )[0]["policy_digest"]

    def stricter(doc: dict[str, Any]) -> None:
        doc["critical_regressions"]["baseline"] = "required"

    edit_registry(demo, "policies/gate-policy.yaml", stricter, "baseline required")
    assert cli("sync", cwd=demo).code == 0
    assert gate_code(cli, demo, "build-125") == 3  # the new policy in force holds
    refused = cli(
        "gate", "check", "--build", "build-125", "--suite", SUITE, "--policy", older,
        "--json", cwd=demo,
    )  # fmt: skip
    assert refused.code == 2
    assert "--dry-run" in json.loads(refused.stdout)["error"]["message"]
    data = gate_json(cli, demo, "build-125", "--policy", older, "--dry-run")
    assert data["policy_digest"] == older == data["policy"]["digest"]
    assert (data["decision"], data["stored"]) == ("pass", False)
    verify_ok(cli, demo)


# ---------------------------------------------------------- 16.1 reconciliations are facts


def test_a_committed_twice_effect_cannot_be_reconciled_away(demo: Path, cli: Cli) -> None:
    assert gate_code(cli, demo, "build-124") == 4
    for extra in ((), ("--index", "1")):
        result = cli(
            "trials", "reconcile", DOUBLE_COMMIT, "--effect", "refund:A-1",
            "--status", "not_committed", "--evidence", "ticket://x", *extra, "--json", cwd=demo,
        )  # fmt: skip
        assert result.code == 5, result.stdout
        assert "fact of the run" in json.loads(result.stdout)["error"]["message"]
    assert audit_kinds(cli, demo)[-2:] == ["trials.reconcile_refused"] * 2
    assert gate_code(cli, demo, "build-124") == 4
    verify_ok(cli, demo)


def test_a_settled_effect_stays_settled(demo: Path, cli: Cli) -> None:
    again = cli(
        "trials", "reconcile", "trial-b124-article-publish-approved-revision-3",
        "--effect", "publish:article-42", "--status", "not_committed",
        "--evidence", "ticket://y", "--json", cwd=demo,
    )  # fmt: skip
    assert again.code == 5
    assert "already reconciled as committed" in json.loads(again.stdout)["error"]["message"]


# --------------------------------------------- 16.2 a blocking trajectory guard blocks


def test_a_blocking_trajectory_guard_blocks_and_coverage_agrees(demo: Path, cli: Cli) -> None:
    def add_guard(doc: dict[str, Any]) -> None:
        doc["version"] += 1
        doc["graders"].insert(  # first: the primary guard of refund_outside_policy
            0,
            {
                "id": "path-guard",
                "version": 1,
                "layer": "trajectory_diagnosis",
                "type": "deterministic",
                "rule_state": "blocking_constraint",
                "produces": ["pass", "task_fail"],
                "blocking": True,
                "covers": ["refund_outside_policy"],
            },
        )

    edit_registry(demo, "graders/support-graders.yaml", add_guard, "a blocking path guard")
    assert cli("sync", cwd=demo).code == 0
    from evalops.registry.definitions import load_definition

    new_set = load_definition(demo / "registry" / "graders" / "support-graders.yaml").digest
    records = []
    for index in range(3):
        record = copy.deepcopy(fix_record(demo, NONCRITICAL, index))
        record["trial_id"] = f"guarded-{index}"
        record["grader_set_digest"] = new_set
        record["eval_case_digest"] = digests.eval_case_digest(
            record["task_digest"], record["execution_digest"], new_set
        )
        record.pop("primary_classification", None)
        record["grader_results"] = [
            {**r, "state": "task_pass"} if r["grader_id"] != GUARD else r
            for r in record["grader_results"]
        ] + [{"grader_id": "path-guard", "grader_version": 1, "state": "pass"}]
        records.append(record)
    records[2]["grader_results"][-1]["state"] = "task_fail"
    assert ingest(cli, demo, "guarded", *records).code == 0
    promoted = cli("promote", NONCRITICAL, "--to", SUITE, "--json", cwd=demo)
    assert promoted.code == 0, promoted.stdout
    data = gate_json(cli, demo, "build-125")
    row = next(t for t in data["tasks"] if t["task_id"] == NONCRITICAL)
    assert (row["state"], row["effect"]) == ("hard_constraint_fail", "block")
    assert data["decision"] == "block"
    assert _waive(cli, demo, "build-125", NONCRITICAL).code == 0  # task_fail may be waived...
    assert gate_code(cli, demo, "build-125") == 4  # ...but a hard failure never is
    coverage = json.loads(cli("suite", "coverage", SUITE, "--json", cwd=demo).stdout)
    (guarded,) = [
        r for r in coverage["rows"]
        if r["task_id"] == NONCRITICAL and r["primary_grader"] == "path-guard"
    ]  # fmt: skip
    assert guarded["gate_effect"] == "block"


# ------------------------------------------------------------ 16.3 definitions in force


def _strict(doc: dict[str, Any]) -> None:
    doc["critical_regressions"]["baseline"] = "required"


def _lax(doc: dict[str, Any]) -> None:
    doc["critical_regressions"]["baseline"] = "optional"


def _revert(demo: Path) -> None:
    repo = git.Repo(demo)
    try:
        repo.git.revert("HEAD", no_edit=True)
    finally:
        repo.close()


def test_a_reverted_gate_policy_is_back_in_force(demo: Path, cli: Cli) -> None:
    edit_registry(demo, "policies/gate-policy.yaml", _strict, "P1: strict")
    assert cli("sync", cwd=demo).code == 0
    assert gate_code(cli, demo, "build-125") == 3
    edit_registry(demo, "policies/gate-policy.yaml", _lax, "P2: lax")
    assert cli("sync", cwd=demo).code == 0
    assert gate_code(cli, demo, "build-125") == 0
    _revert(demo)
    synced = cli("sync", "--json", cwd=demo)
    assert synced.code == 0
    report = json.loads(synced.stdout)
    assert report["registered"] == []
    assert [(d["kind"], d["id"]) for d in report["back_in_force"]] == [
        ("gate_policy", "release-gate")
    ]
    assert audit_kinds(cli, demo)[-1] == "sync.in_force"
    assert gate_code(cli, demo, "build-125") == 3
    verify_ok(cli, demo)


def test_a_reverted_execution_profile_is_back_in_force(demo: Path, cli: Cli) -> None:
    def new_model(doc: dict[str, Any]) -> None:
        doc["model"]["name"] = "another-model"

    edit_registry(demo, "executions/fix-b125.yaml", new_model, "model change")
    assert cli("sync", cwd=demo).code == 0
    held = gate_json(cli, demo, "build-125")
    assert held["decision"] == "hold"
    assert held["ignoredTrials"].get("older_execution_digest", 0) > 0
    _revert(demo)
    assert cli("sync", cwd=demo).code == 0
    assert gate_code(cli, demo, "build-125") == 0


def test_a_deleted_definition_is_no_longer_in_force(demo: Path, cli: Cli) -> None:
    (demo / "registry" / "executions" / "fix-b125.yaml").unlink()
    commit_all(demo, "build-125 retired")
    synced = json.loads(cli("sync", "--json", cwd=demo).stdout)
    assert [(d["kind"], d["id"]) for d in synced["no_longer_in_force"]] == [
        ("execution_profile", "fix-b125")
    ]
    result = cli("gate", "check", "--build", "build-125", "--suite", SUITE, "--json", cwd=demo)
    assert result.code == 2
    assert "no execution profile in force" in json.loads(result.stdout)["error"]["message"]


# --------------------------------------------------- 16.5 one-class calibrations fail


def test_a_one_class_calibration_is_failing_and_refuses_promotion(demo: Path, cli: Cli) -> None:
    items = [
        {
            "item_id": f"one-{i:03d}",
            "split": "holdout" if i < 60 else "calibration",
            "stratum": "s",
            "human_labels": [
                {"annotator": "a", "label": "task_pass"},
                {"annotator": "b", "label": "task_pass"},
            ],
            "model_label": "task_pass",
        }
        for i in range(70)
    ]
    labels = write_jsonl(demo / "one-class.jsonl", items)
    recorded = cli(
        "calibration", "record", "reply-quality", "--labels", str(labels), "--json", cwd=demo
    )
    data = json.loads(recorded.stdout)
    assert data["state"] == "failing"
    assert data["human_agreement"]["overall"] is None
    promoted = cli("promote", "support-reply-tone", "--to", SUITE, "--json", cwd=demo)
    assert promoted.code == 5
    unmet = [r["name"] for r in json.loads(promoted.stdout)["requirements"] if not r["met"]]
    assert "calibrated_graders" in unmet
    assert gate_code(cli, demo, "build-125") == 3  # the pinned judge is failing now


# ------------------------------------------------ 16.6 a required baseline that is missing


def test_a_missing_required_baseline_holds_in_human_and_json_output(demo: Path, cli: Cli) -> None:
    edit_registry(demo, "policies/gate-policy.yaml", _strict, "baseline required")
    assert cli("sync", cwd=demo).code == 0
    human = cli("gate", "check", "--build", "build-125", "--suite", SUITE, cwd=demo)
    assert human.code == 3, human.stdout + human.stderr
    assert "internal error" not in human.stderr
    assert "baseline is required" in human.stdout
    assert gate_code(cli, demo, "build-125", "--json") == 3
