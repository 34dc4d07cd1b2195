"""Git commits that touched registry files, with their signatures (gitpython)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SignedCommit:
    sha: str
    payload: bytes
    signature: bytes | None
    """The armored SSH signature, or None when the commit is not SSH-signed."""


class UnknownHistory(ValueError):
    """The commit of the previous sync is not in this repository's history."""


def commits_touching(
    root: Path, since: str | None, head: str, paths: list[Path]
) -> list[SignedCommit]:
    """Every commit in `since..head` (all of `head` when `since` is None) touching `paths`."""
    import git

    from evalops.domain.sshsig import split_signed_commit

    repo = git.Repo(root, search_parent_directories=True)
    try:
        top = Path(repo.working_tree_dir or root).resolve()
        rel = [str(p.resolve().relative_to(top)) for p in paths]
        if since is not None:
            try:
                repo.git.merge_base("--is-ancestor", since, head)
            except git.GitCommandError:
                raise UnknownHistory(
                    f"the last synced commit {since[:12]} is not an ancestor of {head[:12]}"
                ) from None
        span = f"{since}..{head}" if since else head
        shas = repo.git.rev_list(span, "--", *rel).split()
        out = []
        for sha in shas:
            raw = repo.odb.stream(bytes.fromhex(sha)).read()
            payload, signature = split_signed_commit(raw)
            out.append(SignedCommit(sha, payload, signature))
        return out
    finally:
        repo.close()
