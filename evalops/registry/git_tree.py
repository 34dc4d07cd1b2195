"""What a commit holds, and how the work tree departs from it (git plumbing, no work tree reads).

`sync` vouches for a commit, so it reads the definition files from that commit's objects:
one `git ls-tree -r` for the listing and one `git cat-file --batch` for every blob, however
many files the registry holds. The work tree is only compared with the commit, so that a file
git does not see (ignored, untracked) or does not compare (skip-worktree, assume-unchanged)
is named instead of being read as if it were committed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evalops.errors import InputError
from evalops.registry.history import git_output

#: A symlink chain longer than this is refused (a cycle, or a maze).
MAX_LINK_HOPS = 40

_LINK_MODE = "120000"


@dataclass(frozen=True)
class TreeEntry:
    """One blob of a commit: repository-relative path, mode, object id and size."""

    path: str
    mode: str
    sha: str
    size: int

    @property
    def is_link(self) -> bool:
        return self.mode == _LINK_MODE


@dataclass(frozen=True)
class WorkTreeChange:
    """A registry file whose work-tree state is not what the commit holds."""

    path: str
    """Relative to the repository's top."""
    reason: str

    @property
    def untracked(self) -> bool:
        """Git has never held the file: not an edit to undo, a file to move out (or add)."""
        return self.reason == _STATUS_REASON["??"]


def _pathspec(rel: str) -> list[str]:
    return ["--"] if rel in ("", ".") else ["--", rel]


_STATUS_REASON = {
    "??": "untracked: the commit does not hold it",
    "!!": "git-ignored: the commit does not hold it",
}


def _status_reason(code: str) -> str:
    if code in _STATUS_REASON:
        return _STATUS_REASON[code]
    if "D" in code:
        return "deleted in the work tree or index: the commit still holds it"
    return "differs from the commit (uncommitted change)"


def work_tree_changes(
    top: Path, rel: str, wanted_ignored: Callable[[str], bool]
) -> list[WorkTreeChange]:
    """Every file below `rel` that is untracked, changed, staged or deleted, marked
    skip-worktree or assume-unchanged (git would not notice an edit), or git-ignored and
    one that `wanted_ignored` says the registry would read."""
    changes: dict[str, str] = {}
    raw = git_output(
        top, "status", "--porcelain=v1", "-z", "--ignored=traditional", "-uall", *_pathspec(rel)
    )
    fields = iter(raw.decode("utf-8", "surrogateescape").split("\0"))
    for item in fields:
        if len(item) < 4:
            continue
        code, path = item[:2], item[3:]
        if code[0] in "RC":
            source = next(fields, "")  # a rename names its source next; both changed
            changes.setdefault(source, "renamed away: the commit holds it under this name")
        if code == "!!" and not wanted_ignored(path):
            continue
        changes.setdefault(path, _status_reason(code))
    flagged = git_output(top, "ls-files", "-v", "-z", *_pathspec(rel))
    for item in flagged.decode("utf-8", "surrogateescape").split("\0"):
        if len(item) < 3:
            continue
        tag, path = item[0], item[2:]
        if tag == "S":
            changes.setdefault(
                path, "marked skip-worktree: git does not compare it with the commit"
            )
        elif tag.islower():
            changes.setdefault(path, "marked assume-unchanged: git does not compare it")
    return [WorkTreeChange(p, r) for p, r in sorted(changes.items())]


def list_tree(top: Path, commit: str, rel: str) -> dict[str, TreeEntry]:
    """Every blob and symlink below `rel` in `commit` (one `git ls-tree -r`)."""
    raw = git_output(top, "ls-tree", "-r", "-l", "-z", "--full-tree", commit, *_pathspec(rel))
    entries: dict[str, TreeEntry] = {}
    for item in raw.decode("utf-8", "surrogateescape").split("\0"):
        if not item:
            continue
        meta, _, path = item.partition("\t")
        mode, kind, sha, size = meta.split(maxsplit=3)
        if kind != "blob":
            continue  # a submodule holds no definition of this registry
        entries[path] = TreeEntry(path, mode, sha, int(size) if size.strip().isdigit() else 0)
    return entries


def read_blobs(top: Path, shas: list[str]) -> dict[str, bytes]:
    """The content of every object in `shas`, through one `git cat-file --batch`."""
    unique = list(dict.fromkeys(shas))
    if not unique:
        return {}
    out = git_output(top, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in unique).encode())
    blobs: dict[str, bytes] = {}
    at = 0
    for sha in unique:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) != 3:
            raise InputError(f"git object {sha} is missing from the repository", str(top))
        size = int(header[2])
        blobs[sha] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the content is followed by a newline
    return blobs


def resolve_link(link: str, target: str, top: Path) -> str | None:
    """The repository-relative path a symlink at `link` points to, or None when it leads
    out of the repository."""
    if posixpath.isabs(target):
        try:
            inside = PurePosixPath(target).relative_to(top.as_posix())
        except ValueError:
            return None
        joined = posixpath.normpath(inside.as_posix())
    else:
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if joined == ".." or joined.startswith("../") or posixpath.isabs(joined):
        return None
    return "" if joined == "." else joined
