"""`verify`: the recorded syncs re-checked against the registry's git history.

Every sync that changed what is in force is re-checked as `sync` checks it
(docs/authority.md): it is on the tracked line of its time (its path and branch, a
fast-forward of the previous sync on that line unless `registry track` re-based it), and,
with an authority in force before it, a change to a rule-bearing definition came in commits
signed by a policy owner of that authority (full history since the clean syncs before it),
never from a dirty work tree. A sync that would have been refused is exit 6, so rows written
without the check (SQL, a modified evalops) are found. The git repository is the registry's
own (`--registry`); without one nothing is re-checked and the report says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalops.errors import InputError, VerificationError
from evalops.registry.history import (
    RepositoryRefused,
    branch_tips,
    is_ancestor,
    known_commits,
    normal_path,
    on_branch,
    repository_top,
)
from evalops.store.reader import Reader

if TYPE_CHECKING:
    from evalops.domain.specs import AuthoritySpec

#: As evalops/services/authority/rule_changes.py (imported only when an authority was in
#: force: the spec models and the ORM stay off verify's path otherwise).
RULE_KINDS = ("gate_policy", "suite_policy", "suite", "authority", "grader_set")

_IN_FORCE_RUNS = (
    "SELECT r.id, r.audit_seq, r.registry_path, r.git_commit, r.git_dirty, r.git_branch "
    "FROM sync_run AS r WHERE EXISTS (SELECT 1 FROM sync_in_force AS x "
    "WHERE x.sync_run_id = r.id) ORDER BY r.id"
)


@dataclass
class RuleHistory:
    """What the re-check covered."""

    checked: int = 0
    """Syncs re-checked against the repository."""
    skipped: str | None = None
    """Why nothing was re-checked (no git repository at the registry)."""
    unknown: list[int] = field(default_factory=list)
    """Syncs whose commit this repository does not hold (another clone, a shallow one)."""

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "skipped": self.skipped, "unknown_commits": self.unknown}


@dataclass(frozen=True)
class _Run:
    id: int
    seq: int
    commit: str | None
    dirty: bool
    line: tuple[str, str | None] | None
    """(path, branch) recorded by the sync; None for a sync made before the line existed."""
    path: str
    """The registry path as the sync run recorded it."""
    forced: dict[tuple[str, str], str]


def _runs(reader: Reader) -> list[_Run]:
    out = []
    for row in reader.rows(_IN_FORCE_RUNS):
        event = reader.first(
            "SELECT payload FROM audit_event WHERE seq = :s", {"s": row["audit_seq"]}
        )
        payload = json.loads(event["payload"]) if event else {}
        recorded = payload.get("tracked")
        line = (
            (str(recorded["path"]), recorded.get("branch"))
            if isinstance(recorded, dict) and isinstance(recorded.get("path"), str)
            else None
        )
        forced = {
            (r["kind"], r["definition_id"]): r["document_digest"]
            for r in reader.rows(
                "SELECT kind, definition_id, document_digest FROM sync_in_force "
                "WHERE sync_run_id = :run",
                {"run": row["id"]},
            )
        }
        out.append(
            _Run(row["id"], row["audit_seq"], row["git_commit"], bool(row["git_dirty"]), line,
                 normal_path(row["registry_path"]), forced)
        )  # fmt: skip
    return out


def _document(reader: Reader, table: str, digest: str) -> Any:
    row = reader.first(
        f"SELECT document FROM {table} WHERE document_digest = :d ORDER BY id LIMIT 1",
        {"d": digest},
    )
    return json.loads(row["document"]) if row else None


def _authority(reader: Reader, forced: dict[tuple[str, str], str]) -> AuthoritySpec | None:
    digest = next((dd for (kind, _), dd in forced.items() if kind == "authority"), None)
    if digest is None:
        return None
    from evalops.domain.specs import AuthoritySpec

    document = _document(reader, "policy", digest)
    return AuthoritySpec.model_validate(document) if document is not None else None


def _labels(document: Any) -> tuple[Any, Any]:
    meta = document.get("meta") if isinstance(document, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    protects = meta.get("protects")
    return meta.get("risk"), sorted(protects) if isinstance(protects, list) else protects


def _rule_changes(reader: Reader, before: _Run, after: _Run) -> list[str]:
    changed = [
        f"{kind} {ident}"
        for kind, ident in sorted(before.forced.keys() | after.forced.keys())
        if kind in RULE_KINDS
        and before.forced.get((kind, ident)) != after.forced.get((kind, ident))
    ]
    for (kind, ident), digest in sorted(after.forced.items()):
        old = before.forced.get((kind, ident))
        if kind != "task" or old is None or old == digest:
            continue
        if _labels(_document(reader, "task_revision", old)) != _labels(
            _document(reader, "task_revision", digest)
        ):
            changed.append(f"task {ident} meta.risk / meta.protects")
    return changed


def check_rule_history(reader: Reader, root: Path) -> RuleHistory:
    """Re-check every recorded sync (see the module); VerificationError on the first that
    `sync` would have refused."""
    try:
        top = repository_top(root) if root.is_dir() else None
    except RepositoryRefused as refused:
        # Git will not read it (another user's checkout): the chain was still verified.
        return RuleHistory(skipped=f"syncs not re-checked: {refused.message}")
    if top is None and not root.is_dir():
        what = "is a file, not a directory" if root.exists() else "does not exist"
        return RuleHistory(
            skipped=f"registry directory {root} {what} (give --registry DIR): syncs not re-checked"
        )
    if top is None:
        return RuleHistory(skipped=f"{root} is not in a git repository: syncs not re-checked")
    report = RuleHistory()
    tracks = [
        (row["seq"], json.loads(row["payload"]))
        for row in reader.rows(
            "SELECT seq, payload FROM audit_event WHERE kind = 'registry.track' ORDER BY seq"
        )
    ]
    runs = _runs(reader)
    held = set(known_commits(top, [r.commit for r in runs if r.commit]))
    vetted: list[str] = []
    previous: _Run | None = None
    line: tuple[str, str | None] | None = None
    for run in runs:
        re_based = [p for seq, p in tracks if (previous.seq if previous else 0) < seq < run.seq]
        if re_based:
            line = (str(re_based[-1]["path"]), re_based[-1].get("branch"))
        if run.commit is not None and run.commit not in held:
            report.unknown.append(run.id)
            if previous is not None:
                _unheld_rule_changes(reader, run, previous)
        else:
            _check_line(top, run, previous, line, bool(re_based))
            if previous is not None:
                _check_rules(reader, top, run, previous, vetted)
            report.checked += 1
        if run.line is not None:
            line = run.line
        if run.commit is not None and not run.dirty:
            vetted.insert(0, run.commit)
        previous = run
    if previous is not None and previous.commit in held:
        _check_on_its_branch(top, previous)
    return report


def _check_on_its_branch(top: Path, run: _Run) -> None:
    """What is in force now came from a commit of the branch it was synced as: a ref of
    that name here (the local branch, or a remote's copy) holds it. Only the latest sync is
    held to the refs of today (an older one may predate a re-based line); a repository with
    no ref of that name says nothing."""
    branch = run.line[1] if run.line is not None else None
    if branch is None or run.commit is None:
        return
    try:
        if on_branch(top, run.commit, branch):
            return
        tips = branch_tips(top, branch)  # for the message; none: nothing to hold it to
    except InputError:
        return
    if not tips:
        return
    held = ", ".join(f"{ref} at {sha[:12]}" for ref, sha in sorted(tips.items()))
    raise VerificationError(
        f"{_where(run)} put its commit in force as {branch}, but no ref named {branch} here "
        f"holds it ({held}): a commit that was never on {branch}, or one a force-push "
        f"took off it (then re-base the line: `evalops registry track --branch {branch}`, a "
        f"rule change, and sync); if this clone's {branch} is old, fetch it and verify again"
    )


def _where(run: _Run) -> str:
    return f"sync run {run.id} (audit seq {run.seq}, commit {(run.commit or 'none')[:12]})"


def _check_line(
    top: Path,
    run: _Run,
    previous: _Run | None,
    line: tuple[str, str | None] | None,
    re_based: bool,
) -> None:
    if line is None:
        return  # the first sync, or syncs made before the tracked line existed
    if run.line is None:
        raise VerificationError(
            f"{_where(run)} changed what is in force without recording its branch and path "
            f"(tracked: {line[1]} at {line[0]}/)"
        )
    adopts = line[1] is None and previous is not None and previous.commit is None
    if run.line[0] != line[0] or (run.line[1] != line[1] and not adopts):
        raise VerificationError(
            f"{_where(run)} changed what is in force off the tracked line: it synced "
            f"{run.line[1]} at {run.line[0]}/, but {line[1]} at {line[0]}/ was tracked "
            "(sync would have registered it and changed nothing in force)"
        )
    last = previous.commit if previous is not None and not re_based else None
    if last is not None and run.commit is not None and not is_ancestor(top, last, run.commit):
        raise VerificationError(
            f"{_where(run)} changed what is in force from rewritten history: the previous "
            f"synced commit {last[:12]} is not an ancestor of {run.commit[:12]}"
        )


def _unheld_rule_changes(reader: Reader, run: _Run, previous: _Run) -> None:
    """A sync from a commit this repository does not hold is only counted (a clone that
    lacks it, a shallow one), unless it changed the rules under an authority: then what
    makes it acceptable, the signatures of the commits that brought the change, cannot be
    checked, and an unchecked rule change is not a verified one."""
    authority = _authority(reader, previous.forced)
    if authority is None:
        return
    changed = _rule_changes(reader, previous, run)
    if changed:
        raise VerificationError(
            f"{_where(run)} put rule changes ({', '.join(changed)}) in force while authority "
            f"{authority.id} was in force, from a commit this repository does not hold: the "
            "signatures that allowed them cannot be checked; fetch the full history of the "
            "tracked branch (`git fetch --unshallow` in a shallow clone) and verify again"
        )


def _check_rules(reader: Reader, top: Path, run: _Run, previous: _Run, vetted: list[str]) -> None:
    authority = _authority(reader, previous.forced)
    if authority is None:
        return
    changed = _rule_changes(reader, previous, run)
    if not changed:
        return
    what = ", ".join(changed)
    if run.dirty or run.commit is None:
        raise VerificationError(
            f"{_where(run)} put rule changes ({what}) in force from a dirty work tree while "
            f"authority {authority.id} was in force (sync refuses that)"
        )
    from evalops.services.authority.rule_changes import Span, history_refusal

    rel = run.line[0] if run.line is not None else run.path
    refusal, _ = history_refusal(Span(top, rel, list(vetted), run.commit), authority, what)
    if refusal is not None:
        raise VerificationError(f"{_where(run)} would have been refused: {refusal}")


def check_promotions(reader: Reader) -> int:
    """Every promotion accepted while an authority was in force carries a `suite.promote`
    signed act (its signature is re-verified with the other acts). Promotions recorded
    before the registry's first sync on a tracked line were made by an evalops that did
    not ask for one, and are left as they were. Returns how many were checked."""
    first = reader.first(
        "SELECT min(seq) AS seq FROM audit_event WHERE kind = 'sync.in_force' "
        "AND payload LIKE '%\"tracked\"%'"
    )
    since = first["seq"] if first and first["seq"] is not None else None
    if since is None:
        return 0
    runs = [(r["audit_seq"], r["id"]) for r in reader.rows(_IN_FORCE_RUNS)]
    checked = 0
    for event in reader.rows(
        "SELECT seq, subject FROM audit_event WHERE kind = 'promotion.accepted' "
        "AND seq > :since ORDER BY seq",
        {"since": since},
    ):
        run = max((rid for seq, rid in runs if seq < event["seq"]), default=None)
        governed = run is not None and reader.first(
            "SELECT 1 AS x FROM sync_in_force WHERE sync_run_id = :r AND kind = 'authority'",
            {"r": run},
        )
        if not governed:
            continue
        checked += 1
        act = reader.first(
            "SELECT 1 AS x FROM signed_act WHERE audit_seq = :s AND kind = 'suite.promote'",
            {"s": event["seq"]},
        )
        if act is None:
            raise VerificationError(
                f"promotion {event['subject']} (audit seq {event['seq']}) was accepted "
                "unsigned while an authority was in force: promote is a risk owner's signed "
                "act suite.promote"
            )
    return checked
