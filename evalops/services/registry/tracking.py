"""The tracked branch and path: which syncs change what is in force (docs/authority.md,
"The tracked branch").

A registry follows one registry path (relative to its git repository's top) on one branch.
The first sync records them (`sync.in_force` payload `tracked`); `evalops registry track`
changes them (a `registry.track` event, a signed act under an authority). A registry synced
before the tracked line existed adopts its last sync's path and branch. Nothing is stored
apart: the line is read back from the audit events, so `verify` can re-derive it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain import audit_kinds
from evalops.domain.authority import Scope
from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError, RefusedError
from evalops.registry.history import (
    branch_tips,
    is_ancestor,
    normal_path,
    on_branch,
    refs_holding,
    repository_top,
)
from evalops.registry.provenance import GitProvenance
from evalops.registry.spec_sources import display_path
from evalops.services.authority.acts import (
    Signing,
    authority_in_force,
    authorize,
    record_refusal,
)
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import write_session
from evalops.store.tables import AuditEvent, SyncRun


@dataclass(frozen=True)
class Line:
    """A registry path and a branch (None: outside git, or a detached HEAD)."""

    path: str
    branch: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "branch": self.branch}

    def describe(self) -> str:
        return f"{self.branch or '(no branch)'} tracks {self.path.rstrip('/')}/"


def line_of(root: Path, provenance: GitProvenance, track: str | None) -> Line:
    """Where this sync reads from: the registry path relative to its repository's top (as
    given, outside git) and the branch checked out (`--track BRANCH` on a detached HEAD)."""
    branch = provenance.branch
    if track is not None:
        if branch is not None and branch != track:
            raise InputError(
                f"--track {track}, but branch {branch} is checked out: check out {track}, "
                "or sync without --track",
                field="--track",
            )
        branch = track
    top = provenance.top if provenance.is_git else None
    if top is None and provenance.is_git:
        top = repository_top(root)
    if top is None:
        return Line(normal_path(display_path(root)), branch)
    try:
        rel = root.resolve().relative_to(top).as_posix()
    except ValueError:
        rel = display_path(root)
    return Line(normal_path(rel), branch)


def _on_branch(provenance: GitProvenance, branch: str) -> bool:
    """Whether a ref of this repository named `branch` holds the commit checked out."""
    top, commit = provenance.top, provenance.commit
    if top is None or commit is None:
        return False
    return on_branch(top, commit, branch)


def check_detached_on(provenance: GitProvenance, track: str) -> None:
    """`--track BRANCH` on a detached HEAD says which branch the commit is; the repository
    must agree, one of its refs named BRANCH (the local branch, or a remote's copy, as CI
    checkouts fetch it) containing the commit. Else any commit could be synced as the
    tracked branch: a pull request's, or a proposal never merged."""
    top, commit = provenance.top, provenance.commit
    if provenance.branch is not None or top is None or commit is None:
        return
    if _on_branch(provenance, track):
        return
    tips = branch_tips(top, track)
    if tips:
        held = ", ".join(f"{ref} at {sha[:12]}" for ref, sha in sorted(tips.items()))
        why = f"commit {commit[:12]} is not on {track} ({held} does not contain it)"
    else:
        why = (
            f"this repository has no branch {track} (no refs/heads/{track}, no "
            f"refs/remotes/*/{track}) to find commit {commit[:12]} on"
        )
    raise InputError(
        f"{why}; fetch {track} (`git fetch origin {track}`) if the commit "
        f"is on it, or sync without --track to register the definitions without changing "
        "what is in force",
        field="--track",
    )


@dataclass
class Tracked:
    """The line in force and what was synced on it."""

    line: Line
    last_commit: str | None
    """The commit of the last sync on this line (None: none yet, or outside git)."""
    vetted: list[str] = field(default_factory=list)
    """Every clean synced commit: the rule-change history check starts after them."""
    set_by_track: bool = False


def run_line(session: Session, run: SyncRun) -> Line:
    """The line a sync that changed what is in force was made on (adopted from its
    path and branch when it predates the tracked line)."""
    event = session.get(AuditEvent, run.audit_seq)
    recorded = json.loads(event.payload).get("tracked") if event is not None else None
    if isinstance(recorded, dict) and isinstance(recorded.get("path"), str):
        branch = recorded.get("branch")
        return Line(recorded["path"], branch if isinstance(branch, str) else None)
    return Line(normal_path(run.registry_path), run.git_branch)


