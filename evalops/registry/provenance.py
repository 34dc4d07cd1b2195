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


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_SCP = re.compile(r"^([^:/@]+):(?!//)(.*)$", re.DOTALL)


def strip_credentials(url: str) -> str:
    """A git remote reduced to scheme, host, port and path (DESIGN.md section 10).

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
