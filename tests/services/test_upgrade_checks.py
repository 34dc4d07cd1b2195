"""`db upgrade` checks before it carries rows forward (docs/verify.md), SQLite and PostgreSQL.

The fixture is the demo database of schema 0001 (tests/fixtures/README.md). Migration 0002
commits to the digest of every row it finds, so an edit made before the upgrade would be
vouched for ever after: the upgrade must first run every check schema 0001 supports, and
refuse (exit 6, the database unchanged) on any mismatch. After a clean upgrade `verify` and
the audit report say from which audit event on the rows are fully covered.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from evalops.services.verify.upgrade_checks import CHECKS
from evalops.store.migrate import alembic_config
from evalops.store.schema import HEAD_REVISION
from tests.conftest import Cli
from tests.helpers import sqlite_fingerprint
from tests.store.test_migration_0002 import FIXTURE, _copy_rows

WAIVER_EDIT = "UPDATE waiver SET expires_at = '2027-12-01 00:00:00.000000'"
MIGRATION_SEQ = 37  # the fixture's chain holds 36 events


def _sqlite_copy(tmp_path: Path, *statements: str) -> tuple[str, Path]:
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURE, db)
    con = sqlite3.connect(db)
    try:
        for statement in statements:
            assert con.execute(statement).rowcount != 0, statement
        con.commit()
    finally:
        con.close()
    return f"sqlite:///{db}", db


@pytest.mark.tampers
@pytest.mark.parametrize(
    ("statement", "named"),
    [
        pytest.param(WAIVER_EDIT, "audit seq 35 (waiver.grant): waiver row 1", id="waiver-expiry"),
        pytest.param(
            "UPDATE waiver SET owner = 'mallory@example.com'", "waiver row 1", id="waiver-owner"
        ),
        pytest.param("DELETE FROM waiver", "audit seq 35 (waiver.grant)", id="waiver-deleted"),
        pytest.param(
            "UPDATE grader_config SET blocking = 0 WHERE blocking = 1",
            "grader_config row",
            id="grader-config-blocking",
        ),
        pytest.param(
            "UPDATE trial SET execution_digest = 'sha256:' || substr(task_digest, 8) WHERE id = 5",
            "trial row 5",
            id="trial-execution",
        ),
        pytest.param(
            "UPDATE gate_decision SET decision = 'pass' WHERE gate_id = 'GATE-1'",
            "gate_decision row 1",
            id="decision",
        ),
        pytest.param(
            "UPDATE suite_membership SET task_id = 'article-citation-format' WHERE id = 1",
            "suite_membership row 1",
            id="membership",
        ),
    ],
)
def test_an_edit_made_before_the_upgrade_is_refused_and_nothing_changes(
    tmp_path: Path, cli: Cli, statement: str, named: str
) -> None:
    url, db = _sqlite_copy(tmp_path, statement)
    before = sqlite_fingerprint(db)
    result = cli("--db", url, "db", "upgrade", cwd=tmp_path)
    assert result.code == 6, result.stdout + result.stderr
    assert "refusing to upgrade from 0001" in result.stderr and named in result.stderr
    assert "the database is unchanged" in result.stderr
    assert sqlite_fingerprint(db) == before


def _pg_state(url: str) -> tuple[object, ...]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return (
                conn.execute(text("SELECT version_num FROM alembic_version")).scalar(),
                conn.execute(text("SELECT count(*) FROM audit_event")).scalar(),
                conn.execute(text("SELECT expires_at FROM waiver")).scalar(),
            )
    finally:
        engine.dispose()


@pytest.mark.tampers
@pytest.mark.postgres
def test_on_postgresql_a_waiver_edited_before_the_upgrade_is_refused(
    tmp_path: Path, cli: Cli, pg_url: str
) -> None:
    assert cli("--db", pg_url, "db", "upgrade", "0001", cwd=tmp_path).code == 0
    _copy_rows(FIXTURE, pg_url)
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(WAIVER_EDIT))
    finally:
        engine.dispose()
    before = _pg_state(pg_url)
    result = cli("--db", pg_url, "db", "upgrade", cwd=tmp_path)
    assert result.code == 6, result.stdout + result.stderr
    assert "audit seq 35 (waiver.grant): waiver row 1 has a expires_at" in result.stderr
    assert _pg_state(pg_url) == before
    assert before[0] == "0001" and before[1] == 36


def test_after_a_clean_upgrade_verify_and_the_report_say_where_full_coverage_starts(
    tmp_path: Path, cli: Cli
) -> None:
    url, _ = _sqlite_copy(tmp_path)
    assert cli("--db", url, "db", "upgrade", cwd=tmp_path).code == 0
    verified = cli("--db", url, "verify", "--json", cwd=tmp_path)
    assert verified.code == 0, verified.stderr
    data = verified.json()
    assert data["rows_fully_covered_from"] == MIGRATION_SEQ
    assert data["carried_forward"] == [{"seq": MIGRATION_SEQ, "migration": "0002"}]
    human = cli("--db", url, "verify", cwd=tmp_path)
    assert f"rows are fully covered from audit seq {MIGRATION_SEQ} on" in human.stdout
    report = cli(
        "--db", url, "report", "audit", "--gate", "GATE-3", "--format", "json", "-o", "-",
        cwd=tmp_path,
    )  # fmt: skip
    assert report.json()["coverage"] == {
        "rows_fully_covered_from": MIGRATION_SEQ,
        "carried_forward": [{"seq": MIGRATION_SEQ, "migration": "0002"}],
    }
    for fmt in ("html", "md"):
        rendered = cli(
            "--db", url, "report", "audit", "--gate", "GATE-3", "--format", fmt, "-o", "-",
            cwd=tmp_path,
        )  # fmt: skip
        assert f"from audit seq {MIGRATION_SEQ} on" in rendered.stdout


def test_every_older_schema_has_its_checks() -> None:
    """A migration that moves the head on must bring the checks of the schema it leaves."""
    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    older = {s.revision for s in scripts.walk_revisions()} - {HEAD_REVISION}
    assert older and older <= set(CHECKS)


EVALUATOR2_FIXTURE = FIXTURE.parent / "registry-evaluator2-demo.db"
"""The demo database of schema 0002 (made by evalops before signed acts, migration 0003)."""


def _copy_0002(tmp_path: Path, *statements: str) -> tuple[str, Path]:
    db = tmp_path / "registry-0002.db"
    shutil.copy(EVALUATOR2_FIXTURE, db)
    con = sqlite3.connect(db)
    try:
        assert con.execute("select version_num from alembic_version").fetchone()[0] == "0002"
        for statement in statements:
            assert con.execute(statement).rowcount != 0, statement
        con.commit()
    finally:
        con.close()
    return f"sqlite:///{db}", db


@pytest.mark.tampers
def test_an_edit_of_a_0002_database_is_refused_before_the_upgrade(tmp_path: Path, cli: Cli) -> None:
    """Migration 0003 would vouch for every row it carries: an edit made before must be
    caught first, by the checks schema 0002 supports (row digests, decisions)."""
    url, db = _copy_0002(tmp_path, "update waiver set reason = 'approved by nobody'")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    result = cli("--db", url, "db", "upgrade", cwd=tmp_path)
    assert result.code == 6, result.stdout + result.stderr
    assert "refusing to upgrade from 0002" in result.stderr and "waiver" in result.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_clean_0002_database_upgrades_and_verifies(tmp_path: Path, cli: Cli) -> None:
    url, _ = _copy_0002(tmp_path)
    assert cli("--db", url, "db", "upgrade", cwd=tmp_path).code == 0
    verified = cli("--db", url, "verify", cwd=tmp_path)
    assert verified.code == 0, verified.stderr
