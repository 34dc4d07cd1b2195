"""Acceptance tests of calibration and human review at the CLI (docs/promotion.md,
docs/classification.md, docs/gate.md and docs/cli.md).

The workspace: a critical task with an invariant, judged by a grader set whose outcome
layer has a BLOCKING model grader (`judge`, produces task_pass / task_fail / abstain) next
to two deterministic graders; a second grader set holds a three-class model grader
(`triage`) for the per-class human-agreement case; a regression suite; both example
policies. The committed example label set registry/calibration/reply-quality.jsonl gives
`judge` a valid calibration.

- `calibration record --json` never prints NaN/Infinity, even for degenerate label files.
- Changing the judge's prompt hash, model name or rubric version (and re-syncing) turns its
  calibration stale: its trials re-derive to grader_invalid, the gate holds (exit 3);
  recording a new calibration restores them and the gate passes again.
- A holdout below min_holdout_items, a Wilson lower bound below its minimum, or a class on
  which humans do not agree enough each make the calibration not valid for exactly that.
- A review resolution re-classifies the trial, shows in `trials show` with actor and
  reason, and the original grader result stays.
- `calibration invalidate` makes the calibration stale and is an audit event;
  `calibration list|show` work; `verify` exits 0.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import yaml

from tests.conftest import Cli
from tests.helpers import (
    EXAMPLE_REGISTRY,
    MINI_EXECUTION,
    MINI_TASK,
    CliResult,
    built_once,
    commit_all,
    run_quiet,
    write_yaml,
)
from tests.trial_factory import eval_case, record, write_jsonl

ACTOR = "tester@example.com"  # EVALOPS_ACTOR, set by tests/conftest.py
DB = Path(".evalops/registry.db")
TASK_ID = "judged-task"
TASK_FILE = f"registry/tasks/{TASK_ID}.yaml"
GRADERS_FILE = "registry/graders/judge-graders.yaml"
TRIAGE_FILE = "registry/graders/triage-graders.yaml"
EXEC_FILE = "registry/executions/mini-b1.json"
SUITE = "regression/judged"
BUILD = "build-1"
JUDGE = "judge"
TRIAGE = "triage"
REPLY_QUALITY = EXAMPLE_REGISTRY / "calibration" / "reply-quality.jsonl"

P, F, M, A = "task_pass", "task_fail", "missing_required_evidence", "abstain"
STATES = {"valid", "stale", "failing", "missing"}

CAL_REQ = {
    "min_holdout_items": 50,
    "min_precision_lower_bound": 0.8,
    "min_recall_lower_bound": 0.8,
    "min_human_agreement": 0.6,
}


def model_grader(gid: str, produces: list[str]) -> dict[str, Any]:
    return {
        "id": gid,
        "version": 1,
        "layer": "outcome",
        "type": "model",
        "evidence_required": ["final_reply"],
        "model": {
            "provider": "example-provider",
            "name": "example-judge-2026-09",
            "prompt_hash": "sha256:" + hashlib.sha256(gid.encode()).hexdigest(),
            "rubric_version": "support-reply/v3",
        },
        "produces": produces,
        "blocking": True,
        "covers": [],
        "calibration_requirements": copy.deepcopy(CAL_REQ),
    }


TASK: dict[str, Any] = copy.deepcopy(MINI_TASK)
TASK["id"] = TASK_ID
TASK["meta"]["invariant"] = "the thing is done exactly once"
TASK["grader_set"] = "judge-graders"

GRADERS: dict[str, Any] = {
    "spec_schema_version": "grader-set/v1",
    "id": "judge-graders",
    "version": 1,
    "graders": [
        {
            "id": "outcome",
            "version": 1,
            "layer": "outcome",
            "type": "deterministic",
            "produces": [P, F],
            "blocking": True,
            "covers": ["done"],
        },
        {
            "id": "no-twice",
            "version": 1,
            "layer": "hard_constraint",
            "type": "deterministic",
            "produces": ["hard_constraint_fail", "pass"],
            "blocking": True,
            "covers": ["do_it_twice"],
        },
        model_grader(JUDGE, [P, F, A]),
    ],
}

TRIAGE_GRADERS: dict[str, Any] = {
    "spec_schema_version": "grader-set/v1",
    "id": "triage-graders",
    "version": 1,
    "graders": [model_grader(TRIAGE, [P, F, M, A])],
}

# Unique across processes too: a registry built once per run in one xdist worker (below)
# holds trials another worker's test then adds to.
_trial_ids = (f"{os.getpid()}-{n}" for n in itertools.count(1))


# ----------------------------------------------------------------------------- helpers


def _run_quiet(*args: str, cwd: Path) -> tuple[int, str]:
    return run_quiet(*args, cwd=cwd, actor=ACTOR)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite JSON number {name}")


def strict_json(result: CliResult) -> Any:
    """The one JSON document on stdout; NaN / Infinity are refused."""
    return json.loads(result.stdout, parse_constant=_reject_constant)


def ok(result: CliResult, code: int = 0) -> Any:
    assert result.code == code, (result.code, result.stdout, result.stderr)
    return strict_json(result)


def load_yaml(ws: Path, rel: str) -> Any:
    return yaml.safe_load((ws / rel).read_text(encoding="utf-8"))


def config_digest(entry: dict[str, Any]) -> str:
    """grader_config_digest (docs/digests.md), recomputed with rfc8785 + hashlib."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(entry)).hexdigest()


def grader_entry(ws: Path, rel: str, gid: str) -> dict[str, Any]:
    for entry in load_yaml(ws, rel)["graders"]:
        if entry["id"] == gid:
            return dict(entry)
    raise AssertionError(f"{gid} not in {rel}")


