"""With an authority in force, a change to the rules must come in policy owners' commits.

The rules: gate and suite policies, suite declarations, the authority itself, and a task's
`meta.risk` / `meta.protects`. When a sync would change any of them, every commit since
the last synced commit that touches the rule files must be SSH-signed (git's
`gpg.format ssh`) by a `policy_owner` of the authority in force before the change. The
first authority is accepted as it is (the bootstrap).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlmodel import Session

from evalops.domain.authority import judge_commit
from evalops.domain.specs import AuthoritySpec, EvalTaskSpec
from evalops.registry.commits import UnknownHistory, commits_touching
from evalops.registry.provenance import GitProvenance
from evalops.registry.snapshot import Snapshot
from evalops.store import queries

RULE_KINDS = ("gate_policy", "suite_policy", "suite", "authority")
RULE_FOLDERS = ("policies", "suites")


def rule_changes(session: Session, snapshot: Snapshot) -> tuple[list[str], list[Path]]:
    """What this snapshot changes in the rules in force, and the files that hold them."""
    before = queries.in_force(session)
    after = {(d.kind, d.id): d.document_digest for d in snapshot.definitions}
    changed = [
        f"{kind} {ident}"
        for kind, ident in sorted(before.keys() | after.keys())
        if kind in RULE_KINDS and before.get((kind, ident)) != after.get((kind, ident))
    ]
    paths = [snapshot.root / f for f in RULE_FOLDERS if changed and (snapshot.root / f).exists()]
    for d in snapshot.of_kind("task"):
        row = queries.task_row(session, d.id)
        if row is None or not isinstance(d.spec, EvalTaskSpec):
            continue
        old = queries.task_spec(row).meta
        new = d.spec.meta
        if (old.risk, sorted(old.protects)) != (new.risk, sorted(new.protects)):
            changed.append(f"task {d.id} meta.risk / meta.protects")
            paths.append(Path(d.file))
    return changed, paths


def rule_change_refusal(
    session: Session, snapshot: Snapshot, provenance: GitProvenance, authority: AuthoritySpec
) -> tuple[str | None, list[str], list[dict[str, Any]]]:
    """(why the sync is refused or None, the rule changes it carries, the commits that made
    them with their signers, newest first: what the audit report names)."""
    changed, paths = rule_changes(session, snapshot)
    if not changed:
        return None, changed, []
    what = ", ".join(changed)
    if provenance.dirty or provenance.commit is None:
        return (
            f"uncommitted rule changes ({what}) cannot be signed: commit them signed",
            changed,
            [],
        )
    last = queries.latest_sync_run(session)
    since = last.git_commit if last is not None else None
    try:
        commits = commits_touching(snapshot.root, since, provenance.commit, paths)
    except UnknownHistory as exc:
        return f"{exc}: cannot tell who changed the rules ({what})", changed, []
    signed: list[dict[str, Any]] = []
    for commit in commits:
        problem, signer = judge_commit(authority, commit.sha, commit.payload, commit.signature)
        if problem is not None or signer is None:
            return f"{what} changed: {problem}", changed, []
        signed.append({"commit": commit.sha, **signer.as_dict()})
    return None, changed, signed
