"""Acceptance tests of the release gate at the CLI (docs/gate.md,
docs/classification.md, docs/verify.md and docs/cli.md).

One prepared registry (built once per session, then copied) holds tasks of every risk tier,
the example gate and suite policies, one regression suite per scenario family, and one
execution profile (build) per scenario, each with trials built by tests/trial_factory.py:

| suite               | members                                   |
|---------------------|-------------------------------------------|
| regression/crit     | crit-task (critical, protects external_effect) |
| regression/noncrit  | noncrit-task (noncritical_regression)     |
| regression/quality  | quality-task (quality_signal)             |
| regression/mixed    | crit-task, crit-plain (critical, protects nothing), noncrit-task |
| regression/ten      | ten-task (trials.count 10, passRule any, noncritical) |
| regression/model    | model-task (a blocking, calibrated model grader) |
| regression/many     | score-1 .. score-6 (noncritical)          |
| regression/empty    | (no members)                              |

Every member was promoted through `evalops promote` (2 valid trials under `build-0`).
Every `gate check` a test runs is replayed right away (`gate replay ID --json` must say
`identical: true`; tests that change lifecycle state afterwards replay all earlier
decisions again), so every stored decision of these tests is replayed byte for byte; the
tests marked `tampers` then damage stored decisions and expect `gate replay` and `verify`
to exit 6.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import yaml

from evalops.domain.canonical import canonical_text, digest
from evalops.domain.gate import evaluate
from tests import forked
from tests.conftest import Cli
from tests.helpers import (
    EXAMPLE_REGISTRY,
    MINI_EXECUTION,
    MINI_GRADERS,
    MINI_TASK,
    built_once,
    commit_all,
    write_yaml,
)
from tests.helpers import run_quiet as helpers_run_quiet
from tests.trial_factory import eval_case, record, write_jsonl

ACTOR = "tester@example.com"
DB = Path(".evalops/registry.db")
SQLITE = "sqlite:///.evalops/registry.db"
EXIT = {"pass": 0, "hold": 3, "block": 4}
EVIDENCE_BLOCKED = (
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
)
FAILING = ("agent_error", "runtime_error", "task_fail")

CRIT = "regression/crit"
NONCRIT = "regression/noncrit"
QUALITY = "regression/quality"
MIXED = "regression/mixed"
TEN = "regression/ten"
MODEL = "regression/model"
MANY = "regression/many"
EMPTY = "regression/empty"
SCORE_TASKS = tuple(f"score-{i}" for i in range(1, 7))

# One build per scenario: a trial variant per task (every other member of the suite has no
# trials in that build unless listed). Variants: see `grader_results_for` / `trial_extra`.
VARIANT_OF_CLASS = {
    "hard_constraint_fail": "hcf",
    "ambiguous_external_effect": "amb",
    "missing_required_evidence": "mre",
    "grader_invalid": "ginv",
    "infrastructure_invalid": "infra",
    "agent_error": "agent",
    "runtime_error": "runtime",
    "task_fail": "fail",
    "task_pass": "pass",
}
BUILD_OF_CLASS = {cls: f"build-{variant}" for cls, variant in VARIANT_OF_CLASS.items()}
SINGLE_TASKS = ("crit-task", "crit-plain", "noncrit-task", "quality-task")

# build -> task -> list of trial variants (one trial each).
PLAN: dict[str, dict[str, list[str]]] = {
    "build-0": {},  # promotion evidence: filled in below (2 passing trials per task)
    **{
        build: {task: [variant] for task in SINGLE_TASKS}
        for build, variant in ((BUILD_OF_CLASS[c], VARIANT_OF_CLASS[c]) for c in VARIANT_OF_CLASS)
    },
    "build-empty": {},
    # regression/mixed: build-fail has a block and a hold; here a hold among passes
    "build-mixed": {"crit-task": ["pass"], "crit-plain": ["pass"], "noncrit-task": ["fail"]},
    # ten-task
    "build-ten-pass": {"ten-task": ["pass"] * 10},
    "build-nine": {"ten-task": ["pass"] * 9},
    "build-ten-hcf": {"ten-task": ["pass"] * 4 + ["hcf"] + ["pass"] * 5},
    "build-ten-fail": {"ten-task": ["fail"] * 9 + ["pass"]},
    # the hard failure is rerun and the rerun passes: it still blocks
    "build-ten-rerun": {"ten-task": ["pass"] * 4 + ["hcf"] + ["pass"] * 5 + ["rerun-of-4"]},
    # an ambiguous effect with the same key as a committed one: reconciled committed => twice
    "build-amb-twice": {"crit-task": ["amb-twice"]},
    # model-task
    "build-model": {"model-task": ["pass"]},
    # regression/many: baseline all 1.0, candidates lower, failing, partial
    "build-base": {t: ["pass"] for t in SCORE_TASKS},
    "build-lower": {t: ["pass-0.6"] for t in SCORE_TASKS},
    "build-many-fail": {t: ["fail"] for t in SCORE_TASKS},
    "build-partial": {t: ["pass-0.6"] for t in SCORE_TASKS[:4]},
}
# build-pass: every task of every suite passes
PLAN["build-pass"].update({"ten-task": ["pass"] * 10, "model-task": ["pass"]})
PLAN["build-pass"].update({t: ["pass"] for t in SCORE_TASKS})

ALL_TASKS = (*SINGLE_TASKS, "ten-task", "model-task", *SCORE_TASKS)
PLAN["build-0"] = {task: ["pass", "pass"] for task in ALL_TASKS}

SUITES: dict[str, tuple[str, ...]] = {
    CRIT: ("crit-task",),
    NONCRIT: ("noncrit-task",),
    QUALITY: ("quality-task",),
    MIXED: ("crit-task", "crit-plain", "noncrit-task"),
    TEN: ("ten-task",),
    MODEL: ("model-task",),
    MANY: SCORE_TASKS,
    EMPTY: (),
}
SUITE_OF_TASK = {"crit-task": CRIT, "noncrit-task": NONCRIT, "quality-task": QUALITY}

REPLY_QUALITY: dict[str, Any] = next(
    g
    for g in yaml.safe_load(
        (EXAMPLE_REGISTRY / "graders" / "support-graders.yaml").read_text(encoding="utf-8")
    )["graders"]
    if g["id"] == "reply-quality"
)
CALIBRATION_GOOD = EXAMPLE_REGISTRY / "calibration" / "reply-quality.jsonl"
CALIBRATION_DISPUTED = EXAMPLE_REGISTRY / "calibration" / "reply-quality-disputed.jsonl"


# ----------------------------------------------------------------------------- registry


def task_spec(
    task_id: str,
    risk: str,
    protects: Iterable[str] = (),
    *,
    trials: dict[str, Any] | None = None,
    grader_set: str = "mini-graders",
) -> dict[str, Any]:
    task = copy.deepcopy(MINI_TASK)
    task["id"] = task_id
    task["meta"].update(
        risk=risk,
        protects=list(protects),
        invariant=f"{task_id} does the thing exactly once",
        title=f"task {task_id}",
    )
    task["contract"]["goal"] = "goal_" + task_id.replace("-", "_")
    if trials is not None:
        task["contract"]["trials"] = trials
    task["fixtures"]["toolResponses"] = [
        {"tool": "svc:do", "args": {"n": 1}, "argsMatch": "subset", "response": {"ok": True}}
    ]
    task["grader_set"] = grader_set
    return task


TASK_SPECS: dict[str, dict[str, Any]] = {
    "crit-task": task_spec("crit-task", "critical", ["external_effect"]),
    "crit-plain": task_spec("crit-plain", "critical"),
    "noncrit-task": task_spec("noncrit-task", "noncritical_regression"),
    "quality-task": task_spec("quality-task", "quality_signal"),
    "ten-task": task_spec(
        "ten-task", "noncritical_regression", trials={"count": 10, "k": 3, "passRule": "any"}
    ),
    "model-task": task_spec("model-task", "critical", grader_set="model-graders"),
    **{t: task_spec(t, "noncritical_regression") for t in SCORE_TASKS},
}
MODEL_GRADERS: dict[str, Any] = {
    **copy.deepcopy(MINI_GRADERS),
    "id": "model-graders",
    "graders": [*copy.deepcopy(MINI_GRADERS["graders"]), copy.deepcopy(REPLY_QUALITY)],
}


def execution_id(build: str) -> str:
    return "exec-" + build.removeprefix("build-")


def grader_set_of(task_id: str) -> str:
    return str(TASK_SPECS[task_id]["grader_set"])


def grader_results_for(task_id: str, variant: str) -> list[dict[str, Any]]:
    score = 0.6 if variant == "pass-0.6" else 1.0
    outcome = {"grader_id": "outcome", "grader_version": 1, "state": "task_pass", "score": score}
    guard: dict[str, Any] = {"grader_id": "no-twice", "grader_version": 1, "state": "pass"}
    if variant == "hcf":
        guard = {**guard, "state": "hard_constraint_fail"}
    elif variant == "fail":
        outcome = {**outcome, "state": "task_fail", "score": 0.0}
    elif variant == "ginv":
        outcome = {**outcome, "grader_version": 99}  # a version the grader set does not have
    results = [outcome] if variant == "mre" else [outcome, guard]  # mre: a blocking grader silent
    if grader_set_of(task_id) == "model-graders":
        results.append(
            {"grader_id": "reply-quality", "grader_version": 2, "state": "task_pass", "score": 1.0}
        )
    return results


def trial_extra(variant: str) -> dict[str, Any]:
    runtime = {"infra": "infrastructure_error", "agent": "agent_error", "runtime": "runtime_error"}
    extra: dict[str, Any] = {"runtime": runtime.get(variant, "ok")}
    if variant == "amb":
        extra["external_effects"] = [{"effect_key": "svc:do:1", "status": "unknown"}]
    if variant == "amb-twice":
        extra["external_effects"] = [
            {"effect_key": "svc:do:1", "status": "committed", "external_ref": "r-1"},
            {"effect_key": "svc:do:1", "status": "requested"},
        ]
    return extra


def trial_id(build: str, task_id: str, index: int) -> str:
    return f"{build}.{task_id}.{index}"


def trial_records(root: Path, plan: dict[str, dict[str, list[str]]]) -> list[dict[str, Any]]:
    reg = root / "registry"
    out = []
    for build, tasks in plan.items():
        for task, variants in tasks.items():
            case = eval_case(
                reg / "tasks" / f"{task}.yaml",
                reg / "executions" / f"{execution_id(build)}.yaml",
                reg / "graders" / f"{grader_set_of(task)}.yaml",
            )
            for index, variant in enumerate(variants):
                extra = trial_extra(variant)
                trial_index = index
                if variant.startswith("rerun-of-"):
                    # a passing rerun of an earlier trial of this build (same trial_index)
                    trial_index = int(variant.removeprefix("rerun-of-"))
                    parent = trial_id(build, task, trial_index)
                    extra["rerun"] = {"parent_trial_id": parent, "reason": "flaky"}
                out.append(
                    record(
                        case,
                        trial_id=trial_id(build, task, index),
                        task_id=task,
                        trial_index=trial_index,
                        grader_results=grader_results_for(task, variant),
                        **extra,
                    )
                )
    return out


ALT_POLICIES = {"sign-test": {"method": "sign-test"}, "required-baseline": {"baseline": "required"}}


def alt_policy(root: Path, name: str, **regression: Any) -> Path:
    """A registered gate policy other than the one in force (`gate check --policy ID`).

    docs/gate.md: a stored decision uses only registered definitions. `populate`
    syncs these files, then deletes and re-syncs, so they stay registered but not in force.
    """
    policy = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text())
    policy["id"] = f"release-gate-{name}"
    policy["critical_regressions"].update(regression)
    return write_yaml(root / "registry" / "policies" / f"alt-{name}.yaml", policy)


def write_registry(root: Path) -> None:
    reg = root / "registry"
    for task_id, spec in TASK_SPECS.items():
        write_yaml(reg / "tasks" / f"{task_id}.yaml", spec)
    write_yaml(reg / "graders" / "mini-graders.yaml", MINI_GRADERS)
    write_yaml(reg / "graders" / "model-graders.yaml", MODEL_GRADERS)
    for build in PLAN:
        execution = {
            **copy.deepcopy(MINI_EXECUTION),
            "id": execution_id(build),
            "system_build": build,
        }
        write_yaml(reg / "executions" / f"{execution_id(build)}.yaml", execution)
    for name, model in (("dup-a", "model-a"), ("dup-b", "model-b")):  # two profiles, one build
        execution = {
            **copy.deepcopy(MINI_EXECUTION),
            "id": f"exec-{name}",
            "system_build": "build-dup",
            "model": {"provider": "example", "name": model},
        }
        write_yaml(reg / "executions" / f"exec-{name}.yaml", execution)
    (reg / "policies").mkdir(parents=True)
    for name in ("gate-policy.yaml", "suite-policy.yaml"):
        shutil.copy(EXAMPLE_REGISTRY / "policies" / name, reg / "policies" / name)
    for suite_id in SUITES:
        write_yaml(
            reg / "suites" / f"{suite_id.replace('/', '-')}.yaml",
            {
                "spec_schema_version": "suite/v1",
                "id": suite_id,
                "kind": "regression",
                "owner": ACTOR,
            },
        )
    for name, regression in ALT_POLICIES.items():
        alt_policy(root, name, **regression)
    commit_all(root, "gate test registry")


def run_quiet(*args: str, cwd: Path, db: str = SQLITE) -> tuple[int, str]:
    return helpers_run_quiet(*args, cwd=cwd, db=db, actor=ACTOR)


def must(*args: str, cwd: Path, db: str = SQLITE) -> str:
    code, output = run_quiet(*args, cwd=cwd, db=db)
    assert code == 0, f"evalops {' '.join(args)} -> {code}\n{output}"
    return output


def populate(root: Path, db: str = SQLITE) -> None:
    """init, sync, calibrate, ingest the promotion evidence, promote, ingest the scenarios."""
    must("init", cwd=root, db=db)
    must("sync", cwd=root, db=db)
    for name in ALT_POLICIES:  # registered, then no longer in force
        (root / "registry" / "policies" / f"alt-{name}.yaml").unlink()
    commit_all(root, "only the release gate is in force")
    must("sync", cwd=root, db=db)
    must(
        "calibration", "record", "reply-quality", "--labels", str(CALIBRATION_GOOD),
        "--annotation-guide", "support-reply-guide/v2", cwd=root, db=db,
    )  # fmt: skip
    first = write_jsonl(
        root / ".evalops" / "build-0.jsonl", trial_records(root, {"build-0": PLAN["build-0"]})
    )
    must("trials", "ingest", str(first), cwd=root, db=db)
    for suite_id, members in SUITES.items():
        for task_id in members:
            must("promote", task_id, "--to", suite_id, cwd=root, db=db)
    rest = {b: p for b, p in PLAN.items() if b != "build-0"}
    scenarios = write_jsonl(root / ".evalops" / "scenarios.jsonl", trial_records(root, rest))
    must("trials", "ingest", str(scenarios), cwd=root, db=db)


def base_workspace(factory: pytest.TempPathFactory) -> Path:
    """The prepared registry (built once per run across xdist workers, `built_once`; copy
    it before changing it)."""
    return built_once(factory, "gate-base", _build_base)


def _build_base(root: Path) -> None:
    root.mkdir()
    write_registry(root)
    populate(root)


def copy_workspace(base: Path, dest: Path) -> Path:
    return Path(shutil.copytree(base, dest, symlinks=True))


# ----------------------------------------------------------------------------- helpers


def gate(cli: Cli, ws: Path, build: str, suite: str, *extra: str) -> dict[str, Any]:
    """`gate check --json`: exit code matches the decision; the decision replays identically."""
    result = cli("gate", "check", "--build", build, "--suite", suite, *extra, "--json", cwd=ws)
    assert result.code in (0, 3, 4), result.stdout + result.stderr
    data: dict[str, Any] = result.json()
    assert result.code == EXIT[data["decision"]], (result.code, data["decision"])
    if "--dry-run" in extra:  # another registered policy than the suite's: nothing stored
        assert data["stored"] is False
        return data
    replayed = cli("gate", "replay", data["gate_id"], "--json", cwd=ws)
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    assert replayed.json()["gate_id"] == data["gate_id"]
    assert replayed.json()["identical"] is True, replayed.stdout
    return data


def replay_all(cli: Cli, ws: Path) -> None:
    """Every decision stored in `ws` still replays byte for byte (after later changes)."""
    for gate_id in _decisions(ws):
        replayed = cli("gate", "replay", gate_id, "--json", cwd=ws)
        assert replayed.code == 0, replayed.stdout + replayed.stderr
        assert replayed.json()["identical"] is True, replayed.stdout


def task_of(data: dict[str, Any], task_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [t for t in data["tasks"] if t["task_id"] == task_id]
    assert len(found) == 1, data["tasks"]
    return found[0]


def reasons_name(data: dict[str, Any], task_id: str) -> bool:
    """Some reason names the task (as a whole id: `crit-task` is not in `noncrit-task`)."""
    pattern = re.compile(rf"(?<![\w./-]){re.escape(task_id)}(?![\w/-])")
    return any(pattern.search(r) for r in data["reasons"])


def verify_ok(cli: Cli, ws: Path) -> None:
    result = cli("verify", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr


def sql(ws: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(ws / DB)
    try:
        rows = con.execute(query, params).fetchall()
        con.commit()
    finally:
        con.close()
    return rows


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return base_workspace(tmp_path_factory)


@pytest.fixture
def shared(base: Path, tmp_path: Path) -> Path:
    """A private copy of the base for the tests that only read and check. It was one copy
    for the module, but every test's end replays every decision of a database whose head
    moved (tests/conftest.py `_replay_all`): each test replayed all the earlier tests'
    decisions again, a cost growing with their number (a copy is a few ms, a replay ~10)."""
    return copy_workspace(base, tmp_path / "shared")


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    """A private copy of the base, for tests that change lifecycle state."""
    return copy_workspace(base, tmp_path / "ws")


def utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def grant_waiver(cli: Cli, ws: Path, task: str, suite: str, build: str, states: str) -> str:
    expires = utc((datetime.now(UTC) + timedelta(days=14)).replace(microsecond=0))
    result = cli(
        "waiver", "grant", "--task", task, "--suite", suite, "--states", states,
        "--build", build, "--owner", "risk-owner@example.com",
        "--reason", "accepted for this build", "--expires", expires, "--json", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    waiver_id: str = result.json()["waiver_id"]
    return waiver_id


# -------------------------------------------------------------------- section 9 mapping

MAPPING_ROWS = [
    # (class of the task's one trial, task, expected effect)
    *(("hard_constraint_fail", t, "block") for t in ("crit-task", "noncrit-task", "quality-task")),
    *((c, t, "hold") for c in EVIDENCE_BLOCKED for t in ("crit-task", "noncrit-task")),
    *((c, "crit-task", "block") for c in FAILING),
    *((c, t, "hold") for c in FAILING for t in ("noncrit-task", "quality-task")),
    *(("task_pass", t, "pass") for t in ("crit-task", "noncrit-task", "quality-task")),
]


@pytest.mark.parametrize(
    ("cls", "task", "effect"), MAPPING_ROWS, ids=[f"{c}-{t}" for c, t, _ in MAPPING_ROWS]
)
def test_section_9_mapping_row(cls: str, task: str, effect: str, shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, BUILD_OF_CLASS[cls], SUITE_OF_TASK[task])

    assert data["decision"] == effect
    row = task_of(data, task)
    assert row["state"] == cls
    assert row["effect"] == effect
    assert row["risk"] == TASK_SPECS[task]["meta"]["risk"]
    assert row["n"] == 1
    assert row["passedCount"] == (1 if cls == "task_pass" else 0)
    assert row["waiver_id"] is None
    if effect == "pass":
        assert data["reasons"] == []
    else:
        assert reasons_name(data, task), data["reasons"]
    assert data["build"] == BUILD_OF_CLASS[cls]
    assert data["suite"] == SUITE_OF_TASK[task]
    assert data["regression"] is None


@pytest.mark.parametrize("task", ["noncrit-task", "quality-task"])
@pytest.mark.parametrize("cls", FAILING)
def test_failing_noncritical_task_with_a_valid_waiver_passes(
    cls: str, task: str, ws: Path, cli: Cli
) -> None:
    build, suite = BUILD_OF_CLASS[cls], SUITE_OF_TASK[task]
    before = gate(cli, ws, build, suite)
    assert (before["decision"], task_of(before, task)["effect"]) == ("hold", "hold")

    waiver_id = grant_waiver(cli, ws, task, suite, build, cls)
    data = gate(cli, ws, build, suite)

    assert data["decision"] == "pass"
    row = task_of(data, task)
    assert (row["state"], row["effect"], row["waiver_id"]) == (cls, "pass", waiver_id)
    assert data["waivers"]["applied"] == [waiver_id]
    assert data["reasons"] == []
    verify_ok(cli, ws)


def test_a_waiver_never_passes_a_critical_failure(ws: Path, cli: Cli) -> None:
    """The grant is refused; the critical task_fail still blocks."""
    refused = cli(
        "waiver", "grant", "--task", "crit-plain", "--suite", MIXED, "--states", "task_fail",
        "--build", "build-fail", "--owner", "o@example.com", "--reason", "r",
        "--expires", utc(datetime.now(UTC) + timedelta(days=1)), "--json", cwd=ws,
    )  # fmt: skip
    assert refused.code == 5, refused.stdout
    data = gate(cli, ws, "build-fail", MIXED)
    assert data["decision"] == "block"
    assert task_of(data, "crit-plain")["effect"] == "block"
    assert data["waivers"]["applied"] == []


def test_regressed_against_the_baseline_blocks(shared: Path, cli: Cli) -> None:
    """Every task still passes on its own (lower scores); the paired verdict blocks."""
    from scipy.stats import binomtest

    data = gate(
        cli,
        shared,
        "build-lower",
        MANY,
        "--baseline",
        "build-base",
        "--policy",
        "release-gate-sign-test",
        "--dry-run",
    )

    assert data["decision"] == "block"
    assert all(t["state"] == "task_pass" and t["effect"] == "pass" for t in data["tasks"])
    regression = data["regression"]
    assert regression["verdict"] == "regressed"
    assert regression["method"] == "sign-test"
    assert regression["alpha"] == 0.05
    assert regression["pairedTaskCount"] == 6
    assert regression["pValue"] == pytest.approx(binomtest(0, 6, 0.5).pvalue, rel=1e-12)
    assert any("regress" in r and "build-base" in r for r in data["reasons"]), data["reasons"]


def test_regressed_mcnemar_verdict_turns_noncritical_holds_into_a_block(
    shared: Path, cli: Cli
) -> None:
    from scipy.stats import binomtest

    data = gate(cli, shared, "build-many-fail", MANY, "--baseline", "build-base")

    assert data["decision"] == "block"
    assert {t["effect"] for t in data["tasks"]} == {"hold"}
    assert data["regression"]["verdict"] == "regressed"
    assert data["regression"]["method"] == "mcnemar"
    assert data["regression"]["pairedTaskCount"] == 6
    assert data["regression"]["pValue"] == pytest.approx(binomtest(6, 6, 0.5).pvalue, rel=1e-12)


def test_unchanged_baseline_does_not_block(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-pass", MANY, "--baseline", "build-base")
    assert data["decision"] == "pass"
    assert data["regression"]["verdict"] in ("unchanged", "inconclusive")
    assert data["regression"]["pairedTaskCount"] == 6


def test_required_baseline_with_no_trials_holds(shared: Path, cli: Cli) -> None:
    data = gate(
        cli,
        shared,
        "build-pass",
        CRIT,
        "--baseline",
        "build-empty",
        "--policy",
        "release-gate-required-baseline",
        "--dry-run",
    )

    assert data["decision"] == "hold"
    assert task_of(data, "crit-task")["effect"] == "pass"
    assert data["regression"] is not None
    assert data["regression"]["pairedTaskCount"] == 0
    assert data["regression"]["verdict"] != "regressed"
    assert any("baseline" in r for r in data["reasons"]), data["reasons"]


def test_optional_baseline_with_no_trials_is_inconclusive_not_a_hold(
    shared: Path, cli: Cli
) -> None:
    data = gate(cli, shared, "build-pass", CRIT, "--baseline", "build-empty")
    assert data["decision"] == "pass"
    assert data["regression"]["verdict"] == "inconclusive"
    assert data["regression"]["pairedTaskCount"] == 0


def test_required_baseline_that_cannot_be_found_holds(ws: Path, cli: Cli) -> None:
    """No --baseline and no earlier pass for `auto`: a required baseline holds."""
    for extra in ((), ("--baseline", "auto")):
        data = gate(
            cli, ws, "build-pass", CRIT, "--policy", "release-gate-required-baseline", "--dry-run",
            *extra,
        )  # fmt: skip
        assert data["decision"] == "hold", extra
        assert task_of(data, "crit-task")["effect"] == "pass"
        assert any("baseline" in r for r in data["reasons"]), data["reasons"]


def test_baseline_auto_is_the_build_of_the_latest_pass(ws: Path, cli: Cli) -> None:
    assert gate(cli, ws, "build-base", MANY)["decision"] == "pass"
    data = gate(
        cli, ws, "build-lower", MANY, "--baseline", "auto", "--policy", "release-gate-sign-test",
        "--dry-run",
    )  # fmt: skip
    assert data["regression"]["baseline"] == "build-base"
    assert data["regression"]["verdict"] == "regressed"
    assert data["decision"] == "block"


# ------------------------------------------------------------- evidence and trial counts


def test_a_task_with_no_trials_holds(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-empty", CRIT)
    assert data["decision"] == "hold"
    row = task_of(data, "crit-task")
    assert (row["state"], row["effect"], row["n"]) == ("missing_required_evidence", "hold", 0)
    assert reasons_name(data, "crit-task")


def test_an_empty_suite_holds(shared: Path, cli: Cli) -> None:
    """ "No confirmed failures" is never enough."""
    data = gate(cli, shared, "build-pass", EMPTY)
    assert data["decision"] == "hold"
    assert data["tasks"] == []
    assert data["reasons"]


def test_trials_of_other_builds_are_not_evidence(shared: Path, cli: Cli) -> None:
    """build-0 and the scenario builds all have ten-task trials; build-empty has none."""
    data = gate(cli, shared, "build-empty", TEN)
    assert data["decision"] == "hold"
    assert task_of(data, "ten-task")["n"] == 0


def test_trials_of_another_revision_are_ignored_and_counted(ws: Path, cli: Cli) -> None:
    """A new revision of crit-task is synced and tried; the suite still pins the old one."""
    spec = copy.deepcopy(TASK_SPECS["crit-task"])
    spec["revision"] = 2
    spec["contract"]["goal"] = "goal_crit_task_v2"
    write_yaml(ws / "registry" / "tasks" / "crit-task.yaml", spec)
    commit_all(ws, "crit-task revision 2")
    assert cli("sync", cwd=ws).code == 0
    records = trial_records(ws, {"build-empty": {"crit-task": ["pass", "pass"]}})
    path = write_jsonl(ws / ".evalops" / "revision-2.jsonl", records)
    ingested = cli("trials", "ingest", str(path), "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr

    data = gate(cli, ws, "build-empty", CRIT)
    assert data["decision"] == "hold"
    row = task_of(data, "crit-task")
    assert (row["state"], row["n"]) == ("missing_required_evidence", 0)
    assert data["ignoredTrials"] == {"other_task_revision": 2}
    assert row["ignoredTrials"] == {"other_task_revision": 2}

    promoted = cli("promote", "crit-task", "--to", CRIT, "--json", cwd=ws)
    assert promoted.code == 0, promoted.stdout
    repinned = gate(cli, ws, "build-empty", CRIT)
    assert repinned["decision"] == "pass"
    assert task_of(repinned, "crit-task")["n"] == 2
    assert repinned["ignoredTrials"] == {}
    old = gate(cli, ws, "build-pass", CRIT)  # build-pass only tried revision 1
    assert old["decision"] == "hold"
    assert old["ignoredTrials"] == {"other_task_revision": 1}
    replay_all(cli, ws)


def test_several_profiles_for_one_build_need_execution(shared: Path, cli: Cli) -> None:
    result = cli("gate", "check", "--build", "build-dup", "--suite", CRIT, "--json", cwd=shared)
    assert result.code == 2, result.stdout
    assert "--execution" in result.stdout
    data = gate(cli, shared, "build-dup", CRIT, "--execution", "exec-dup-b")
    assert data["decision"] == "hold"  # no trials for that profile
    digests = cli("digest", "registry/executions/exec-dup-b.yaml", "--json", cwd=shared)
    assert data["execution_digest"] == digests.json()[0]["execution_digest"]


def test_fewer_trials_than_trials_count_holds(shared: Path, cli: Cli) -> None:
    """Nine passing trials, passRule any, trials.count 10: incomplete evidence holds."""
    data = gate(cli, shared, "build-nine", TEN)
    assert data["decision"] == "hold"
    row = task_of(data, "ten-task")
    assert (row["state"], row["effect"]) == ("missing_required_evidence", "hold")
    assert (row["n"], row["passedCount"]) == (9, 9)
    assert reasons_name(data, "ten-task")


def test_ten_passing_trials_pass(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-ten-pass", TEN)
    assert data["decision"] == "pass"
    row = task_of(data, "ten-task")
    assert (row["state"], row["n"], row["passedCount"]) == ("task_pass", 10, 10)
    assert row["passAtK"] == 1.0
    assert row["passHatK"] == 1.0


def test_passrule_any_passes_with_one_passing_trial_of_ten(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-ten-fail", TEN)
    row = task_of(data, "ten-task")
    assert (row["state"], row["n"], row["passedCount"]) == ("task_pass", 10, 1)
    assert data["decision"] == "pass"


@pytest.mark.parametrize("build", ["build-ten-hcf", "build-ten-rerun"])
def test_one_hard_failure_in_ten_trials_blocks(build: str, shared: Path, cli: Cli) -> None:
    """Nine passing trials and passRule any, or a passing rerun of the failure: still block."""
    data = gate(cli, shared, build, TEN)
    assert data["decision"] == "block"
    row = task_of(data, "ten-task")
    assert (row["state"], row["effect"]) == ("hard_constraint_fail", "block")
    assert row["n"] == 10
    assert row["passedCount"] == 9
    assert reasons_name(data, "ten-task")
    if build == "build-ten-rerun":
        assert row["rerunCount"] == 1


def test_ambiguous_external_effect_holds_until_reconciled(ws: Path, cli: Cli) -> None:
    held = gate(cli, ws, "build-amb", CRIT)
    assert held["decision"] == "hold"
    assert task_of(held, "crit-task")["state"] == "ambiguous_external_effect"

    trial = trial_id("build-amb", "crit-task", 0)
    result = cli(
        "trials", "reconcile", trial, "--effect", "svc:do:1", "--status", "committed",
        "--evidence", "receipt://svc/1", "--json", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr

    passed = gate(cli, ws, "build-amb", CRIT)
    assert passed["decision"] == "pass"
    assert task_of(passed, "crit-task")["state"] == "task_pass"
    # the earlier decision is kept and still replays from its own inputs
    replay_all(cli, ws)
    verify_ok(cli, ws)


def test_reconciling_an_ambiguous_effect_rederives_a_hard_failure(ws: Path, cli: Cli) -> None:
    """The same effect key committed once and requested once: reconciled committed = twice."""
    held = gate(cli, ws, "build-amb-twice", CRIT)
    assert held["decision"] == "hold"
    assert task_of(held, "crit-task")["state"] == "ambiguous_external_effect"

    trial = trial_id("build-amb-twice", "crit-task", 0)
    result = cli(
        "trials", "reconcile", trial, "--effect", "svc:do:1", "--status", "committed",
        "--evidence", "receipt://svc/1-bis", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr

    blocked = gate(cli, ws, "build-amb-twice", CRIT)
    assert blocked["decision"] == "block"
    assert task_of(blocked, "crit-task")["state"] == "hard_constraint_fail"
    replay_all(cli, ws)


def test_an_uncalibrated_blocking_model_grader_holds(ws: Path, cli: Cli) -> None:
    assert gate(cli, ws, "build-model", MODEL)["decision"] == "pass"

    # a newer calibration on which humans disagree: the judge is no longer calibrated
    result = cli(
        "calibration", "record", "reply-quality", "--labels", str(CALIBRATION_DISPUTED),
        "--annotation-guide", "support-reply-guide/v2", "--json", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["state"] != "valid"

    data = gate(cli, ws, "build-model", MODEL)
    assert data["decision"] == "hold"
    row = task_of(data, "model-task")
    assert (row["state"], row["effect"]) == ("grader_invalid", "hold")
    assert reasons_name(data, "model-task")
    shown = cli("trials", "show", trial_id("build-model", "model-task", 0), "--json", cwd=ws)
    assert shown.code == 0
    assert "uncalibrated_model_grader" in shown.json()["secondary_labels"]

    # calibrated again: the same trial passes again
    result = cli(
        "calibration", "record", "reply-quality", "--labels", str(CALIBRATION_GOOD),
        "--annotation-guide", "support-reply-guide/v2", cwd=ws,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert gate(cli, ws, "build-model", MODEL)["decision"] == "pass"
    replay_all(cli, ws)


# ------------------------------------------------------------------------ the decision


def test_block_wins_over_hold(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-fail", MIXED)
    assert data["decision"] == "block"
    effects = {t["task_id"]: t["effect"] for t in data["tasks"]}
    assert effects == {"crit-task": "block", "crit-plain": "block", "noncrit-task": "hold"}
    for task in effects:
        assert reasons_name(data, task), data["reasons"]


def test_hold_wins_over_pass_and_reasons_name_only_the_holding_task(shared: Path, cli: Cli) -> None:
    data = gate(cli, shared, "build-mixed", MIXED)
    assert data["decision"] == "hold"
    effects = {t["task_id"]: t["effect"] for t in data["tasks"]}
    assert effects == {"crit-task": "pass", "crit-plain": "pass", "noncrit-task": "hold"}
    assert reasons_name(data, "noncrit-task")
    assert not reasons_name(data, "crit-task")
    assert not reasons_name(data, "crit-plain")


def test_gate_check_json_shape(shared: Path, cli: Cli) -> None:
    # A moment after everything was recorded, written with a +09:00 offset: the decision
    # stores it in UTC with a Z (the contract: timestamps carry an offset, stored as UTC).
    tokyo = timezone(timedelta(hours=9))
    at = datetime.now(UTC)  # a moment the registry has stood at, in another offset
    data = gate(cli, shared, "build-mixed", MIXED, "--at", at.astimezone(tokyo).isoformat())
    assert set(data) >= {
        "gate_id", "decision", "build", "suite", "suite_digest", "policy_digest",
        "execution_digest", "evaluated_at", "reasons", "tasks", "trialStats", "waivers",
        "regression",
    }  # fmt: skip
    assert data["gate_id"].startswith("GATE-")
    assert data["evaluated_at"].startswith(at.strftime("%Y-%m-%dT%H:%M:%S"))
    assert data["evaluated_at"].endswith("Z")
    for task in data["tasks"]:
        assert set(task) >= {
            "task_id", "state", "effect", "risk", "n", "passedCount", "meanScore", "passAtK",
            "passHatK", "invalidCount", "rerunCount", "waiver_id", "trajectory", "efficiency",
            "fixtureMissCount",
        }  # fmt: skip
    assert set(data["waivers"]) >= {"applied", "expired", "unused", "refused"}
    digests = cli(
        "digest", f"registry/executions/{execution_id('build-mixed')}.yaml",
        "registry/policies/gate-policy.yaml", "--json", cwd=shared,
    )  # fmt: skip
    assert digests.code == 0
    execution, policy = digests.json()
    assert data["execution_digest"] == execution["execution_digest"]
    assert data["policy_digest"] == policy["policy_digest"]
    shown = cli("gate", "show", data["gate_id"], "--json", cwd=shared)
    assert shown.code == 0, shown.stderr
    # The chain head moves on after the decision; the decision's own event does not.
    assert shown.json()["decision_event"] == data["decision_event"] == data["audit_head"]
    stored = {k: v for k, v in shown.json().items() if k in data and k != "audit_head"}
    assert stored == {k: v for k, v in data.items() if k != "audit_head"}
    listed = cli("gate", "list", "--json", cwd=shared)
    assert listed.code == 0
    assert data["gate_id"] in [row["gate_id"] for row in listed.json()]


def test_human_output_and_exit_code_without_json(shared: Path, cli: Cli) -> None:
    result = cli("gate", "check", "--build", "build-fail", "--suite", MIXED, cwd=shared)
    assert result.code == 4
    assert "BLOCK" in result.stdout.upper()
    assert "crit-task" in result.stdout


def test_unknown_build_or_suite_is_an_input_error(shared: Path, cli: Cli) -> None:
    for build, suite, *extra in (
        ("build-nope", CRIT),
        ("build-pass", "regression/nope"),
        ("build-pass", CRIT, "--at", "2026-12-01T00:00:00"),  # naive
        ("build-pass", CRIT, "--at", "yesterday"),
        ("build-pass", CRIT, "--policy", "registry/policies/suite-policy.yaml"),
        ("build-pass", CRIT, "--policy", "no-such-policy"),
    ):
        result = cli(
            "gate", "check", "--build", build, "--suite", suite, *extra, "--json", cwd=shared
        )
        assert result.code == 2, result.stdout
        assert result.json()["error"]["code"] == 2


# ----------------------------------------------------------------- replay and tampering


def _stored(ws: Path, gate_id: str) -> tuple[str, str]:
    [(inputs, result)] = sql(
        ws, "SELECT inputs, result FROM gate_decision WHERE gate_id = ?", (gate_id,)
    )
    return inputs, result


def _assert_tampering_detected(
    cli: Cli, ws: Path, gate_id: str, *, replay_fails: bool = True
) -> None:
    replayed = cli("gate", "replay", gate_id, "--json", cwd=ws)
    if replay_fails:
        assert replayed.code == 6, replayed.stdout + replayed.stderr
        assert replayed.json()["identical"] is False
        assert cli("gate", "replay", gate_id, cwd=ws).code == 6
    verified = cli("verify", "--json", cwd=ws)
    assert verified.code == 6, verified.stdout + verified.stderr
    assert gate_id in verified.stdout


def _decisions(ws: Path) -> list[str]:
    return [row[0] for row in sql(ws, "SELECT gate_id FROM gate_decision ORDER BY id")]


@pytest.fixture(scope="module")
def decided_base(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base with three stored decisions: GATE-1 pass, GATE-2 hold, GATE-3 block."""
    root = copy_workspace(base, tmp_path_factory.mktemp("gate-decided") / "ws")
    for build, suite, code in (
        ("build-pass", CRIT, 0),
        ("build-fail", NONCRIT, 3),
        ("build-fail", CRIT, 4),
    ):
        got, output = run_quiet("gate", "check", "--build", build, "--suite", suite, cwd=root)
        assert got == code, output
    must("verify", cwd=root)
    return root


