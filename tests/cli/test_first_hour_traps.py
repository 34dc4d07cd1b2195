"""The traps a new user met in the first hour, each closed (issue: "ingest without silent
traps"): tool calls that silently did not count for their target agent, and a template that
wrote such calls."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

TASK = "support-refund-in-order"
EXECUTION = "candidate-b124"


def _template(cli: Cli, demo: Path, *extra: str) -> dict[str, Any]:
    done = cli(
        "trials", "template", "--task", TASK, "--execution", EXECUTION, "--run-id", "run-hand",
        "--trial-prefix", "hand", *extra, "--json", cwd=demo,
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    record: dict[str, Any] = done.json()
    return record


def _ingest(cli: Cli, demo: Path, record: dict[str, Any], *extra: str) -> Any:
    path = demo / f"{record['trial_id']}.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return cli("trials", "ingest", str(path), *extra, cwd=demo)


def test_the_template_gives_every_call_the_target_agent_it_names(demo: Path, cli: Cli) -> None:
    record = _template(cli, demo, "--target-agent", "support")
    assert record["target_agent_id"] == "support"
    assert record["tool_calls"] and {c.get("agent_id") for c in record["tool_calls"]} == {"support"}
    assert _ingest(cli, demo, record).code == 0
    shown = cli("trials", "show", record["trial_id"], "--json", cwd=demo).json()
    assert shown["trajectory"]["matched"] is True
    assert shown["classification"] == "task_pass"


def test_ingest_counts_the_calls_no_agent_made_for_the_target(demo: Path, cli: Cli) -> None:
    record = _template(cli, demo)
    calls = len(record["tool_calls"])
    assert calls and all("agent_id" not in c for c in record["tool_calls"])
    record["target_agent_id"] = "support"  # written by hand, as the user did
    done = _ingest(cli, demo, record)
    assert done.code == 0, done.stderr
    assert (
        f"note: {calls} tool calls have no agent_id and are not observed for "
        "target_agent_id support" in done.stderr
    )
    again = _ingest(cli, demo, {**record, "trial_id": "hand-0002", "trial_index": 1}, "--json")
    assert again.json()["unattributed_calls"] == {"support": calls}
    # A record whose calls name their agent has nothing to say.
    named = {
        **record,
        "trial_id": "hand-0003",
        "trial_index": 2,
        "tool_calls": [{**c, "agent_id": "support"} for c in record["tool_calls"]],
    }
    assert _ingest(cli, demo, named, "--json").json()["unattributed_calls"] == {}


def test_ingest_names_a_grader_its_grader_set_does_not_have(demo: Path, cli: Cli) -> None:
    """A typo in a result's grader_id made the trial hold as missing evidence, and only
    `trials show` said why; ingest says so, with the id it probably meant."""
    record = _template(cli, demo, "--target-agent", "support")
    assert record["grader_results"], "the template fills a result per grader"
    real = record["grader_results"][0]["grader_id"]
    typo = real.replace("-", "_") if "-" in real else real + "x"
    record["grader_results"][0]["grader_id"] = typo
    done = _ingest(cli, demo, record)
    assert done.code == 0, done.stderr
    note = next(line for line in done.stderr.splitlines() if line.startswith("note: "))
    assert f"1 record names grader {typo!r}, which grader set " in note
    assert f"(did you mean {real!r}?)" in note and "grader_invalid" in note
    again = _ingest(cli, demo, {**record, "trial_id": "hand-0002", "trial_index": 1}, "--json")
    (entry,) = again.json()["unknown_graders"]
    assert (entry["grader_id"], entry["records"], entry["did_you_mean"]) == (typo, 1, real)
    # Results of the set's own graders have nothing to say.
    own = {**_template(cli, demo, "--target-agent", "support"), "trial_id": "hand-0009"}
    fine = _ingest(cli, demo, {**own, "trial_index": 9}, "--json")
    assert fine.code == 0, fine.stdout + fine.stderr
    assert fine.json()["unknown_graders"] == []


def test_a_gate_reason_says_which_trials_of_the_build_did_not_count(demo: Path, cli: Cli) -> None:
    """Trials of an older version of the execution profile: the reason says so, instead of
    "no trials for this build" above a line that counts them."""
    from tests.integrity.test_decision_integrity_cli import edit_registry

    def new_model(doc: dict[str, Any]) -> None:
        doc["model"]["name"] = "another-model"

    edit_registry(demo, "executions/fix-b125.yaml", new_model, "model change")
    assert cli("sync", cwd=demo).code == 0
    asked = ("gate", "check", "--build", "build-125", "--suite", "regression/core")
    stored = cli(*asked, "--json", cwd=demo).json()
    held = next(t for t in stored["tasks"] if t["task_id"] == TASK)
    n = held["ignoredTrials"]["older_execution_digest"]
    assert held["n"] == 0 and n > 0
    shown = cli("gate", "show", stored["gate_id"], cwd=demo).stdout
    assert (
        f"{TASK} (critical): missing_required_evidence -> hold; no counted trials "
        f"({n} under another profile version: sync it or pass --execution)" in shown
    )
    assert "no trials for this build" not in shown
    # The stored reason is the evaluator's own: replay compares it byte for byte.
    assert any(r.endswith("no trials for this build") for r in stored["reasons"])


def test_init_registry_on_an_existing_registry_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    """Starters deleted or renamed: writing them again would add a second gate policy and a
    second suite policy to a registry that validates."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert cli("init", "--registry", "registry", cwd=tmp_path).code == 0
    gate_policy = tmp_path / "registry" / "policies" / "release-gate.yaml"
    suite_policy = tmp_path / "registry" / "policies" / "default-suite-policy.yaml"
    # Made one's own: every starter renamed, the suite policy deleted.
    suite_policy.unlink()
    for path in (tmp_path / "registry").rglob("*.yaml"):
        if path.parent.name != "schemas":
            path.rename(path.with_name(f"ours-{path.name}"))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "registry").rglob("*"))
    done = cli("init", "--registry", "registry", cwd=tmp_path)
    assert done.code == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "already holds a registry" in said and "--database-only" in said
    assert "release-gate.yaml" in said and "default-suite-policy.yaml" in said
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "registry").rglob("*")) == before
    only = cli("init", "--registry", "registry", "--database-only", cwd=tmp_path)
    assert only.code == 0, only.stdout + only.stderr
    assert not gate_policy.exists() and not suite_policy.exists()
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "registry").rglob("*")) == before


