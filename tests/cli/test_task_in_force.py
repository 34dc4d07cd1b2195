"""`task list` and `task show` say which revision is in force where a newer one is only
registered (a sync from another branch registers without changing what is in force), and
`task list --suite` of a suite with no members says so, not that the registry has no tasks.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import Cli

TASK = "support-reply-tone"
NEW = "support-reply-calm"


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
        cwd=root, check=True, capture_output=True,
    )  # fmt: skip


def _on_a_branch(demo: Path, cli: Cli) -> None:
    """On branch `feature`: TASK's revision 2 (its timezone changed) and a new task NEW,
    committed and synced: registered, not in force (the demo tracks its first branch)."""
    _git(demo, "checkout", "-q", "-b", "feature")
    spec = demo / "registry" / "tasks" / f"{TASK}.yaml"
    text = spec.read_text(encoding="utf-8")
    assert "\nrevision: 1\n" in text and "timezone: Europe/Berlin" in text
    changed = text.replace("\nrevision: 1\n", "\nrevision: 2\n").replace(
        "timezone: Europe/Berlin", "timezone: Europe/Vienna"
    )
    spec.write_text(changed, encoding="utf-8")
    (spec.parent / f"{NEW}.yaml").write_text(
        text.replace(f"\nid: {TASK}\n", f"\nid: {NEW}\n"), encoding="utf-8"
    )
    _git(demo, "add", "registry/tasks")
    _git(demo, "commit", "-q", "-m", "a new revision and a new task, on a branch")
    done = cli("sync", "registry", cwd=demo)
    assert done.code == 0, done.stderr
    assert "in force unchanged" in done.stdout.splitlines()[0], done.stdout


def test_a_revision_registered_from_a_branch_is_listed_with_the_one_in_force(
    demo: Path, cli: Cli
) -> None:
    _on_a_branch(demo, cli)
    rows = {r["task_id"]: r for r in cli("--json", "task", "list", "--all", cwd=demo).json()}
    assert (rows[TASK]["revision"], rows[TASK]["in_force_revision"]) == (2, 1)
    assert (rows[NEW]["revision"], rows[NEW]["in_force_revision"]) == (1, None)
    others = [r for t, r in rows.items() if t not in (TASK, NEW)]
    assert others and all(r["in_force_revision"] == r["revision"] for r in others)
    human = cli("task", "list", "--all", cwd=demo).stdout
    line = next(x for x in human.splitlines() if f" {TASK} " in x)
    assert " 2 (in force: 1) " in line, line
    line = next(x for x in human.splitlines() if f" {NEW} " in x)
    assert " 1 (not in force) " in line, line
    shown = cli("--json", "task", "show", TASK, cwd=demo).json()
    assert (shown["revision"], shown["in_force_revision"]) == (2, 1)
    assert (
        cli("task", "show", TASK, cwd=demo)
        .stdout.splitlines()[0]
        .endswith(f"{TASK} revision 2 (in force: 1)")
    )
    # Merged into the tracked branch, the new revision is in force, and nothing is marked.
    _git(demo, "checkout", "-q", "-")
    _git(demo, "merge", "-q", "--ff-only", "feature")
    assert cli("sync", "registry", cwd=demo).code == 0
    rows = {r["task_id"]: r for r in cli("--json", "task", "list", "--all", cwd=demo).json()}
    assert (rows[TASK]["revision"], rows[TASK]["in_force_revision"]) == (2, 2)
    assert (rows[NEW]["revision"], rows[NEW]["in_force_revision"]) == (1, 1)
    assert "in force" not in cli("task", "list", "--all", cwd=demo).stdout


def test_a_suite_without_members_is_not_a_registry_without_tasks(demo: Path, cli: Cli) -> None:
    done = cli("task", "list", "--suite", "capability/agents", cwd=demo)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == (
        "suite capability/agents has no members; "
        "`evalops promote TASK --to capability/agents` adds one"
    )
    assert cli("--json", "task", "list", "--suite", "capability/agents", cwd=demo).json() == []
