"""Definitions a build's trials were made under that came from a sync off the tracked line.

A pull request's CI may sync its branch (which registers, and puts nothing in force) and
ingest its trials: a stored `gate check` of that build then holds on evidence that is not
of the definitions in force. Re-running the eval cannot help; the hint names that sync.
"""

from __future__ import annotations

from typing import Any

from evalops.store.in_force_sql import LATEST_IN_FORCE_RUN_SQL
from evalops.store.reader import Reader

_NOT_IN_FORCE = (
    "document_digest NOT IN (SELECT f.document_digest FROM sync_in_force AS f "
    f"WHERE f.sync_run_id = {LATEST_IN_FORCE_RUN_SQL})"
)


def off_line_syncs(reader: Reader, build: str) -> list[dict[str, Any]]:
    """The syncs off the tracked line (newest first) that registered an execution profile
    of `build`, or a task revision its trials ran, that is not in force."""
    return reader.rows(
        "SELECT r.id AS sync_run, r.git_commit, r.git_branch, r.registry_path "
        "FROM sync_run AS r WHERE NOT EXISTS "
        "(SELECT 1 FROM sync_in_force AS x WHERE x.sync_run_id = r.id) AND ("
        "EXISTS (SELECT 1 FROM execution_profile AS e WHERE e.sync_run_id = r.id "
        f"AND e.system_build = :build AND e.{_NOT_IN_FORCE}) OR "
        "EXISTS (SELECT 1 FROM task_revision AS t JOIN trial AS tr ON tr.task_digest = "
        "t.task_digest JOIN execution_profile AS e2 ON e2.execution_digest = "
        f"tr.execution_digest WHERE t.sync_run_id = r.id AND e2.system_build = :build "
        f"AND t.{_NOT_IN_FORCE})) ORDER BY r.id DESC",
        {"build": build},
    )
