"""The CI recipes of docs/ci.md run here, step by step, on a copy of the demo registry.

Steps are run as the forge would run them (`bash -eo pipefail`, GitHub's `$GITHUB_OUTPUT`
and `${{ steps.ID.outputs.KEY }}`, GitLab's one shell for all of `script`), except those
that install evalops (it is installed here) or call the forge's API (`gh`, `curl`); the
`evalops` the steps find on their PATH runs each command in a fork of one process that
imported evalops once (tests/cli_server.py), not in a new interpreter.
In a real git repository: `main`'s job syncs; a pull request's branch (a changed gate
policy) is evaluated by its job under its own definitions, a passing build ending with 0 and
a blocked one with the gate's 4, both leaving the report and the JUnit file to publish,
while its sync changes nothing in force; after the merge `main`'s job puts the branch's
policy in force, and a rewritten `main` is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from tests import cli_server
from tests.conftest import PINNED_NOW, Cli
from tests.helpers import REPO_ROOT

CI_DOC = REPO_ROOT / "docs" / "ci.md"
SUITE = "regression/core"
# The demo's builds: build-125 passes (by a waiver), build-124 is blocked (a refund
# committed twice); their trial files are in the demo's registry.
TRIAL_FILES = {"build-125": "fix-b125.jsonl", "build-124": "candidate-b124.jsonl"}
FORGE_ONLY = re.compile(r"^\s*(pip install|gh |'?curl )")


def _yaml_blocks() -> dict[str, Any]:
    text = CI_DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    found: dict[str, Any] = {}
    for block in blocks:
        first = block.splitlines()[0]
        found[first.removeprefix("# ").strip()] = yaml.safe_load(block)
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The directory of the `evalops` the recipes run (tests/cli_server.py)."""
    server = cli_server.start(tmp_path_factory.mktemp("cli-server"))
    yield server.bin_dir
    server.stop()


def _environment(demo: Path, build: str, served: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_NOW"] = os.environ["EVALOPS_NOW"]
    env["EVALOPS_DATABASE_URL"] = f"sqlite:///{demo / '.evalops' / 'registry.db'}"
    env["EVALOPS_ACTOR"] = "ci@example.com"
    env["PATH"] = os.pathsep.join([str(served), str(Path(sys.executable).parent), env["PATH"]])
    env["BUILD"], env["SUITE"] = build, SUITE
    env["CI_DEFAULT_BRANCH"] = "main"
    return env


def _workspace(demo: Path, build: str) -> None:
    runs = demo / "runs"
    runs.mkdir(exist_ok=True)
    shutil.copy(demo / "registry" / "trials" / TRIAL_FILES[build], runs / f"{build}.jsonl")


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _run_github(
    workflow: dict[str, Any], demo: Path, build: str, job_name: str, served: Path
) -> int:
    env = _environment(demo, build, served)
    outputs: dict[str, dict[str, str]] = {}
    assert "EVALOPS_DATABASE_URL" in workflow["env"]
    # A read-only default token would refuse the comment; a refused comment fails no gate.
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    comments = [s for s in workflow["jobs"]["gate"]["steps"] if "gh pr comment" in s.get("run", "")]
    assert comments and all(s.get("continue-on-error") is True for s in comments)
    job = workflow["jobs"][job_name]
    assert job_name == "sync" or {"BUILD", "SUITE"} <= set(job["env"])
    ran = 0
    for step in job["steps"]:
        script = step.get("run")
        if script is None or FORGE_ONLY.match(script):
            continue
        script = re.sub(
            r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}",
            lambda m: outputs[m.group(1)][m.group(2)],
            script,
        )
        assert "${{" not in script, f"an expression the test does not know: {script}"
        output_file = demo / f"github-output-{ran}"
        output_file.write_text("")
        done = _bash(script, demo, {**env, "GITHUB_OUTPUT": str(output_file)})
        ran += 1
        if "id" in step:
            pairs = [line.split("=", 1) for line in output_file.read_text().splitlines()]
            outputs[step["id"]] = dict(pairs)
        if done.returncode != 0:
            return done.returncode
    assert ran >= (1 if job_name == "sync" else 3)
    return 0


def _run_gitlab(
    pipeline: dict[str, Any], demo: Path, build: str, job_name: str, served: Path
) -> int:
    job = pipeline[f"evalops-{job_name}"]
    lines = [line for line in job["script"] if not FORGE_ONLY.match(line)]
    if job_name == "gate":
        assert job["artifacts"]["reports"]["junit"] == "junit.xml"
        assert job["artifacts"]["when"] == "always"
        assert len(lines) >= 4
    return _bash("\n".join(lines), demo, _environment(demo, build, served)).returncode


RUNNERS = {".github/workflows/evalops-gate.yml": _run_github, ".gitlab-ci.yml": _run_gitlab}


def test_the_doc_holds_both_recipes() -> None:
    assert set(_yaml_blocks()) == set(RUNNERS)


