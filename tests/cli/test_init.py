"""`evalops init` on databases that are not empty goes through the migrations, as before
a fresh database was created from the models (docs/verify.md, "The database"): a foreign
database is extended or refused exactly as the migrations do it, one at an older revision
is checked and carried forward, and a damaged file is refused unchanged.

Every case records whether the migrations ran (a spy on `evalops.store.migrate.upgrade`);
the expected outputs are what `init` printed before the fresh-create path existed.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalops.store.schema import HEAD_REVISION
from tests.conftest import Cli
from tests.helpers import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"


@pytest.fixture
def migrations_ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The revisions `migrate.upgrade` was asked for, in order."""
    from evalops.store import migrate

    asked: list[str] = []
    real = migrate.upgrade

    def spy(url: str, engine: Any, revision: str = "head") -> None:
        asked.append(revision)
        real(url, engine, revision)

    monkeypatch.setattr(migrate, "upgrade", spy)
    return asked


def _objects(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return sorted(con.execute("SELECT type, name FROM sqlite_master").fetchall())
    finally:
        con.close()


def _evalops_objects() -> set[str]:
    from sqlmodel import SQLModel

    import evalops.store.tables  # noqa: F401  (registers every table)

    names = {"alembic_version", *SQLModel.metadata.tables}
    for table in SQLModel.metadata.tables.values():
        names |= {str(i.name) for i in table.indexes}
    return names


@pytest.mark.parametrize(
    "foreign",
    [
        pytest.param(["CREATE TABLE notes (x TEXT)", "INSERT INTO notes VALUES ('kept')"],
                     id="table"),
        pytest.param(["CREATE VIEW answer AS SELECT 42 AS x"], id="view"),
    ],
)  # fmt: skip
def test_a_foreign_database_gets_the_migrations_beside_what_it_holds(
    tmp_path: Path, cli: Cli, migrations_ran: list[str], foreign: list[str]
) -> None:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    for statement in foreign:
        con.execute(statement)
    con.commit()
    con.close()
    before = set(_objects(db))
    done = cli("--db", f"sqlite:///{db}", "--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["revision"] == HEAD_REVISION
    assert migrations_ran == ["head"]
    after = set(_objects(db))
    assert before <= after
    added = {name for _, name in after - before}
    assert {n for n in added if not n.startswith("sqlite_autoindex_")} == _evalops_objects()
    if "notes" in {name for _, name in before}:
        con = sqlite3.connect(db)
        assert con.execute("SELECT x FROM notes").fetchall() == [("kept",)]
        con.close()


def test_a_foreign_table_of_an_evalops_name_is_refused_and_nothing_changes(
    tmp_path: Path, cli: Cli, migrations_ran: list[str]
) -> None:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE trial (x TEXT)")
    con.commit()
    con.close()
    done = cli("--db", f"sqlite:///{db}", "init", cwd=tmp_path)
    assert done.code == 2
    assert done.stderr == (
        f"error: --db: cannot open database sqlite:///{db}: table trial already exists\n"
    )
    assert migrations_ran == ["head"]
    assert _objects(db) == [("table", "trial")]


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(
    tmp_path: Path, cli: Cli, migrations_ran: list[str]
) -> None:
    db = tmp_path / "other.db"
    content = b"not a database at all\n" * 100
    db.write_bytes(content)
    done = cli("--db", f"sqlite:///{db}", "init", cwd=tmp_path)
    assert done.code == 2
    assert done.stderr == (
        f"error: --db: cannot open database sqlite:///{db}: file is not a database\n"
    )
    assert migrations_ran == []  # refused while reading its revision
    assert db.read_bytes() == content


def test_a_database_downgraded_to_base_is_migrated_again(
    tmp_path: Path, cli: Cli, migrations_ran: list[str]
) -> None:
    """Only `alembic_version` left (no rows): not empty, so the migrations run."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    assert cli("--db", url, "init", cwd=tmp_path).code == 0
    assert cli("--db", url, "db", "downgrade", "base", cwd=tmp_path).code == 0
    assert _objects(tmp_path / "registry.db") == [
        ("index", "sqlite_autoindex_alembic_version_1"),
        ("table", "alembic_version"),
    ]
    migrations_ran.clear()
    done = cli("--db", url, "--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.json()["revision"] == HEAD_REVISION
    assert migrations_ran == ["head"]
    assert cli("--db", url, "db", "check", cwd=tmp_path).code == 0


@pytest.mark.parametrize(
    ("fixture", "revision", "events_added"),
    [("registry-0001-demo.db", "0001", 2), ("registry-evaluator2-demo.db", "0002", 0)],
)
def test_init_on_an_older_revision_checks_and_migrates_it(
    tmp_path: Path,
    cli: Cli,
    migrations_ran: list[str],
    fixture: str,
    revision: str,
    events_added: int,
) -> None:
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURES / fixture, db)
    url = f"sqlite:///{db}"
    current = cli("--db", url, "--json", "db", "current", cwd=tmp_path)
    assert current.json()["revision"] == revision
    con = sqlite3.connect(db)
    (events,) = con.execute("SELECT count(*) FROM audit_event").fetchone()
    con.close()
    done = cli("--db", url, "--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["revision"] == HEAD_REVISION
    assert migrations_ran == ["head"]
    con = sqlite3.connect(db)
    # 0002 records the rows it carried forward in the chain (migration.rows, .in_force).
    assert con.execute("SELECT count(*) FROM audit_event").fetchone() == (events + events_added,)
    con.close()