def passing_results(judge_state: str = P) -> list[dict[str, Any]]:
    return [
        {"grader_id": "outcome", "grader_version": 1, "state": P, "score": 1.0},
        {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
        {"grader_id": JUDGE, "grader_version": 1, "state": judge_state},
    ]


def trials_file(ws: Path, results: Sequence[list[dict[str, Any]]], first_index: int = 0) -> Path:
    case = eval_case(ws / TASK_FILE, ws / EXEC_FILE, ws / GRADERS_FILE)
    records = []
    trial_id = ""
    for i, grader_results in enumerate(results):
        trial_id = f"trial-{next(_trial_ids)}"
        records.append(
            record(
                case,
                trial_id=trial_id,
                task_id=TASK_ID,
                trial_index=first_index + i,
                grader_results=grader_results,
            )
        )
    # .evalops/ is git-ignored: the registry stays clean for `sync`.
    return write_jsonl(ws / ".evalops" / f"{trial_id}.jsonl", records)


def labels_file(
    ws: Path,
    name: str,
    *,
    holdout: Sequence[tuple[int, Sequence[str], str]],
    calibration: Sequence[tuple[int, Sequence[str], str]] = (),
) -> Path:
    """A JSONL label set from (count, human labels, model label) rows per split."""
    lines = []
    n = 0
    for split, rows in (("calibration", calibration), ("holdout", holdout)):
        for count, humans, model in rows:
            for _ in range(count):
                n += 1
                lines.append(
                    {
                        "item_id": f"{name}-{n:04d}",
                        "split": split,
                        "stratum": ("refund", "tone")[n % 2],
                        "human_labels": [
                            {"annotator": f"annotator-{chr(97 + k)}", "label": label}
                            for k, label in enumerate(humans)
                        ],
                        "model_label": model,
                    }
                )
    path = ws / ".evalops" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def record_calibration(
    cli: Cli, ws: Path, grader: str, labels: Path, code: int = 0
) -> dict[str, Any]:
    result = cli(
        "calibration",
        "record",
        grader,
        "--labels",
        str(labels),
        "--annotation-guide",
        "support-reply/v2",
        "--json",
        cwd=ws,
    )
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout, result.stdout
    data: dict[str, Any] = ok(result, code)
    return data


def status_of(cli: Cli, ws: Path, grader: str) -> dict[str, Any]:
    rows = ok(cli("calibration", "status", "--json", cwd=ws))
    assert isinstance(rows, list)
    for row in rows:
        assert set(row) >= {"grader_id", "grader_version", "state", "reasons"}, row
        assert row["state"] in STATES, row
        assert isinstance(row["reasons"], list)
    found = [r for r in rows if r["grader_id"] == grader and r["in_force"]]
    assert len(found) == 1, rows
    status: dict[str, Any] = found[0]
    return status


def pinned_status_of(cli: Cli, ws: Path, grader: str, suite: str) -> dict[str, Any]:
    """The status of the grader config that `suite` pins (what its decisions judge)."""
    rows = ok(cli("calibration", "status", "--json", cwd=ws))
    found = [r for r in rows if r["grader_id"] == grader and suite in r["pinned_by"]]
    assert len(found) == 1, rows
    status: dict[str, Any] = found[0]
    return status


def trials_of(cli: Cli, ws: Path) -> dict[str, dict[str, Any]]:
    rows = ok(cli("trials", "list", "--task", TASK_ID, "--json", cwd=ws))
    return {r["trial_id"]: r for r in rows}


def show_trial(cli: Cli, ws: Path, trial_id: str) -> dict[str, Any]:
    data: dict[str, Any] = ok(cli("trials", "show", trial_id, "--json", cwd=ws))
    return data


def gate(cli: Cli, ws: Path, code: int) -> dict[str, Any]:
    result = cli("gate", "check", "--build", BUILD, "--suite", SUITE, "--json", cwd=ws)
    data: dict[str, Any] = ok(result, code)
    return data


def audit(ws: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(ws / DB)
    try:
        rows = con.execute(
            "SELECT seq, actor, kind, subject, payload FROM audit_event ORDER BY seq"
        ).fetchall()
    finally:
        con.close()
    return [
        {"seq": s, "actor": a, "kind": k, "subject": sub, "payload": json.loads(p)}
        for s, a, k, sub, p in rows
    ]


def verify_ok(cli: Cli, ws: Path) -> None:
    data = ok(cli("verify", "--json", cwd=ws))
    assert data["ok"] is True, data


def assert_record_shape(data: dict[str, Any]) -> None:
    """The `calibration record --json` / `calibration show --json` shape of docs/cli.md."""
    assert set(data) >= {
        "calibration_id",
        "grader_id",
        "grader_version",
        "grader_config_digest",
        "state",
        "reasons",
        "counts",
        "human_agreement",
        "holdout",
    }, sorted(data)
    assert data["state"] in STATES
    assert isinstance(data["reasons"], list)
    assert set(data["counts"]) >= {"calibration", "holdout", "per_class"}
    assert set(data["human_agreement"]) >= {"method", "overall", "per_class"}
    assert set(data["holdout"]) >= {"kappa_vs_majority", "abstain_rate", "per_class"}
    for label, stats in data["holdout"]["per_class"].items():
        assert set(stats) >= {"precision", "precision_ci", "recall", "recall_ci", "support"}, (
            label,
            stats,
        )
        for key in ("precision_ci", "recall_ci"):
            low, high = stats[key]
            assert 0.0 <= low <= high <= 1.0, (label, key, stats)


# ---------------------------------------------------------------------------- fixtures


def _build_seed(root: Path) -> Path:
    reg = root / "registry"
    write_yaml(reg / "tasks" / f"{TASK_ID}.yaml", TASK)
    write_yaml(reg / "graders" / "judge-graders.yaml", GRADERS)
    write_yaml(reg / "graders" / "triage-graders.yaml", TRIAGE_GRADERS)
    path = reg / "executions" / "mini-b1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(MINI_EXECUTION, indent=2), encoding="utf-8")
    write_yaml(
        reg / "suites" / "regression.yaml",
        {"spec_schema_version": "suite/v1", "id": SUITE, "kind": "regression", "owner": ACTOR},
    )
    (reg / "policies").mkdir(parents=True)
    for name in ("suite-policy.yaml", "gate-policy.yaml"):
        shutil.copy(EXAMPLE_REGISTRY / "policies" / name, reg / "policies")
    commit_all(root, "registry with a blocking model grader")
    for args in (("init",), ("sync",)):
        code, output = _run_quiet(*args, cwd=root)
        assert code == 0, output
    return root


def _once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """`build` run once per test run, across modules and xdist workers (`built_once`)."""
    return built_once(factory, name, build)


def judged_seed(factory: pytest.TempPathFactory) -> Path:
    """The synced registry with a blocking model grader; nothing calibrated, no trials (copy
    it before changing it)."""
    return _once(factory, "judged-seed", _build_seed)


def _build_gated(seed: Path, root: Path) -> None:
    shutil.copytree(seed, root, symlinks=True)
    steps: list[tuple[str, ...]] = [
        ("calibration", "record", JUDGE, "--labels", str(REPLY_QUALITY)),
        ("trials", "ingest", str(trials_file(root, [passing_results(), passing_results()]))),
        ("promote", TASK_ID, "--to", SUITE),
        ("gate", "check", "--build", BUILD, "--suite", SUITE),
    ]
    for args in steps:
        code, output = _run_quiet(*args, cwd=root)
        assert code == 0, (args, output)


def judged_gated(factory: pytest.TempPathFactory) -> Path:
    """The seed with judge calibrated, 2 passing trials, the task promoted, a passing gate
    (copy it before changing it)."""
    seed = judged_seed(factory)
    return _once(factory, "judged-gated", lambda root: _build_gated(seed, root))


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_seed(tmp_path_factory)


@pytest.fixture(scope="module")
def gated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_gated(tmp_path_factory)


@pytest.fixture
def seed(seed_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the synced seed: nothing calibrated, no trials."""
    return Path(shutil.copytree(seed_dir, tmp_path / "ws", symlinks=True))


@pytest.fixture
def gated(gated_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the calibrated, promoted workspace whose gate passes."""
    return Path(shutil.copytree(gated_dir, tmp_path / "ws", symlinks=True))


# --------------------------------------------------------------- NaN-free degenerate files

DEGENERATE: dict[str, dict[str, Any]] = {
    "one-class-only": {
        "calibration": [(10, [P, P], P)],
        "holdout": [(60, [P, P], P)],
    },
    "zero-predictions-of-a-class": {"holdout": [(30, [P, P], P), (30, [F, F], P)]},
    "model-always-abstains": {"holdout": [(30, [P, P], A), (30, [F, F], A)]},
    "humans-never-agree": {"holdout": [(30, [P, F], P), (30, [F, P], F)]},
    "single-item": {"holdout": [(1, [F, F], F)]},
    "three-annotators-one-class": {"holdout": [(5, [P, P, P], P)]},
    "calibration-split-only": {"calibration": [(20, [P, P], P), (20, [F, F], F)], "holdout": []},
}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_label_files_record_without_nan(seed: Path, cli: Cli, name: str) -> None:
    labels = labels_file(seed, name, **DEGENERATE[name])
    data = record_calibration(cli, seed, JUDGE, labels)
    assert_record_shape(data)
    assert data["state"] in {"valid", "failing"}
    shown = cli("calibration", "show", data["calibration_id"], "--json", cwd=seed)
    assert "NaN" not in shown.stdout and "Infinity" not in shown.stdout
    shown_data = ok(shown)
    assert_record_shape(shown_data)
    for key in ("counts", "human_agreement", "holdout", "grader_config_digest"):
        assert shown_data[key] == data[key], key
    assert status_of(cli, seed, JUDGE)["state"] == data["state"]


def test_zero_predictions_of_a_class_is_null_precision_and_fails(seed: Path, cli: Cli) -> None:
    labels = labels_file(seed, "never-fail", **DEGENERATE["zero-predictions-of-a-class"])
    data = record_calibration(cli, seed, JUDGE, labels)
    fail = data["holdout"]["per_class"][F]
    assert fail["precision"] is None
    assert fail["precision_ci"] == [0.0, 1.0]
    assert fail["recall"] == 0.0
    assert fail["support"] == 30
    assert data["state"] == "failing"
    assert any(F in r and "precision" in r for r in data["reasons"]), data["reasons"]
    assert F not in data["blockable_classes"]


def test_one_class_only_has_undefined_agreement_and_fails(seed: Path, cli: Cli) -> None:
    """docs/promotion.md: agreement among one class is undefined, never 1, and never meets a
    requirement; with no support for task_fail the judge could block nothing: failing."""
    labels = labels_file(seed, "only-pass", **DEGENERATE["one-class-only"])
    data = record_calibration(cli, seed, JUDGE, labels)
    assert data["human_agreement"]["overall"] is None
    assert data["holdout"]["kappa_vs_majority"] is None
    assert set(data["holdout"]["per_class"]) == {P}
    assert F not in data["blockable_classes"]
    assert data["state"] == "failing"
    assert any("undefined" in r for r in data["reasons"]), data["reasons"]
    assert any("block none" in r for r in data["reasons"]), data["reasons"]


def test_malformed_label_file_is_refused_and_nothing_is_recorded(seed: Path, cli: Cli) -> None:
    labels = labels_file(seed, "bad", holdout=[(3, [P, P], P), (1, [P, P], "hard_constraint_fail")])
    before = audit(seed)
    result = cli("calibration", "record", JUDGE, "--labels", str(labels), "--json", cwd=seed)
    assert result.code == 2, (result.stdout, result.stderr)
    error = strict_json(result)["error"]
    assert error["code"] == 2
    assert error["line"] == 4
    assert error["field"] == "model_label"
    assert audit(seed) == before
    assert ok(cli("calibration", "list", "--json", cwd=seed)) == []
    assert status_of(cli, seed, JUDGE)["state"] == "missing"


def test_one_label_an_item_from_three_annotators_is_refused_not_a_crash(
    seed: Path, cli: Cli
) -> None:
    """Fleiss' kappa needs every item labelled by the same number, at least 2, of the
    annotators: one label an item from three annotators was "internal error: ValueError";
    it is exit 2 naming an item, nothing recorded."""
    labels = seed / "one-label-each.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"item_id": f"one-{n}", "split": "holdout", "stratum": "refund",
                        "human_labels": [{"annotator": f"annotator-{n % 3}", "label": P}],
                        "model_label": P}) + "\n"
            for n in range(6)
        ),
        encoding="utf-8",
    )  # fmt: skip
    before = audit(seed)
    result = cli("calibration", "record", JUDGE, "--labels", str(labels), "--json", cwd=seed)
    assert result.code == 2, (result.stdout, result.stderr)
    error = strict_json(result)["error"]
    assert error["field"] == "human_labels" and error["file"] == str(labels)
    assert "'one-0' has 1 human label(s)" in error["message"], error
    assert audit(seed) == before


