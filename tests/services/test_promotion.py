"""Acceptance tests of the suite lifecycle at the CLI (docs/promotion.md,
docs/formats.md, docs/verify.md and docs/cli.md).

`promote` answers a checklist (`{"accepted", "requirements": [{name, met, evidence, fix}]}`):
all met -> a membership pinned to (task_digest, grader_set_digest) and a
`promotion.accepted` audit event, exit 0; any unmet -> nothing in the lifecycle changes,
a `promotion.refused` event is appended, exit 5. For every requirement of the section 7
table that the CLI can reach there is a test below in which it is the only unmet one;
`task_digest`, `versioned_fixture` and `grader_set_digest` can only be unmet for a task or
grader set that is not synced, which `sync` never lets happen, so they are covered by the
pure engine in tests/domain/test_suite_policy.py.

Each test starts from a copy of one prepared workspace (the "base": the mini registry plus a
suite policy, a capability, a regression and an estimation suite, the task carrying
`meta.invariant`, synced, with 2 valid trials ingested) in which promoting `mini-task`
into `regression/mini` is accepted, then changes exactly one thing.
"""

from __future__ import annotations

import copy
import itertools
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import forked
from tests.conftest import Cli, evalops_test_env
from tests.helpers import (
    CAPABILITY_REQUIREMENTS,
    ESTIMATION_REQUIREMENTS,
    EXAMPLE_REGISTRY,
    MINI_EXECUTION,
    MINI_JUDGE,
    MINI_TASK,
    REGRESSION_REQUIREMENTS,
    CliResult,
    commit_all,
    run_quiet,
    sqlite_fingerprint,
    write_mini_registry,
    write_yaml,
)
from tests.trial_factory import eval_case, record, write_jsonl

DB = Path(".evalops/registry.db")
TASK_FILE = "registry/tasks/mini-task.yaml"
GRADERS_FILE = "registry/graders/mini-graders.yaml"
POLICY_FILE = "registry/policies/suite-policy.yaml"
ESTIMATION_FILE = "registry/suites/estimation.yaml"
EXEC_1 = "registry/executions/mini-b1.json"
EXEC_2 = "registry/executions/mini-b2.yaml"

CAPABILITY = "capability/mini"
REGRESSION = "regression/mini"
ESTIMATION = "estimation/mini"
ACTOR = "tester@example.com"


BASE_TASK: dict[str, Any] = copy.deepcopy(MINI_TASK)
BASE_TASK["meta"]["invariant"] = "the thing is done exactly once"
# What a member of an estimation suite declares (section 16): its stratum and when sampled.
BASE_TASK["meta"]["stratum"] = {"tenant_tier": "pro"}
BASE_TASK["meta"]["sampled_at"] = "2026-10-15T09:30:00Z"
# The task calls a tool, served by a fail-closed fixture (so fixtures are needed).
BASE_TASK["fixtures"]["toolResponses"] = [
    {"tool": "svc:do", "args": {"n": 1}, "argsMatch": "subset", "response": {"ok": True}}
]

ESTIMATION_SUITE: dict[str, Any] = {
    "spec_schema_version": "suite/v1",
    "id": ESTIMATION,
    "kind": "estimation",
    "owner": "data@example.com",
    "description": "A frozen sample of production sessions.",
    "sampling_frame": {
        "source": "production-sessions",
        "period": "2026-10",
        "frozen_at": "2026-11-01T00:00:00Z",
    },
    "population": "sessions of paying tenants in the EU region",
    "weights": {"by": "tenant_tier", "values": {"free": 0.2, "pro": 0.5, "enterprise": 0.3}},
    "update_policy": "refreshed quarterly; old cohorts kept read-only",
}

_trial_ids = itertools.count(1)


# ----------------------------------------------------------------------------- helpers


def _run_quiet(*args: str, cwd: Path) -> tuple[int, str]:
    return run_quiet(*args, cwd=cwd, db="sqlite:///.evalops/registry.db", actor=ACTOR)


def _trials_file(ws: Path, n: int, *, execution: str = EXEC_1, **kwargs: Any) -> Path:
    case = eval_case(ws / TASK_FILE, ws / execution, ws / GRADERS_FILE)
    records = []
    run = f"run-{next(_trial_ids)}"  # each file is its own run: trial indexes restart at 0
    for i in range(n):
        trial_id = f"trial-{next(_trial_ids)}"
        records.append(record(case, trial_id=trial_id, trial_index=i, **{"run_id": run, **kwargs}))
    # .evalops/ is git-ignored: the registry stays clean for `sync`.
    return write_jsonl(ws / ".evalops" / f"{trial_id}.jsonl", records)


def load_yaml(ws: Path, rel: str) -> Any:
    return yaml.safe_load((ws / rel).read_text(encoding="utf-8"))


def change(ws: Path, rel: str, mutate: Callable[[Any], None], message: str = "change") -> None:
    """Edit one registry file, commit it."""
    value = load_yaml(ws, rel)
    mutate(value)
    write_yaml(ws / rel, value)
    commit_all(ws, message)


