"""Git provenance of a registry directory, asked of `git` itself."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalops.registry.git_tree import WorkTreeChange


@dataclass(frozen=True)
class GitProvenance:
    """Where the registry's files came from."""

    is_git: bool
    commit: str | None = None
    dirty: bool = True
    branch: str | None = None
    remote: str | None = None
    changes: tuple[WorkTreeChange, ...] = field(default=(), compare=False)
    """Registry files whose work-tree state is not what `commit` holds (never stored)."""
    top: Path | None = field(default=None, compare=False)
    """The repository's work tree."""

    def marked_dirty(self) -> GitProvenance:
        """The same provenance, recorded as dirty (`sync --allow-dirty`)."""
        return replace(self, dirty=True)

    def as_dict(self) -> dict[str, object]:
        return {
            "git_commit": self.commit,
            "git_dirty": self.dirty,
            "git_branch": self.branch,
            "git_remote": self.remote,
        }


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_SCP = re.compile(r"^([^:/@]+):(?!//)(.*)$", re.DOTALL)


def strip_credentials(url: str) -> str:
    """A git remote reduced to scheme, host, port and path (docs/verify.md).

    Userinfo (anything up to the last `@` of the authority, so `@` or `/` inside a
    password cannot leak), query and fragment are dropped; the scheme may be in any case.
    scp-like remotes (`user@host:path`) keep `host:path`. What cannot be parsed is replaced,
    never stored raw: provenance is append-only.
    """
    url = url.strip()
    match = _SCHEME.match(url)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
        rest = re.split(r"[?#]", rest, maxsplit=1)[0]
        # The authority ends at the first "/" after the last "@" (passwords may hold "/").
        at = rest.rfind("@")
        if at >= 0:
            rest = rest[at + 1 :]
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host}{slash}{path}"
    if url.startswith(("/", "./", "../")) or re.match(r"^[A-Za-z]:[\\/]", url):
        return url.split("?", 1)[0].split("#", 1)[0]  # a local path
    # scp-like: everything up to the last "@" is userinfo (a password may hold "@" or ":").
    scp = _SCP.match(url[url.rfind("@") + 1 :])
    if scp:
        return f"{scp.group(1)}:{scp.group(2)}".split("?", 1)[0].split("#", 1)[0]
    return "<unparsed remote>"


def git_provenance(path: Path) -> GitProvenance:
    """Commit, dirty flag (of `path` only), branch and first remote of the repo holding `path`.

    Dirty means some registry file is not what the commit holds: changed, staged, deleted,
    untracked, git-ignored where a spec would be read, or marked skip-worktree or
    assume-unchanged (so that git itself would not notice an edit); each is named in
    `changes`. Asked of `git` itself, as every other git fact `sync` reads.
    """
    from evalops.registry.git_tree import work_tree_changes
    from evalops.registry.history import (
        first_remote_url,
        head_branch,
        head_commit,
        repository_top,
    )

    top = repository_top(path) if path.exists() else None
    if top is None:
        return GitProvenance(is_git=False)
    rel = path.resolve().relative_to(top).as_posix()
    commit = head_commit(top)
    changes = tuple(work_tree_changes(top, rel, _reads_spec(rel))) if commit else ()
    dirty = commit is None or bool(changes)
    remote = first_remote_url(top)
    return GitProvenance(
        True,
        commit,
        dirty,
        head_branch(top),
        strip_credentials(remote) if remote is not None else None,
        changes,
        top,
    )


def _reads_spec(rel: str) -> Callable[[str], bool]:
    """Whether a repository path is one the registry at `rel` would read as a spec file
    (an ignored editor backup elsewhere in the registry is no definition)."""
    from evalops.registry.load import SPEC_SUFFIXES
    from evalops.registry.spec_sources import SPEC_DIRS

    base = "" if rel in ("", ".") else f"{rel}/"

    def wanted(path: str) -> bool:
        if not path.startswith(base):
            return False
        below = path[len(base) :]
        return below.split("/", 1)[0] in SPEC_DIRS and (
            path.endswith(SPEC_SUFFIXES) or path.endswith("/")
        )

    return wanted
