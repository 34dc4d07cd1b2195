"""The CI recipes of docs/ci.md run here, step by step, on a copy of the demo registry.

Steps are run as the forge would run them (`bash -eo pipefail`, GitHub's `$GITHUB_OUTPUT`
and `${{ steps.ID.outputs.KEY }}`, GitLab's one shell for all of `script`), except those
that install evalops (it is installed here) or call the forge's API (`gh`, `curl`).
A passing build must end the job with 0 and a blocked one with the gate's 4, both leaving
the report and the JUnit file to publish.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def _environment(demo: Path, build: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_NOW"] = os.environ["EVALOPS_NOW"]
    env["EVALOPS_DATABASE_URL"] = f"sqlite:///{demo / '.evalops' / 'registry.db'}"
    env["EVALOPS_ACTOR"] = "ci@example.com"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["BUILD"], env["SUITE"] = build, SUITE
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


def _run_github(workflow: dict[str, Any], demo: Path, build: str) -> int:
    env = _environment(demo, build)
    outputs: dict[str, dict[str, str]] = {}
    (job,) = workflow["jobs"].values()
    assert {"EVALOPS_DATABASE_URL", "BUILD", "SUITE"} <= set(job["env"])
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
    assert ran >= 3
    return 0


def _run_gitlab(pipeline: dict[str, Any], demo: Path, build: str) -> int:
    (job,) = (v for v in pipeline.values() if isinstance(v, dict) and "script" in v)
    assert job["artifacts"]["reports"]["junit"] == "junit.xml"
    assert job["artifacts"]["when"] == "always"
    lines = [line for line in job["script"] if not FORGE_ONLY.match(line)]
    assert len(lines) >= 4
    return _bash("\n".join(lines), demo, _environment(demo, build)).returncode


RUNNERS = {".github/workflows/evalops-gate.yml": _run_github, ".gitlab-ci.yml": _run_gitlab}


def test_the_doc_holds_both_recipes() -> None:
    assert set(_yaml_blocks()) == set(RUNNERS)


@pytest.mark.parametrize("recipe", sorted(RUNNERS))
@pytest.mark.parametrize(("build", "verdict"), [("build-125", 0), ("build-124", 4)])
def test_a_recipe_gates_and_publishes(demo: Path, recipe: str, build: str, verdict: int) -> None:
    _workspace(demo, build)
    shutil.rmtree(demo / "site", ignore_errors=True)  # the demo wrote one: the recipe must
    code = RUNNERS[recipe](_yaml_blocks()[recipe], demo, build)
    assert code == verdict, f"{recipe} ended {code} for {build}"
    report = (demo / "report.md").read_text(encoding="utf-8")
    assert build in report
    assert ("BLOCK" if verdict == 4 else "PASS") in report
    junit = (demo / "junit.xml").read_text(encoding="utf-8")
    assert junit.startswith("<?xml") and "testsuite" in junit
    index = (demo / "site" / "index.html").read_text(encoding="utf-8")
    assert build in index, "the site's index shows the suite's latest decision"