# ------------------------------------------------------------ record, status, list, show


def test_record_valid_calibration_status_list_show(seed: Path, cli: Cli) -> None:
    missing = status_of(cli, seed, JUDGE)
    assert missing["state"] == "missing"
    assert missing["reasons"] and all(r.strip() for r in missing["reasons"])
    assert missing["grader_version"] == 1

    before = audit(seed)
    data = record_calibration(cli, seed, JUDGE, REPLY_QUALITY)
    assert_record_shape(data)
    assert data["calibration_id"] == "CAL-1"
    assert data["grader_id"] == JUDGE
    assert data["grader_version"] == 1
    assert data["grader_config_digest"] == config_digest(grader_entry(seed, GRADERS_FILE, JUDGE))
    assert data["state"] == "valid", data["reasons"]
    assert data["reasons"] == []
    assert sorted(data["blockable_classes"]) == [F, P]
    assert data["counts"]["calibration"] == 40
    assert data["counts"]["holdout"] == 120
    assert data["human_agreement"]["method"] == "cohen"
    assert data["human_agreement"]["overall"] == pytest.approx(0.9)
    assert data["holdout"]["abstain_rate"] == pytest.approx(2 / 120)
    for label in (P, F):
        stats = data["holdout"]["per_class"][label]
        assert stats["support"] == 57
        assert stats["precision"] == pytest.approx(54 / 56)
        assert stats["recall"] == pytest.approx(54 / 57)

    new = audit(seed)[len(before) :]
    assert len(new) == 1, new
    assert new[0]["kind"].startswith("calibration")
    assert new[0]["actor"] == ACTOR
    assert new[0]["subject"] == "CAL-1"

    status = status_of(cli, seed, JUDGE)
    assert {k: status[k] for k in ("grader_id", "grader_version", "state", "reasons")} == {
        "grader_id": JUDGE,
        "grader_version": 1,
        "state": "valid",
        "reasons": [],
    }
    # The other model grader is listed too, with its own state.
    assert status_of(cli, seed, TRIAGE)["state"] == "missing"

    listed = ok(cli("calibration", "list", "--json", cwd=seed))
    assert [(r["calibration_id"], r["grader_id"]) for r in listed] == [("CAL-1", JUDGE)]

    shown = ok(cli("calibration", "show", "CAL-1", "--json", cwd=seed))
    assert_record_shape(shown)
    for key in ("calibration_id", "grader_config_digest", "counts", "human_agreement", "holdout"):
        assert shown[key] == data[key], key
    assert shown["state"] == "valid"
    assert "support-reply/v2" in json.dumps(shown)  # the annotation guide version is stored

    human = cli("calibration", "show", "CAL-1", cwd=seed)
    assert human.code == 0 and "CAL-1" in human.stdout and "valid" in human.stdout
    human_status = cli("calibration", "status", cwd=seed)
    assert human_status.code == 0 and JUDGE in human_status.stdout

    unknown = cli("calibration", "show", "CAL-99", "--json", cwd=seed)
    assert unknown.code == 2
    assert strict_json(unknown)["error"]["code"] == 2

    second = record_calibration(cli, seed, JUDGE, REPLY_QUALITY)
    assert second["calibration_id"] == "CAL-2"
    listed = ok(cli("calibration", "list", "--json", cwd=seed))
    assert [r["calibration_id"] for r in listed] == ["CAL-1", "CAL-2"]
    assert ok(cli("calibration", "show", "CAL-2", "--json", cwd=seed))["state"] == "valid"
    verify_ok(cli, seed)


