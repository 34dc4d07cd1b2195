"""The everyday read commands read without SQLAlchemy on SQLite, and read alike on both engines.

Their speed is measured by benchmarks/read_commands.py, never here: these tests check which
modules a read command loads in a fresh interpreter (so a module that creeps back onto
their path fails a test, not only the benchmark), that the plain `sqlite3` reader and the
SQLAlchemy one give the same documents, that PostgreSQL still reads through the latter, and
that `trials list` and `calibration status` print, in JSON and for people, what they printed
through the ORM (tests/services/test_read_differential.py compares the two readings under
every filter, on both engines).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PINNED_NOW, Cli
from tests.golden_reports import READS, READS_GOLDEN, reads_name

REPO = Path(__file__).resolve().parents[2]

#: What the read commands no longer import on a SQLite registry.
OFF_THE_READ_PATH = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "pydantic",
    "scipy",
    "jinja2",
    "git",
    "evalops.store.tables",
    "evalops.domain.specs",
)

READ_COMMANDS = [
    ["gate", "list"],
    ["gate", "show", "GATE-3"],
    ["incident", "list"],
    ["waiver", "list", "--all"],
    ["suite", "show", "regression/core", "--all"],
    ["trials", "list"],
    ["trials", "list", "--class", "task_pass", "--suite", "regression/core", "--limit", "3"],
    ["calibration", "status"],
]


def _loaded_by(
    argv: list[str], cwd: Path, modules: tuple[str, ...] = OFF_THE_READ_PATH
) -> tuple[int, dict[str, bool]]:
    """Run `evalops ARGV` in a fresh interpreter in `cwd`: its exit code, and which of
    `modules` it imported."""
    script = (
        "import contextlib, io, json, sys\n"
        "from evalops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        f"print(json.dumps([code, {{m: m in sys.modules for m in {modules!r}}}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "EVALOPS_NOW": PINNED_NOW},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return int(code), loaded


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_read_commands_on_sqlite_load_no_database_or_model_code(
    argv: list[str], demo: Path
) -> None:
    code, loaded = _loaded_by(argv, demo)
    assert code == 0
    assert not any(loaded.values()), [m for m, yes in loaded.items() if yes]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_the_sqlite3_reader_and_the_sqlalchemy_reader_agree(
    argv: list[str], demo: Path, cli: Cli
) -> None:
    # `sqlite+pysqlite://` is the same file through SQLAlchemy (the path PostgreSQL takes).
    through_sqlalchemy = f"sqlite+pysqlite:///{demo / '.evalops' / 'registry.db'}"
    fast = cli("--json", *argv, cwd=demo)
    engine = cli("--db", through_sqlalchemy, "--json", *argv, cwd=demo)
    assert fast.code == engine.code == 0, (fast.stderr, engine.stderr)
    assert json.loads(fast.stdout) == json.loads(engine.stdout)
    assert json.loads(fast.stdout)  # the demo has something to show for each


@pytest.mark.parametrize("include_removed", [False, True])
def test_suite_show_reads_what_the_suite_card_reads(demo: Path, include_removed: bool) -> None:
    """The suite card still reads its suite through the ORM (services/registry/suites.py); both
    readings of a suite are the same document."""
    from evalops.services.database import open_database
    from evalops.services.reads.listings import show_suite
    from evalops.services.registry.suites import show_suite as orm_show_suite
    from evalops.store.reader import engine_reader

    engine = open_database(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        with engine_reader(engine) as reader:
            plain = show_suite(reader, "regression/core", include_removed=include_removed)
        orm = orm_show_suite(engine, "regression/core", include_removed=include_removed)
    finally:
        engine.dispose()
    assert plain == orm
    assert len(plain["members"]) == 3


def test_an_unknown_gate_decision_is_the_same_usage_error(demo: Path, cli: Cli) -> None:
    done = cli("gate", "show", "GATE-99", cwd=demo)
    assert done.code == 2
    assert "unknown gate decision 'GATE-99'" in done.stderr


def test_a_database_not_at_head_is_refused_before_reading(demo: Path, cli: Cli) -> None:
    import sqlite3

    with sqlite3.connect(demo / ".evalops" / "registry.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    done = cli("gate", "list", cwd=demo)
    assert done.code == 2
    assert "is at revision 0002, evalops needs" in done.stderr
    assert "run `evalops db upgrade`" in done.stderr


def test_reads_give_the_same_documents_on_both_engines(
    workspace: Path, cli: Cli, synced_store: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incident and its state read back as written, timestamps in evalops's one spelling,
    whichever engine stores them (PostgreSQL returns aware datetimes, SQLite naive text)."""
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    monkeypatch.setenv("EVALOPS_ACTOR", "reader@example.com")
    opened = cli(
        *synced_store, "incident", "open", "--title", "refund promised twice", "--severity",
        "high", "--observed-at", "2026-11-02T10:14:00+01:00", "--trace-uri", "trace://x/1",
        cwd=workspace,
    )  # fmt: skip
    assert opened.code == 0, opened.stderr
    assert cli(*synced_store, "incident", "confirm", "INC-1", cwd=workspace).code == 0
    listed = cli(*synced_store, "--json", "incident", "list", cwd=workspace)
    assert listed.code == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {
            "incident_id": "INC-1",
            "state": "confirmed",
            "title": "refund promised twice",
            "severity": "high",
            "observed_at": "2026-11-02T09:14:00.000000Z",
            "trace_uri": "trace://x/1",
            "description": None,
            "tasks": [],
            "opened_at": "2026-11-30T12:00:00.000000Z",
            "opened_by": "reader@example.com",
        }
    ]
    for argv in (["gate", "list"], ["waiver", "list", "--all"]):
        empty = cli(*synced_store, "--json", *argv, cwd=workspace)
        assert (empty.code, json.loads(empty.stdout)) == (0, [])
    unknown = cli(*synced_store, "gate", "show", "GATE-1", cwd=workspace)
    assert unknown.code == 2
    assert "unknown gate decision 'GATE-1'" in unknown.stderr