def tracked(session: Session) -> Tracked | None:
    """The tracked line (None: nothing was ever synced)."""
    run = queries.latest_sync_run(session)
    track_event = session.exec(
        select(AuditEvent)
        .where(AuditEvent.kind == audit_kinds.REGISTRY_TRACK)
        .order_by(col(AuditEvent.seq).desc())
        .limit(1)
    ).first()
    vetted = queries.clean_synced_commits(session)
    if track_event is not None and (run is None or track_event.seq > run.audit_seq):
        payload = json.loads(track_event.payload)
        return Tracked(Line(payload["path"], payload.get("branch")), None, vetted, True)
    if run is None:
        return None
    return Tracked(run_line(session, run), run.git_commit, vetted)


def registry_state(engine: Engine) -> dict[str, Any]:
    """`evalops registry show`: what this registry follows and what is in force: the
    tracked path and branch, the sync whose definitions are in force, the authority in
    force, the registry id. Nothing is written."""
    from evalops.store.engine import read_session

    with read_session(engine) as session:
        state = tracked(session)
        run = queries.latest_sync_run(session)
        authority = authority_in_force(session)
        counts: dict[str, int] = {}
        for kind, _ in queries.in_force(session):
            counts[kind] = counts.get(kind, 0) + 1
        return {
            "registry_id": queries.registry_id(session),
            "tracked": state.line.as_dict() if state is not None else None,
            "tracked_by": (
                None if state is None else "registry track" if state.set_by_track else "sync"
            ),
            "in_force": None
            if run is None
            else {
                "sync_run": run.id,
                "git_commit": run.git_commit,
                "git_branch": run.git_branch,
                "dirty": bool(run.git_dirty),
                "at": format_timestamp(run.at),
                "actor": run.actor,
                "audit_seq": run.audit_seq,
                "definitions": dict(sorted(counts.items())),
            },
            "authority": None
            if authority is None
            else {"id": authority[0].id, "digest": authority[1]},
        }


@dataclass(frozen=True)
class Placement:
    """How a sync relates to the tracked line."""

    on_line: bool
    rewritten: str | None = None
    """Why the sync is refused: the tracked branch's history was rewritten."""


def same_path(here: Line, there: Line, root: Path) -> bool:
    if here.path == there.path:
        return True
    # A path recorded before the line existed may be absolute, or relative to where
    # sync ran: the same directory is the same path.
    recorded = Path(there.path)
    return recorded.is_absolute() and recorded.resolve() == root.resolve()


def place(state: Tracked | None, here: Line, root: Path, provenance: GitProvenance) -> Placement:
    """Whether a sync of `here` changes what is in force, or is refused."""
    if state is None:
        return Placement(True)
    line = state.line
    if not same_path(here, line, root):
        return Placement(False)
    # A registry first synced outside git takes its branch from its first commit.
    adopts = line.branch is None and state.last_commit is None and not state.set_by_track
    if here.branch != line.branch and not adopts:
        return Placement(False)
    last, head = state.last_commit, provenance.commit
    if last is None or head is None or provenance.top is None:
        return Placement(True)
    if is_ancestor(provenance.top, last, head):
        return Placement(True)
    return Placement(
        True,
        rewritten=f"history of {line.branch or 'the tracked line'} was rewritten: the last "
        f"synced commit {last[:12]} is not an ancestor of {head[:12]} (a force-push, a "
        "shallow clone or another repository)"
        + _held_elsewhere(provenance.top, last, line.branch)
        + f"; sync a commit that descends from {last[:12]} (fetch the full history), or, if "
        "the rewrite is intended, re-base the tracked line with `evalops registry track "
        f"--path {line.path} --branch {line.branch or 'BRANCH'}` (a rule change)",
    )


def _held_elsewhere(top: Path, commit: str, branch: str | None) -> str:
    """When branches other than the tracked one hold the last synced commit and none named
    like it does: it may never have been on the tracked branch at all (synced as `main`
    from a ref only that checkout had, which a pull request's job can make), and re-basing
    would adopt it."""
    if branch is None or on_branch(top, commit, branch):
        return ""
    held = refs_holding(top, commit)
    if not held:
        return ""
    return (
        f". {commit[:12]} is on {', '.join(held[:5])} and on no {branch} here: if "
        f"{branch} was not force-pushed, it was synced as {branch} from a ref only that "
        "checkout had (a pull request's job can make one), and re-basing would adopt what "
        f"{branch} never held; run `evalops verify`, and give pull request jobs a database "
        "of their own (docs/ci.md)"
    )