@pytest.fixture
def decided(decided_base: Path, tmp_path: Path) -> tuple[Path, str]:
    """A private copy of `decided_base` and the id of its hold decision."""
    return copy_workspace(decided_base, tmp_path / "ws"), "GATE-2"


@pytest.mark.tampers
@pytest.mark.parametrize("spelling", ["raw", "canonical"])
def test_changing_a_stored_input_fails_replay_and_verify(
    spelling: str, decided: tuple[Path, str], cli: Cli
) -> None:
    ws, gate_id = decided
    inputs, _ = _stored(ws, gate_id)
    value = json.loads(inputs)
    # A decision's inputs hold one summary per task (evaluator 4): its one trial, counted.
    single = value["tasks"][0]["single"]
    assert single["classes"] == {"task_fail": 1}
    if spelling == "raw":
        changed = inputs.replace('"classes":{"task_fail":1}', '"classes":{"task_pass":1}')
        assert changed != inputs
    else:
        single["classes"] = {"task_pass": 1}
        changed = canonical_text(value)
    json.loads(changed)  # still valid JSON
    sql(ws, "UPDATE gate_decision SET inputs = ? WHERE gate_id = ?", (changed, gate_id))

    _assert_tampering_detected(cli, ws, gate_id)
    # the other decisions still replay
    for other in _decisions(ws):
        if other != gate_id:
            assert cli("gate", "replay", other, "--json", cwd=ws).json()["identical"] is True