# -- trials list, calibration status, trials show: what they printed when written twice -----


@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
@pytest.mark.parametrize("argv", READS, ids=" ".join)
def test_the_read_commands_print_what_they_printed(
    argv: tuple[str, ...], as_json: bool, demo: Path, cli: Cli
) -> None:
    """These listings were once read twice, through the ORM services and through the Reader
    (tests/golden/reads/ holds what both printed then, byte for byte); one reading is left.
    `make golden-reports` rewrites the files, only for an intended change."""
    args = ["--json", *argv] if as_json else list(argv)
    done = cli(*args, cwd=demo)
    shown = (
        f"$ evalops {' '.join(args)}\nexit {done.code}\n--- stdout\n{done.stdout}"
        f"--- stderr\n{done.stderr}"
    )
    golden = (READS_GOLDEN / reads_name(argv, as_json)).read_text(encoding="utf-8")
    assert shown == golden


def test_every_read_golden_file_is_checked() -> None:
    named = {reads_name(argv, as_json) for argv in READS for as_json in (False, True)}
    assert {p.name for p in READS_GOLDEN.iterdir()} == named


#: What `verify` does not import on a SQLite registry (it replays decisions, so it needs the
#: evaluator's pydantic models; scipy only past 15 paired trials, which the demo has not,
#: and scipy.special for a stored estimate's t interval; never scipy.stats).
OFF_THE_VERIFY_PATH = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "scipy",
    "scipy.stats",
    "jinja2",
    "git",
    "evalops.store.tables",
    "evalops.store.engine",
)


def test_verify_on_sqlite_loads_no_database_or_table_code(demo: Path) -> None:
    """`verify` reads a SQLite registry with sqlite3 alone. scipy is loaded only to
    recompute a stored estimate's paired comparison (its t interval: `scipy.special`, what
    `scipy.stats.t.ppf` computes inside, without the second of importing `scipy.stats`),
    and the demo stores one; nothing else of the list."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(demo / ".evalops" / "registry.db")) as conn:
        comparisons = conn.execute(
            "SELECT count(*) FROM estimate WHERE baseline IS NOT NULL"
        ).fetchone()[0]
    assert comparisons > 0, "the demo stores a comparison; else scipy must stay unloaded"
    code, loaded = _loaded_by(["verify"], demo, OFF_THE_VERIFY_PATH)
    assert code == 0
    unexpected = [m for m, yes in loaded.items() if yes and m != "scipy"]
    assert not unexpected, unexpected


def test_verify_through_sqlite3_and_through_sqlalchemy_says_the_same(demo: Path, cli: Cli) -> None:
    through_sqlalchemy = f"sqlite+pysqlite:///{demo / '.evalops' / 'registry.db'}"
    fast = cli("verify", "--json", cwd=demo)
    engine = cli("--db", through_sqlalchemy, "verify", "--json", cwd=demo)
    assert fast.code == engine.code == 0, (fast.stderr, engine.stderr)
    assert json.loads(fast.stdout) == json.loads(engine.stdout)
    assert json.loads(fast.stdout)["decisions"] == 3


@pytest.mark.tampers
def test_a_tampered_decision_fails_verify_alike_through_both_readers(demo: Path, cli: Cli) -> None:
    import sqlite3
    from contextlib import closing

    db = demo / ".evalops" / "registry.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "UPDATE trial SET classification = 'task_fail' WHERE id = (SELECT MIN(id) FROM "
            "trial WHERE classification = 'task_pass')"
        )
        conn.commit()
    fast = cli("verify", cwd=demo)
    engine = cli("--db", f"sqlite+pysqlite:///{db}", "verify", cwd=demo)
    assert fast.code == engine.code == 6
    assert fast.stderr == engine.stderr
    assert "changed since the event recorded them" in fast.stderr