def test_only_model_graders_calibrate(seed: Path, cli: Cli) -> None:
    for grader in ("outcome", "no-such-grader"):
        result = cli("calibration", "record", grader, "--labels", str(REPLY_QUALITY), cwd=seed)
        assert result.code == 2, (grader, result.stdout, result.stderr)
    wrong_version = cli(
        "calibration", "record", f"{JUDGE}@2", "--labels", str(REPLY_QUALITY), cwd=seed
    )
    assert wrong_version.code == 2, (wrong_version.stdout, wrong_version.stderr)
    assert ok(cli("calibration", "list", "--json", cwd=seed)) == []
    pinned = record_calibration(cli, seed, f"{JUDGE}@1", REPLY_QUALITY)
    assert (pinned["grader_id"], pinned["grader_version"]) == (JUDGE, 1)


# ------------------------------------------------- config changes make a calibration stale


def _change_prompt(judge: dict[str, Any]) -> None:
    judge["model"]["prompt_hash"] = "sha256:" + hashlib.sha256(b"a new judge prompt").hexdigest()


def _change_model(judge: dict[str, Any]) -> None:
    judge["model"]["name"] = "example-judge-2026-12"


def _change_rubric(judge: dict[str, Any]) -> None:
    judge["model"]["rubric_version"] = "support-reply/v4"


