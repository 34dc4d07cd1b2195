"""A tracked registry's git history: ancestry, and the commits between two syncs.

History is never simplified: `git rev-list` without a pathspec lists every commit
reachable from the synced one and from none of the commits already vetted, merges and
both sides of them; what each commit changed is asked of git against every parent in turn
(a merge whose tree differs from one parent changed something, whatever the other holds).
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from evalops.errors import InputError


class RepositoryRefused(InputError):
    """Git will not read the repository (another user's: "dubious ownership")."""


@dataclass(frozen=True)
class HistoryCommit:
    sha: str
    parents: tuple[str, ...]


def _run(top: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(top), *args], input=stdin, capture_output=True, check=False
        )
    except OSError as exc:
        raise InputError(f"cannot run git: {exc.strerror}", str(top)) from None


def git_output(top: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """What `git -C top ARGS` prints; a failure is an input error naming git's last line."""
    done = _run(top, *args, stdin=stdin)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(f"git {args[0]} failed: {detail[-1] if detail else 'no output'}", str(top))
    return done.stdout


def branch_known(top: Path, branch: str) -> bool | None:
    """Whether the repository holding `top` has `branch`, as a local branch or a
    remote-tracking one (`origin/B`); None when `top` is in no git repository (or git is
    missing), where nothing can be said."""
    try:
        return bool(branch_tips(top, branch))
    except InputError:
        return None


def known_commits(top: Path, shas: list[str]) -> list[str]:
    """The commits of `shas` this repository holds (a shallow clone or another repository
    may hold none of them)."""
    unique = list(dict.fromkeys(s for s in shas if s))
    if not unique:
        return []
    out = git_output(
        top, "cat-file", "--batch-check", stdin="".join(f"{s}\n" for s in unique).encode()
    )
    held = []
    for sha, line in zip(unique, out.decode("utf-8", "replace").splitlines(), strict=False):
        parts = line.split()
        if len(parts) == 3 and parts[1] == "commit":
            held.append(sha)
    return held


def is_ancestor(top: Path, older: str, newer: str) -> bool:
    """Whether `older` is `newer` or one of its ancestors (False when it is not held)."""
    if not known_commits(top, [older]):
        return False
    return _run(top, "merge-base", "--is-ancestor", older, newer).returncode == 0


def branch_tips(top: Path, branch: str) -> dict[str, str]:
    """Every ref of this repository named `branch`: the local branch and each remote's
    copy of it (`refs/remotes/origin/main`), ref name -> the commit it points to."""
    if branch.startswith("-"):
        return {}
    out = git_output(
        top,
        "for-each-ref",
        "--format=%(refname)%00%(objectname)",
        f"refs/heads/{branch}",
        f"refs/remotes/*/{branch}",
    )
    # for-each-ref matches a pattern as a prefix up to a slash and as a glob: keep the refs
    # named exactly so (refs/heads/main/x, or a branch named with `*`, is not main).
    exact = re.compile(rf"refs/heads/{re.escape(branch)}|refs/remotes/[^/]+/{re.escape(branch)}")
    tips: dict[str, str] = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        ref, _, sha = line.partition("\0")
        if sha and exact.fullmatch(ref):
            tips[ref] = sha
    return tips


def refs_holding(top: Path, commit: str) -> list[str]:
    """Every branch and remote-tracking ref of this repository that holds `commit` (none
    when the repository does not have it)."""
    try:
        out = git_output(
            top,
            "for-each-ref",
            "--format=%(refname:short)",
            f"--contains={commit}",
            "refs/heads",
            "refs/remotes",
        )
    except InputError:  # a commit this repository does not have
        return []
    return [line for line in out.decode("utf-8", "replace").splitlines() if line]


def on_branch(top: Path, commit: str, branch: str) -> bool:
    """Whether a ref of this repository named `branch` (`branch_tips`) holds `commit`."""
    return any(is_ancestor(top, commit, tip) for tip in branch_tips(top, branch).values())


def commits_since(top: Path, vetted: list[str], head: str) -> list[HistoryCommit]:
    """Every commit reachable from `head` and from none of `vetted` (those this repository
    holds), newest first, each with all its parents."""
    held = known_commits(top, vetted)
    spec = "".join(f"^{s}\n" for s in held) + f"{head}\n"
    out = git_output(top, "rev-list", "--parents", "--stdin", stdin=spec.encode())
    commits = []
    for line in out.decode("ascii").splitlines():
        sha, *parents = line.split()
        commits.append(HistoryCommit(sha, tuple(parents)))
    return commits


def changed_paths(top: Path, commit: str, parent: str | None) -> set[str]:
    """Repository paths whose blob differs between `parent` (None: the empty tree) and
    `commit`, renames split into a deletion and an addition."""
    args = ["diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-commit-id"]
    args += ["--root", commit] if parent is None else [parent, commit]
    raw = git_output(top, *args)
    return {p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p}


def raw_commit(top: Path, sha: str) -> bytes:
    """The commit object as git stores it (what its signature covers, plus the signature)."""
    return git_output(top, "cat-file", "commit", sha)


def repository_top(path: Path) -> Path | None:
    """The work tree of the git repository holding `path`, or None outside git. A
    repository git refuses to read (owned by another user: `safe.directory`) is an input
    error in git's words, not "no repository": the fix is git's."""
    where = path if path.is_dir() else path.parent
    done = _run(where, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace")
        if "dubious ownership" in said:
            hint = next(
                (line.strip() for line in said.splitlines() if "safe.directory" in line),
                "git config --global --add safe.directory DIR",
            )
            raise RepositoryRefused(
                f"git refuses to read this repository (dubious ownership: it belongs to "
                f"another user); if you trust it: {hint}",
                str(where),
            )
        return None
    return Path(done.stdout.decode("utf-8", "surrogateescape").strip()).resolve()


def head_commit(top: Path) -> str | None:
    """The commit HEAD is at, or None on a branch with no commit yet."""
    done = _run(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if done.returncode != 0:
        return None
    return done.stdout.decode("ascii").strip() or None


def head_branch(top: Path) -> str | None:
    """The branch checked out (a new one with no commit included), or None on a detached
    HEAD. Read in full and cut here: `--short` would say `heads/main` where a tag is named
    main too."""
    done = _run(top, "symbolic-ref", "--quiet", "HEAD")
    ref = done.stdout.decode("utf-8", "surrogateescape").strip()
    if done.returncode != 0 or not ref.startswith("refs/heads/"):
        return None
    return ref.removeprefix("refs/heads/")


def first_remote_url(top: Path) -> str | None:
    """The URL of the repository's first remote in its configuration, or None."""
    done = _run(top, "config", "--null", "--get-regexp", r"^remote\..*\.url$")
    if done.returncode != 0:
        return None
    first = done.stdout.decode("utf-8", "surrogateescape").split("\0", 1)[0]
    _, _, url = first.partition("\n")
    return url or None


def resolve_revision(top: Path, revision: str) -> str | None:
    """The commit `revision` names (a sha, a branch, a tag, `HEAD~2`...), or None."""
    if revision.startswith("-"):
        return None
    done = _run(
        top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    if done.returncode != 0:
        return None
    return done.stdout.decode("ascii").strip() or None


def normal_path(path: str) -> str:
    """A registry path as the tracked line records it: posix, normalized, "." for the top."""
    text = posixpath.normpath(path.replace("\\", "/")) if path else "."
    return text.rstrip("/") or "/"
