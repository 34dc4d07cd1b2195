"""Reading registered tasks."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain.timestamps import format_timestamp
from evalops.errors import InputError
from evalops.services.registry.sync import latest_task_revisions
from evalops.services.registry.unknown_ids import not_registered
from evalops.store import queries
from evalops.store.engine import read_session
from evalops.store.tables import SyncRun, TaskRevision


def _summary(row: TaskRevision, run: SyncRun | None, in_force: int | None) -> dict[str, Any]:
    doc = json.loads(row.document)
    return {
        "task_id": row.task_id,
        "revision": row.revision,
        # A newer revision may be registered from another branch, path or directory without
        # being in force (docs/tutorial.md, "Definitions in force"): which one rules is said.
        "in_force_revision": in_force,
        "title": doc["meta"]["title"],
        "risk": row.risk,
        "task_digest": row.task_digest,
        "grader_set": row.grader_set_id,
        "file": row.file_path,
        "git_commit": run.git_commit if run else None,
        "git_dirty": run.git_dirty if run else None,
        "synced_at": format_timestamp(run.at) if run else None,
        "synced_by": run.actor if run else None,
    }


def list_tasks(engine: Engine, *, suite: str | None = None) -> list[dict[str, Any]]:
    """The latest revision of every task; with `suite`, of the suite's current members.
    Each names the revision in force (`in_force_revision`; None: none is)."""
    with read_session(engine) as session:
        rows = latest_task_revisions(session)
        if suite is not None:
            if queries.suite_row(session, suite) is None:
                raise InputError(not_registered(session, "suite", suite), field="--suite")
            members = {m.task_id for m in queries.members(session, suite)}
            rows = [r for r in rows if r.task_id in members]
        in_force = _in_force_revisions(session)
        return [
            _summary(r, session.get(SyncRun, r.sync_run_id), in_force.get(r.task_id)) for r in rows
        ]


def _in_force_revisions(session: Session) -> dict[str, int]:
    """Task id -> the revision of the definition in force."""
    return {
        task_id: int(row.revision)
        for task_id, row in queries.in_force_rows(session, "task").items()
    }


def show_task(engine: Engine, task_id: str) -> dict[str, Any]:
    with read_session(engine) as session:
        rows = session.exec(
            select(TaskRevision)
            .where(TaskRevision.task_id == task_id)
            .order_by(col(TaskRevision.revision), col(TaskRevision.id))
        ).all()
        if not rows:
            raise InputError(not_registered(session, "task", task_id))
        in_force = _in_force_revisions(session).get(task_id)
        history = [_summary(r, session.get(SyncRun, r.sync_run_id), in_force) for r in rows]
        return {**history[-1], "spec": json.loads(rows[-1].document), "history": history}
