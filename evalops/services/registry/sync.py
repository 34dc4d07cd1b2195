"""`evalops sync`: register a registry snapshot's definitions with git provenance.

All-or-nothing: every conflict is found before anything is written, and the whole sync is
one serialized transaction. A definition already registered with the same document changes
nothing; a new one gets a row and one audit event. Each sync that changes what is in force
(a new definition, a revert, a deleted file) records the whole set its commit holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from evalops.domain import audit_kinds, digests
from evalops.domain.canonical import canonical_text
from evalops.domain.specs import (
    AuthoritySpec,
    EvalTaskSpec,
    ExecutionProfile,
    GraderSet,
    SuiteDeclaration,
)
from evalops.errors import InputError, InputErrors
from evalops.registry.definitions import Definition
from evalops.registry.git_tree import WorkTreeChange
from evalops.registry.provenance import GitProvenance, git_provenance
from evalops.registry.snapshot import (
    Snapshot,
    load_committed_snapshot,
    load_snapshot,
    require_registry_dir,
)
from evalops.registry.spec_sources import display_path
from evalops.services.authority.acts import authority_in_force
from evalops.services.authority.rule_changes import rule_change_refusal
from evalops.services.registry.ratchet import RegisteredRows, conflict
from evalops.services.registry.tracking import (
    Line,
    Tracked,
    check_detached_on,
    follow_hint,
    line_of,
    off_line_summary,
    place,
    tracked,
)
from evalops.store import queries
from evalops.store.audit import append_event, next_seq
from evalops.store.engine import write_session
from evalops.store.reader import ConnectionReader
from evalops.store.tables import (
    ExecutionProfileRow,
    GraderConfig,
    GraderSetRow,
    PolicyRow,
    SuiteRow,
    SyncInForce,
    SyncRun,
    TaskRevision,
)

# Registration order: what others refer to first.
KIND_ORDER = (
    "grader_set", "task", "execution_profile", "suite", "suite_policy", "gate_policy", "authority",
)  # fmt: skip


@dataclass
class SyncResult:
    registered: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    provenance: GitProvenance | None = None
    back_in_force: list[dict[str, str]] = field(default_factory=list)
    """Definitions registered before that this commit puts back in force (a revert)."""
    no_longer_in_force: list[dict[str, str]] = field(default_factory=list)
    """Definitions in force before that this commit no longer holds (deleted files)."""
    now_in_force: list[dict[str, str]] = field(default_factory=list)
    """Definitions registered before (by a sync off the tracked line) now put in force."""
    sync_run: int | None = None
    refused: str | None = None
    """Why the sync was refused (a rule change without a policy owner's signed commits,
    rewritten history of the tracked branch)."""
    tracked: dict[str, Any] | None = None
    """The tracked line (path and branch) after this sync."""
    off_line: str | None = None
    """Set when the sync is off the tracked branch or path: its first line, saying that
    nothing in force changed."""
    same_digest: list[dict[str, str]] = field(default_factory=list)
    """Registered with a new document whose identity digest is registered already: only
    labels (title, owner, notes) changed, never what a decision reads."""
    authority_bootstrap: bool = False
    """This sync put the first authority in force: every act from now on needs signatures."""
    follow: str | None = None
    """Under a sync off the tracked line: the `registry track` that would follow it."""
    started_tracking: bool = False
    """This sync chose the tracked branch (the registry's first sync on a branch): from now
    on only that branch's commits change what is in force."""

    def as_dict(self) -> dict[str, Any]:
        if self.refused is not None:
            return {
                "refused": self.refused,
                "git": self.provenance.as_dict() if self.provenance else None,
                "tracked": self.tracked,
            }
        return {
            "registered": self.registered,
            "unchanged": self.unchanged,
            # A sync on the tracked line that found everything registered and in force
            # already writes no sync run: nothing in force changed.
            "in_force_changed": self.off_line is None and self.sync_run is not None,
            "summary": self.off_line,
            "back_in_force": self.back_in_force,
            "now_in_force": self.now_in_force,
            "no_longer_in_force": self.no_longer_in_force,
            "sync_run": self.sync_run,
            "tracked": self.tracked,
            "same_digest": self.same_digest,
            "authority_bootstrap": self.authority_bootstrap,
            "git": self.provenance.as_dict() if self.provenance else None,
        }


def read_for_sync(root: Path, *, allow_dirty: bool) -> tuple[Snapshot, GitProvenance]:
    """The definitions `sync` registers, and the provenance it records for them.

    A clean registry is read from its commit's objects, so the digests recorded under that
    commit are the commit's own. A registry outside git, without a commit, or with any
    file that is not what the commit holds is refused, every such file named, unless
    `allow_dirty`: then the work tree is read and the provenance recorded as dirty.
    """
    require_registry_dir(root)
    provenance = git_provenance(root)
    if provenance.is_git and not provenance.dirty and provenance.commit is not None:
        return load_committed_snapshot(root, provenance.commit), provenance
    if allow_dirty:
        return load_snapshot(root), provenance.marked_dirty()
    if not provenance.is_git:
        raise InputError(
            "registry is not in a git repository: commit it to git, or pass --allow-dirty",
            display_path(root),
        )
    if provenance.commit is None:
        raise InputError(
            "registry's repository has no commit yet: commit it, or pass --allow-dirty",
            display_path(root),
        )
    raise InputErrors.of(
        [
            InputError(
                f"registry has uncommitted changes: {change.reason}; sync reads the commit, "
                f"so {_way_out(change)}, or pass --allow-dirty",
                display_path((provenance.top or root) / change.path),
            )
            for change in provenance.changes
        ]
    )


def _way_out(change: WorkTreeChange) -> str:
    """An untracked file is often a stray output (a report written inside the registry):
    restoring means nothing for it, and committing it is right only if it belongs there."""
    if change.untracked:
        return "move or delete it (or add and commit it if it belongs to the registry)"
    return "commit it (or restore it)"


def _subject(d: Definition) -> str:
    rev = f"@{d.revision}" if d.revision is not None else ""
    return f"{d.kind}:{d.id}{rev}"


def _row_for(d: Definition, common: dict[str, Any]) -> SQLModel:
    spec = d.spec
    if isinstance(spec, EvalTaskSpec):
        return TaskRevision(
            task_id=d.id,
            revision=spec.revision,
            task_digest=d.digest,
            grader_set_id=spec.grader_set,
            risk=spec.meta.risk,
            **common,
        )
    if isinstance(spec, GraderSet):
        return GraderSetRow(
            grader_set_id=d.id, version=spec.version, grader_set_digest=d.digest, **common
        )
    if isinstance(spec, ExecutionProfile):
        return ExecutionProfileRow(
            execution_id=d.id,
            system_build=spec.system_build,
            execution_digest=d.digest,
            **common,
        )
    if isinstance(spec, SuiteDeclaration):
        return SuiteRow(suite_id=d.id, kind=spec.kind, **common)
    return PolicyRow(kind=d.kind, policy_id=d.id, policy_digest=d.digest, **common)


def _grader_configs(d: Definition, grader_set_row_id: int, seq: int) -> list[GraderConfig]:
    assert isinstance(d.spec, GraderSet)
    return [
        GraderConfig(
            grader_set_row_id=grader_set_row_id,
            grader_id=g.id,
            grader_version=g.version,
            grader_config_digest=digests.grader_config_digest(raw),
            layer=g.layer,
            type=g.type,
            blocking=g.blocking,
            audit_seq=seq,
        )
        for g, raw in zip(d.spec.graders, d.value["graders"], strict=True)
    ]


def _in_force_changes(
    before: dict[tuple[str, str], str], now_forced: dict[tuple[str, str], str], new: set[str]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    back = [
        {"kind": kind, "id": ident, "document_digest": dd}
        for (kind, ident), dd in sorted(now_forced.items())
        if before.get((kind, ident)) != dd and dd not in new
    ]
    gone = [
        {"kind": kind, "id": ident, "document_digest": dd}
        for (kind, ident), dd in sorted(before.items())
        if (kind, ident) not in now_forced
    ]
    return back, gone


def sync_registry(
    engine: Engine,
    snapshot: Snapshot,
    provenance: GitProvenance,
    *,
    registry_path: str,
    actor: str,
    now: datetime,
    track: str | None = None,
) -> SyncResult:
    """Register every new definition of `snapshot` and, on the tracked branch and path,
    put the snapshot's definitions in force (docs/digests.md); raise InputErrors on any
    conflict, writing nothing.

    Nothing is written when every definition is registered and already in force; a revert
    to an earlier content, or a deleted file, changes what is in force and is audited. A
    sync off the tracked line registers what is new and changes nothing in force.
    """
    with write_session(engine) as session:
        return sync_in_session(
            session,
            snapshot,
            provenance,
            registry_path=registry_path,
            actor=actor,
            now=now,
            track=track,
        )


def _sorted_out(
    session: Session, ordered: list[Definition], result: SyncResult
) -> tuple[list[Definition], list[InputError]]:
    """The definitions to register and the conflicts, counting the unchanged ones and
    noting those whose identity digest is registered already (only labels changed)."""
    new: list[Definition] = []
    conflicts: list[InputError] = []
    registered = RegisteredRows(ConnectionReader(session.connection()))
    for d in ordered:
        rows = registered.of(d)
        problem = conflict(d, rows)
        if problem is not None:
            conflicts.append(problem)
        elif any(r.document_digest == d.document_digest for r in rows):
            result.unchanged += 1
        else:
            new.append(d)
            if any(r.digest_column == d.digest_field and r.digest == d.digest for r in rows):
                result.same_digest.append({"kind": d.kind, "id": d.id})
    return new, conflicts


def sync_in_session(
    session: Session,
    snapshot: Snapshot,
    provenance: GitProvenance,
    *,
    registry_path: str,
    actor: str,
    now: datetime,
    track: str | None = None,
    unchecked: bool = False,
) -> SyncResult:
    """`sync_registry` inside the caller's write transaction. `unchecked` puts the snapshot
    in force whatever its branch, path or signatures: only for `gate check --dry-run
    --definitions`, whose transaction is always rolled back."""
    ordered = sorted(
        snapshot.definitions, key=lambda d: (KIND_ORDER.index(d.kind), d.id, d.revision or 0)
    )
    result = SyncResult(provenance=provenance)
    new, conflicts = _sorted_out(session, ordered, result)
    if conflicts:
        raise InputErrors.of(conflicts)
    state = tracked(session)
    if not unchecked and not _on_line(
        session, result, snapshot, new, state, track, registry_path, actor, now
    ):
        return result
    governing = None if unchecked else authority_in_force(session)
    bootstrap = governing is None and bool(snapshot.of_kind("authority"))
    result.authority_bootstrap = bootstrap and not unchecked
    rule_commits: list[dict[str, Any]] = []
    if governing is not None:
        vetted = state.vetted if state is not None else []
        refusal, rule_commits = _rule_check(
            session, snapshot, provenance, governing, vetted, now=now, actor=actor,
            where=registry_path,
        )  # fmt: skip
        if refusal is not None:
            result.refused = refusal
            return result
    before = queries.in_force(session)
    now_forced = {(d.kind, d.id): d.document_digest for d in ordered}
    if not new and now_forced == before:
        # Nothing written, so no line recorded either: the next sync that writes chooses.
        result.started_tracking = False
        return result
    first_seq = next_seq(session)
    run_seq = first_seq + len(new)  # the in-force event comes after every registration
    run = _sync_run(provenance, registry_path, actor=actor, now=now, seq=run_seq)
    session.add(run)
    session.flush()
    assert run.id is not None
    result.sync_run = run.id
    _register(session, result, new, provenance, run.id, actor=actor, now=now)
    forced = [
        SyncInForce(
            sync_run_id=run.id,
            kind=kind,
            definition_id=ident,
            document_digest=dd,
            audit_seq=run_seq,
        )
        for (kind, ident), dd in sorted(now_forced.items())
    ]
    session.add_all(forced)
    result.back_in_force, result.no_longer_in_force = _in_force_changes(
        before, now_forced, {d.document_digest for d in new}
    )
    _split_first_time_in_force(session, result)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.SYNC_IN_FORCE,
        subject=f"sync:{run.id}",
        payload={
            "sync_run": run.id,
            "registry_path": registry_path,
            **provenance.as_dict(),
            # The line this sync is on: what later syncs must fast-forward.
            "tracked": result.tracked,
            "in_force": [
                {"kind": k, "id": i, "document_digest": dd}
                for (k, i), dd in sorted(now_forced.items())
            ],
            "registered": len(new),
            "back_in_force": result.back_in_force,
            "no_longer_in_force": result.no_longer_in_force,
            # The first authority is accepted as it is: nobody could have signed it.
            **({"authority_bootstrap": True} if bootstrap else {}),
            # Who signed the commits that changed the rules (newest first).
            **({"rule_change_commits": rule_commits} if rule_commits else {}),
        },
        rows=[run, *forced],
    )
    return result


def _on_line(
    session: Session,
    result: SyncResult,
    snapshot: Snapshot,
    new: list[Definition],
    state: Tracked | None,
    track: str | None,
    registry_path: str,
    actor: str,
    now: datetime,
) -> bool:
    """Whether this sync is on the tracked line (it may change what is in force); if not,
    what it registers is registered, or its refusal audited."""
    provenance = result.provenance
    assert provenance is not None
    here = line_of(snapshot.root, provenance, track)
    if track is not None and state is not None and state.line.branch not in (None, track):
        raise InputError(
            f"--track {track}: this registry tracks {state.line.branch} (only its first "
            "sync chooses the branch); `evalops registry track --branch "
            f"{track} --path {state.line.path}` changes it (a rule change)",
            field="--track",
        )
    if track is not None:
        check_detached_on(provenance, track)
    placement = place(state, here, snapshot.root, provenance)
    if not placement.on_line:
        assert state is not None
        result.tracked = state.line.as_dict()
        _register_only(session, result, new, provenance, here, state.line, registry_path,
                       actor=actor, now=now, root=snapshot.root)  # fmt: skip
        return False
    result.tracked = here.as_dict()
    result.started_tracking = here.branch is not None and (
        state is None or state.line.branch is None
    )
    if placement.rewritten is not None:
        result.refused = placement.rewritten
        tracked_line = state.line.as_dict() if state else None
        _refuse(session, provenance, placement.rewritten, where=registry_path, actor=actor,
                now=now, extra={"tracked": tracked_line})  # fmt: skip
        return False
    return True


def _sync_run(
    provenance: GitProvenance, registry_path: str, *, actor: str, now: datetime, seq: int
) -> SyncRun:
    return SyncRun(
        at=now,
        actor=actor,
        registry_path=registry_path,
        git_commit=provenance.commit,
        git_dirty=provenance.dirty,
        git_branch=provenance.branch,
        git_remote=provenance.remote,
        audit_seq=seq,
    )


def _register(
    session: Session,
    result: SyncResult,
    new: list[Definition],
    provenance: GitProvenance,
    run_id: int,
    *,
    actor: str,
    now: datetime,
) -> None:
    """One row and one audit event per new definition, under sync run `run_id`."""
    for d in new:
        entry: dict[str, Any] = {
            **d.digest_row(),
            "document_digest": d.document_digest,
            **provenance.as_dict(),
        }
        seq = next_seq(session)
        row = _row_for(
            d,
            {
                "document_digest": d.document_digest,
                "document": canonical_text(d.value),
                "file_path": d.file,
                "sync_run_id": run_id,
                "audit_seq": seq,
            },
        )
        session.add(row)
        written: list[Any] = [row]
        if isinstance(row, GraderSetRow):
            session.flush()
            assert row.id is not None
            configs = _grader_configs(d, row.id, seq)
            session.add_all(configs)
            written += configs
        append_event(
            session,
            at=now,
            actor=actor,
            kind=audit_kinds.sync_kind(d.kind),
            subject=_subject(d),
            payload=entry,
            rows=written,
        )
        result.registered.append(entry)


def _register_only(
    session: Session,
    result: SyncResult,
    new: list[Definition],
    provenance: GitProvenance,
    here: Line,
    line: Line,
    registry_path: str,
    *,
    actor: str,
    now: datetime,
    root: Path,
) -> None:
    """Off the tracked line: register what is new (by digest, so that a pull request's
    trials and `gate check --definitions` can name it), put nothing in force."""
    result.off_line = off_line_summary(len(new), here, line, provenance, root)
    result.follow = follow_hint(here, line, root)
    if not new:
        return
    run_seq = next_seq(session) + len(new)
    run = _sync_run(provenance, registry_path, actor=actor, now=now, seq=run_seq)
    session.add(run)
    session.flush()
    assert run.id is not None
    result.sync_run = run.id
    _register(session, result, new, provenance, run.id, actor=actor, now=now)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.SYNC_REGISTERED,
        subject=f"sync:{run.id}",
        payload={
            "sync_run": run.id,
            "registry_path": registry_path,
            **provenance.as_dict(),
            "line": here.as_dict(),
            "tracked": line.as_dict(),
            "registered": len(new),
            "in_force_changed": False,
        },
        rows=[run],
    )