CHANGES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("prompt_hash", _change_prompt),
    ("model name", _change_model),
    ("rubric_version", _change_rubric),
]


def change_judge(ws: Path, mutate: Callable[[dict[str, Any]], None], message: str) -> str:
    """Edit the judge, bump the grader set version, commit; returns the new config digest."""
    doc = load_yaml(ws, GRADERS_FILE)
    (judge,) = [g for g in doc["graders"] if g["id"] == JUDGE]
    mutate(judge)
    doc["version"] += 1
    write_yaml(ws / GRADERS_FILE, doc)
    commit_all(ws, message)
    return config_digest(judge)


def assert_gate_passes(cli: Cli, ws: Path, trial_ids: Sequence[str], what: str) -> None:
    trials = trials_of(cli, ws)
    for trial_id in trial_ids:
        assert trials[trial_id]["classification"] == P, (what, trials[trial_id])
    data = gate(cli, ws, 0)
    assert data["decision"] == "pass", (what, data["reasons"])
    (task,) = data["tasks"]
    assert (task["task_id"], task["state"], task["effect"]) == (TASK_ID, P, "pass"), what


def assert_gate_holds_grader_invalid(
    cli: Cli, ws: Path, trial_ids: Sequence[str], what: str
) -> None:
    trials = trials_of(cli, ws)
    for trial_id in trial_ids:
        row = trials[trial_id]
        assert row["classification"] == "grader_invalid", (what, row)
        assert "uncalibrated_model_grader" in row["secondary_labels"], (what, row)
    shown = show_trial(cli, ws, trial_ids[0])
    assert shown["classification"] == "grader_invalid", what
    data = gate(cli, ws, 3)
    assert data["decision"] == "hold", (what, data)
    (task,) = data["tasks"]
    assert (task["task_id"], task["state"], task["effect"]) == (
        TASK_ID,
        "grader_invalid",
        "hold",
    ), (what, task)


def test_config_change_makes_the_new_config_stale_and_leaves_the_pinned_one_valid(
    seed: Path, cli: Cli
) -> None:
    """docs/promotion.md: a calibration belongs to one grader config; decisions judge the config
    the suite pins. A new prompt, model or rubric makes the config in force `stale` until it
    is calibrated, while the pinned config keeps its own calibration and its gate."""
    ws = seed
    first = record_calibration(cli, ws, JUDGE, REPLY_QUALITY)
    assert first["state"] == "valid", first["reasons"]
    path = trials_file(ws, [passing_results(), passing_results()])
    ingested = ok(cli("trials", "ingest", str(path), "--json", cwd=ws))
    assert ingested["ingested"] == 2
    trial_ids = sorted(trials_of(cli, ws))
    assert len(trial_ids) == 2
    promoted = ok(cli("promote", TASK_ID, "--to", SUITE, "--json", cwd=ws))
    assert promoted["accepted"] is True, promoted
    assert_gate_passes(cli, ws, trial_ids, "before any change")
    pinned_config = first["grader_config_digest"]

    # Control: a new grader set version that leaves the judge's entry as it is keeps it valid.
    unchanged = change_judge(ws, lambda judge: None, "graders: new version, same judge")
    assert unchanged == pinned_config
    ok(cli("sync", "--json", cwd=ws))
    assert status_of(cli, ws, JUDGE)["state"] == "valid"
    assert_gate_passes(cli, ws, trial_ids, "grader set bumped, judge unchanged")

    current = first
    for n, (what, mutate) in enumerate(CHANGES, start=2):
        new_digest = change_judge(ws, mutate, f"judge: new {what}")
        ok(cli("sync", "--json", cwd=ws))

        status = status_of(cli, ws, JUDGE)
        assert status["grader_config_digest"] == new_digest, what
        assert status["state"] == "stale", (what, status)
        assert status["reasons"] and all(r.strip() for r in status["reasons"]), (what, status)
        assert current["calibration_id"] in status["reasons"][0], (what, status)
        # The calibration stays valid for the config it was made for...
        shown = ok(cli("calibration", "show", current["calibration_id"], "--json", cwd=ws))
        assert shown["grader_config_digest"] != new_digest, what
        assert shown["state"] == "valid", (what, shown)
        # ... and the suite still pins the first config, whose trials still pass.
        pinned = pinned_status_of(cli, ws, JUDGE, SUITE)
        assert (pinned["grader_config_digest"], pinned["state"]) == (pinned_config, "valid")
        assert_gate_passes(cli, ws, trial_ids, what)

        current = record_calibration(cli, ws, JUDGE, REPLY_QUALITY)
        assert current["calibration_id"] == f"CAL-{n}", what
        assert current["grader_config_digest"] == new_digest, what
        assert current["state"] == "valid", (what, current["reasons"])
        assert status_of(cli, ws, JUDGE)["state"] == "valid", what
    verify_ok(cli, ws)