@pytest.mark.tampers
def test_changing_a_stored_input_that_does_not_change_the_decision_is_still_detected(
    decided: tuple[Path, str], cli: Cli
) -> None:
    ws, gate_id = decided
    inputs, _ = _stored(ws, gate_id)
    value = json.loads(inputs)
    value["tasks"][0]["single"]["scoreSum"] = "1/2"  # task_fail either way
    sql(
        ws,
        "UPDATE gate_decision SET inputs = ? WHERE gate_id = ?",
        (canonical_text(value), gate_id),
    )
    _assert_tampering_detected(cli, ws, gate_id)


@pytest.mark.tampers
def test_changing_a_stored_result_fails_replay_and_verify(
    decided: tuple[Path, str], cli: Cli
) -> None:
    ws, gate_id = decided
    _, result = _stored(ws, gate_id)
    assert '"decision":"hold"' in result
    changed = result.replace('"decision":"hold"', '"decision":"pass"')
    json.loads(changed)
    sql(ws, "UPDATE gate_decision SET result = ? WHERE gate_id = ?", (changed, gate_id))
    _assert_tampering_detected(cli, ws, gate_id)


@pytest.mark.tampers
def test_changing_the_stored_decision_column_fails_verify(
    decided: tuple[Path, str], cli: Cli
) -> None:
    ws, gate_id = decided
    sql(ws, "UPDATE gate_decision SET decision = 'pass' WHERE gate_id = ?", (gate_id,))
    _assert_tampering_detected(cli, ws, gate_id)


