"""`gate check --dry-run --definitions REV`: how a commit's definitions would decide.

The definitions of commit REV are read as `sync` reads them (the commit's objects, symlinks
followed inside it) and put in force inside one write transaction that is always rolled
back: the dry run, its report and its JUnit are made inside it, and nothing is registered
or put in force. A pull request's CI runs this; only the tracked branch syncs
(docs/ci.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from evalops.errors import InputError
from evalops.registry.history import repository_top, resolve_revision
from evalops.registry.provenance import GitProvenance
from evalops.registry.snapshot import load_committed_snapshot, require_registry_dir
from evalops.registry.spec_sources import display_path
from evalops.services.registry.sync import sync_in_session
from evalops.store.engine import discarded_transaction


@dataclass(frozen=True)
class DefinitionsAt:
    """Which commit's definitions a dry run was evaluated under."""

    revision: str
    git_commit: str
    registry_path: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "git_commit": self.git_commit,
            "registry_path": self.registry_path,
            "in_force": False,
        }

    def describe(self) -> str:
        # The revision as given, when it is a name (HEAD, a branch) and not the commit itself.
        named = "" if self.git_commit.startswith(self.revision) else f" ({self.revision})"
        return (
            f"under the definitions of commit {self.git_commit[:12]}{named}, "
            "not in force: nothing registered"
        )


@contextmanager
def definitions_at(
    engine: Engine, root: Path, revision: str, *, actor: str, now: datetime
) -> Iterator[tuple[Engine, Connection, DefinitionsAt]]:
    """(an engine stand-in whose sessions see REV's definitions in force, its connection,
    what was read); everything is rolled back on exit."""
    require_registry_dir(root)
    top = repository_top(root)
    if top is None:
        raise InputError(
            "--definitions reads a commit: the registry is not in a git repository",
            display_path(root),
            field="--definitions",
        )
    commit = resolve_revision(top, revision)
    if commit is None:
        raise InputError(
            f"no such commit {revision!r} in {top} (a sha, branch or tag; fetch it first)",
            field="--definitions",
        )
    snapshot = load_committed_snapshot(root, commit)
    provenance = GitProvenance(True, commit, False, None, None, (), top)
    where = DefinitionsAt(revision, commit, display_path(root))
    with discarded_transaction(engine) as conn:
        with Session(conn, expire_on_commit=False) as session:
            sync_in_session(
                session,
                snapshot,
                provenance,
                registry_path=where.registry_path,
                actor=actor,
                now=now,
                unchecked=True,
            )
            session.flush()
        # Sessions bound to the connection join its transaction (read_session takes it
        # as it takes an engine).
        yield cast(Engine, conn), conn, where
