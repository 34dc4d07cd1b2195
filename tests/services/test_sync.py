"""`evalops sync`: provenance, idempotence, revision conflicts, dirty and non-git registries."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path

from evalops.store.schema import HEAD_REVISION
from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, sqlite_fingerprint, write_mini_registry, write_yaml

DB = Path(".evalops/registry.db")


def _count(workspace: Path, table: str) -> int:
    con = sqlite3.connect(workspace / DB)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def test_sync_records_digests_file_and_git_commit(workspace: Path, cli: Cli) -> None:
    sha = commit_all(workspace)
    assert cli("init", cwd=workspace).code == 0
    synced = cli("sync", "--json", cwd=workspace)
    assert synced.code == 0, synced.stderr
    assert synced.json()["git"]["git_commit"] == sha
    assert synced.json()["git"]["git_dirty"] is False
    assert synced.json()["in_force_changed"] is True  # the first sync put the commit in force
    shown = cli("task", "show", "mini-task", "--json", cwd=workspace).json()
    assert shown["git_commit"] == sha
    assert shown["git_dirty"] is False
    assert shown["file"] == "registry/tasks/mini-task.yaml"
    assert shown["task_digest"].startswith("sha256:")
    assert shown["synced_by"] == "tester@example.com"
    # One event per definition registered, and one putting the synced commit in force.
    assert _count(workspace, "audit_event") == 4


def test_resync_of_unchanged_files_changes_nothing(synced: Path, cli: Cli) -> None:
    before = sqlite_fingerprint(synced / DB)
    again = cli("sync", "--json", cwd=synced)
    assert again.code == 0
    assert again.json()["registered"] == []
    assert again.json()["sync_run"] is None
    assert again.json()["in_force_changed"] is False  # what is in force did not change
    assert sqlite_fingerprint(synced / DB) == before


def test_changed_contract_without_new_revision_is_refused_naming_both_digests(
    synced: Path, cli: Cli
) -> None:
    old = cli("task", "show", "mini-task", "--json", cwd=synced).json()["task_digest"]
    task = copy.deepcopy(MINI_TASK)
    task["contract"]["goal"] = "do_a_different_thing"
    write_yaml(synced / "registry/tasks/mini-task.yaml", task)
    commit_all(synced, "change the contract, forget the revision")
    new = cli("digest", "registry/tasks/mini-task.yaml", "--json", cwd=synced).json()[0]
    before = sqlite_fingerprint(synced / DB)

    refused = cli("sync", "--json", cwd=synced)

    assert refused.code == 2
    error = refused.json()["error"]
    assert old in error["message"] and new["task_digest"] in error["message"]
    assert error["file"] == "registry/tasks/mini-task.yaml"
    assert error["field"] == "revision"
    assert error["line"] == 3
    assert sqlite_fingerprint(synced / DB) == before


def test_new_revision_is_registered_and_history_kept(synced: Path, cli: Cli) -> None:
    task = copy.deepcopy(MINI_TASK)
    task["contract"]["goal"] = "do_a_different_thing"
    task["revision"] = 2
    write_yaml(synced / "registry/tasks/mini-task.yaml", task)
    commit_all(synced, "revision 2")
    result = cli("sync", "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert [(e["id"], e["revision"]) for e in result.json()["registered"]] == [("mini-task", 2)]
    shown = cli("task", "show", "mini-task", "--json", cwd=synced).json()
    assert shown["revision"] == 2
    assert [h["revision"] for h in shown["history"]] == [1, 2]
    assert cli("verify", cwd=synced).code == 0


def test_label_change_without_contract_change_is_registered_not_refused(
    synced: Path, cli: Cli
) -> None:
    task = copy.deepcopy(MINI_TASK)
    task["meta"]["title"] = "A better title"
    write_yaml(synced / "registry/tasks/mini-task.yaml", task)
    commit_all(synced, "retitle")
    result = cli("sync", "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert len(result.json()["registered"]) == 1
    shown = cli("task", "show", "mini-task", "--json", cwd=synced).json()
    assert shown["title"] == "A better title"
    assert len({h["task_digest"] for h in shown["history"]}) == 1


def test_dirty_registry_is_refused_unless_allowed(synced: Path, cli: Cli) -> None:
    task = copy.deepcopy(MINI_TASK)
    task["meta"]["title"] = "Uncommitted title"
    write_yaml(synced / "registry/tasks/mini-task.yaml", task)
    before = sqlite_fingerprint(synced / DB)
    refused = cli("sync", cwd=synced)
    assert refused.code == 2
    assert "uncommitted changes" in refused.stderr
    assert sqlite_fingerprint(synced / DB) == before

    allowed = cli("sync", "--allow-dirty", "--json", cwd=synced)
    assert allowed.code == 0, allowed.stderr
    assert allowed.json()["git"]["git_dirty"] is True
    assert cli("task", "show", "mini-task", "--json", cwd=synced).json()["git_dirty"] is True


def test_registry_outside_git_is_refused_unless_allowed(tmp_path: Path, cli: Cli) -> None:
    write_mini_registry(tmp_path / "registry")
    assert cli("init", cwd=tmp_path).code == 0
    refused = cli("sync", cwd=tmp_path)
    assert refused.code == 2
    assert "not in a git repository" in refused.stderr
    allowed = cli("sync", "--allow-dirty", "--json", cwd=tmp_path)
    assert allowed.code == 0
    assert allowed.json()["git"]["git_commit"] is None


def test_database_not_at_head_is_refused_naming_both_revisions(synced: Path, cli: Cli) -> None:
    """docs/cli.md: exit 2 with "run evalops db upgrade"; `verify` reports it as 6.

    The stamp is a revision an older evalops wrote (one of this evalops's own migrations
    before head); a revision this evalops does not ship is a newer one, tested in
    tests/cli/test_fault_messages.py."""
    con = sqlite3.connect(synced / DB)
    con.execute("UPDATE alembic_version SET version_num = '0001'")
    con.commit()
    con.close()
    for args, code in ((["task", "list"], 2), (["sync"], 2), (["verify"], 6)):
        result = cli(*args, cwd=synced)
        assert result.code == code, args
        assert "0001" in result.stderr and HEAD_REVISION in result.stderr
        assert "evalops db upgrade" in result.stderr


def test_missing_database_is_refused(workspace: Path, cli: Cli) -> None:
    result = cli("--json", "task", "list", cwd=workspace)
    assert result.code == 2
    assert "evalops init" in result.json()["error"]["message"]
    assert not (workspace / DB).exists()


def test_db_commands_report_and_move_revisions(synced: Path, cli: Cli) -> None:
    assert cli("db", "current", "--json", cwd=synced).json()["revision"] == HEAD_REVISION
    assert cli("db", "check", cwd=synced).code == 0
    before = sqlite_fingerprint(synced / DB)
    refused = cli("db", "downgrade", "base", "--json", cwd=synced)
    assert refused.code == 5, refused.stdout
    assert "--force-destroy-data" in refused.json()["error"]["message"]
    assert "would be lost: 4 audit events" in refused.stderr
    assert sqlite_fingerprint(synced / DB) == before
    down = cli("db", "downgrade", "base", "--force-destroy-data", "--json", cwd=synced)
    assert down.code == 0 and down.json()["revision"] is None
    assert down.json()["destroyed"] == {"audit events": 4}
    assert cli("db", "check", cwd=synced).code == 6
    assert cli("db", "upgrade", "--json", cwd=synced).json()["revision"] == HEAD_REVISION