@pytest.mark.tampers
def test_a_changed_input_with_its_digest_recomputed_fails_replay_and_verify(
    decided: tuple[Path, str], cli: Cli
) -> None:
    ws, gate_id = decided
    inputs, _ = _stored(ws, gate_id)
    value = json.loads(inputs)
    value["tasks"][0]["single"]["classes"] = {"task_pass": 1}
    sql(
        ws,
        "UPDATE gate_decision SET inputs = ?, inputs_digest = ? WHERE gate_id = ?",
        (canonical_text(value), digest(value), gate_id),
    )
    _assert_tampering_detected(cli, ws, gate_id)


@pytest.mark.tampers
def test_a_consistently_forged_decision_row_fails_verify(
    decided: tuple[Path, str], cli: Cli
) -> None:
    """Inputs, result and both digests rewritten together: replay and verify both check
    the row against the audit event that recorded it."""
    ws, gate_id = decided
    inputs, _ = _stored(ws, gate_id)
    value = json.loads(inputs)
    value["tasks"][0]["single"]["classes"] = {"task_pass": 1}
    forged = evaluate(value)
    assert forged["decision"] == "pass"
    sql(
        ws,
        "UPDATE gate_decision SET inputs = ?, inputs_digest = ?, result = ?, result_digest = ?,"
        " decision = ? WHERE gate_id = ?",
        (
            canonical_text(value),
            digest(value),
            canonical_text(forged),
            digest(forged),
            forged["decision"],
            gate_id,
        ),
    )
    _assert_tampering_detected(cli, ws, gate_id)


