"""Migration 0002 carries an existing registry forward, on SQLite and PostgreSQL.

The fixture is the demo database made by evalops before the decision-integrity
rulings (schema 0001, tests/fixtures/README.md). After `evalops db upgrade`:
- every row is still there and `verify` passes, old gate decisions replaying under the
  evaluator they were made with;
- the rows that existed before are covered by the chain (a direct edit of one is caught);
- the newest registered definitions are in force, recorded by an audit event;
- legacy reconciliations settle the effect they meant;
- new decisions can be made and verified.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, select, text

from tests.conftest import Cli
from tests.helpers import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "registry-0001-demo.db"
COUNTED = (
    "audit_event", "trial", "gate_decision", "waiver", "calibration", "incident",
    "suite_membership", "reconciliation", "task_revision",
)  # fmt: skip


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() or 0)
                    for t in COUNTED}  # fmt: skip
    finally:
        engine.dispose()


def _upgrade_and_check(cli: Cli, url: str, cwd: Path) -> None:
    before = _counts(url)
    upgraded = cli("--db", url, "db", "upgrade", "--json", cwd=cwd)
    assert upgraded.code == 0, upgraded.stdout + upgraded.stderr
    after = _counts(url)
    # Nothing lost; the chain grew by the two events that record the migration itself.
    assert {k: v for k, v in after.items() if k != "audit_event"} == {
        k: v for k, v in before.items() if k != "audit_event"
    }
    assert after["audit_event"] == before["audit_event"] + 2
    verified = cli("--db", url, "verify", "--json", cwd=cwd)
    assert verified.code == 0, verified.stdout + verified.stderr
    assert verified.json()["decisions"] == 3
    for gate_id in ("GATE-1", "GATE-2", "GATE-3"):
        replayed = cli("--db", url, "gate", "replay", gate_id, "--json", cwd=cwd)
        assert replayed.json()["identical"] is True, replayed.stdout
    # New decisions work on the carried-forward registry, and verify rebuilds them.
    new = cli("--db", url, "gate", "check", "--build", "build-124", "--suite",
              "regression/core", "--json", cwd=cwd)  # fmt: skip
    assert new.code == 4, new.stdout + new.stderr
    assert cli("--db", url, "verify", cwd=cwd).code == 0


def test_sqlite_0001_demo_upgrades_and_verifies(tmp_path: Path, cli: Cli) -> None:
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURE, db)
    url = f"sqlite:///{db}"
    _upgrade_and_check(cli, url, tmp_path)
    con = sqlite3.connect(db)
    try:
        kinds = [k for (k,) in con.execute("SELECT kind FROM audit_event ORDER BY seq")]
        assert kinds[36:38] == ["migration.rows", "migration.in_force"]
        forced = con.execute("SELECT count(*) FROM sync_in_force").fetchone()[0]
        assert forced == 17  # every definition of the example registry
        settled = con.execute("SELECT effect_key, effect_index FROM reconciliation").fetchall()
        assert settled == [("publish:article-42", 0)]
    finally:
        con.close()


def test_a_0001_database_its_checks_cannot_read_is_exit_2_and_left_as_it_was(
    tmp_path: Path, cli: Cli
) -> None:
    """The checks before an upgrade read through the readers, which raise the driver's
    own error (`sqlite3`'s, not SQLAlchemy's): a database they cannot read, a column of its
    schema renamed by hand, is a damaged database naming its cause (exit 6, as for every
    command), not an internal error, and nothing is written."""
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURE, db)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE audit_event RENAME COLUMN hash TO hash_gone")
    con.commit()
    con.close()
    before = db.read_bytes()
    result = cli("--db", f"sqlite:///{db}", "db", "upgrade", cwd=tmp_path)
    assert result.code == 6, result.stdout + result.stderr
    assert "is damaged" in result.stderr and "no such column: hash" in result.stderr
    assert "internal error" not in result.stderr and "bug" not in result.stderr
    assert db.read_bytes() == before


@pytest.mark.tampers
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE waiver SET expires_at = '2027-12-01 00:00:00.000000'",
        "DELETE FROM waiver_revocation",  # none in the demo: harmless, verify stays ok
        "UPDATE trial SET classification = 'task_pass' WHERE classification != 'task_pass'",
        "DELETE FROM suite_membership WHERE task_id = 'support-refund-in-order'",
        "UPDATE grader_config SET blocking = 0",
    ],
)
def test_rows_from_before_the_migration_are_covered_by_the_chain(
    tmp_path: Path, cli: Cli, statement: str
) -> None:
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURE, db)
    url = f"sqlite:///{db}"
    assert cli("--db", url, "db", "upgrade", cwd=tmp_path).code == 0
    con = sqlite3.connect(db)
    changed = con.execute(statement).rowcount
    con.commit()
    con.close()
    result = cli("--db", url, "verify", cwd=tmp_path)
    assert result.code == (6 if changed else 0), result.stderr


def _copy_rows(source: Path, url: str) -> None:
    """Load the 0001 fixture's rows into a PostgreSQL database at 0001."""
    src = create_engine(f"sqlite:///{source}")
    dst = create_engine(url)
    meta = MetaData()
    meta.reflect(dst)
    try:
        with src.connect() as s, dst.begin() as d:
            for table in meta.sorted_tables:
                if table.name == "alembic_version":
                    continue
                rows = [dict(r._mapping) for r in s.execute(select(table))]
                if rows:
                    d.execute(table.insert(), rows)
                if "id" in table.c and table.c.id.autoincrement is not False and rows:
                    d.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                            f"(SELECT max(id) FROM {table.name}))"
                        )
                    )
    finally:
        src.dispose()
        dst.dispose()


@pytest.mark.postgres
def test_postgresql_0001_demo_upgrades_and_verifies(tmp_path: Path, cli: Cli, pg_url: str) -> None:
    assert cli("--db", pg_url, "db", "upgrade", "0001", cwd=tmp_path).code == 0
    _copy_rows(FIXTURE, pg_url)
    _upgrade_and_check(cli, pg_url, tmp_path)
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            payload = conn.execute(
                text("SELECT payload FROM audit_event WHERE kind = 'migration.rows'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert set(json.loads(payload)["legacy_rows"]) == {str(s) for s in range(1, 37)}
