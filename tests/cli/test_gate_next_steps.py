"""The gate's `next:` lines when trials exist but are not evidence for the suite's pins.

A build's trials of a task count only for the member's pinned task revision, grader-set
version and the execution profile in force (docs/gate.md, "What the gate reads"). A user who
synced a new revision and ingested its trials must be told that they were not counted and
what makes them count, not to "ingest more".
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from evalops.domain.next_steps import next_steps, not_counted
from tests.conftest import Cli
from tests.helpers import commit_all, run_quiet

ACTOR = "first-hour@example.com"
TASK, SUITE = "first-task", "regression/main"


def _ok(*args: str, cwd: Path) -> str:
    code, out = run_quiet(*args, cwd=cwd, actor=ACTOR)
    assert code == 0, (args, out)
    return out


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def _trials(template: str, prefix: str, count: int) -> str:
    """`count` records like the template, each a trial of its own."""
    record = json.loads(next(line for line in template.splitlines() if line.startswith("{")))
    lines = []
    for i in range(count):
        trial = {**record, "trial_id": f"{prefix}-{i}", "run_id": f"{prefix}-run"}
        lines.append(json.dumps({**trial, "attempt_id": f"{prefix}-a{i}", "trial_index": i}))
    return "\n".join(lines) + "\n"


def _ingest(repo: Path, build: str, prefix: str, count: int) -> None:
    """`count` passing trials of the task as synced now, under the profile of `build`."""
    template = _ok("trials", "template", "--task", TASK, "--execution", build, "--jsonl", cwd=repo)
    path = repo / f"{prefix}.jsonl"
    path.write_text(_trials(template, prefix, count), encoding="utf-8")
    _ok("trials", "ingest", path.name, cwd=repo)


def _sync(repo: Path, message: str) -> None:
    commit_all(repo, message)
    _ok("sync", cwd=repo)


@pytest.fixture(scope="module")
def promoted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter registry with two builds of their own; `first-task` (revision 1) is a
    member of `regression/main`, and build-1 passes it with 3 trials."""
    repo = tmp_path_factory.mktemp("next-steps") / "mine"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _ok("init", "--registry", "registry", cwd=repo)
    _ok("new", "execution", "build-1", cwd=repo)
    _ok("new", "execution", "build-2", cwd=repo)
    task = repo / "registry" / "tasks" / f"{TASK}.yaml"
    _edit(task, '  # invariant: "state the rule this task guards"', '  invariant: "act once"')
    _sync(repo, "starter")
    _ingest(repo, "build-1", "b1-rev1", 3)
    _ok("promote", TASK, "--to", SUITE, cwd=repo)
    return repo


