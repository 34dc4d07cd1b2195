"""Definitions in force (docs/digests.md) and the one gate effect of every grader.

- Hypothesis drives random sequences of commits, reverts and deletions over a registry's git
  history, syncing at random points: afterwards exactly the definitions of the last synced
  commit are in force (by digest), whatever was registered before.
- `suite coverage` and the gate agree on every grader's gate effect: for each grader of the
  example registry and of generated grader sets, a trial whose only failing result is that
  grader's failing verdict is classified and evaluated by the real gate; its effect (with
  and without a valid waiver) must be what coverage prints.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
from pathlib import Path
from typing import Any

import git
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalops.domain.calibration_validity import Validity
from evalops.domain.classify import classify
from evalops.domain.specs import EvalTaskSpec, Grader, GraderSet
from evalops.domain.trial_record import TrialRecord
from evalops.registry.snapshot import load_snapshot
from evalops.services.registry.suites import coverage_rows
from evalops.store import queries
from evalops.store.engine import make_engine, read_session
from tests.decide import evaluate
from tests.helpers import (
    EXAMPLE_REGISTRY,
    MINI_GRADERS,
    commit_all,
    write_mini_registry,
    write_yaml,
)

GATE_POLICY = yaml.safe_load((EXAMPLE_REGISTRY / "policies" / "gate-policy.yaml").read_text())

# ---------------------------------------------------------------- in force after syncs


def _run(*args: str, cwd: Path) -> int:
    from evalops.cli.main import main

    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return main(["--actor", "t@example.com", *args])
    finally:
        os.chdir(before)


def _in_force(root: Path) -> dict[tuple[str, str], str]:
    engine = make_engine(f"sqlite:///{root / '.evalops' / 'registry.db'}")
    try:
        with read_session(engine) as session:
            return queries.in_force(session)
    finally:
        engine.dispose()


def _snapshot(root: Path) -> dict[tuple[str, str], str]:
    return {(d.kind, d.id): d.document_digest for d in load_snapshot(root / "registry").definitions}


def _policy(variant: int) -> dict[str, Any]:
    doc = dict(GATE_POLICY)
    doc["waivers"] = {**GATE_POLICY["waivers"], "max_duration_days": 10 + variant}
    return doc


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("policy"), st.integers(0, 2)),
        st.tuples(st.just("title"), st.integers(0, 2)),
        st.tuples(st.just("delete_execution"), st.just(0)),
        st.tuples(st.just("restore_execution"), st.just(0)),
        st.tuples(st.just("revert"), st.just(0)),
        st.tuples(st.just("sync"), st.just(0)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def in_force_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("in-force") / "ws"
    write_mini_registry(root / "registry")
    write_yaml(root / "registry" / "policies" / "gate-policy.yaml", _policy(0))
    commit_all(root)
    assert _run("init", cwd=root) == 0
    assert _run("sync", cwd=root) == 0
    return root


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(STEPS)
def test_syncs_over_any_history_leave_in_force_the_last_synced_commit(
    in_force_base: Path, tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    root = Path(shutil.copytree(in_force_base, tmp_path_factory.mktemp("run") / "ws"))
    execution = root / "registry" / "executions" / "mini-b1.json"
    saved_execution = execution.read_bytes()
    synced = _snapshot(root)
    for action, n in [*steps, ("sync", 0)]:
        repo = git.Repo(root)
        try:
            if action == "policy":
                write_yaml(root / "registry" / "policies" / "gate-policy.yaml", _policy(n))
                commit_all(root, f"policy {n}")
            elif action == "title":
                task = root / "registry" / "tasks" / "mini-task.yaml"
                doc = yaml.safe_load(task.read_text())
                doc["meta"]["title"] = f"title {n}"
                write_yaml(task, doc)
                commit_all(root, f"title {n}")
            elif action == "delete_execution" and execution.exists():
                execution.unlink()
                commit_all(root, "delete execution")
            elif action == "restore_execution" and not execution.exists():
                execution.parent.mkdir(parents=True, exist_ok=True)
                execution.write_bytes(saved_execution)
                commit_all(root, "restore execution")
            elif action == "revert" and len(list(repo.iter_commits())) > 1:
                with contextlib.suppress(git.GitCommandError):  # an empty commit: nothing to undo
                    repo.git.revert("HEAD", no_edit=True)
            elif action == "sync":
                assert _run("sync", cwd=root) == 0
                synced = _snapshot(root)
                assert _in_force(root) == synced
        finally:
            repo.close()
    assert _in_force(root) == synced
    assert _run("verify", cwd=root) == 0


# ------------------------------------------------- coverage and the gate agree on effects


def _task(risk: str, grader_set: GraderSet, grader: Grader) -> EvalTaskSpec:
    item = grader.covers[0]
    where = (
        {"success_state": {item: True}}
        if grader.layer == "outcome"
        else {"forbidden_effects": [item]}
    )
    return EvalTaskSpec.model_validate(
        {
            "spec_schema_version": "eval-task/v1",
            "id": "task",
            "revision": 1,
            "meta": {
                "title": "t",
                "risk": risk,
                **({"protects": ["external_effect"]} if risk == "critical" else {}),
            },
            "contract": {
                "goal": "g",
                "environment": {"network_policy": "deny"},
                **where,
            },
            "grader_set": grader_set.id,
        }
    )


def _gate_effects(task: EvalTaskSpec, graders: GraderSet, grader: Grader) -> set[str]:
    """The gate's effect, without and with a valid waiver, when only `grader` fails."""
    failing = "hard_constraint_fail" if "hard_constraint_fail" in grader.produces else "task_fail"
    results = [
        {
            "grader_id": g.id,
            "grader_version": g.version,
            "state": failing
            if g.id == grader.id
            else ("pass" if "pass" in g.produces else "task_pass"),
        }
        for g in graders.graders
    ]
    record = TrialRecord.model_validate(
        {
            "schema": "evalops.trial/v1",
            "trial_id": "t",
            "task_id": "task",
            "task_digest": "sha256:" + "0" * 64,
            "execution_digest": "sha256:" + "0" * 64,
            "grader_set_digest": "sha256:" + "0" * 64,
            "trial_index": 0,
            "started_at": "2026-11-29T10:00:00Z",
            "completed_at": "2026-11-29T10:01:00Z",
            "grader_results": results,
            "runtime": {"status": "ok"},
        }
    )
    everything = frozenset({"task_pass", "task_fail", "hard_constraint_fail"})
    validity = {g.id: Validity("valid", blockable_classes=everything) for g in graders.graders}
    c = classify(record, task, graders, validity=validity, trajectory=None)
    effects = set()
    # A waiver the policy allows (its states, its 25 days); a hard failure is never waived.
    for waivers in ([], [{"waiver_id": "W", "task_id": "task", "suite_id": "s", "build": "b",
                          "states": ["task_fail"],
                          "granted_at": "2026-11-20T00:00:00Z",
                          "expires_at": "2026-12-15T00:00:00Z"}]):  # fmt: skip
        decision = evaluate(
            {
                "gate_id": "G",
                "build": "b",
                "suite": {"id": "s", "kind": "regression", "suite_digest": "d"},
                "execution_digest": "e",
                "policy": GATE_POLICY,
                "policy_digest": "p",
                "evaluated_at": "2026-12-01T00:00:00Z",
                "tasks": [
                    {
                        "task_id": "task",
                        "risk": task.meta.risk,
                        "protects": [],
                        "task_digest": "sha256:" + "0" * 64,
                        "grader_set_digest": "sha256:" + "0" * 64,
                        "plan": {"count": 1, "k": 1, "passRule": "all", "passScore": 1.0},
                        "trials": [
                            {"trial_id": "t", "parent_trial_id": None,
                             "classification": c.primary, "score": c.score,
                             "gating_score": c.gating_score, "trajectory": None,
                             "efficiency": {}, "fixture_misses": 0}
                        ],
                        "ignoredTrials": {},
                    }
                ],
                "waivers": waivers,
                "baseline": None,
            }
        )  # fmt: skip
        effects.add(decision["tasks"][0]["effect"])
    return effects