def _split_first_time_in_force(session: Session, result: SyncResult) -> None:
    """A definition registered by a sync off the tracked line and now put in force for the
    first time is not "back" in force: it was never in force."""
    digests = {e["document_digest"] for e in result.back_in_force}
    if not digests:
        return
    seen = set(
        session.exec(
            select(SyncInForce.document_digest).where(
                col(SyncInForce.document_digest).in_(digests),
                col(SyncInForce.sync_run_id) != result.sync_run,
            )
        ).all()
    )
    result.now_in_force = [e for e in result.back_in_force if e["document_digest"] not in seen]
    result.back_in_force = [e for e in result.back_in_force if e["document_digest"] in seen]


def _refuse(
    session: Session,
    provenance: GitProvenance,
    refusal: str,
    *,
    where: str,
    actor: str,
    now: datetime,
    extra: dict[str, Any],
) -> None:
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.SYNC_REFUSED,
        subject="sync",
        payload={"registry_path": where, **provenance.as_dict(), **extra, "refusal": refusal},
    )


def _rule_check(
    session: Session,
    snapshot: Snapshot,
    provenance: GitProvenance,
    governing: tuple[AuthoritySpec, str],
    vetted: list[str],
    *,
    now: datetime,
    actor: str,
    where: str,
) -> tuple[str | None, list[dict[str, Any]]]:
    """With an authority in force: (why the sync is refused, audited; the signed commits
    that changed the rules, newest first)."""
    refusal, changed, commits = rule_change_refusal(
        session, snapshot, provenance, governing[0], vetted
    )
    if refusal is not None:
        _refuse(session, provenance, refusal, where=where, actor=actor, now=now,
                extra={"authority_digest": governing[1], "rule_changes": changed})  # fmt: skip
    return refusal, commits


def latest_task_revisions(session: Session) -> list[TaskRevision]:
    """The newest registered row of every task id (highest revision, then newest labels)."""
    rows = session.exec(
        select(TaskRevision).order_by(
            col(TaskRevision.task_id), col(TaskRevision.revision), col(TaskRevision.id)
        )
    ).all()
    latest: dict[str, TaskRevision] = {}
    for row in rows:
        latest[row.task_id] = row
    return list(latest.values())
