"""With an authority in force, a change to the rules must come in policy owners' commits.

The rules (docs/authority.md, "Changing the rules"): gate and suite policies, suite
declarations, the authority itself, every grader set, and a task's `meta.risk` /
`meta.protects`. When a sync would put a change to any of them in force, every commit
reachable from the synced commit and from no clean synced commit (full history: merges and
both sides of them) whose tree differs from any of its parents in a file a rule-bearing
definition is read from (symlinks and their targets included) must be SSH-signed (git's
`gpg.format ssh`) by a `policy_owner` of the authority in force before the change. The
first authority is accepted as it is (the bootstrap). `verify` re-runs the same check over
the recorded syncs (evalops/services/verify/rule_history.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session

from evalops.domain import sshsig
from evalops.domain.authority import judge_commit, key_owners
from evalops.domain.specs import AuthoritySpec, EvalTaskSpec
from evalops.domain.sshsig import split_signed_commit
from evalops.registry.committed import RuleReads, rule_reads, task_blobs
from evalops.registry.history import HistoryCommit, changed_paths, commits_since, raw_commit
from evalops.registry.provenance import GitProvenance
from evalops.registry.snapshot import Snapshot
from evalops.store import queries

#: Kept equal to evalops/services/verify/rule_history.py's (a test holds them together).
RULE_KINDS = ("gate_policy", "suite_policy", "suite", "authority", "grader_set")


def rule_changes(session: Session, snapshot: Snapshot) -> list[str]:
    """What this snapshot changes in the rules in force."""
    before = queries.in_force(session)
    after = {(d.kind, d.id): d.document_digest for d in snapshot.definitions}
    changed = [
        f"{kind} {ident}"
        for kind, ident in sorted(before.keys() | after.keys())
        if kind in RULE_KINDS and before.get((kind, ident)) != after.get((kind, ident))
    ]
    for d in snapshot.of_kind("task"):
        # Against the task in force (not one registered off the tracked line): what
        # `verify` compares too.
        row = queries.in_force_row(session, "task", d.id)
        if row is None or not isinstance(d.spec, EvalTaskSpec):
            continue
        old = queries.task_spec(row).meta
        new = d.spec.meta
        if (old.risk, sorted(old.protects)) != (new.risk, sorted(new.protects)):
            changed.append(f"task {d.id} meta.risk / meta.protects")
    return changed


@dataclass(frozen=True)
class RuleCommit:
    """A commit whose tree differs from one of its parents in a rule-bearing file."""

    sha: str
    files: tuple[str, ...]


class _Reads:
    """`rule_reads` of each commit, once."""

    def __init__(self, top: Path, rel: str) -> None:
        self.top = top
        self.rel = rel
        self._cache: dict[str, RuleReads] = {}

    def of(self, sha: str | None) -> RuleReads:
        if sha is None:
            return RuleReads(frozenset(), {})
        if sha not in self._cache:
            self._cache[sha] = rule_reads(self.top, sha, self.rel)
        return self._cache[sha]


def _labels(value: Any) -> tuple[str, Any] | None:
    """(task id, its risk labels) of a parsed task file, None when it is no task."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return None
    meta = value.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    protects = meta.get("protects")
    protects = sorted(map(str, protects)) if isinstance(protects, list) else protects
    return value["id"], (meta.get("risk"), protects)


def _task_label_changes(top: Path, diff: set[str], mine: RuleReads, theirs: RuleReads) -> set[str]:
    """Task files (as the diff names them) whose `meta.risk` / `meta.protects` differ between
    the two commits, by task id (a rename keeps its id); a touched task file that does not
    parse counts: what it says cannot be told."""
    touched = {
        side: {sha: paths for sha, paths in reads.tasks.items() if diff & set(paths)}
        for side, reads in (("mine", mine), ("theirs", theirs))
    }
    docs = task_blobs(top, [sha for side in touched.values() for sha in side])
    labels: dict[str, dict[str, Any]] = {"mine": {}, "theirs": {}}
    where: dict[str, set[str]] = {}
    files: set[str] = set()
    for side, blobs in touched.items():
        for sha, paths in blobs.items():
            doc = docs.get(sha)
            found = _labels(doc.value) if doc is not None else None
            if found is None:
                files |= diff & set(paths)
                continue
            labels[side][found[0]] = found[1]
            where.setdefault(found[0], set()).update(diff & set(paths))
    for task_id in labels["mine"].keys() & labels["theirs"].keys():
        if labels["mine"][task_id] != labels["theirs"][task_id]:
            files |= where[task_id]
    return files


