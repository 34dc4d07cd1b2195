"""`git_provenance` asks `git` itself: held to GitPython's reading of the same repositories
(commit, branch, first remote, work tree) in the shapes a registry meets: outside git, a
branch with no commit yet, a detached HEAD, a branch with a slash and a tag of the same
name, several remotes, a linked worktree, a registry below the top."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from evalops.registry.provenance import GitProvenance, git_provenance, strip_credentials


@pytest.fixture(autouse=True)
def _identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@example.com")


def _git(top: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(top), *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _repo(root: Path, branch: str = "main") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", branch)
    (root / "registry" / "tasks").mkdir(parents=True)
    (root / "registry" / "tasks" / "t.yaml").write_text("id: t\n", encoding="utf-8")
    return root


def _commit(root: Path, message: str = "c") -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", message)
    return _git(root, "rev-parse", "HEAD")


def _as_gitpython_reads(path: Path) -> GitProvenance:
    """The reference: what the GitPython-based reading made of `path` (the fields it gave)."""
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return GitProvenance(is_git=False)
    try:
        commit = repo.head.commit.hexsha if repo.head.is_valid() else None
        branch = None if repo.head.is_detached else repo.active_branch.name
        remote = next((strip_credentials(r.url) for r in repo.remotes), None)
        return GitProvenance(True, commit, commit is None, branch, remote)
    finally:
        repo.close()


def _same(path: Path) -> GitProvenance:
    ours = git_provenance(path)
    assert ours == _as_gitpython_reads(path), path
    return ours


def test_outside_git_and_a_missing_path_are_not_git(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    assert _same(tmp_path / "registry") == GitProvenance(is_git=False)
    assert git_provenance(tmp_path / "missing") == GitProvenance(is_git=False)


def test_a_branch_with_no_commit_yet(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", branch="feature/evals")
    ours = _same(root / "registry")
    assert (ours.commit, ours.dirty, ours.branch) == (None, True, "feature/evals")
    assert ours.top == root.resolve()


def test_a_commit_a_detached_head_and_a_tag_named_as_the_branch(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", branch="feature/evals")
    first = _commit(root)
    _git(root, "tag", "feature/evals")  # `symbolic-ref --short` would say heads/feature/evals
    ours = _same(root / "registry")
    assert (ours.commit, ours.dirty, ours.branch) == (first, False, "feature/evals")
    (root / "registry" / "tasks" / "t.yaml").write_text("id: t2\n", encoding="utf-8")
    second = _commit(root)
    _git(root, "checkout", "-q", "--detach", first)
    ours = _same(root / "registry")
    assert (ours.commit, ours.branch) == (first, None)
    assert second != first


def test_the_first_remote_in_configuration_order_without_credentials(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    _commit(root)
    _git(root, "remote", "add", "zeta", "https://user:secret@example.com/z.git")
    _git(root, "remote", "add", "alpha", "git@example.com:a.git")
    ours = _same(root / "registry")
    assert ours.remote == "https://example.com/z.git"


def test_a_linked_worktree_and_a_registry_below_the_top(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    nested = root / "evals" / "registry"
    nested.mkdir(parents=True)
    (nested / "x.yaml").write_text("id: x\n", encoding="utf-8")
    commit = _commit(root)
    _git(root, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"))
    ours = _same(tmp_path / "wt" / "evals" / "registry")
    assert (ours.commit, ours.branch, ours.top) == (commit, "other", (tmp_path / "wt").resolve())
    # A change outside the registry's path leaves it clean; one inside does not.
    (root / "README").write_text("x", encoding="utf-8")
    assert git_provenance(nested).dirty is False
    (nested / "x.yaml").write_text("id: y\n", encoding="utf-8")
    assert git_provenance(nested).dirty is True


def test_a_repository_git_refuses_to_read_is_git_s_refusal_not_no_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's repository (container CI): git says "dubious ownership" and names the
    `safe.directory` fix; reading it as "not in a git repository" sent people to `git init`.
    Git's own test knob makes the repository another user's."""
    from evalops.errors import InputError

    root = _repo(tmp_path / "r")
    _commit(root)
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    with pytest.raises(InputError) as refused:
        git_provenance(root / "registry")
    assert "dubious ownership" in refused.value.message
    assert "git config --global --add safe.directory" in refused.value.message
