"""The example registry's sample trial data (registry/trials): reproducible, valid, on story.

registry/trials/generate.py writes one JSONL file per execution profile. These tests check
that the committed files are exactly what the generator writes from the current registry,
that every record is a valid TrialRecord naming registered digests, that the classes
evalops derives tell the demo's story build by build, and that the files ingest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from evalops.cassette import Cassette
from evalops.domain import digests
from evalops.domain.calibration_validity import Validity
from evalops.domain.classify import Classification, classify
from evalops.domain.reruns import TrialNode, resolve_reruns
from evalops.domain.specs import EvalTaskSpec, ExecutionProfile, GatePolicy, GraderSet
from evalops.domain.trajectory import ObservedCall, grade
from evalops.domain.trial_record import TrialRecord
from evalops.domain.vocabulary import CANONICAL_PRECEDENCE
from evalops.registry.snapshot import Snapshot, load_snapshot
from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY, REPO_ROOT, commit_all, copy_example_registry

TRIALS = EXAMPLE_REGISTRY / "trials"
GENERATOR = TRIALS / "generate.py"
# Execution profile id -> its build; the file of a build is `<profile id>.jsonl`.
PROFILES = {
    "baseline-b123": "build-123",
    "candidate-b124": "build-124",
    "fix-b125": "build-125",
}
FILES = {build: TRIALS / f"{profile}.jsonl" for profile, build in PROFILES.items()}

FAILING = frozenset(CANONICAL_PRECEDENCE) - {"task_pass"}
CALIBRATED = {"reply-quality": Validity("valid", blockable_classes=FAILING)}
UNCALIBRATED = {"reply-quality": Validity("missing", ("no calibration recorded",))}

SUPPORT_TASKS = (
    "support-refund-in-order",
    "support-refund-policy-explanation",
    "support-reply-tone",
)
CRITICAL = (
    "article-publish-approved-revision",
    "article-source-records-complete",
    "support-refund-in-order",
)
QUALITY = ("article-citation-format", "support-reply-tone")

# The story: first results (reruns excluded) per build and task, with the reply-quality
# judge calibrated, as the gate will see them.
EXPECTED_FIRST_RESULTS: dict[str, dict[str, dict[str, int]]] = {
    "build-123": {
        "article-citation-format": {
            "task_pass": 1,
            "agent_error": 1,
            "missing_required_evidence": 1,
        },
        "article-publish-approved-revision": {"task_pass": 5},
        "article-source-records-complete": {"task_pass": 4, "infrastructure_invalid": 1},
        "support-refund-in-order": {"task_pass": 5},
        "support-refund-policy-explanation": {"task_pass": 3},
        "support-reply-tone": {"task_pass": 3, "runtime_error": 1, "grader_invalid": 1},
    },
    "build-124": {
        "article-citation-format": {"task_pass": 3},
        "article-publish-approved-revision": {"task_pass": 4, "ambiguous_external_effect": 1},
        "article-source-records-complete": {"task_pass": 5},
        "support-refund-in-order": {"task_pass": 4, "hard_constraint_fail": 1},
        "support-refund-policy-explanation": {"task_pass": 1, "task_fail": 2},
        "support-reply-tone": {"task_pass": 5},
    },
    "build-125": {
        "article-citation-format": {"task_pass": 3},
        "article-publish-approved-revision": {"task_pass": 5},
        "article-source-records-complete": {"task_pass": 5},
        "support-refund-in-order": {"task_pass": 5},
        "support-refund-policy-explanation": {"task_pass": 1, "task_fail": 2},
        "support-reply-tone": {"task_pass": 5},
    },
}
# build -> (task, class of the parent, class of the rerun, does the rerun stand in?)
EXPECTED_RERUNS: dict[str, list[tuple[str, str, str, bool]]] = {
    "build-123": [("article-source-records-complete", "infrastructure_invalid", "task_pass", True)],
    "build-124": [("support-refund-in-order", "hard_constraint_fail", "task_pass", False)],
    "build-125": [],
}


# ----------------------------------------------------------------------------- helpers


@cache
def _snapshot() -> Snapshot:
    return load_snapshot(EXAMPLE_REGISTRY)


def _task(task_id: str) -> EvalTaskSpec:
    found = _snapshot().find("task", task_id)
    assert found is not None and isinstance(found.spec, EvalTaskSpec)
    return found.spec


def _graders(grader_set_id: str) -> GraderSet:
    found = _snapshot().find("grader_set", grader_set_id)
    assert found is not None and isinstance(found.spec, GraderSet)
    return found.spec


def _digest(kind: str, def_id: str) -> str:
    found = _snapshot().find(kind, def_id)
    assert found is not None
    return found.digest


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _records(build: str) -> list[TrialRecord]:
    return [TrialRecord.model_validate(v) for v in _lines(FILES[build])]


def _classify(
    record: TrialRecord,
    validity: Mapping[str, Validity] = CALIBRATED,
    reconciliations: Mapping[int, str] | None = None,
) -> Classification:
    task = _task(record.task_id)
    expectation = task.contract.expected.trajectory if task.contract.expected else None
    trajectory = None
    if expectation is not None:
        calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
        trajectory = grade(expectation, calls, record.target_agent_id)
    return classify(
        record,
        task,
        _graders(task.grader_set),
        validity=validity,
        trajectory=trajectory,
        reconciliations=reconciliations,
    )


def _is_rerun(record: TrialRecord) -> bool:
    return record.rerun is not None and record.rerun.parent_trial_id is not None


def _first_results(build: str) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for record in _records(build):
        if not _is_rerun(record):
            out.setdefault(record.task_id, Counter())[_classify(record).primary] += 1
    return out


def _gate_policy() -> GatePolicy:
    found = _snapshot().find("gate_policy", "release-gate")
    assert found is not None and isinstance(found.spec, GatePolicy)
    return found.spec


# ------------------------------------------------------------------ (a) reproducibility


def test_generator_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in FILES.values())
    for path in FILES.values():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), (
            f"{path.name} drifted from the registry: run "
            ".venv/bin/python registry/trials/generate.py"
        )


EU_SESSION = "eu-session-"
EU_GENERATOR = TRIALS / "generate_eu_sessions.py"
EU_FILES = {p: TRIALS / "eu-sessions" / f"{p}.jsonl" for p in ("candidate-b124", "fix-b125")}


def test_eu_sessions_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EU_GENERATOR), str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in EU_FILES.values())
    for path in EU_FILES.values():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), (
            f"{path.name} drifted from the registry: run "
            ".venv/bin/python registry/trials/generate_eu_sessions.py"
        )


def test_eu_session_trials_name_the_registry_digests_and_every_member() -> None:
    snapshot = _snapshot()
    sessions = {d.id: d for d in snapshot.of_kind("task") if d.id.startswith(EU_SESSION)}
    assert len(sessions) == 10
    counts: dict[str, dict[str, int]] = {}
    for profile, path in EU_FILES.items():
        execution = snapshot.find("execution_profile", profile)
        assert execution is not None
        for line in path.read_text(encoding="utf-8").splitlines():
            record = TrialRecord.model_validate(json.loads(line))
            assert record.task_digest == sessions[record.task_id].digest
            assert record.execution_digest == execution.digest
            counts.setdefault(profile, {}).setdefault(record.task_id, 0)
            counts[profile][record.task_id] += 1
    # Build 124 ran every sampled session 3 times; build 125 all but the bulk return.
    assert counts["candidate-b124"] == dict.fromkeys(sessions, 3)
    assert set(sessions) - set(counts["fix-b125"]) == {"eu-session-enterprise-refund-bulk-return"}
    for definition in sessions.values():
        spec = definition.spec
        assert isinstance(spec, EvalTaskSpec)
        assert spec.meta.stratum is not None and spec.meta.sampled_at is not None


@pytest.mark.parametrize("build", FILES)
def test_files_are_sorted_key_jsonl_with_lf(build: str) -> None:
    data = FILES[build].read_bytes()
    assert data.endswith(b"\n") and b"\r" not in data
    for line in data.decode("utf-8").splitlines():
        assert json.dumps(json.loads(line), sort_keys=True) == line


# ------------------------------------------------------------- (b) validity and digests


@pytest.mark.parametrize("build", FILES)
def test_records_validate_and_name_the_registry_digests(build: str) -> None:
    profile = next(p for p, b in PROFILES.items() if b == build)
    found = _snapshot().find("execution_profile", profile)
    assert found is not None and isinstance(found.spec, ExecutionProfile)
    assert found.spec.system_build == build
    execution = found.digest
    raw = _lines(FILES[build])
    for value in raw:
        record = TrialRecord.model_validate(value)
        assert "primary_classification" not in value  # evalops derives it
        task = _task(record.task_id)
        assert record.task_digest == _digest("task", record.task_id)
        assert record.execution_digest == execution
        assert record.grader_set_digest == _digest("grader_set", task.grader_set)
        assert record.eval_case_digest == digests.eval_case_digest(
            record.task_digest, record.execution_digest, record.grader_set_digest
        )
        for key in ("run_id", "attempt_id", "trace_uri", "effective_seed", "usage"):
            assert value[key] is not None, key
        # The fail-closed cassette agrees with the recorded fixture misses.
        cassette = Cassette(task)
        for call in record.tool_calls:
            cassette.call(call.tool, call.args)
        assert record.fixture_misses == cassette.misses
    ids = [v["trial_id"] for v in raw]
    assert len(ids) == len(set(ids))


def test_trial_ids_are_unique_across_builds() -> None:
    ids = [r.trial_id for build in FILES for r in _records(build)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("build", FILES)
def test_each_task_has_its_planned_trials_and_reruns_follow_their_parent(build: str) -> None:
    records = _records(build)
    position = {r.trial_id: n for n, r in enumerate(records)}
    by_id = {r.trial_id: r for r in records}
    for definition in _snapshot().of_kind("task"):
        assert isinstance(definition.spec, EvalTaskSpec)
        if definition.id.startswith(EU_SESSION):
            continue  # the sampled sessions' trials are in their own files (below)
        trials = definition.spec.contract.trials
        count = trials.count if trials else 1
        indices = sorted(
            r.trial_index for r in records if r.task_id == definition.id and not _is_rerun(r)
        )
        assert indices == list(range(count)), definition.id
    for record in records:
        if _is_rerun(record):
            assert record.rerun is not None and record.rerun.reason
            parent = by_id[str(record.rerun.parent_trial_id)]
            assert position[parent.trial_id] < position[record.trial_id]
            assert (parent.task_id, parent.trial_index) == (record.task_id, record.trial_index)


def test_grader_results_and_artifacts_are_complete_except_where_the_story_says() -> None:
    """Every blocking grader answers with its version and a state it produces; every
    required artifact is in the manifest. Exactly one trial breaks each rule on purpose."""
    out_of_produces: list[tuple[str, str, str]] = []
    missing_artifacts: list[tuple[str, str]] = []
    for build in FILES:
        for record in _records(build):
            task = _task(record.task_id)
            graders = _graders(task.grader_set)
            results = {r.grader_id: r for r in record.grader_results}
            for grader in graders.graders:
                result = results.get(grader.id)
                if not grader.blocking:
                    continue
                assert result is not None, (record.trial_id, grader.id)
                assert result.grader_version == grader.version
                if result.state not in grader.produces:
                    out_of_produces.append((record.trial_id, grader.id, result.state))
            assert set(results) <= {g.id for g in graders.graders}
            required = task.contract.required_artifacts
            present = {
                a.kind
                for a in (record.artifact_manifest.artifacts if record.artifact_manifest else [])
            }
            missing_artifacts += [
                (record.trial_id, kind)
                for kind in (required.logical if required else [])
                if kind not in present and record.runtime.status == "ok"
            ]
    assert out_of_produces == [("trial-b123-support-reply-tone-4", "ticket-outcome", "pass")]
    assert missing_artifacts == [("trial-b123-article-citation-format-2", "article_draft")]


def test_support_trials_carry_agent_ids_and_a_reply_quality_result() -> None:
    for build in FILES:
        for record in _records(build):
            if record.task_id not in SUPPORT_TASKS:
                continue
            assert record.target_agent_id == "support"
            assert record.tool_calls
            assert all(c.agent_id == "support" for c in record.tool_calls)
            assert any(r.grader_id == "reply-quality" for r in record.grader_results)


# ------------------------------------------------------------------ (c) the story


def test_every_class_appears_across_the_three_builds() -> None:
    seen = {_classify(r).primary for build in FILES for r in _records(build)}
    assert seen == set(CANONICAL_PRECEDENCE)


@pytest.mark.parametrize("build", FILES)
def test_first_results_tell_the_story(build: str) -> None:
    assert _first_results(build) == {
        task: Counter(classes) for task, classes in EXPECTED_FIRST_RESULTS[build].items()
    }


@pytest.mark.parametrize("build", FILES)
def test_reruns_are_stored_and_stand_in_only_where_policy_permits(build: str) -> None:
    records = _records(build)
    by_id = {r.trial_id: r for r in records}
    found: list[tuple[str, str, str, bool]] = []
    nodes = [
        TrialNode(r.trial_id, r.rerun.parent_trial_id if r.rerun else None, _classify(r).primary)
        for r in records
    ]
    limits = {str(k): n for k, n in _gate_policy().reruns.max_attempts_by_class.items()}
    outcome = resolve_reruns(nodes, limits)
    for record in records:
        if _is_rerun(record):
            assert record.rerun is not None
            parent = by_id[str(record.rerun.parent_trial_id)]
            found.append(
                (
                    record.task_id,
                    _classify(parent).primary,
                    _classify(record).primary,
                    record.trial_id in outcome.effective,
                )
            )
            assert (record.trial_id in outcome.not_permitted) != (
                record.trial_id in outcome.effective
            )
    assert found == EXPECTED_RERUNS[build]


def test_build_124_has_one_hard_failure_a_refund_committed_twice() -> None:
    hard = [
        r
        for r in _records("build-124")
        if not _is_rerun(r) and _classify(r).primary == "hard_constraint_fail"
    ]
    assert [r.task_id for r in hard] == ["support-refund-in-order"]
    effects = [(e.effect_key, e.status) for e in hard[0].external_effects]
    assert effects == [("refund:A-1", "committed"), ("refund:A-1", "committed")]


def test_build_124_ambiguous_publish_passes_once_reconciled_as_committed() -> None:
    (ambiguous,) = [
        r for r in _records("build-124") if _classify(r).primary == "ambiguous_external_effect"
    ]
    assert ambiguous.task_id == "article-publish-approved-revision"
    assert [(e.effect_key, e.status) for e in ambiguous.external_effects] == [
        ("publish:article-42", "unknown")
    ]
    reconciled = _classify(ambiguous, reconciliations={0: "committed"})
    assert reconciled.primary == "task_pass"


def test_build_125_fixes_every_critical_task_and_keeps_the_noncritical_failure() -> None:
    firsts = _first_results("build-125")
    for task_id in CRITICAL:
        assert set(firsts[task_id]) == {"task_pass"}, task_id
    assert firsts["support-refund-policy-explanation"]["task_fail"] == 2
    assert _task("support-refund-policy-explanation").meta.risk == "noncritical_regression"
    for task_id in QUALITY:
        assert set(firsts[task_id]) == {"task_pass"}, task_id
        plan = _task(task_id).contract.trials
        assert plan is not None and plan.passRule == "mean"
        scores = [_classify(r).gating_score for r in _records("build-125") if r.task_id == task_id]
        assert sum(scores) / len(scores) >= plan.passScore


def test_policy_explanation_failures_do_not_rest_on_the_model_judge() -> None:
    """Deterministic evidence (ticket-outcome, the trajectory, a fail-closed miss) fails
    these trials. If reply-quality may not block task_fail, its verdict waits for a person
    (missing_required_evidence, docs/promotion.md) and is never read as a pass: the trial still
    fails, and the deterministic failure is still among its classes."""
    unblockable = {"reply-quality": Validity("valid", blockable_classes=frozenset())}
    for build in ("build-124", "build-125"):
        for record in _records(build):
            if record.task_id != "support-refund-policy-explanation":
                continue
            calibrated = _classify(record)
            judged = _classify(record, unblockable)
            if calibrated.primary == "task_pass":
                assert judged.primary == "task_pass", record.trial_id
                continue
            assert judged.primary in (calibrated.primary, "missing_required_evidence")
            assert calibrated.primary in (judged.primary, *judged.secondary_labels)


# -------------------------------------------------------------------- (d) ingest


def test_the_three_files_ingest_into_a_fresh_synced_database(tmp_path: Path, cli: Cli) -> None:
    registry = copy_example_registry(tmp_path / "registry")
    commit_all(tmp_path)
    assert cli("init", cwd=tmp_path).code == 0
    synced = cli("sync", cwd=tmp_path)
    assert synced.code == 0, synced.stdout + synced.stderr
    files = [str(registry / "trials" / path.name) for path in FILES.values()]
    result = cli("trials", "ingest", *files, "--json", cwd=tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    total = sum(len(_lines(path)) for path in FILES.values())
    assert result.json()["ingested"] == total
    assert result.json()["rejected"] == []
    # Without a calibration of reply-quality, evalops derives what the pure function does
    # with the judge uncalibrated: every support trial is held (grader_invalid) at best.
    listed = cli("trials", "list", "--json", cwd=tmp_path)
    assert listed.code == 0, listed.stderr
    stored = {row["trial_id"]: row["classification"] for row in listed.json()}
    expected = {
        r.trial_id: _classify(r, UNCALIBRATED).primary for build in FILES for r in _records(build)
    }
    assert stored == expected
    again = cli("trials", "ingest", *files, "--json", cwd=tmp_path)
    assert again.code == 0, again.stdout + again.stderr
    assert again.json()["skipped_identical"] == total