def test_invalidate_makes_stale_and_is_audited(gated: Path, cli: Cli) -> None:
    trial_ids = sorted(trials_of(cli, gated))
    assert_gate_passes(cli, gated, trial_ids, "before invalidation")

    empty = cli("calibration", "invalidate", JUDGE, "--reason", " ", "--json", cwd=gated)
    assert empty.code == 2, (empty.stdout, empty.stderr)
    assert status_of(cli, gated, JUDGE)["state"] == "valid"

    before = audit(gated)
    reason = "label distribution shift in production"
    result = cli(
        "--actor",
        "owner@example.com",
        "calibration",
        "invalidate",
        JUDGE,
        "--reason",
        reason,
        "--json",
        cwd=gated,
    )
    data = ok(result)
    assert_record_shape(data)
    assert data["calibration_id"] == "CAL-1"
    assert data["state"] == "stale"
    assert any(reason in r for r in data["reasons"]), data["reasons"]

    new = audit(gated)[len(before) :]
    assert len(new) == 1, new
    assert new[0]["kind"].startswith("calibration")
    assert new[0]["actor"] == "owner@example.com"
    assert new[0]["subject"] == "CAL-1"
    assert reason in json.dumps(new[0]["payload"])

    status = status_of(cli, gated, JUDGE)
    assert status["state"] == "stale"
    assert any(reason in r for r in status["reasons"]), status
    shown = ok(cli("calibration", "show", "CAL-1", "--json", cwd=gated))
    assert shown["state"] == "stale"
    assert_gate_holds_grader_invalid(cli, gated, trial_ids, "after invalidation")

    again = record_calibration(cli, gated, JUDGE, REPLY_QUALITY)
    assert again["calibration_id"] == "CAL-2"
    assert again["state"] == "valid"
    assert status_of(cli, gated, JUDGE)["state"] == "valid"
    assert_gate_passes(cli, gated, trial_ids, "recalibrated after invalidation")
    verify_ok(cli, gated)


def test_invalidate_without_a_calibration_is_an_input_error(seed: Path, cli: Cli) -> None:
    result = cli("calibration", "invalidate", JUDGE, "--reason", "why", "--json", cwd=seed)
    assert result.code == 2, (result.stdout, result.stderr)
    assert strict_json(result)["error"]["code"] == 2
    assert "has no calibration" in strict_json(result)["error"]["message"]
    # A mistyped grader is an unknown grader, as `calibration record` says it.
    typo = cli("calibration", "invalidate", JUDGE[:-1], "--reason", "why", "--json", cwd=seed)
    assert typo.code == 2
    assert f"did you mean '{JUDGE}'?" in strict_json(typo)["error"]["message"]


def test_record_calibrates_the_newest_registered_config_of_the_grader(seed: Path, cli: Cli) -> None:
    """Two grader sets in force hold the judge, configured differently: without --config
    the newest registered config is calibrated (docs/promotion.md), not whichever set
    comes first by name."""
    newer = copy.deepcopy(GRADERS)
    newer["id"] = "zzz-judge-graders"  # sorts after judge-graders
    judge = next(g for g in newer["graders"] if g["id"] == JUDGE)
    judge["model"]["rubric_version"] = "support-reply/v4"
    write_yaml(seed / "registry" / "graders" / "zzz-judge-graders.yaml", newer)
    commit_all(seed, "a second set, with a newer judge config")
    assert cli("sync", cwd=seed).code == 0
    data = record_calibration(cli, seed, JUDGE, REPLY_QUALITY)
    assert data["grader_config_digest"] == config_digest(judge)
    older = config_digest(grader_entry(seed, GRADERS_FILE, JUDGE))
    assert data["grader_config_digest"] != older
    # Status lists both configs in force: the other one is not calibrated, and says so.
    rows = ok(cli("calibration", "status", "--json", cwd=seed))
    judged = {r["grader_config_digest"]: r for r in rows if r["grader_id"] == JUDGE}
    assert set(judged) == {config_digest(judge), older}, rows
    assert judged[config_digest(judge)]["state"] == "valid"
    assert judged[older]["state"] != "valid" and judged[older]["in_force"] is True


# ------------------------------------------------------- validity: exactly what they should


def test_holdout_below_min_holdout_items_fails_for_exactly_that(seed: Path, cli: Cli) -> None:
    labels = labels_file(
        seed,
        "small-holdout",
        calibration=[(20, [P, P], P), (20, [F, F], F)],
        holdout=[(20, [P, P], P), (20, [F, F], F)],
    )
    data = record_calibration(cli, seed, JUDGE, labels)
    assert data["counts"]["holdout"] == 40
    assert data["state"] == "failing"
    assert len(data["reasons"]) == 1, data["reasons"]
    reason = data["reasons"][0]
    assert "holdout" in reason and "40" in reason and "50" in reason, reason
    status = status_of(cli, seed, JUDGE)
    assert (status["state"], status["reasons"]) == ("failing", data["reasons"])
    verify_ok(cli, seed)