def _git(demo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
        cwd=demo, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def _gate_policy_in_force(demo: Path) -> str:
    with sqlite3.connect(demo / ".evalops" / "registry.db") as con:
        ((digest,),) = con.execute(
            "SELECT document_digest FROM sync_in_force WHERE kind = 'gate_policy' AND "
            "sync_run_id = (SELECT max(r.id) FROM sync_run r WHERE EXISTS (SELECT 1 FROM "
            "sync_in_force x WHERE x.sync_run_id = r.id))"
        ).fetchall()
    return str(digest)


def _document_digest(path: Path) -> str:
    import rfc8785

    value = yaml.safe_load(path.read_text(encoding="utf-8"))
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def _tracking_main(demo: Path, served: Path) -> None:
    """The demo registry, its branch named main and tracked (an existing registry adopting
    the recipe: `registry track`)."""
    _git(demo, "branch", "-M", "main")
    env = _environment(demo, "build-125", served)
    done = _bash("evalops registry track --branch main", demo, env)
    assert done.returncode == 0, done.stderr


class PullRequest(NamedTuple):
    recipe: str
    demo: Path  # copy it before changing it
    in_force: str  # the gate policy in force after main's sync
    served: Path  # the directory of the `evalops` the recipe runs


@pytest.fixture(scope="module", params=sorted(RUNNERS))
def pull_request(
    request: pytest.FixtureRequest,
    demo_master: Path,
    tmp_path_factory: pytest.TempPathFactory,
    served: Path,
) -> PullRequest:
    """Per recipe, built once and copied by each test: the demo registry tracked on main and
    synced by the recipe's main job, then a pull request's branch changing the gate policy
    checked out. With the recipe and the gate policy in force after main's sync.

    Main's first sync does not depend on the build, and each recipe command is a new
    process (about 0.7 CPU-s): the builds' tests and the merge test start from here."""
    recipe = str(request.param)
    demo = tmp_path_factory.mktemp("ci-recipe") / "demo"
    shutil.copytree(demo_master, demo, symlinks=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALOPS_NOW", PINNED_NOW)
        _tracking_main(demo, served)
        shutil.rmtree(demo / "site", ignore_errors=True)  # the demo wrote one: the recipe must
        assert RUNNERS[recipe](_yaml_blocks()[recipe], demo, "build-125", "sync", served) == 0
    in_force = _gate_policy_in_force(demo)
    _git(demo, "checkout", "-q", "-b", "feature-x")
    policy = demo / "registry" / "policies" / "gate-policy.yaml"
    policy.write_text(policy.read_text().replace("max_duration_days: 30", "max_duration_days: 31"))
    _git(demo, "commit", "-q", "-am", "a longer waiver limit")
    return PullRequest(recipe, demo, in_force, served)


def _copy(pull_request: PullRequest, tmp_path: Path) -> Path:
    demo = tmp_path / "demo"
    shutil.copytree(pull_request.demo, demo, symlinks=True)
    return demo


@pytest.mark.parametrize(("build", "verdict"), [("build-125", 0), ("build-124", 4)])
def test_a_recipe_gates_and_publishes(
    pull_request: PullRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    build: str,
    verdict: int,
) -> None:
    """A pull request's job: decided under the branch's definitions, report, JUnit and site
    written, nothing put in force."""
    recipe, _, in_force, served = pull_request
    demo = _copy(pull_request, tmp_path)
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    _workspace(demo, build)
    policy = demo / "registry" / "policies" / "gate-policy.yaml"
    head = _git(demo, "rev-parse", "HEAD")
    code = RUNNERS[recipe](_yaml_blocks()[recipe], demo, build, "gate", served)
    assert code == verdict, f"{recipe} ended {code} for {build}"
    report = (demo / "report.md").read_text(encoding="utf-8")
    assert build in report
    assert ("BLOCK" if verdict == 4 else "PASS") in report
    assert head in report and "not in force" in report
    assert _document_digest(policy) in report, "decided under the branch's gate policy"
    junit = (demo / "junit.xml").read_text(encoding="utf-8")
    assert junit.startswith("<?xml") and "testsuite" in junit
    index = (demo / "site" / "index.html").read_text(encoding="utf-8").replace("<wbr>", "")
    assert "regression/core" in index
    # The branch's sync registered its policy and put nothing in force.
    assert _gate_policy_in_force(demo) == in_force


def test_a_recipe_puts_main_in_force_and_refuses_a_rewrite(
    pull_request: PullRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Cli,
) -> None:
    """After the merge main's job puts the branch's policy in force (registered before by
    the branch's sync, as its job does); a rewritten main is refused, nothing changes."""
    recipe, _, in_force, served = pull_request
    demo = _copy(pull_request, tmp_path)
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    blocks = _yaml_blocks()[recipe]
    # The branch's job registers its policy first (its line `evalops sync registry`, run by
    # the tests above as a process; here in-process, as set-up).
    monkeypatch.setenv("EVALOPS_ACTOR", "ci@example.com")
    monkeypatch.setenv("EVALOPS_DATABASE_URL", f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    done = cli("sync", "registry", cwd=demo)
    assert done.code == 0, done.stderr
    assert _gate_policy_in_force(demo) == in_force
    policy = demo / "registry" / "policies" / "gate-policy.yaml"

    _git(demo, "checkout", "-q", "main")
    _git(demo, "merge", "-q", "--no-ff", "-m", "merge feature-x", "feature-x")
    assert RUNNERS[recipe](blocks, demo, "build-125", "sync", served) == 0
    merged = _document_digest(policy)
    assert _gate_policy_in_force(demo) == merged != in_force

    _git(demo, "reset", "-q", "--hard", "HEAD~1")
    assert RUNNERS[recipe](blocks, demo, "build-125", "sync", served) == 5
    assert _gate_policy_in_force(demo) == merged