def test_replay_of_an_unknown_decision_is_an_input_error(shared: Path, cli: Cli) -> None:
    result = cli("gate", "replay", "GATE-999999", "--json", cwd=shared)
    assert result.code == 2, result.stdout


def test_verify_reevaluates_every_stored_decision_of_the_shared_workspace(
    shared: Path, cli: Cli
) -> None:
    """Run last in this module: `verify` replays every decision the tests above stored."""
    gate(cli, shared, "build-pass", CRIT)
    stored = _decisions(shared)
    result = cli("verify", "--json", cwd=shared)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["ok"] is True
    assert result.json().get("decisions", len(stored)) == len(stored)


# ----------------------------------------------------------- concurrent writers (load)

CONCURRENT_CHECKS = (
    ("build-pass", CRIT, 0),
    ("build-fail", CRIT, 4),
    ("build-fail", NONCRIT, 3),
    ("build-empty", TEN, 3),
)


def _concurrent_gate_checks(cli: Cli, root: Path, url: str) -> None:
    # Processes of their own, forked from this one (tests/forked.py) and released together
    # so that their transactions overlap.
    env = forked.child_env(url, "load@example.com")
    sqlite_db = root / DB if url.startswith("sqlite:///") else None
    go = root / "go"
    procs = [
        forked.start(
            ["--db", url, "gate", "check", "--build", build, "--suite", suite, "--json"],
            root,
            env,
            sqlite_db,
            forked.released_by(go),
        )
        for build, suite, _ in CONCURRENT_CHECKS
    ]
    go.touch()
    decisions = []
    for proc, (build, suite, code) in zip(procs, CONCURRENT_CHECKS, strict=True):
        result = proc.wait(300)
        assert result.code == code, (build, suite, result.stdout, result.stderr)
        decisions.append(json.loads(result.stdout))
    gate_ids = [d["gate_id"] for d in decisions]
    assert len(set(gate_ids)) == len(CONCURRENT_CHECKS)

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            seqs = [r[0] for r in conn.execute(sqlalchemy.text("SELECT seq FROM audit_event"))]
            gate_seqs = [
                r[0] for r in conn.execute(sqlalchemy.text("SELECT audit_seq FROM gate_decision"))
            ]
    finally:
        engine.dispose()
    assert sorted(seqs) == list(range(1, len(seqs) + 1))  # contiguous, no fork, no gap
    assert len(set(gate_seqs)) == len(CONCURRENT_CHECKS)
    verified = cli("--db", url, "verify", "--json", cwd=root)
    assert verified.code == 0, verified.stdout + verified.stderr
    assert verified.json()["ok"] is True
    listed = cli("--db", url, "gate", "list", "--json", cwd=root)
    assert listed.code == 0
    assert sorted(r["gate_id"] for r in listed.json()) == sorted(gate_ids)
    for gate_id in gate_ids:
        replayed = cli("--db", url, "gate", "replay", gate_id, "--json", cwd=root)
        assert replayed.code == 0, replayed.stdout
        assert replayed.json()["identical"] is True


@pytest.mark.load
def test_concurrent_gate_checks_on_sqlite_keep_the_chain(ws: Path, cli: Cli) -> None:
    _concurrent_gate_checks(cli, ws, f"sqlite:///{ws / DB}")


@pytest.mark.load
@pytest.mark.postgres
def test_concurrent_gate_checks_on_postgresql_keep_the_chain(
    tmp_path: Path, pg_url: str, cli: Cli
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    write_registry(root)
    populate(root, db=pg_url)
    _concurrent_gate_checks(cli, root, pg_url)