def sync(cli: Cli, ws: Path) -> None:
    result = cli("sync", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr


def ingest(cli: Cli, ws: Path, n: int = 2, **kwargs: Any) -> None:
    """Ingest `n` records of the current eval case of mini-task (passing unless told)."""
    path = _trials_file(ws, n, **kwargs)
    result = cli("trials", "ingest", str(path), "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["ingested"] == n


def promote(cli: Cli, ws: Path, subject: str, suite: str, *extra: str) -> CliResult:
    return cli("promote", subject, "--to", suite, *extra, "--json", cwd=ws)


def suite_members(cli: Cli, ws: Path, suite: str, *, all_: bool = False) -> list[dict[str, Any]]:
    args = ["suite", "show", suite, "--json", *(["--all"] if all_ else [])]
    result = cli(*args, cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    members: list[dict[str, Any]] = result.json()["members"]
    return members


def all_memberships(cli: Cli, ws: Path) -> dict[str, list[dict[str, Any]]]:
    return {s: suite_members(cli, ws, s, all_=True) for s in (CAPABILITY, REGRESSION, ESTIMATION)}


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


def unmet_in_payload(payload: Any) -> list[str]:
    """Names of the unmet requirements an audit payload records, wherever it keeps them."""
    found: list[str] = []
    if isinstance(payload, dict):
        if payload.get("met") is False and isinstance(payload.get("name"), str):
            found.append(payload["name"])
        for value in payload.values():
            found += unmet_in_payload(value)
    elif isinstance(payload, list):
        for value in payload:
            found += unmet_in_payload(value)
    return found


def verify_ok(cli: Cli, ws: Path) -> None:
    result = cli("verify", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["ok"] is True


def task_digest(cli: Cli, ws: Path) -> str:
    shown = cli("task", "show", "mini-task", "--json", cwd=ws)
    assert shown.code == 0, shown.stderr
    digest: str = shown.json()["task_digest"]
    return digest


def file_digest(cli: Cli, ws: Path, rel: str, key: str) -> str:
    result = cli("digest", rel, "--json", cwd=ws)
    assert result.code == 0, result.stderr
    digest: str = result.json()[0][key]
    return digest


def unmet(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in data["requirements"] if r["met"] is not True]


def assert_refused_only(
    cli: Cli, ws: Path, requirement: str, *, subject: str = "mini-task", suite: str = REGRESSION
) -> dict[str, Any]:
    """`promote` is refused naming exactly `requirement`; lifecycle unchanged, refusal audited."""
    memberships = all_memberships(cli, ws)
    events = audit(ws)

    result = promote(cli, ws, subject, suite)

    assert result.code == 5, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is False
    assert isinstance(data["requirements"], list)
    for r in data["requirements"]:
        assert set(r) >= {"name", "met", "evidence", "fix"}, r
    missing = unmet(data)
    assert [r["name"] for r in missing] == [requirement], data["requirements"]
    refusal = missing[0]
    assert refusal["met"] is False
    assert isinstance(refusal["evidence"], str) and refusal["evidence"].strip()
    assert isinstance(refusal["fix"], str) and refusal["fix"].strip()

    assert all_memberships(cli, ws) == memberships
    after = audit(ws)
    assert after[: len(events)] == events
    new = after[len(events) :]
    assert [e["kind"] for e in new] == ["promotion.refused"]
    assert new[0]["actor"] == ACTOR
    assert unmet_in_payload(new[0]["payload"]) == [requirement], new[0]["payload"]
    verify_ok(cli, ws)
    return refusal


def assert_accepted(
    cli: Cli, ws: Path, *, subject: str = "mini-task", suite: str = REGRESSION
) -> dict[str, Any]:
    events = audit(ws)
    result = promote(cli, ws, subject, suite)
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is True
    assert unmet(data) == []
    new = audit(ws)[len(events) :]
    assert "promotion.accepted" in [e["kind"] for e in new]
    verify_ok(cli, ws)
    return data


# ---------------------------------------------------------------------------- fixtures


def _build_seed(root: Path) -> Path:
    """The mini registry + policy + three suites + a second execution; synced, no trials."""
    reg = root / "registry"
    write_mini_registry(reg)
    write_yaml(reg / "tasks" / "mini-task.yaml", BASE_TASK)
    second = {**copy.deepcopy(MINI_EXECUTION), "id": "mini-b2", "system_build": "build-2"}
    write_yaml(reg / "executions" / "mini-b2.yaml", second)
    (reg / "policies").mkdir(parents=True)
    shutil.copy(EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml", reg / "policies")
    for name, suite_id, kind in (
        ("capability", CAPABILITY, "capability"),
        ("regression", REGRESSION, "regression"),
    ):
        write_yaml(
            reg / "suites" / f"{name}.yaml",
            {"spec_schema_version": "suite/v1", "id": suite_id, "kind": kind, "owner": ACTOR},
        )
    write_yaml(reg / "suites" / "estimation.yaml", ESTIMATION_SUITE)
    commit_all(root, "base registry")
    for args in (("init",), ("sync",)):
        code, output = _run_quiet(*args, cwd=root)
        assert code == 0, output
    return root


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_seed(tmp_path_factory.mktemp("seed"))


@pytest.fixture(scope="module")
def base_dir(seed_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base") / "ws"
    shutil.copytree(seed_dir, root, symlinks=True)
    path = _trials_file(root, 2)
    code, output = _run_quiet("trials", "ingest", str(path), cwd=root)
    assert code == 0, output
    return root


@pytest.fixture
def seed(seed_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the synced base registry, without trials."""
    return Path(shutil.copytree(seed_dir, tmp_path / "ws", symlinks=True))


@pytest.fixture
def ws(base_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the base: promoting mini-task into regression/mini is accepted."""
    return Path(shutil.copytree(base_dir, tmp_path / "ws", symlinks=True))


# ------------------------------------------------------------------------ accepted path


def test_base_promotion_is_accepted_pinned_and_audited(ws: Path, cli: Cli) -> None:
    assert suite_members(cli, ws, REGRESSION) == []
    events = audit(ws)

    result = promote(cli, ws, "mini-task", REGRESSION)

    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is True
    assert [r["name"] for r in data["requirements"]] == REGRESSION_REQUIREMENTS
    for r in data["requirements"]:
        assert r["met"] is True, r
        assert isinstance(r["evidence"], str) and r["evidence"].strip(), r

    expected_task = task_digest(cli, ws)
    expected_graders = file_digest(cli, ws, GRADERS_FILE, "grader_set_digest")
    members = suite_members(cli, ws, REGRESSION)
    assert len(members) == 1
    member = members[0]
    assert member["task_id"] == "mini-task"
    assert member["task_digest"] == expected_task
    assert member["grader_set_digest"] == expected_graders
    assert member["added_by"] == ACTOR
    # Nothing else changed membership.
    assert suite_members(cli, ws, CAPABILITY, all_=True) == []
    assert suite_members(cli, ws, ESTIMATION, all_=True) == []

    new = audit(ws)[len(events) :]
    accepted = [e for e in new if e["kind"] == "promotion.accepted"]
    assert len(accepted) == 1
    assert accepted[0]["actor"] == ACTOR
    assert "mini-task" in accepted[0]["subject"]
    assert REGRESSION in accepted[0]["subject"]
    assert accepted[0]["payload"]["task_digest"] == expected_task
    assert accepted[0]["payload"]["grader_set_digest"] == expected_graders
    assert not [e for e in new if e["kind"] == "promotion.refused"]
    listed = {s["suite"]: s for s in cli("suite", "list", "--json", cwd=ws).json()}
    assert listed[REGRESSION]["members"] == 1
    verify_ok(cli, ws)


def test_promoting_again_with_the_same_pin_keeps_one_membership(ws: Path, cli: Cli) -> None:
    assert_accepted(cli, ws)
    before = suite_members(cli, ws, REGRESSION, all_=True)

    again = promote(cli, ws, "mini-task", REGRESSION)

    assert again.code == 0, again.stdout + again.stderr
    assert again.json()["accepted"] is True
    assert suite_members(cli, ws, REGRESSION, all_=True) == before
    assert [e["kind"] for e in audit(ws)].count("promotion.accepted") == 1
    verify_ok(cli, ws)


def test_capability_and_estimation_entry_rules(ws: Path, cli: Cli) -> None:
    capability = assert_accepted(cli, ws, suite=CAPABILITY)
    assert [r["name"] for r in capability["requirements"]] == CAPABILITY_REQUIREMENTS
    estimation = assert_accepted(cli, ws, suite=ESTIMATION)
    assert [r["name"] for r in estimation["requirements"]] == ESTIMATION_REQUIREMENTS
    assert [m["task_id"] for m in suite_members(cli, ws, CAPABILITY)] == ["mini-task"]
    assert [m["task_id"] for m in suite_members(cli, ws, ESTIMATION)] == ["mini-task"]
    assert suite_members(cli, ws, REGRESSION) == []


def test_regression_checklist_includes_the_capability_requirements(ws: Path, cli: Cli) -> None:
    """An unmet capability requirement refuses a regression promotion too."""
    change(ws, TASK_FILE, lambda t: t["meta"].pop("owner"), "no review owner")
    sync(cli, ws)
    result = promote(cli, ws, "mini-task", REGRESSION, "--dry-run")
    names = [r["name"] for r in result.json()["requirements"]]
    assert set(CAPABILITY_REQUIREMENTS) <= set(names)
    assert [r["name"] for r in unmet(result.json())] == ["review_owner"]


# ---------------------------------------------------------------------------- dry run


def test_dry_run_of_an_accepted_promotion_changes_nothing(ws: Path, cli: Cli) -> None:
    before = sqlite_fingerprint(ws / DB)

    result = promote(cli, ws, "mini-task", REGRESSION, "--dry-run")

    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is True
    assert [r["name"] for r in data["requirements"]] == REGRESSION_REQUIREMENTS
    assert sqlite_fingerprint(ws / DB) == before
    assert suite_members(cli, ws, REGRESSION, all_=True) == []


def test_dry_run_of_a_refused_promotion_changes_nothing(ws: Path, cli: Cli) -> None:
    change(ws, TASK_FILE, lambda t: t["meta"].pop("failure_owner"), "no failure owner")
    sync(cli, ws)
    before = sqlite_fingerprint(ws / DB)

    result = promote(cli, ws, "mini-task", REGRESSION, "--dry-run")

    assert result.code in (0, 5), result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is False
    assert [r["name"] for r in unmet(data)] == ["failure_owner"]
    assert sqlite_fingerprint(ws / DB) == before
    assert "promotion.refused" not in [e["kind"] for e in audit(ws)]


def test_checklist_evidence_counts_agree_with_their_nouns(ws: Path, cli: Cli) -> None:
    """The base task scripts exactly one tool response: `1 tool response`, never `responses`."""
    data = promote(cli, ws, "mini-task", REGRESSION, "--dry-run").json()
    evidence = {r["name"]: r["evidence"] for r in data["requirements"]}
    assert len(BASE_TASK["fixtures"]["toolResponses"]) == 1
    assert "fixtures fail closed (1 tool response)" in evidence["reproducible_fixture"]
    assert "1 tool responses" not in json.dumps(data)


# ------------------------------------------------------ one unmet requirement at a time


def test_reproducible_fixture_refused_when_fixtures_may_go_live(ws: Path, cli: Cli) -> None:
    def live(task: dict[str, Any]) -> None:
        task["fixtures"]["onMiss"] = "live"
        task["revision"] = 2

    change(ws, TASK_FILE, live, "fixtures onMiss live")
    sync(cli, ws)
    ingest(cli, ws, 2)  # two valid trials of the new eval case: only the fixture is wrong

    refusal = assert_refused_only(cli, ws, "reproducible_fixture")
    assert "live" in refusal["evidence"]


def test_reproducible_fixture_refused_with_fewer_than_two_valid_trials(
    seed: Path, cli: Cli
) -> None:
    # One valid trial and one infrastructure_invalid trial of the eval case.
    ingest(cli, seed, 1)
    ingest(cli, seed, 1, runtime="infrastructure_error")

    assert_refused_only(cli, seed, "reproducible_fixture", suite=CAPABILITY)
    assert_refused_only(cli, seed, "reproducible_fixture")

    ingest(cli, seed, 1)  # the second valid trial meets it
    assert_accepted(cli, seed)


def test_a_rerun_the_gate_excludes_is_no_second_valid_trial(seed: Path, cli: Cli) -> None:
    """Promotion counts a rerun exactly where the gate lets it stand in, as `trials list`
    flags the others: a rerun of a passing trial never; a rerun of an infrastructure
    failure only under a gate policy that permits it, and here none governs the task (no
    rerun stands in: fail closed)."""
    case = eval_case(seed / TASK_FILE, seed / EXEC_1, seed / GRADERS_FILE)
    first = record(case, trial_id="t-once", run_id="run-x", trial_index=0)
    again = record(case, trial_id="t-again", run_id="run-x", trial_index=0,
                   rerun={"parent_trial_id": "t-once", "reason": "looked flaky"})  # fmt: skip
    broken = record(case, trial_id="t-broken", run_id="run-y", trial_index=0,
                    runtime="infrastructure_error")  # fmt: skip
    stood = record(case, trial_id="t-stood", run_id="run-y", trial_index=0,
                   rerun={"parent_trial_id": "t-broken", "reason": "infrastructure"})  # fmt: skip
    path = write_jsonl(seed / ".evalops" / "rr.jsonl", [first, again, broken, stood])
    done = cli("trials", "ingest", str(path), cwd=seed)
    assert done.code == 0, done.stdout + done.stderr
    refusal = assert_refused_only(cli, seed, "reproducible_fixture", suite=CAPABILITY)
    assert "rerun_not_permitted" in json.dumps(refusal), refusal
    listed = cli("trials", "list", "--all", "--json", cwd=seed)
    flagged = {
        t["trial_id"] for t in listed.json() if "rerun_not_permitted" in t["secondary_labels"]
    }
    assert {"t-again", "t-stood"} <= flagged, listed.stdout
    # A second original that passed: now two valid trials, whatever the reruns.
    ingest(cli, seed, 1)
    assert_accepted(cli, seed, suite=CAPABILITY)


def test_reproducible_fixture_needs_two_trials_of_one_eval_case(seed: Path, cli: Cli) -> None:
    """One valid trial under each of two executions is not two trials of one eval case."""
    ingest(cli, seed, 1, execution=EXEC_1)
    ingest(cli, seed, 1, execution=EXEC_2)

    assert_refused_only(cli, seed, "reproducible_fixture")


def test_trials_of_an_older_revision_do_not_count(ws: Path, cli: Cli) -> None:
    def new_goal(task: dict[str, Any]) -> None:
        task["contract"]["goal"] = "do_the_thing_better"
        task["revision"] = 2

    change(ws, TASK_FILE, new_goal, "revision 2")
    sync(cli, ws)

    assert_refused_only(cli, ws, "reproducible_fixture")


def test_minimum_grader_coverage_refused(ws: Path, cli: Cli) -> None:
    """The only grader covering the forbidden effect stops blocking."""

    def drop(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"][1]["blocking"] = False

    change(ws, GRADERS_FILE, drop, "no-twice no longer blocks")
    sync(cli, ws)
    ingest(cli, ws, 2)

    refusal = assert_refused_only(cli, ws, "minimum_grader_coverage")
    assert "do_it_twice" in refusal["evidence"]


def test_review_owner_refused(ws: Path, cli: Cli) -> None:
    change(ws, TASK_FILE, lambda t: t["meta"].pop("owner"), "no owner")
    sync(cli, ws)

    refusal = assert_refused_only(cli, ws, "review_owner")
    assert "owner" in refusal["fix"]
    # The human checklist names the unmet requirement and how to meet it.
    human = cli("promote", "mini-task", "--to", REGRESSION, cwd=ws)
    assert human.code == 5
    assert "review_owner" in human.stdout
    assert refusal["fix"] in human.stdout


def test_failure_owner_refused(ws: Path, cli: Cli) -> None:
    change(ws, TASK_FILE, lambda t: t["meta"].pop("failure_owner"), "no failure owner")
    sync(cli, ws)

    refusal = assert_refused_only(cli, ws, "failure_owner")
    assert "failure_owner" in refusal["fix"]


def test_confirmed_failure_or_invariant_refused(ws: Path, cli: Cli) -> None:
    change(ws, TASK_FILE, lambda t: t["meta"].pop("invariant"), "no invariant")
    sync(cli, ws)

    assert_refused_only(cli, ws, "confirmed_failure_or_invariant")


def test_confirmed_failure_or_invariant_unmet_by_an_unconfirmed_incident(
    ws: Path, cli: Cli
) -> None:
    change(ws, TASK_FILE, lambda t: t["meta"].pop("invariant"), "no invariant")
    sync(cli, ws)
    inc = open_incident(cli, ws)
    linked = cli("incident", "link", inc, "--task", "mini-task", "--json", cwd=ws)
    assert linked.code == 0, linked.stdout + linked.stderr

    assert_refused_only(cli, ws, "confirmed_failure_or_invariant")
    # Promoting the incident itself is refused for being unconfirmed, too.
    by_incident = promote(cli, ws, inc, REGRESSION)
    assert by_incident.code == 5, by_incident.stdout + by_incident.stderr
    assert [r["name"] for r in unmet(by_incident.json())] == [
        "confirmed_incident",
        "confirmed_failure_or_invariant",
    ]
    assert incident_state(cli, ws, inc) == "open"

    confirmed = cli("incident", "confirm", inc, "--json", cwd=ws)
    assert confirmed.code == 0, confirmed.stdout + confirmed.stderr
    assert_accepted(cli, ws)


def test_stable_success_state_refused_when_a_key_has_no_deterministic_grader(
    ws: Path, cli: Cli
) -> None:
    """The blocking outcome grader of `done` is a human one: covered, but not stable."""

    def human(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"][0]["type"] = "human"

    change(ws, GRADERS_FILE, human, "human outcome grader")
    sync(cli, ws)
    ingest(cli, ws, 2)

    refusal = assert_refused_only(cli, ws, "stable_success_state")
    assert "done" in refusal["evidence"]


def test_stable_success_state_refused_when_success_state_is_empty(ws: Path, cli: Cli) -> None:
    def empty(task: dict[str, Any]) -> None:
        task["contract"]["success_state"] = {}
        task["revision"] = 2

    change(ws, TASK_FILE, empty, "no success state")
    sync(cli, ws)
    ingest(cli, ws, 2)

    assert_refused_only(cli, ws, "stable_success_state")


JUDGE: dict[str, Any] = MINI_JUDGE


def test_calibrated_graders_refused_for_an_uncalibrated_blocking_model_grader(
    ws: Path, cli: Cli
) -> None:
    """A blocking model grader without a calibration.

    While it is uncalibrated every trial of the new eval case is `grader_invalid` (section
    6.2), so `reproducible_fixture` cannot be met at the same time under the default policy.
    To make `calibrated_graders` the only unmet requirement, the policy first stops
    requiring `reproducible_fixture` (a policy may require fewer, section 5.4); that change
    alone keeps the promotion accepted; then the grader set gains the model grader.
    """
    change(
        ws,
        POLICY_FILE,
        lambda p: p["regression_entry"]["requires"].remove("reproducible_fixture"),
        "policy without reproducible_fixture",
    )
    sync(cli, ws)
    dry = promote(cli, ws, "mini-task", REGRESSION, "--dry-run")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert dry.json()["accepted"] is True

    def add_judge(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"].append(copy.deepcopy(JUDGE))

    change(ws, GRADERS_FILE, add_judge, "blocking model grader")
    sync(cli, ws)

    refusal = assert_refused_only(cli, ws, "calibrated_graders")
    assert "judge" in refusal["evidence"] or "judge" in refusal["fix"]


def test_uncalibrated_model_grader_also_leaves_no_valid_trials(ws: Path, cli: Cli) -> None:
    """Under the default policy its trials are grader_invalid: both requirements are unmet."""

    def add_judge(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"].append(copy.deepcopy(JUDGE))

    change(ws, GRADERS_FILE, add_judge, "blocking model grader")
    sync(cli, ws)
    results = [
        {"grader_id": "outcome", "grader_version": 1, "state": "task_pass", "score": 1.0},
        {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
        {"grader_id": "judge", "grader_version": 1, "state": "pass"},
    ]
    ingest(cli, ws, 2, grader_results=results)
    events = audit(ws)

    result = promote(cli, ws, "mini-task", REGRESSION)

    assert result.code == 5, result.stdout + result.stderr
    assert {r["name"] for r in unmet(result.json())} == {
        "reproducible_fixture",
        "calibrated_graders",
    }
    assert suite_members(cli, ws, REGRESSION, all_=True) == []
    assert [e["kind"] for e in audit(ws)[len(events) :]] == ["promotion.refused"]


def test_too_few_valid_trials_names_the_classes_not_counted(ws: Path, cli: Cli) -> None:
    """`ingest at least 2 valid trials` alone hides the cause when
    the trials exist but do not count; the refusal names their classes and why."""

    def add_judge(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"].append(copy.deepcopy(JUDGE))

    change(ws, GRADERS_FILE, add_judge, "blocking model grader")
    sync(cli, ws)
    results = [
        {"grader_id": "outcome", "grader_version": 1, "state": "task_pass", "score": 1.0},
        {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
        {"grader_id": "judge", "grader_version": 1, "state": "pass"},
    ]
    ingest(cli, ws, 5, grader_results=results)
    ingest(cli, ws, 1, grader_results=results, runtime="infrastructure_error")

    result = promote(cli, ws, "mini-task", REGRESSION)
    human = cli("promote", "mini-task", "--to", REGRESSION, cwd=ws)

    assert result.code == human.code == 5, result.stdout + result.stderr
    [refusal] = [r for r in unmet(result.json()) if r["name"] == "reproducible_fixture"]
    assert refusal["evidence"].endswith(
        "no valid trials of this task's eval case; not counted: 6 of 6 trials are "
        "grader_invalid (blocking model grader judge calibration missing)"
    )
    assert "fix what made the trials invalid" in refusal["fix"]
    assert "a model grader needs a valid calibration" in refusal["fix"]
    assert "6 of 6 trials are grader_invalid (blocking model grader judge calibration" in (
        human.stdout
    )


def test_trials_not_counted_are_named_by_class_beside_the_valid_ones(seed: Path, cli: Cli) -> None:
    ingest(cli, seed, 1)
    ingest(cli, seed, 1, runtime="infrastructure_error")

    refusal = assert_refused_only(cli, seed, "reproducible_fixture")

    assert "1 valid trial of one eval case" in refusal["evidence"]
    assert "; not counted: 1 of 2 trials is infrastructure_invalid (" in refusal["evidence"]


@pytest.mark.parametrize(
    ("requirement", "field"),
    [
        ("frozen_sampling_frame", "sampling_frame"),
        ("production_population_definition", "population"),
        ("weights", "weights"),
        ("update_policy", "update_policy"),
    ],
)
def test_estimation_suite_missing_one_declaration_field_is_refused(
    ws: Path, cli: Cli, requirement: str, field: str
) -> None:
    change(ws, ESTIMATION_FILE, lambda s: s.pop(field), f"estimation suite without {field}")
    sync(cli, ws)

    refusal = assert_refused_only(cli, ws, requirement, suite=ESTIMATION)
    assert field in refusal["fix"]


# ---------------------------------------------------------------------------- incidents


def open_incident(cli: Cli, ws: Path) -> str:
    opened = cli(
        "incident",
        "open",
        "--title",
        "did the thing twice",
        "--severity",
        "high",
        "--observed-at",
        "2026-11-02T09:14:00Z",
        "--trace-uri",
        "trace://prod/1",
        "--json",
        cwd=ws,
    )
    assert opened.code == 0, opened.stdout + opened.stderr
    data = opened.json()
    assert data["state"] == "open"
    assert data["incident_id"].startswith("INC-")
    incident_id: str = data["incident_id"]
    return incident_id


def incident_state(cli: Cli, ws: Path, incident_id: str) -> str:
    shown = cli("incident", "show", incident_id, "--json", cwd=ws)
    assert shown.code == 0, shown.stdout + shown.stderr
    state: str = shown.json()["state"]
    return state


def test_incident_without_a_linked_task_cannot_be_promoted(ws: Path, cli: Cli) -> None:
    inc = open_incident(cli, ws)
    confirmed = cli("incident", "confirm", inc, "--json", cwd=ws)
    assert confirmed.code == 0, confirmed.stdout + confirmed.stderr
    assert incident_state(cli, ws, inc) == "confirmed"
    memberships = all_memberships(cli, ws)
    events = audit(ws)

    result = promote(cli, ws, inc, REGRESSION)

    assert result.code == 5, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is False
    missing = unmet(data)
    assert len(missing) == 1
    assert missing[0]["evidence"].strip()
    assert "incident link" in missing[0]["fix"]
    assert all_memberships(cli, ws) == memberships
    new = audit(ws)[len(events) :]
    assert [e["kind"] for e in new] == ["promotion.refused"]
    assert inc in json.dumps(new[0])
    assert unmet_in_payload(new[0]["payload"]) == [missing[0]["name"]]
    assert incident_state(cli, ws, inc) == "confirmed"
    verify_ok(cli, ws)


def test_promoting_an_incident_promotes_its_task_and_moves_it_to_promoted(
    ws: Path, cli: Cli
) -> None:
    # Without meta.invariant, the confirmed incident is what meets the regression rule.
    change(ws, TASK_FILE, lambda t: t["meta"].pop("invariant"), "no invariant")
    sync(cli, ws)
    inc = open_incident(cli, ws)
    assert cli("incident", "confirm", inc, cwd=ws).code == 0
    linked = cli("incident", "link", inc, "--task", "mini-task", "--json", cwd=ws)
    assert linked.code == 0, linked.stdout + linked.stderr
    assert linked.json()["tasks"] == ["mini-task"]

    data = assert_accepted(cli, ws, subject=inc)

    evidence = {r["name"]: r["evidence"] for r in data["requirements"]}
    assert inc in evidence["confirmed_failure_or_invariant"]
    assert incident_state(cli, ws, inc) == "promoted"
    members = suite_members(cli, ws, REGRESSION)
    assert [m["task_id"] for m in members] == ["mini-task"]
    assert members[0]["task_digest"] == task_digest(cli, ws)


def test_an_incident_whose_task_is_already_a_member_is_promoted_all_the_same(
    ws: Path, cli: Cli
) -> None:
    """The task was promoted first; an incident it reproduces, promoted later, left the
    membership as it was and the incident "reproduced" for good, so the site said no
    regression task guarded it. Now the incident moves to promoted, once."""
    assert_accepted(cli, ws)
    members = suite_members(cli, ws, REGRESSION, all_=True)
    inc = open_incident(cli, ws)
    assert cli("incident", "confirm", inc, cwd=ws).code == 0
    assert cli("incident", "link", inc, "--task", "mini-task", cwd=ws).code == 0
    events = audit(ws)
    dry = cli("promote", inc, "--to", REGRESSION, "--dry-run", cwd=ws)
    assert dry.stdout.splitlines()[0] == (
        f"dry run: already a member with this pin; {inc} would be promoted (its task guards "
        f"it): {inc} -> {REGRESSION}"
    ), dry.stdout
    assert audit(ws) == events and incident_state(cli, ws, inc) == "reproduced"
    done = cli("promote", inc, "--to", REGRESSION, "--json", cwd=ws)
    assert done.code == 0, done.stdout + done.stderr
    assert (done.json()["outcome"], done.json()["incident_promoted"]) == ("noop", True)
    assert incident_state(cli, ws, inc) == "promoted"
    assert suite_members(cli, ws, REGRESSION, all_=True) == members
    kinds = [e["kind"] for e in audit(ws)[len(events) :]]
    assert kinds[0] == "promotion.noop" and len(kinds) == 2, kinds
    again = cli("promote", inc, "--to", REGRESSION, cwd=ws)
    assert again.code == 0
    assert again.stdout.splitlines()[0].startswith("already a member with this pin: nothing")
    assert incident_state(cli, ws, inc) == "promoted"
    verify_ok(cli, ws)


# ---------------------------------------------------------------------------- re-pinning


def test_new_grader_set_version_needs_a_new_promotion_and_passes_the_same_checks(
    ws: Path, cli: Cli
) -> None:
    assert_accepted(cli, ws)
    pinned = suite_members(cli, ws, REGRESSION)

    def drop(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"][1]["blocking"] = False

    change(ws, GRADERS_FILE, drop, "no-twice no longer blocks")
    sync(cli, ws)
    ingest(cli, ws, 2)

    # The new version did not enter the suite by itself: the pin and its coverage are kept.
    assert suite_members(cli, ws, REGRESSION) == pinned
    coverage = cli("suite", "coverage", REGRESSION, "--json", cwd=ws)
    assert coverage.code == 0, coverage.stdout + coverage.stderr
    assert coverage.json()["gaps"] == 0
    # Promoting it again runs the same checks; the refusal keeps the old pin.
    assert_refused_only(cli, ws, "minimum_grader_coverage")
    assert suite_members(cli, ws, REGRESSION) == pinned


def test_new_task_revision_is_promoted_again_and_replaces_the_pin(ws: Path, cli: Cli) -> None:
    assert_accepted(cli, ws)
    old = suite_members(cli, ws, REGRESSION)[0]
    old_suite_digest = cli("suite", "show", REGRESSION, "--json", cwd=ws).json()["suite_digest"]

    def new_goal(task: dict[str, Any]) -> None:
        task["contract"]["goal"] = "do_the_thing_better"
        task["revision"] = 2

    change(ws, TASK_FILE, new_goal, "revision 2")
    sync(cli, ws)
    ingest(cli, ws, 2)
    new_digest = task_digest(cli, ws)
    assert new_digest != old["task_digest"]
    # Not in the suite by itself.
    assert suite_members(cli, ws, REGRESSION) == [old]

    assert_accepted(cli, ws)

    members = suite_members(cli, ws, REGRESSION, all_=True)
    assert [m["task_id"] for m in members] == ["mini-task"]
    assert members[0]["task_digest"] == new_digest
    assert members[0]["removed"] is None
    shown = cli("suite", "show", REGRESSION, "--json", cwd=ws).json()
    assert shown["suite_digest"] != old_suite_digest
    pins = [e["payload"]["task_digest"] for e in audit(ws) if e["kind"] == "promotion.accepted"]
    assert pins == [old["task_digest"], new_digest]


def test_unknown_suite_or_task_is_an_input_error_and_writes_nothing(ws: Path, cli: Cli) -> None:
    before = sqlite_fingerprint(ws / DB)
    for subject, suite in (("mini-task", "regression/nope"), ("no-such-task", REGRESSION)):
        result = promote(cli, ws, subject, suite)
        assert result.code == 2, result.stdout + result.stderr
        assert result.json()["error"]["code"] == 2
    assert sqlite_fingerprint(ws / DB) == before


# ---------------------------------------------------------------------------- coverage


def test_suite_coverage_marks_a_forbidden_effect_without_a_blocking_hard_constraint_grader(
    ws: Path, cli: Cli
) -> None:
    """A policy that does not require minimum_grader_coverage lets the gap into the suite."""
    change(
        ws,
        POLICY_FILE,
        lambda p: p["regression_entry"]["requires"].remove("minimum_grader_coverage"),
        "policy without minimum_grader_coverage",
    )

    def drop(graders: dict[str, Any]) -> None:
        graders["version"] = 2
        graders["graders"][1]["blocking"] = False

    change(ws, GRADERS_FILE, drop, "no-twice no longer blocks")
    sync(cli, ws)
    ingest(cli, ws, 2)
    assert_accepted(cli, ws)

    result = cli("suite", "coverage", REGRESSION, "--json", cwd=ws)

    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    rows = {r["item"]: r for r in data["rows"] if r["task_id"] == "mini-task"}
    assert set(rows) == {"do_it_twice", "done"}
    assert rows["do_it_twice"]["gap"] is True
    assert rows["done"]["gap"] is False
    assert rows["done"]["primary_grader"] == "outcome"
    assert data["gaps"] == 1
    human = cli("suite", "coverage", REGRESSION, cwd=ws)
    assert human.code == 0
    assert "GAP" in human.stdout


def test_suite_coverage_without_gaps(ws: Path, cli: Cli) -> None:
    assert_accepted(cli, ws)
    data = cli("suite", "coverage", REGRESSION, "--json", cwd=ws).json()
    rows = {r["item"]: r for r in data["rows"]}
    assert rows["do_it_twice"]["primary_grader"] == "no-twice"
    assert rows["do_it_twice"]["gap"] is False
    assert data["gaps"] == 0


# ---------------------------------------------------------------------------- retirement


def _add_task(ws: Path, task_id: str, goal: str, *, forbidden: list[str]) -> None:
    task = copy.deepcopy(BASE_TASK)
    task["id"] = task_id
    task["contract"]["goal"] = goal
    task["contract"]["forbidden_effects"] = forbidden
    write_yaml(ws / "registry" / "tasks" / f"{task_id}.yaml", task)


def _ingest_task(cli: Cli, ws: Path, task_id: str) -> None:
    case = eval_case(ws / "registry" / "tasks" / f"{task_id}.yaml", ws / EXEC_1, ws / GRADERS_FILE)
    records = [
        record(case, trial_id=f"{task_id}-{next(_trial_ids)}", task_id=task_id, trial_index=i)
        for i in range(2)
    ]
    path = write_jsonl(ws / ".evalops" / f"{task_id}.jsonl", records)
    result = cli("trials", "ingest", str(path), "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr


def _quiet_cli(*args: str, cwd: Path | None = None) -> CliResult:
    """The `cli` fixture's runs (its environment, no replay) for a module-scoped fixture."""
    import contextlib
    import io
    import os

    from evalops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    with evalops_test_env():
        if cwd is not None:
            os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([str(a) for a in args])
        finally:
            os.chdir(before)
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def retire_master(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`retire_ws`, built once per module (three promotions, each verified)."""
    root = tmp_path_factory.mktemp("retire") / "ws"
    shutil.copytree(base_dir, root, symlinks=True)
    return _build_retire(_quiet_cli, root)


@pytest.fixture
def retire_ws(retire_master: Path, tmp_path: Path) -> Path:
    """mini-task, wide-task (covers everything it does) and narrow-task (misses do_it_twice)
    are all members of regression/mini (a private copy of `retire_master`)."""
    return Path(shutil.copytree(retire_master, tmp_path / "ws", symlinks=True))


def _build_retire(cli: Cli, ws: Path) -> Path:
    _add_task(ws, "wide-task", "do_the_thing_wider", forbidden=["do_it_twice"])
    _add_task(ws, "narrow-task", "do_the_thing_narrower", forbidden=[])
    commit_all(ws, "replacement candidates")
    sync(cli, ws)
    for task_id in ("wide-task", "narrow-task"):
        _ingest_task(cli, ws, task_id)
    for task_id in ("mini-task", "wide-task", "narrow-task"):
        assert_accepted(cli, ws, subject=task_id)
    return ws


def _retire(cli: Cli, ws: Path, *args: str) -> CliResult:
    return cli("retire", "mini-task", "--from", REGRESSION, *args, "--json", cwd=ws)


def _assert_retirement_refused(cli: Cli, ws: Path, requirement: str, *args: str) -> None:
    before = suite_members(cli, ws, REGRESSION, all_=True)
    events = audit(ws)

    result = _retire(cli, ws, *args)

    assert result.code == 5, result.stdout + result.stderr
    data = result.json()
    assert data["accepted"] is False
    missing = unmet(data)
    assert [r["name"] for r in missing] == [requirement], data["requirements"]
    assert missing[0]["evidence"].strip()
    assert missing[0]["fix"].strip()
    assert suite_members(cli, ws, REGRESSION, all_=True) == before
    new = audit(ws)[len(events) :]
    assert [e["kind"] for e in new] == ["retirement.refused"]
    assert unmet_in_payload(new[0]["payload"]) == [requirement], new[0]["payload"]
    verify_ok(cli, ws)


def test_retire_without_approver_is_refused(retire_ws: Path, cli: Cli) -> None:
    _assert_retirement_refused(cli, retire_ws, "risk_owner_approval", "--reason", "obsolete")


def test_retire_replaced_by_an_uncovering_task_is_refused(retire_ws: Path, cli: Cli) -> None:
    _assert_retirement_refused(
        cli,
        retire_ws,
        "coverage_mapping",
        "--reason",
        "replaced",
        "--approved-by",
        "risk@example.com",
        "--replaced-by",
        "narrow-task",
    )
    refused = audit(retire_ws)[-1]
    assert "do_it_twice" in json.dumps(refused["payload"])


def test_retire_replaced_without_a_replacement_is_refused(retire_ws: Path, cli: Cli) -> None:
    _assert_retirement_refused(
        cli,
        retire_ws,
        "coverage_mapping",
        "--reason",
        "replaced",
        "--approved-by",
        "risk@example.com",
    )


def test_a_task_cannot_replace_itself(retire_ws: Path, cli: Cli) -> None:
    """Retired, it leaves the suite: nothing would cover what it covered, whatever the
    coverage mapping of a task to itself says."""
    _assert_retirement_refused(
        cli, retire_ws, "replacement_member",
        "--reason", "replaced", "--approved-by", "risk@example.com", "--replaced-by", "mini-task",
    )  # fmt: skip


def test_a_replacement_covers_by_its_pinned_revision_not_a_newer_one(
    retire_ws: Path, cli: Cli
) -> None:
    """narrow-task's pin misses do_it_twice; a newer revision that states it, registered
    but never promoted, is not what the suite holds, so it covers nothing there."""

    def wider(doc: Any) -> None:
        doc["revision"] += 1
        doc["contract"]["forbidden_effects"] = ["do_it_twice"]

    change(retire_ws, "registry/tasks/narrow-task.yaml", wider, "narrow-task, revision 2")
    sync(cli, retire_ws)
    _assert_retirement_refused(
        cli, retire_ws, "coverage_mapping",
        "--reason", "replaced", "--approved-by", "risk@example.com", "--replaced-by", "narrow-task",
    )  # fmt: skip
    assert "do_it_twice" in json.dumps(audit(retire_ws)[-1]["payload"])


def test_a_member_whose_file_left_the_branch_can_still_be_retired(
    retire_ws: Path, cli: Cli
) -> None:
    """Its pinned revision is what is retired: no internal error for a task no longer in
    force."""
    (retire_ws / "registry" / "tasks" / "narrow-task.yaml").unlink()
    commit_all(retire_ws, "narrow-task's file removed")
    sync(cli, retire_ws)
    result = cli("retire", "narrow-task", "--from", REGRESSION, "--reason", "obsolete",
                 "--approved-by", "risk@example.com", "--json", cwd=retire_ws)  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    assert "narrow-task" not in [m["task_id"] for m in suite_members(cli, retire_ws, REGRESSION)]
    verify_ok(cli, retire_ws)


def test_accepted_retirement_keeps_the_history(retire_ws: Path, cli: Cli) -> None:
    pinned = next(
        m for m in suite_members(cli, retire_ws, REGRESSION) if m["task_id"] == "mini-task"
    )
    events = audit(retire_ws)

    result = _retire(cli, retire_ws, "--reason", "obsolete", "--approved-by", "risk@example.com")

    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["accepted"] is True
    current = [m["task_id"] for m in suite_members(cli, retire_ws, REGRESSION)]
    assert current == ["narrow-task", "wide-task"]
    everything = {m["task_id"]: m for m in suite_members(cli, retire_ws, REGRESSION, all_=True)}
    assert set(everything) == {"mini-task", "narrow-task", "wide-task"}
    removed = everything["mini-task"]["removed"]
    assert removed is not None
    assert removed["reason"] == "obsolete"
    assert removed["approved_by"] == "risk@example.com"
    assert everything["mini-task"]["task_digest"] == pinned["task_digest"]
    assert everything["wide-task"]["removed"] is None
    human = cli("suite", "show", REGRESSION, "--all", cwd=retire_ws)
    assert human.code == 0
    assert "risk@example.com" in human.stdout
    assert "obsolete" in human.stdout
    new = audit(retire_ws)[len(events) :]
    assert [e["kind"] for e in new] == ["retirement.accepted"]
    verify_ok(cli, retire_ws)


def test_accepted_replacement_by_a_covering_task(retire_ws: Path, cli: Cli) -> None:
    result = _retire(
        cli,
        retire_ws,
        "--reason",
        "replaced",
        "--approved-by",
        "risk@example.com",
        "--replaced-by",
        "wide-task",
    )

    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["accepted"] is True
    everything = {m["task_id"]: m for m in suite_members(cli, retire_ws, REGRESSION, all_=True)}
    removed = everything["mini-task"]["removed"]
    assert removed["reason"] == "replaced"
    assert removed["approved_by"] == "risk@example.com"
    assert removed["replaced_by"] == "wide-task"
    assert "mini-task" not in [m["task_id"] for m in suite_members(cli, retire_ws, REGRESSION)]
    verify_ok(cli, retire_ws)


# ------------------------------------------------------------------ concurrency (PostgreSQL)


#: Enough that the race is real: with the writer lock removed, 2 forked promotions released
#: together left two memberships in only 1 run of 5.
PROMOTERS = 6


@pytest.mark.load
@pytest.mark.postgres
def test_concurrent_promotions_on_postgresql_leave_one_membership(
    tmp_path: Path, cli: Cli, pg_url: str
) -> None:
    import psycopg

    ws = _build_pg_workspace(tmp_path, cli, pg_url)
    # Processes of their own, forked from this one (tests/forked.py) and released together
    # so that their transactions overlap.
    env = forked.child_env(pg_url, "load@example.com")
    go = ws / "go"
    procs = [
        forked.start(
            ["--db", pg_url, "--json", "promote", "mini-task", "--to", REGRESSION],
            ws,
            env,
            None,
            forked.released_by(go),
        )
        for _ in range(PROMOTERS)
    ]
    go.touch()
    outcomes = []
    for proc in procs:
        result = proc.wait(300)
        assert result.code in (0, 5), result.stdout + result.stderr
        outcomes.append(result.json())
    assert any(o["accepted"] is True for o in outcomes), outcomes

    members = cli("--db", pg_url, "suite", "show", REGRESSION, "--all", "--json", cwd=ws)
    assert members.code == 0, members.stdout + members.stderr
    assert [m["task_id"] for m in members.json()["members"]] == ["mini-task"]

    with psycopg.connect(pg_url.replace("+psycopg", "")) as conn:
        rows = conn.execute("SELECT seq, kind, subject FROM audit_event ORDER BY seq").fetchall()
        memberships = conn.execute(
            "SELECT count(*) FROM suite_membership WHERE suite_id = %s", (REGRESSION,)
        ).fetchone()
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))
    promotion_events = [kind for _, kind, _ in rows if kind.startswith("promotion.")]
    assert len(promotion_events) == PROMOTERS, promotion_events
    assert promotion_events.count("promotion.accepted") == 1
    assert set(promotion_events) - {"promotion.accepted"} <= {
        "promotion.refused",
        "promotion.noop",
    }
    assert memberships is not None and memberships[0] == 1
    verified = cli("--db", pg_url, "verify", "--json", cwd=ws)
    assert verified.code == 0, verified.stdout + verified.stderr
    assert verified.json()["ok"] is True


def _build_pg_workspace(tmp_path: Path, cli: Cli, pg_url: str) -> Path:
    ws = _build_registry_only(tmp_path / "ws")
    for args in (("init",), ("sync",)):
        result = cli("--db", pg_url, *args, cwd=ws)
        assert result.code == 0, result.stdout + result.stderr
    path = _trials_file(ws, 2)
    result = cli("--db", pg_url, "trials", "ingest", str(path), cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return ws


def _build_registry_only(root: Path) -> Path:
    reg = root / "registry"
    write_mini_registry(reg)
    write_yaml(reg / "tasks" / "mini-task.yaml", BASE_TASK)
    (reg / "policies").mkdir(parents=True)
    shutil.copy(EXAMPLE_REGISTRY / "policies" / "suite-policy.yaml", reg / "policies")
    write_yaml(
        reg / "suites" / "regression.yaml",
        {"spec_schema_version": "suite/v1", "id": REGRESSION, "kind": "regression"},
    )
    commit_all(root, "registry")
    return root


# ------------------------------------------------------- retirement: kind and free reason


def _db_rows(ws: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(ws / ".evalops" / "registry.db") as con:
        return con.execute(sql).fetchall()


def test_retire_with_a_kind_takes_a_free_text_reason_and_shows_both(
    retire_ws: Path, cli: Cli
) -> None:
    text = "the checkout flow it tests was removed: see <b>PR 12</b>"
    result = _retire(
        cli, retire_ws, "--kind", "obsolete", "--reason", text, "--approved-by", "risk@x.org"
    )

    assert result.code == 0, result.stdout + result.stderr
    everything = {m["task_id"]: m for m in suite_members(cli, retire_ws, REGRESSION, all_=True)}
    removed = everything["mini-task"]["removed"]
    assert (removed["kind"], removed["reason"]) == ("obsolete", text)
    human = cli("suite", "show", REGRESSION, "--all", cwd=retire_ws)
    assert human.code == 0
    flat = " ".join(human.stdout.split())
    assert "obsolete:" in flat and "PR 12" in flat
    event = audit(retire_ws)[-1]
    assert event["kind"] == "retirement.accepted"
    assert (event["payload"]["kind"], event["payload"]["reason"]) == ("obsolete", text)
    site = retire_ws / ".evalops" / "site"
    built = cli("report", "site", str(site), cwd=retire_ws)
    assert built.code == 0, built.stdout + built.stderr
    shown = '"why">obsolete: the checkout flow it tests was removed: see &lt;b&gt;PR 12&lt;/b&gt;'
    pages = [p.read_text("utf-8") for p in (site / "suites").rglob("*.html")]
    assert [p for p in pages if shown in p], "no suite page shows the retirement's kind and reason"
    verify_ok(cli, retire_ws)


def test_the_old_reason_word_alone_is_the_kind_and_is_stored_as_before(
    retire_ws: Path, cli: Cli
) -> None:
    result = _retire(cli, retire_ws, "--reason", "unsupported", "--approved-by", "risk@x.org")

    assert result.code == 0, result.stdout + result.stderr
    removed = {m["task_id"]: m for m in suite_members(cli, retire_ws, REGRESSION, all_=True)}[
        "mini-task"
    ]["removed"]
    assert (removed["kind"], removed["reason"]) == ("unsupported", "unsupported")
    # The row holds exactly what the old form always stored (its digest is unchanged).
    assert _db_rows(retire_ws, "SELECT reason FROM suite_membership WHERE action = 'retired'") == [
        ("unsupported",)
    ]
    verify_ok(cli, retire_ws)


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (
            ("--kind", "stale", "--reason", "gone"),
            "--kind",
            ["obsolete", "unsupported", "replaced"],
        ),
        (("--reason", "gone for good"), "--reason", ["obsolete", "unsupported", "replaced"]),
        (("--kind", "obsolete", "--reason", " \u200b\u3164"), "--reason", ["visible"]),
        (("--kind", "obsolete", "--reason", "x" * 5000), "--reason", ["characters"]),
    ],
)
def test_an_unknown_kind_or_a_bad_reason_is_exit_2_and_writes_nothing(
    retire_ws: Path, cli: Cli, args: tuple[str, ...], field: str, words: list[str]
) -> None:
    before = suite_members(cli, retire_ws, REGRESSION, all_=True)
    events = audit(retire_ws)

    result = _retire(cli, retire_ws, *args, "--approved-by", "risk@x.org")

    assert result.code == 2, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert field in said
    for word in words:
        assert word in said
    assert suite_members(cli, retire_ws, REGRESSION, all_=True) == before
    assert audit(retire_ws) == events


def test_the_suite_policy_applies_the_replacement_rule_by_kind_not_by_text(
    retire_ws: Path, cli: Cli
) -> None:
    # Kind replaced, whatever the text says: the replacement rule and its coverage mapping.
    _assert_retirement_refused(
        cli,
        retire_ws,
        "coverage_mapping",
        "--kind",
        "replaced",
        "--reason",
        "superseded",
        "--approved-by",
        "risk@x.org",
    )
    # The word "replaced" as the text of another kind does not invoke it.
    dry = _retire(
        cli,
        retire_ws,
        "--kind",
        "obsolete",
        "--reason",
        "replaced",
        "--approved-by",
        "r@x.org",
        "--dry-run",
    )
    assert dry.code == 0, dry.stdout + dry.stderr
    assert "coverage_mapping" not in [r["name"] for r in dry.json()["requirements"]]
    accepted = _retire(
        cli,
        retire_ws,
        "--kind",
        "replaced",
        "--reason",
        "wide-task checks the same and more",
        "--approved-by",
        "risk@x.org",
        "--replaced-by",
        "wide-task",
    )
    assert accepted.code == 0, accepted.stdout + accepted.stderr
    names = [r["name"] for r in accepted.json()["requirements"]]
    assert "coverage_mapping" in names
    removed = {m["task_id"]: m for m in suite_members(cli, retire_ws, REGRESSION, all_=True)}[
        "mini-task"
    ]["removed"]
    assert removed["kind"] == "replaced"
    assert removed["replaced_by"] == "wide-task"
    verify_ok(cli, retire_ws)


def test_a_retirement_says_the_task_leaves_the_suite(retire_ws: Path, cli: Cli) -> None:
    """`retirement accepted: T -> SUITE` read as a promotion into the suite."""
    args = ("retire", "mini-task", "--from", REGRESSION, "--reason", "obsolete")
    dry = cli(*args, "--approved-by", "risk@example.com", "--dry-run", cwd=retire_ws)
    assert (
        dry.stdout.splitlines()[0] == f"dry run: would be accepted: mini-task out of {REGRESSION}"
    )
    refused = cli(*args, cwd=retire_ws)
    assert refused.code == 5
    assert refused.stdout.splitlines()[0] == f"retirement REFUSED: mini-task out of {REGRESSION}"
    done = cli(*args, "--approved-by", "risk@example.com", cwd=retire_ws)
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == f"retirement accepted: mini-task out of {REGRESSION}"
