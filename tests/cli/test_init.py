"""`evalops init` creates an empty database at head from the models in one step, and goes
through the migrations for any other (docs/verify.md, "The database"): a foreign database is
extended or refused exactly as the migrations do it, one at an older revision is checked and
carried forward, and a damaged file is refused unchanged. `db upgrade` always migrates.

Every case records whether the migrations ran (a spy on `evalops.store.migrate.upgrade`);
the expected outputs of the non-empty cases are what `init` printed before the fresh-create
path existed. That the created schema is the migrated one: tests/store/test_fresh_schema.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from evalops.store.schema import HEAD_REVISION
from tests.conftest import Cli
from tests.helpers import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"


@dataclass
class Paths:
    """What each call of `fresh.create_at_head` answered (True: it created the schema),
    and the revisions `migrate.upgrade` (the migrations) was asked for, in order."""

    created: list[bool] = field(default_factory=list)
    migrated: list[str] = field(default_factory=list)

    def taken(self) -> tuple[list[bool], list[str]]:
        return self.created, self.migrated


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    from evalops.store import fresh, migrate

    seen = Paths()
    create_at_head, upgrade = fresh.create_at_head, migrate.upgrade

    def create_spy(engine: Any) -> bool:
        seen.created.append(create_at_head(engine))
        return seen.created[-1]

    def upgrade_spy(url: str, engine: Any, revision: str = "head") -> None:
        seen.migrated.append(revision)
        upgrade(url, engine, revision)

    monkeypatch.setattr(fresh, "create_at_head", create_spy)
    monkeypatch.setattr(migrate, "upgrade", upgrade_spy)
    return seen


@pytest.mark.parametrize(
    "where", ["new-file", "empty-file", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_init_creates_an_empty_database_at_head_without_the_migrations(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    cli: Cli,
    paths: Paths,
    where: str,
) -> None:
    if where == "postgresql":
        url = request.getfixturevalue("pg_url")
    else:
        db = tmp_path / "sub" / "registry.db"
        if where == "empty-file":
            db.parent.mkdir()
            db.touch()
        url = f"sqlite:///{db}"
    done = cli("--db", url, "--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["revision"] == done.json()["head"] == HEAD_REVISION
    assert paths.taken() == ([True], [])
    # Alembic's own comparison of the models with the database finds nothing to do.
    assert cli("--db", url, "db", "check", cwd=tmp_path).code == 0
    again = cli("--db", url, "--json", "init", cwd=tmp_path)
    assert again.code == 0 and again.json()["revision"] == HEAD_REVISION
    assert paths.taken() == ([True, False], ["head"])


def test_db_upgrade_of_an_empty_database_still_runs_the_migrations(
    tmp_path: Path, cli: Cli, paths: Paths
) -> None:
    db = tmp_path / "registry.db"
    db.touch()
    done = cli("--db", f"sqlite:///{db}", "--json", "db", "upgrade", cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["revision"] == HEAD_REVISION
    assert paths.taken() == ([], ["head"])


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
    tmp_path: Path,
    cli: Cli,
    paths: Paths,
    foreign: list[str],
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
    assert paths.taken() == ([False], ["head"])
    after = set(_objects(db))
    assert before <= after
    added = {name for _, name in after - before}
    assert {n for n in added if not n.startswith("sqlite_autoindex_")} == _evalops_objects()
    if "notes" in {name for _, name in before}:
        con = sqlite3.connect(db)
        assert con.execute("SELECT x FROM notes").fetchall() == [("kept",)]
        con.close()


def test_a_foreign_table_of_an_evalops_name_is_refused_and_nothing_changes(
    tmp_path: Path, cli: Cli, paths: Paths
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
    assert paths.taken() == ([False], ["head"])
    assert _objects(db) == [("table", "trial")]


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(
    tmp_path: Path, cli: Cli, paths: Paths
) -> None:
    db = tmp_path / "other.db"
    content = b"not a database at all\n" * 100
    db.write_bytes(content)
    done = cli("--db", f"sqlite:///{db}", "init", cwd=tmp_path)
    assert done.code == 2
    assert done.stderr == (
        f"error: --db: cannot open database sqlite:///{db}: file is not a database\n"
    )
    assert paths.taken() == ([], [])  # refused reading its revision
    assert db.read_bytes() == content


def test_a_database_downgraded_to_base_is_migrated_again(
    tmp_path: Path, cli: Cli, paths: Paths
) -> None:
    """Only `alembic_version` left (no rows): not empty, so the migrations run."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    assert cli("--db", url, "init", cwd=tmp_path).code == 0
    assert cli("--db", url, "db", "downgrade", "base", cwd=tmp_path).code == 0
    assert _objects(tmp_path / "registry.db") == [
        ("index", "sqlite_autoindex_alembic_version_1"),
        ("table", "alembic_version"),
    ]
    paths.created.clear()
    paths.migrated.clear()
    done = cli("--db", url, "--json", "init", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.json()["revision"] == HEAD_REVISION
    assert paths.taken() == ([False], ["head"])
    assert cli("--db", url, "db", "check", cwd=tmp_path).code == 0


# Fixture databases at older revisions (tests/fixtures/README.md), and the audit events
# their migration adds: 0002 records the rows it carried forward (migration.rows, .in_force).
OLDER = {"0001": ("registry-0001-demo.db", 2), "0002": ("registry-evaluator2-demo.db", 0)}


@pytest.mark.parametrize("revision", OLDER)
def test_init_on_an_older_revision_checks_and_migrates_it(
    tmp_path: Path, cli: Cli, paths: Paths, revision: str
) -> None:
    fixture, events_added = OLDER[revision]
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
    assert paths.taken() == ([False], ["head"])
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM audit_event").fetchone() == (events + events_added,)
    con.close()


@pytest.mark.tampers
def test_init_on_an_edited_older_database_refuses_before_migrating(
    tmp_path: Path, cli: Cli, paths: Paths
) -> None:
    db = tmp_path / "registry.db"
    shutil.copy(FIXTURES / OLDER["0001"][0], db)
    con = sqlite3.connect(db)
    con.execute("UPDATE waiver SET reason = 'edited' WHERE id = (SELECT min(id) FROM waiver)")
    con.commit()
    con.close()
    content = db.read_bytes()
    done = cli("--db", f"sqlite:///{db}", "init", cwd=tmp_path)
    assert done.code == 6, done.stdout + done.stderr
    assert "refusing to upgrade from 0001" in done.stderr
    assert paths.taken() == ([], [])
    assert db.read_bytes() == content
