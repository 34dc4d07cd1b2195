"""Git provenance of a registry directory (gitpython, imported only when needed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitProvenance:
    """Where the registry's files came from."""

    is_git: bool
    commit: str | None = None
    dirty: bool = True
    branch: str | None = None
    remote: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "git_commit": self.commit,
            "git_dirty": self.dirty,
            "git_branch": self.branch,
            "git_remote": self.remote,
        }


def strip_credentials(url: str) -> str:
    """`https://user:token@host/repo` -> `https://host/repo`."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]+@", r"\1", url)


def git_provenance(path: Path) -> GitProvenance:
    """Commit, dirty flag (of `path` only), branch and first remote of the repo holding `path`."""
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return GitProvenance(is_git=False)
    try:
        root = Path(repo.working_tree_dir or path).resolve()
        rel = str(path.resolve().relative_to(root)) or "."
        commit = repo.head.commit.hexsha if repo.head.is_valid() else None
        dirty = commit is None or repo.is_dirty(untracked_files=True, path=rel)
        branch = None if repo.head.is_detached else repo.active_branch.name
        remote = next((strip_credentials(r.url) for r in repo.remotes), None)
        return GitProvenance(True, commit, dirty, branch, remote)
    finally:
        repo.close()
