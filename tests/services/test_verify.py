"""`evalops verify`: the audit chain and every stored spec re-hash, or exit 6 naming the item."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.trial_factory import mini_case, record, write_jsonl


def _db(workspace: Path) -> sqlite3.Connection:
    return sqlite3.connect(workspace / ".evalops" / "registry.db")


def _tamper(workspace: Path, *statements: str) -> None:
    con = _db(workspace)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def test_untouched_database_verifies(synced: Path, cli: Cli) -> None:
    result = cli("verify", "--json", cwd=synced)
    assert result.code == 0, result.stderr
    data = result.json()
    head = data.pop("audit_head")
    # The registry's id (docs/authority.md): a random UUID its first audit event records.
    registry_id = data.pop("registry_id")
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        registry_id)  # fmt: skip
    con = _db(synced)
    (first,) = con.execute("SELECT payload FROM audit_event WHERE seq = 1").fetchone()
    con.close()
    assert json.loads(first)["registry_id"] == registry_id
    assert data == {
        "ok": True,
        "events": 4,  # three definitions registered, then the set put in force
        "rows": 9,  # 3 definitions + 2 grader configs + the sync run + 3 in-force rows
        "definitions": 3,
        "trials": 0,
        "decisions": 0,
        "estimates": 0,
        "anchors": [],
        "rows_fully_covered_from": 1,  # nothing carried forward from an older schema
        "carried_forward": [],
        # The one sync, re-checked against the registry's git history.
        "rule_history": {"checked": 1, "skipped": None, "unknown_commits": []},
    }
    assert head["seq"] == 4 and head["hash"].startswith("sha256:")


@pytest.mark.parametrize(
    ("statements", "named"),
    [
        pytest.param(
            ["UPDATE audit_event SET actor = 'mallory@example.com' WHERE seq = 2"],
            "audit seq 2: hash mismatch",
            id="edit-actor",
        ),
        pytest.param(
            ["UPDATE audit_event SET at = '2020-01-01 00:00:00.000000' WHERE seq = 3"],
            "audit seq 3: hash mismatch",
            id="edit-timestamp",
        ),
        pytest.param(
            ["DELETE FROM audit_event WHERE seq = 2"],
            "audit seq 2: missing",
            id="delete",
        ),
        pytest.param(
            [
                "UPDATE audit_event SET seq = -1 WHERE seq = 1",
                "UPDATE audit_event SET seq = 1 WHERE seq = 2",
                "UPDATE audit_event SET seq = 2 WHERE seq = -1",
            ],
            "audit seq 1: prev_hash does not link",
            id="reorder",
        ),
        pytest.param(
            ["UPDATE audit_event SET payload = replace(payload, 'mini', 'mallory') WHERE seq = 3"],
            "audit seq 3: payload does not match payload_digest",
            id="edit-payload",
        ),
    ],
)
def test_tampered_chain_exits_6_naming_the_first_bad_seq(
    synced: Path, cli: Cli, statements: list[str], named: str
) -> None:
    _tamper(synced, *statements)
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert named in result.stderr


def test_edited_spec_exits_6(synced: Path, cli: Cli) -> None:
    _tamper(
        synced,
        "UPDATE task_revision SET document = replace(document, 'do_the_thing', 'do_another')",
    )
    result = cli("verify", "--json", cwd=synced)
    assert result.code == 6
    error = result.json()["error"]
    assert error["code"] == 6
    assert "task mini-task@1" in error["message"]
    assert "document_digest" in error["message"]


def test_spec_rewritten_with_matching_digests_is_still_caught(synced: Path, cli: Cli) -> None:
    """Recomputing every digest column does not help: the audit event recorded the original."""
    import json

    from evalops.domain.canonical import canonical_text, sha256_digest
    from evalops.domain.digests import task_digest

    con = _db(synced)
    try:
        (document,) = con.execute("SELECT document FROM task_revision").fetchone()
        value = json.loads(document)
        value["contract"]["goal"] = "do_something_else"
        forged = canonical_text(value)
        con.execute(
            "UPDATE task_revision SET document = ?, document_digest = ?, task_digest = ?",
            (forged, sha256_digest(forged.encode()), task_digest(value)),
        )
        con.commit()
    finally:
        con.close()
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert "audit seq 2 (sync.task task:mini-task@1): task_revision row 1 changed" in result.stderr


def test_deleted_definition_row_is_caught(synced: Path, cli: Cli) -> None:
    _tamper(synced, "DELETE FROM execution_profile")
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert "execution_profile:mini-b1" in result.stderr
    assert "its 1 execution_profile row(s) are gone" in result.stderr


@pytest.mark.postgres
def test_verify_on_postgresql_detects_an_edit(workspace: Path, cli: Cli, pg_url: str) -> None:
    import psycopg

    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    assert cli("--db", pg_url, "verify", cwd=workspace).code == 0
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("UPDATE audit_event SET subject = 'task:other@1' WHERE seq = 2")
    result = cli("--db", pg_url, "verify", cwd=workspace)
    assert result.code == 6
    assert "audit seq 2: hash mismatch" in result.stderr


def _ingested(synced: Path, cli: Cli) -> None:
    case = mini_case(synced)
    path = write_jsonl(
        synced / "t.jsonl", [record(case, trial_id=f"t-{i}", trial_index=i) for i in range(2)]
    )
    assert cli("trials", "ingest", str(path), cwd=synced).code == 0
    assert cli("verify", cwd=synced).code == 0


def test_edited_trial_record_is_caught(synced: Path, cli: Cli) -> None:
    _ingested(synced, cli)
    _tamper(synced, "UPDATE trial SET record = replace(record, 'run-1', 'run-9') WHERE id = 1")
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert "trial t-0: stored record was changed" in result.stderr


def test_trial_rewritten_with_its_own_digest_is_still_caught(synced: Path, cli: Cli) -> None:
    """Recomputing stored_digest does not help: the batch's audit event committed to it."""
    from evalops.domain.canonical import sha256_digest

    _ingested(synced, cli)
    con = _db(synced)
    try:
        (text,) = con.execute("SELECT record FROM trial WHERE id = 1").fetchone()
        forged = text.replace("run-1", "run-9")
        con.execute(
            "UPDATE trial SET record = ?, stored_digest = ? WHERE id = 1",
            (forged, sha256_digest(forged.encode())),
        )
        con.commit()
    finally:
        con.close()
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert "(trials.ingest ingest:1): trial rows 1, 2 changed since the event" in result.stderr


def test_deleted_trial_is_caught(synced: Path, cli: Cli) -> None:
    _ingested(synced, cli)
    _tamper(synced, "DELETE FROM trial WHERE id = 2")
    result = cli("verify", cwd=synced)
    assert result.code == 6
    assert "(trials.ingest ingest:1): recorded 2 trial row(s), 1 are stored" in result.stderr