@pytest.fixture
def repo(promoted: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "mine"
    shutil.copytree(promoted, copy, symlinks=True)
    return copy


def _revision_2(repo: Path) -> None:
    """Bump the task to revision 2 (a contract change) and sync it, unpromoted."""
    task = repo / "registry" / "tasks" / f"{TASK}.yaml"
    _edit(task, "revision: 1", "revision: 2")
    _edit(task, "goal: describe_the_goal", "goal: act_exactly_once")
    _sync(repo, "revision 2")


def _lines(output: str, start: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(start)]


def test_trials_of_an_unpromoted_revision_say_promote_and_promoting_passes(
    repo: Path, cli: Cli
) -> None:
    _revision_2(repo)
    _ingest(repo, "build-2", "b2-rev2", 3)
    held = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert held.code == 3, held.stdout + held.stderr
    nexts = _lines(held.stdout, "next: ")
    assert len(nexts) == 1, held.stdout
    step = nexts[0]
    assert "ingest more trials" not in step, step
    assert step.startswith(f"next: {TASK}: 3 trials of build build-2 ")
    assert "another revision of the task" in step and SUITE in step
    command = step.split(": `evalops ", 1)[1].removesuffix("`")
    assert command == f"promote {TASK} --to {SUITE}"
    assert _lines(held.stdout, "  not counted: ") == [
        f"  not counted: {TASK}: 3 trials of build build-2 "
        "(another task revision than the suite pins)"
    ], held.stdout
    promoted = cli(*shlex.split(command), cwd=repo)
    assert promoted.code == 0, promoted.stdout + promoted.stderr
    passed = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert passed.code == 0, passed.stdout + passed.stderr
    assert not _lines(passed.stdout, "next: ")


def test_a_pass_names_the_trials_it_did_not_count(repo: Path, cli: Cli) -> None:
    """build-1 passes on the pinned revision 1; its one trial of revision 2 is named."""
    _revision_2(repo)
    _ingest(repo, "build-1", "b1-rev2", 1)
    passed = cli("gate", "check", "--build", "build-1", "--suite", SUITE, cwd=repo)
    assert passed.code == 0, passed.stdout + passed.stderr
    assert _lines(passed.stdout, "  not counted: ") == [
        f"  not counted: {TASK}: 1 trial of build build-1 "
        "(another task revision than the suite pins)"
    ], passed.stdout
    assert not _lines(passed.stdout, "next: ")
    # Presentation only: the decision as JSON is what it was.
    as_json = cli("gate", "check", "--build", "build-1", "--suite", SUITE, "--json", cwd=repo)
    assert "not counted" not in as_json.stdout
    assert as_json.json()["ignoredTrials"] == {"other_task_revision": 1}


def test_a_pass_with_every_trial_counted_says_nothing_of_it(repo: Path, cli: Cli) -> None:
    passed = cli("gate", "check", "--build", "build-1", "--suite", SUITE, cwd=repo)
    assert passed.code == 0, passed.stdout + passed.stderr
    assert "not counted" not in passed.stdout


def test_trials_of_another_grader_set_version_say_promote_and_promoting_passes(
    repo: Path, cli: Cli
) -> None:
    """A new grader-set version enters a suite by promoting the task again (docs/promotion.md)."""
    graders = repo / "registry" / "graders" / f"{TASK}-graders.yaml"
    _edit(graders, "version: 1                           # bump", "version: 2  # bump")
    _sync(repo, "grader set version 2")
    _ingest(repo, "build-2", "b2-gs2", 2)
    held = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert held.code == 3, held.stdout + held.stderr
    (step,) = _lines(held.stdout, "next: ")
    assert "ingest more trials" not in step, step
    assert step.startswith(f"next: {TASK}: 2 trials of build build-2 ")
    assert "another version of the task's grader set" in step
    command = step.split(": `evalops ", 1)[1].removesuffix("`")
    assert command == f"promote {TASK} --to {SUITE}"
    assert "(another grader-set version than the suite pins)" in held.stdout
    assert cli(*shlex.split(command), cwd=repo).code == 0
    passed = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert passed.code == 0, passed.stdout + passed.stderr


def test_trials_under_an_older_execution_profile_say_run_again(repo: Path, cli: Cli) -> None:
    _ingest(repo, "build-2", "b2-old-profile", 1)
    profile = repo / "registry" / "executions" / "build-2.yaml"
    _edit(profile, "name: example-model", "name: example-model-2")
    _sync(repo, "build-2 on another model")
    held = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert held.code == 3, held.stdout + held.stderr
    (step,) = _lines(held.stdout, "next: ")
    assert "ingest more trials" not in step, step
    assert step.startswith(f"next: {TASK}: 1 trial of build build-2 was run under an older ")
    assert "execution profile" in step and "run the build again" in step
    assert "(an older version of the execution profile)" in held.stdout


def test_no_trials_at_all_still_says_ingest_more(repo: Path, cli: Cli) -> None:
    held = cli("gate", "check", "--build", "build-2", "--suite", SUITE, cwd=repo)
    assert held.code == 3, held.stdout + held.stderr
    (step,) = _lines(held.stdout, "next: ")
    assert "ingest more trials of build build-2" in step
    assert "not counted" not in held.stdout


def test_an_empty_suite_says_promote_a_task_into_it(tmp_path: Path, cli: Cli) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert cli("init", "--registry", "registry", cwd=repo).code == 0
    commit_all(repo, "starter")
    assert cli("sync", cwd=repo).code == 0
    held = cli("gate", "check", "--build", "dev-build", "--suite", SUITE, cwd=repo)
    assert held.code == 3, held.stdout + held.stderr
    assert f"suite {SUITE} has no members" in held.stdout
    (step,) = _lines(held.stdout, "next: ")
    assert step.endswith(f": `evalops promote TASK --to {SUITE}`"), step


def _short(ignored: object) -> dict[str, object]:
    return {
        "build": "build-9",
        "suite": "regression/core",
        "reasons": [],
        "regression": None,
        "tasks": [
            {
                "task_id": "held-task",
                "state": "missing_required_evidence",
                "effect": "hold",
                "reason": "2 effective trials, trials.count is 5",
                "ignoredTrials": ignored,
            }
        ],
    }


def test_each_reason_not_counted_gets_its_clause_in_one_line() -> None:
    ignored = {"older_execution_digest": 1, "other_task_revision": 4}
    (step,) = next_steps(_short(ignored))
    assert step.startswith("held-task: ") and "ingest more trials" not in step
    assert "1 trial of build build-9 was run under an older version" in step
    assert "4 trials of build build-9 are of another revision" in step
    assert not_counted(_short(ignored)) == [
        "held-task: 1 trial of build build-9 (an older version of the execution profile), "
        "4 trials (another task revision than the suite pins)"
    ]


def test_a_decision_counting_ignored_trials_without_reasons_still_names_them() -> None:
    """Evaluator 1 stored `ignoredTrials` as one count per task, without a reason."""
    (step,) = next_steps(_short(2))
    assert "2 trials of build build-9 are of another revision or grader-set version" in step
    assert step.endswith("`evalops promote held-task --to regression/core`")
    assert not_counted(_short(0)) == [] and next_steps(_short(0))[0].startswith(
        "held-task: ingest more trials"
    )