def test_holdout_items_the_humans_split_on_do_not_count_toward_its_size(
    seed: Path, cli: Cli
) -> None:
    """50 holdout items, 16 on which the two annotators split: the model is measured on 34
    items, fewer than min_holdout_items (50), so the calibration is failing for that."""
    labels = labels_file(
        seed,
        "split-holdout",
        calibration=[(20, [P, P], P), (20, [F, F], F)],
        holdout=[(17, [P, P], P), (17, [F, F], F), (8, [P, F], P), (8, [F, P], F)],
    )
    data = record_calibration(cli, seed, JUDGE, labels)
    assert data["counts"]["holdout"] == 50 and data["counts"]["holdout_with_majority"] == 34
    assert data["state"] == "failing"
    assert (
        "holdout has 34 items with a human majority (16 more without one), needs 50"
        in data["reasons"]
    ), data["reasons"]
    shown = cli("calibration", "show", data["calibration_id"], cwd=seed)
    assert "items: 40 calibration, 34 holdout (16 without a human majority)" in shown.stdout


def test_lower_bound_below_minimum_fails_for_exactly_that_class(seed: Path, cli: Cli) -> None:
    # task_fail: 30 items, 24 hits, 6 abstentions -> recall 0.8, Wilson lower bound ~0.63;
    # its precision (24/24) and both task_pass bounds (30/30) meet 0.8.
    labels = labels_file(
        seed,
        "low-recall",
        calibration=[(10, [P, P], P), (10, [F, F], F)],
        holdout=[(30, [P, P], P), (24, [F, F], F), (6, [F, F], A)],
    )
    data = record_calibration(cli, seed, JUDGE, labels)
    fail = data["holdout"]["per_class"][F]
    assert fail["recall"] == pytest.approx(0.8)
    assert fail["recall_ci"][0] < 0.8
    assert data["state"] == "failing"
    assert len(data["reasons"]) == 2, data["reasons"]
    reason, consequence = data["reasons"]
    assert F in reason and "recall" in reason and P not in reason, reason
    # The one failing class it could have blocked is gone: it can block nothing (section 8).
    assert consequence == (
        f"the grader could block none of its failing classes ({F}) under this calibration"
    )
    assert data["blockable_classes"] == [P]
    status = status_of(cli, seed, JUDGE)
    assert (status["state"], status["reasons"]) == ("failing", data["reasons"])


# Three annotators agree on task_pass and task_fail; on missing_required_evidence one of
# them always dissents: Fleiss' kappa 0.36 for that class, 0.77 for the others, 0.66 overall.
DISPUTED_CLASS = {
    "calibration": [(10, [P, P, P], P), (10, [F, F, F], F)],
    "holdout": [
        (30, [P, P, P], P),
        (30, [F, F, F], F),
        (15, [M, M, F], M),
        (15, [M, M, P], M),
    ],
}


def test_low_class_agreement_makes_only_that_class_unblockable(seed: Path, cli: Cli) -> None:
    labels = labels_file(seed, "disputed-class", **DISPUTED_CLASS)
    data = record_calibration(cli, seed, TRIAGE, labels)
    agreement = data["human_agreement"]
    assert agreement["method"] == "fleiss"
    assert agreement["overall"] >= 0.6
    assert agreement["per_class"][M] < 0.6
    assert agreement["per_class"][P] >= 0.6 and agreement["per_class"][F] >= 0.6
    assert M not in data["blockable_classes"]
    assert sorted(data["blockable_classes"]) == [F, P]
    # Humans disagreeing on one class does not take the others away from the grader.
    assert data["state"] == "valid", data["reasons"]
    assert status_of(cli, seed, TRIAGE)["state"] == "valid"


def test_low_class_agreement_is_named_in_the_reasons(seed: Path, cli: Cli) -> None:
    """`calibration status` must say why the grader may not block that class."""
    labels = labels_file(seed, "disputed-class", **DISPUTED_CLASS)
    data = record_calibration(cli, seed, TRIAGE, labels)
    assert len(data["reasons"]) == 1, data["reasons"]
    reason = data["reasons"][0]
    assert M in reason and "agreement" in reason, reason
    assert P not in reason and F not in reason, reason
    assert status_of(cli, seed, TRIAGE)["reasons"] == data["reasons"]


# -------------------------------------------------------------------------- human review