def test_the_tutorials_first_gate_check_is_a_dry_run_and_says_why() -> None:
    import re

    tutorial = (Path(__file__).resolve().parents[2] / "docs" / "tutorial.md").read_text("utf-8")
    commands = re.findall(r"^(?:\$ )?(evalops gate check [^\n]*)$", tutorial, flags=re.M)
    assert commands, "the tutorial runs the gate"
    assert "--dry-run" in commands[0].split(), commands[0]
    first = tutorial.index(commands[0])
    why = tutorial[first : first + 3000]
    assert re.search(r"first look at a new build's decision is a `--dry-run`", why)
    assert "stored for good" in why


def test_a_spec_file_or_a_registry_folder_named_as_the_registry_says_which_to_name(
    tmp_path: Path, cli: Cli
) -> None:
    """`validate registry/tasks/x.yaml` said "registry directory not found" of a file that
    exists, and `validate registry/tasks` found "no spec files" in a folder of them."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert cli("init", "--registry", "registry", cwd=tmp_path).code == 0
    spec = "registry/tasks/first-task.yaml"
    as_file = (
        "a file, not a registry: a registry is read whole, from the directory holding "
        "tasks/, executions/, graders/, suites/, policies/: name registry"
    )
    for command in ("validate", "sync"):
        done = cli("--json", command, spec, cwd=tmp_path)
        assert done.code == 2, done.stdout + done.stderr
        assert done.json()["error"]["message"] == as_file
        assert done.json()["error"]["file"] == spec
    folder = cli("--json", "validate", "registry/tasks", cwd=tmp_path)
    assert folder.code == 2
    assert folder.json()["error"]["message"] == (
        "no spec files found: this is one of a registry's folders, and a registry is read "
        "whole: name registry"
    )
    missing = cli("validate", "regsitry", cwd=tmp_path)
    assert missing.code == 2
    assert missing.stderr.strip().endswith(
        "(run from the directory that holds registry/, or name the registry directory: "
        "evalops --registry DIR, or the argument of validate and sync)"
    ), missing.stderr
    # Named as it says, the registry validates.
    assert cli("validate", "registry", cwd=tmp_path).code == 0


def test_validate_lists_a_typo_in_file_order_with_the_field_it_meant(
    tmp_path: Path, cli: Cli
) -> None:
    """Every problem of a file is listed in the order of the file: a typo folded with the
    required field it misspells keeps its place."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert cli("init", "--registry", "registry", cwd=tmp_path).code == 0
    task = tmp_path / "registry" / "tasks" / "first-task.yaml"
    text = task.read_text()
    text = text.replace("  owner: you@example.com", "  owner: 7").replace("  goal:", "  gaol:")
    task.write_text(text, encoding="utf-8")
    done = cli("--json", "validate", "registry", cwd=tmp_path)
    assert done.code == 2
    errors = [(e["line"], e["field"], e["message"]) for e in done.json()["error"]["errors"]]
    assert [e[:2] for e in errors] == [(9, "meta.owner"), (16, "contract.gaol")], errors
    assert errors[1][2] == "unknown field 'gaol': did you mean 'goal'? (a required field)"


