"""`sync` vouches only for what its commit holds: definitions are read from git objects, and
a registry file git would not show in that commit (ignored, untracked, hidden from git by
skip-worktree or assume-unchanged, edited) is named and refused unless --allow-dirty."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, store_state, write_yaml

TASK = Path("registry/tasks/mini-task.yaml")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _edited_title(title: str) -> dict[str, object]:
    task = copy.deepcopy(MINI_TASK)
    task["meta"]["title"] = title
    return task


def _another_task(task_id: str) -> dict[str, object]:
    task = copy.deepcopy(MINI_TASK)
    task["id"] = task_id
    return task


def _ignored(repo: Path) -> str:
    """A task file git ignores: the commit never holds it, `git status` never shows it."""
    with (repo / ".gitignore").open("a", encoding="utf-8") as out:
        out.write("registry/tasks/local-*.yaml\n")
    commit_all(repo, "ignore local task files")
    write_yaml(repo / "registry/tasks/local-extra.yaml", _another_task("local-extra"))
    return "registry/tasks/local-extra.yaml"


def _untracked(repo: Path) -> str:
    write_yaml(repo / "registry/tasks/untracked.yaml", _another_task("untracked"))
    return "registry/tasks/untracked.yaml"


def _skip_worktree(repo: Path) -> str:
    write_yaml(repo / TASK, _edited_title("Edited under skip-worktree"))
    _git(repo, "update-index", "--skip-worktree", str(TASK))
    return str(TASK)


def _assume_unchanged(repo: Path) -> str:
    write_yaml(repo / TASK, _edited_title("Edited under assume-unchanged"))
    _git(repo, "update-index", "--assume-unchanged", str(TASK))
    return str(TASK)


def _edited(repo: Path) -> str:
    write_yaml(repo / TASK, _edited_title("Plainly edited"))
    return str(TASK)


TRICKS: dict[str, Callable[[Path], str]] = {
    "git-ignored": _ignored,
    "untracked": _untracked,
    "skip-worktree": _skip_worktree,
    "assume-unchanged": _assume_unchanged,
    "edited": _edited,
}


def _state(workspace: Path, args: list[str]) -> object:
    return store_state(workspace, args, ("audit_event", "task_revision", "sync_run"))


@pytest.mark.parametrize("trick", list(TRICKS))
def test_a_file_the_commit_does_not_hold_is_named_and_refused(
    workspace: Path, cli: Cli, synced_store: list[str], trick: str
) -> None:
    name = TRICKS[trick](workspace)
    before = _state(workspace, synced_store)

    refused = cli(*synced_store, "--json", "sync", cwd=workspace)

    assert refused.code == 2, refused.stdout
    error = refused.json()["error"]
    assert error["file"] == name
    assert "--allow-dirty" in error["message"]
    assert _state(workspace, synced_store) == before


def test_every_such_file_is_listed_at_once(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    names = {TRICKS[t](workspace) for t in ("git-ignored", "untracked", "skip-worktree")}
    before = _state(workspace, synced_store)

    refused = cli(*synced_store, "--json", "sync", cwd=workspace)

    assert refused.code == 2
    listed = {e["file"] for e in refused.json()["error"]["errors"]}
    assert listed == names
    human = cli(*synced_store, "sync", cwd=workspace)
    for name in names:
        assert f"error: {name}: registry has uncommitted changes" in human.stderr
    assert _state(workspace, synced_store) == before


def test_an_untracked_file_is_to_be_moved_or_deleted_not_restored(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    """A report written inside the registry is untracked: there is nothing to restore, and
    committing it into the registry is right only if it belongs there."""
    (workspace / "registry" / "audit.md").write_text("# audit\n", encoding="utf-8")
    _edited(workspace)

    refused = cli(*synced_store, "--json", "sync", cwd=workspace)

    assert refused.code == 2, refused.stdout
    by_file = {e["file"]: e["message"] for e in refused.json()["error"]["errors"]}
    stray = by_file["registry/audit.md"]
    assert "move or delete it" in stray and "restore" not in stray
    assert stray.index("move or delete it") < stray.index("commit it")
    assert "--allow-dirty" in stray
    # An edit to a tracked file keeps its own advice.
    assert "commit it (or restore it)" in by_file[str(TASK)]


@pytest.mark.parametrize("trick", ["git-ignored", "skip-worktree", "assume-unchanged"])
def test_allow_dirty_reads_the_work_tree_and_records_dirty(
    workspace: Path, cli: Cli, synced_store: list[str], trick: str
) -> None:
    TRICKS[trick](workspace)

    allowed = cli(*synced_store, "--json", "sync", "--allow-dirty", cwd=workspace)

    assert allowed.code == 0, allowed.stderr
    assert allowed.json()["git"]["git_dirty"] is True
    [registered] = allowed.json()["registered"]
    shown = cli(*synced_store, "--json", "task", "show", registered["id"], cwd=workspace).json()
    assert shown["git_dirty"] is True
    expected = yaml.safe_load((workspace / registered["file"]).read_text(encoding="utf-8"))
    assert shown["title"] == expected["meta"]["title"]


def test_a_clean_sync_records_what_the_commit_holds_not_the_work_tree(workspace: Path) -> None:
    """Read through the commit's objects: another commit's content, whatever is on disk."""
    from evalops.registry.snapshot import load_committed_snapshot

    first = commit_all(workspace, "first")
    write_yaml(workspace / TASK, _edited_title("Second title"))
    commit_all(workspace, "second")
    write_yaml(workspace / TASK, _edited_title("Work tree title"))

    old = load_committed_snapshot(workspace / "registry", first).find("task", "mini-task")
    assert old is not None and old.value["meta"]["title"] == MINI_TASK["meta"]["title"]
    assert old.file.endswith("registry/tasks/mini-task.yaml")


def test_a_symlink_inside_the_repository_is_read_from_the_commit(workspace: Path, cli: Cli) -> None:
    shared = workspace / "shared"
    shared.mkdir()
    write_yaml(shared / "linked-task.yaml", _another_task("linked-task"))
    (workspace / "registry/tasks/linked-task.yaml").symlink_to("../../shared/linked-task.yaml")
    (workspace / "registry/tasks/more").symlink_to("../../shared", target_is_directory=True)
    commit_all(workspace, "symlinks inside the repository")
    assert cli("init", cwd=workspace).code == 0

    refused = cli("--json", "sync", cwd=workspace)
    # Both links reach the same file: one id defined twice, as validate says of the tree.
    assert refused.code == 2
    assert "also defined in" in refused.json()["error"]["message"]
    (workspace / "registry/tasks/more").unlink()
    commit_all(workspace, "one link")

    synced = cli("--json", "sync", cwd=workspace)

    assert synced.code == 0, synced.stderr
    assert synced.json()["git"]["git_dirty"] is False
    assert {e["id"] for e in synced.json()["registered"]} >= {"linked-task", "mini-task"}