def test_review_resolution_reclassifies_and_keeps_the_original(gated: Path, cli: Cli) -> None:
    path = trials_file(gated, [passing_results(A)], first_index=2)
    assert ok(cli("trials", "ingest", str(path), "--json", cwd=gated))["ingested"] == 1
    (trial_id,) = [t for t, row in trials_of(cli, gated).items() if row["classification"] != P]
    before = show_trial(cli, gated, trial_id)
    assert before["classification"] == "missing_required_evidence", before
    assert before["reviews"] == []

    queue = ok(cli("review", "list", "--json", cwd=gated))
    assert [(r["trial_id"], r["grader_id"]) for r in queue] == [(trial_id, JUDGE)], queue
    held = gate(cli, gated, 3)
    assert held["decision"] == "hold"
    assert held["tasks"][0]["state"] == "missing_required_evidence"

    # Bad input (exit 2, nothing written) and refusals by the review rules (exit 5, audited).
    bad_input: list[tuple[str, ...]] = [
        (trial_id, "--grader", "no-such-grader", "--state", P, "--reason", "x"),
        (trial_id, "--grader", JUDGE, "--state", P, "--reason", " "),
        ("no-such-trial", "--grader", JUDGE, "--state", P, "--reason", "x"),
    ]
    for args in bad_input:
        bad = cli("review", "resolve", *args, "--json", cwd=gated)
        assert bad.code == 2, (args, bad.stdout, bad.stderr)
        assert strict_json(bad)["error"]["code"] == 2, args
    refused: list[tuple[tuple[str, ...], str]] = [
        ((trial_id, "--grader", JUDGE, "--state", "hard_constraint_fail", "--reason", "x"),
         "is not one judge produces"),
        # The judge produces abstain; a person never does.
        ((trial_id, "--grader", JUDGE, "--state", A, "--reason", "x"),
         "a person's verdict is never abstain"),
    ]  # fmt: skip
    for args, words in refused:
        bad = cli("review", "resolve", *args, "--json", cwd=gated)
        assert bad.code == 5, (args, bad.stdout, bad.stderr)
        assert strict_json(bad)["error"]["code"] == 5, args
        assert words in strict_json(bad)["error"]["message"], args
    assert show_trial(cli, gated, trial_id)["reviews"] == []
    assert [e["kind"] for e in audit(gated)[-2:]] == ["review.refused", "review.refused"]

    events = audit(gated)
    reason = "the reply cites the refund policy correctly"
    result = cli(
        "--actor",
        "someone@example.com",
        "review",
        "resolve",
        trial_id,
        "--grader",
        JUDGE,
        "--state",
        P,
        "--reason",
        reason,
        "--json",
        cwd=gated,
    )
    ok(result)

    after = show_trial(cli, gated, trial_id)
    assert after["classification"] == P, after
    (review,) = after["reviews"]
    assert review["grader_id"] == JUDGE
    assert review["state"] == P
    assert review["reason"] == reason
    assert review["actor"] == "someone@example.com"
    # The original result is still there: nothing is overwritten.
    judge_results = [r for r in after["grader_results"] if r["grader_id"] == JUDGE]
    assert [r["state"] for r in judge_results] == [A]
    assert after["grader_results"] == before["grader_results"]
    assert after["record_digest"] == before["record_digest"]

    new = audit(gated)[len(events) :]
    assert len(new) == 1, new
    assert new[0]["kind"].startswith("review")
    assert new[0]["actor"] == "someone@example.com"
    assert new[0]["subject"] == trial_id
    assert reason in json.dumps(new[0]["payload"])

    assert trials_of(cli, gated)[trial_id]["classification"] == P
    assert ok(cli("review", "list", "--json", cwd=gated)) == []
    # Resolved once: a second verdict is refused, naming who gave the first and when.
    again = cli("review", "resolve", trial_id, "--grader", JUDGE, "--state", "task_fail",
                "--reason", "changed my mind", "--json", cwd=gated)  # fmt: skip
    assert again.code == 5, again.stdout + again.stderr
    message = strict_json(again)["error"]["message"]
    assert f"someone@example.com resolved it as {P} at " in message, message
    passed = gate(cli, gated, 0)
    assert passed["decision"] == "pass"
    verify_ok(cli, gated)


# ------------------------------------------------- a failing calibration says what to do


def _wilson_lower(p: float, n: int, z: float = 1.959963984540054) -> float:
    """The Wilson lower bound at proportion p, written out here apart from evalops."""
    return (p + z * z / (2 * n) - z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (
        1 + z * z / n
    )


def _fewest_more(rate: float, n: int, bound: float) -> int:
    """By brute force: the first m whose n + m items at `rate` meet the bound."""
    m = 0
    while _wilson_lower(rate, n + m) < bound:
        m += 1
    return m


SHORT = {"holdout": [(40, [P, P], P), (9, [F, F], F), (1, [F, F], P)]}


def test_a_failing_calibration_says_how_many_more_items_of_which_class(
    seed: Path, cli: Cli
) -> None:
    labels = labels_file(seed, "short", **SHORT)
    data = record_calibration(cli, seed, JUDGE, labels)
    assert data["state"] == "failing"
    found = {(s["class"], s["metric"]): s for s in data["shortfalls"]}
    # task_fail: 9 of 10 recalled, 9 of 9 predicted right; both bounds short of 0.8.
    assert set(found) == {(F, "recall"), (F, "precision")}
    assert found[(F, "recall")]["items"] == 10
    assert found[(F, "recall")]["more_items"] == _fewest_more(0.9, 10, 0.8)
    assert found[(F, "precision")]["more_items"] == _fewest_more(1.0, 9, 0.8)
    text = cli("calibration", "show", data["calibration_id"], cwd=seed).stdout
    assert "a blockable class is one the model grader's verdict may decide alone" in text
    human = cli("calibration", "record", JUDGE, "--labels", str(labels), cwd=seed).stdout
    more = found[(F, "recall")]["more_items"]
    assert f"about {more} more holdout items of class {F} at the observed recall 0.90" in human


def test_a_shortfall_no_number_of_items_meets_says_so(seed: Path, cli: Cli) -> None:
    labels = labels_file(seed, "poor", holdout=[(40, [P, P], P), (6, [F, F], F), (4, [F, F], P)])
    data = record_calibration(cli, seed, JUDGE, labels)
    recall = next(s for s in data["shortfalls"] if (s["class"], s["metric"]) == (F, "recall"))
    assert recall["observed"] == 0.6 and recall["more_items"] is None


def test_require_valid_exits_5_and_stores_nothing(seed: Path, cli: Cli) -> None:
    labels = labels_file(seed, "short", **SHORT)
    refused = cli(
        "calibration", "record", JUDGE, "--labels", str(labels), "--require-valid", cwd=seed
    )
    assert refused.code == 5, refused.stdout + refused.stderr
    assert "not stored (--require-valid)" in refused.stderr + refused.stdout
    assert ok(cli("calibration", "list", "--json", cwd=seed)) == []
    assert audit(seed)[-1]["kind"] == "calibration.refused"
    valid = cli(
        "calibration", "record", JUDGE, "--labels", str(REPLY_QUALITY), "--require-valid",
        cwd=seed,
    )  # fmt: skip
    assert valid.code == 0, valid.stdout + valid.stderr
    verify_ok(cli, seed)