def rule_commits(top: Path, rel: str, vetted: list[str], head: str) -> list[RuleCommit]:
    """Every commit reachable from `head` and from none of `vetted` that changes a
    rule-bearing file against any of its parents, newest first."""
    reads = _Reads(top, rel)
    out: list[RuleCommit] = []
    for commit in commits_since(top, vetted, head):
        files = _rule_files(top, commit, reads)
        if files:
            out.append(RuleCommit(commit.sha, tuple(sorted(files))))
    return out


def _rule_files(top: Path, commit: HistoryCommit, reads: _Reads) -> set[str]:
    mine = reads.of(commit.sha)
    files: set[str] = set()
    parents: tuple[str | None, ...] = commit.parents or (None,)
    for parent in parents:
        diff = changed_paths(top, commit.sha, parent)
        if not diff:
            continue
        theirs = reads.of(parent)
        files |= diff & (mine.rules | theirs.rules)
        files |= _task_label_changes(top, diff, mine, theirs)
    return files


def signer_label(authority: AuthoritySpec, signature: bytes | None) -> str:
    """Who signed a commit, as a refusal names it: a principal, a key, or "unsigned"."""
    if signature is None:
        return "unsigned"
    try:
        key = sshsig.parse_signature(signature).public_key
    except sshsig.MalformedSignature:
        return "malformed signature"
    principal = key_owners(authority).get(key.blob)
    return f"signed by {principal}" if principal else f"signed by unknown key {key.fingerprint}"


@dataclass(frozen=True)
class Span:
    """The history a sync brings: the registry at `rel` (repository-relative) in the
    repository at `top`, from the commits already vetted to `head`."""

    top: Path
    rel: str
    vetted: list[str]
    head: str


def history_refusal(
    span: Span, authority: AuthoritySpec, what: str
) -> tuple[str | None, list[dict[str, Any]]]:
    """(why the rule change `what` is refused, naming commit, file, signer and the fix;
    the commits that made it with their signers, newest first)."""
    top, vetted = span.top, span.vetted
    signed: list[dict[str, Any]] = []
    owners = sorted({g.principal for g in authority.roles.get("policy_owner", [])})
    since = vetted[0][:12] if vetted else "the first commit"
    base = vetted[0][:12] if vetted else "--root"
    for found in rule_commits(top, span.rel, vetted, span.head):
        payload, signature = split_signed_commit(raw_commit(top, found.sha))
        problem, signer = judge_commit(authority, found.sha, payload, signature)
        if problem is not None or signer is None:
            who = signer_label(authority, signature)
            more = f" (and {len(found.files) - 1} more)" if len(found.files) > 1 else ""
            return (
                f"{what} changed: commit {found.sha[:12]} ({who}) changes {found.files[0]}"
                f"{more}, a rule-bearing file: {problem}. Every commit since the last clean "
                f"sync ({since}) that changes a rule-bearing file must be SSH-signed by a "
                f"policy_owner ({', '.join(owners) or 'none is declared'}); fix: have one of "
                f"them vouch for {found.sha[:12]} by re-signing it and the commits after it "
                f"(`git rebase --exec 'git commit --amend --no-edit -S' {base}` on the "
                "branch, then push it; a revert on top does not take it out of the history "
                "this check reads)",
                [],
            )
        signed.append({"commit": found.sha, "files": list(found.files), **signer.as_dict()})
    return None, signed


def rule_change_refusal(
    session: Session,
    snapshot: Snapshot,
    provenance: GitProvenance,
    authority: AuthoritySpec,
    vetted: list[str],
) -> tuple[str | None, list[str], list[dict[str, Any]]]:
    """(why the sync is refused or None, the rule changes it carries, the commits that made
    them with their signers, newest first: what the audit report names)."""
    changed = rule_changes(session, snapshot)
    if not changed:
        return None, changed, []
    what = ", ".join(changed)
    if provenance.dirty or provenance.commit is None or provenance.top is None:
        return (
            f"uncommitted rule changes ({what}): sync --allow-dirty never changes a "
            "rule-bearing definition while an authority is in force; fix: commit them, "
            "signed by a policy_owner, and sync the commit",
            changed,
            [],
        )
    rel = snapshot.root.resolve().relative_to(provenance.top).as_posix()
    span = Span(provenance.top, rel, vetted, provenance.commit)
    refusal, signed = history_refusal(span, authority, what)
    return refusal, changed, signed