COVERAGE_TO_GATE = {
    "block": {"block"},
    "hold unless waived": {"hold", "pass"},
    "hold": {"hold"},
}


def _example_grader_sets() -> list[GraderSet]:
    return [
        GraderSet.model_validate(yaml.safe_load(p.read_text()))
        for p in sorted((EXAMPLE_REGISTRY / "graders").glob("*.yaml"))
    ]


def _generated_grader_sets() -> list[GraderSet]:
    out = []
    for layer, gtype, failing in itertools.product(
        ("outcome", "hard_constraint", "trajectory_diagnosis"),
        ("deterministic", "model"),
        ("task_fail", "hard_constraint_fail"),
    ):
        produces = {"outcome": ["task_pass", failing], "hard_constraint": ["pass", failing],
                    "trajectory_diagnosis": ["pass", failing]}[layer]  # fmt: skip
        grader: dict[str, Any] = {
            "id": "subject", "version": 1, "layer": layer, "type": gtype,
            "produces": produces, "blocking": True, "covers": ["item"],
        }  # fmt: skip
        if layer == "trajectory_diagnosis":
            grader["rule_state"] = "blocking_constraint"
        if gtype == "model":
            grader["model"] = {
                "provider": "p",
                "name": "n",
                "prompt_hash": "h",
                "rubric_version": 1,
            }
            grader["calibration_requirements"] = {
                "min_holdout_items": 1, "min_precision_lower_bound": 0,
                "min_recall_lower_bound": 0, "min_human_agreement": 0,
            }  # fmt: skip
        try:
            out.append(
                GraderSet.model_validate({**MINI_GRADERS, "id": "generated", "graders": [grader]})
            )
        except ValueError:
            continue  # a layer that may not say this verdict (docs/formats.md)
    return out


@pytest.mark.parametrize("risk", ["critical", "noncritical_regression", "quality_signal"])
def test_suite_coverage_and_the_gate_agree_on_every_graders_effect(risk: str) -> None:
    checked = 0
    for graders in [*_example_grader_sets(), *_generated_grader_sets()]:
        for grader in graders.graders:
            if not grader.blocking or not grader.covers:
                continue
            task = _task(risk, graders, grader)
            (row,) = [
                r for r in coverage_rows(task, graders, risk) if r["item"] == grader.covers[0]
            ]
            if row["primary_grader"] != grader.id:
                continue  # another grader is this item's primary guard
            shown = row["gate_effect"].split(" (")[0]
            assert _gate_effects(task, graders, grader) == COVERAGE_TO_GATE[shown], (
                graders.id,
                grader.id,
                risk,
                row["gate_effect"],
            )
            checked += 1
    assert checked >= 6