def test_the_tracking_line_is_printed_by_the_sync_that_records_the_branch(
    tmp_path: Path, cli: Cli
) -> None:
    """A registry first synced outside git takes its branch from the first sync that writes
    on one: a sync of unchanged files records nothing and must not say it chose a branch
    (it said so on every such sync)."""
    import subprocess

    assert cli("init", "--registry", "registry", cwd=tmp_path).code == 0
    outside = cli("sync", "registry", "--allow-dirty", cwd=tmp_path)
    assert outside.code == 0, outside.stdout + outside.stderr
    assert "tracking" not in outside.stdout
    env = {"GIT_AUTHOR_NAME": "n", "GIT_AUTHOR_EMAIL": "n@example.com",
           "GIT_COMMITTER_NAME": "n", "GIT_COMMITTER_EMAIL": "n@example.com"}  # fmt: skip

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, env={**os.environ, **env})

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "registry")
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=tmp_path, capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    unchanged = cli("sync", "registry", cwd=tmp_path)
    assert unchanged.code == 0 and "tracking" not in unchanged.stdout, unchanged.stdout
    task = tmp_path / "registry" / "tasks" / "first-task.yaml"
    task.write_text(
        task.read_text()
        .replace("goal: describe_the_goal", "goal: refund_once")
        .replace("revision: 1", "revision: 2"),
        encoding="utf-8",
    )
    git("commit", "-qam", "a real goal")
    written = cli("sync", "registry", cwd=tmp_path)
    assert written.code == 0, written.stdout + written.stderr
    assert f"tracking {branch} at registry/" in written.stdout, written.stdout
    again = cli("sync", "registry", cwd=tmp_path)
    assert again.code == 0 and "tracking" not in again.stdout, again.stdout


def test_init_in_a_repository_git_refuses_warns_in_git_s_words(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's checkout: init warned "not in a git work tree", sending people to
    `git init`; it says git's refusal and its safe.directory fix."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own test knob
    done = cli("--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    (warning,) = done.json()["warnings"]
    assert warning.startswith("git refuses to read this repository (dubious ownership")
    assert "safe.directory" in warning and "git work tree" not in warning