def off_line_summary(
    count: int, here: Line, line: Line, provenance: GitProvenance, root: Path
) -> str:
    """The first line of a sync off the tracked line: nothing in force changed."""
    if here.branch:
        where = f"from {here.branch}"
    elif not provenance.is_git:
        where = "from a directory outside git (no branch, no commit)"
    else:
        where = "from a detached HEAD"
    if here.path != line.path:
        where += f" at {here.path.rstrip('/')}/"
    commit = provenance.commit
    rev = commit[:12] if commit else "REV"
    noun = "definition" if count == 1 else "definitions"
    hint = (
        f"; to see how it decides: evalops gate check --dry-run --definitions {rev} "
        "--build BUILD --suite SUITE"
        if provenance.is_git
        else "; commit it on the tracked branch to put it in force"
    )
    if here.branch is None and line.branch is not None and _on_branch(provenance, line.branch):
        hint += f" (this detached HEAD is on {line.branch}: sync with --track {line.branch})"
    return f"registered {count} {noun} {where}; in force unchanged: {line.describe()}{hint}"


def follow_hint(here: Line, line: Line, root: Path) -> str | None:
    """Under a sync off the tracked line: the rule change that would make this sync's path
    and branch the tracked ones (none from a detached HEAD: its summary names --track)."""
    if here.branch is None:
        return None
    moved_path = not same_path(here, line, root)
    moved_branch = here.branch != line.branch
    where = f"{here.path.rstrip('/')}/"
    was = f"{line.path.rstrip('/')}/"
    if moved_path and moved_branch:
        target = f"{here.branch} at {where} instead of {line.branch} at {was}"
        options = f"--path {here.path} --branch {here.branch}"
    elif moved_path:
        target, options = f"{where} instead of {was}", f"--path {here.path}"
    elif moved_branch:
        target, options = f"{here.branch} instead of {line.branch}", f"--branch {here.branch}"
    else:
        return None
    return f"to follow {target}: evalops registry track {options} (a rule change)"


@dataclass(frozen=True)
class TrackResult:
    line: Line
    previous: Line | None
    changed: bool
    signers: list[dict[str, str]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tracked": self.line.as_dict(),
            "previous": self.previous.as_dict() if self.previous else None,
            "changed": self.changed,
            "signers": self.signers,
        }


def track_registry(
    engine: Engine,
    *,
    path: str | None,
    branch: str | None,
    signing: Signing,
    actor: str,
    now: datetime,
) -> TrackResult:
    """Change the tracked path and branch (`evalops registry track`): with an authority in
    force, a policy owner's signed act `registry.track` (a rule change); the next sync on
    the new line needs no ancestry with the old one, and its rule-change check starts from
    every commit synced clean before."""
    if path is None and branch is None:
        raise InputError("name the new line: --path P, --branch B, or both", field="--branch")
    with write_session(engine) as session:
        state = tracked(session)
        previous = state.line if state is not None else None
        line = Line(
            normal_path(path) if path is not None else (previous.path if previous else "registry"),
            branch if branch is not None else (previous.branch if previous else None),
        )
        authorized = authorize(
            session,
            kind="registry.track",
            body=line.as_dict(),
            scope=Scope(),
            signing=signing,
            now=now,
        )
        if authorized.refused:
            refusal = record_refusal(session, authorized, subject="registry", actor=actor, now=now)
            refused = RefusedError(
                f"registry.track refused: [{refusal['rule']}] {refusal['message']}"
            )
        else:
            refused = None
            seq = next_seq(session)
            act_row = authorized.add_row(session, "registry", seq)
            append_event(
                session,
                at=now,
                actor=actor,
                kind=audit_kinds.REGISTRY_TRACK,
                subject="registry",
                payload={
                    **line.as_dict(),
                    "previous": previous.as_dict() if previous else None,
                    **authorized.payload(),
                },
                rows=[] if act_row is None else [act_row],
            )
    if refused is not None:
        raise refused
    signers = [s.as_dict() for s in authorized.judgement.signers] if authorized.signed else []
    return TrackResult(line, previous, previous != line, signers)
