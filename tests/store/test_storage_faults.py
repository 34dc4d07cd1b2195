"""Storage faults, injected for real, are named by their cause (docs/troubleshooting.md).

Each fault runs the real `evalops` in a process of its own (forked from the test process,
tests/forked.py: what it prints is what a user's process prints, Python's last-resort
logging included) against a real file or server: a file-size
limit (`ulimit -f`, SIGXFSZ ignored so the write fails instead of killing the process), a
filesystem too small for the ingest, a PostgreSQL backend terminated mid-ingest, index and
table pages of a SQLite file overwritten, a database stamped with a revision newer than this
evalops, an exclusive lock held by another process, and a read-only directory. Each asserts
the exit code docs/cli.md gives, a message naming the database, the cause, what to do and
that nothing was stored (never "a bug in evalops", never SQL, parameters or a link into
SQLAlchemy's docs), and that `verify` says of the faulted database exactly what it says of
an untouched copy (`verify` itself, and the commands that show the fault went away, run
in the test process: they need no process boundary).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from evalops.errors import BUSY_MESSAGE
from evalops.store.schema import HEAD_REVISION
from tests import forked
from tests.conftest import Cli
from tests.helpers import CliResult, sqlite_fingerprint
from tests.trial_factory import mini_case, record, write_jsonl

FORBIDDEN = (
    "bug in evalops",
    "internal error",
    "Traceback",
    "sqlalche.me",
    "Background on this error",
    "INSERT",
    "SELECT",
    "[parameters",
    "[SQL",
)


def _sqlite_db(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


def evalops(cwd: Path, url: str, *args: str, limit: int | None = None) -> CliResult:
    """`evalops ARGS` in a process of its own; `limit`: its file-size limit in bytes."""

    def file_size_limit() -> None:
        assert limit is not None
        # Ignored, SIGXFSZ no longer kills the process: the write fails with EFBIG instead.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = forked.child_env(url, "faults@example.com")
    before = file_size_limit if limit is not None else None
    return forked.start(list(args), cwd, env, _sqlite_db(url), before).wait()


def assert_named(
    result: CliResult,
    code: int,
    *phrases: str,
    outcome: str | None = "nothing was stored",
) -> None:
    """Exit `code`; stderr holds every phrase, and says what became of the database."""
    both = result.stdout + result.stderr
    assert result.code == code, both
    for phrase in (*phrases, *([outcome] if outcome else [])):
        assert phrase in result.stderr, (phrase, both)
    for word in FORBIDDEN:
        assert word not in both, (word, both)
    assert len(result.stderr.strip().splitlines()) == 1, both  # one line


@pytest.fixture
def verified(cli: Cli) -> Callable[[Path, str], dict[str, object]]:
    """`evalops --json verify` of a database (in the test process); it must pass."""

    def run(cwd: Path, url: str) -> dict[str, object]:
        result = cli("--db", url, "--json", "verify", cwd=cwd)
        assert result.code == 0, result.stdout + result.stderr
        return dict(result.json())

    return run


def checkpoint(db: Path) -> None:
    """Every committed page into the main file (so a copy or an overwrite sees them)."""
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


@pytest.fixture
def ingested(synced: Path, cli: Cli) -> Path:
    """The synced mini registry holding 300 trials (several pages of table and index)."""
    case = mini_case(synced)
    records = [record(case, trial_id=f"held-{n:04d}", trial_index=n) for n in range(300)]
    path = write_jsonl(synced / "held.jsonl", records)
    result = cli("trials", "ingest", str(path), cwd=synced)
    assert result.code == 0, result.stdout + result.stderr
    checkpoint(synced / ".evalops" / "registry.db")
    return synced


def _big(workspace: Path, n: int, prefix: str = "big") -> Path:
    case = mini_case(workspace)
    return write_jsonl(
        workspace / f"{prefix}.jsonl",
        (record(case, trial_id=f"{prefix}-{i}", trial_index=1000 + i) for i in range(n)),
    )


def _untouched_copy(workspace: Path, tmp_path: Path) -> str:
    """The URL of a copy of the workspace's database, set aside before any fault."""
    db = workspace / ".evalops" / "registry.db"
    checkpoint(db)
    copy = tmp_path / "untouched" / "registry.db"
    copy.parent.mkdir()
    shutil.copy2(db, copy)
    return f"sqlite:///{copy}"


def _trial_count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM trial").fetchone()[0])
    finally:
        con.close()


# --- A full disk: a file-size limit, and a filesystem too small -----------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ingest", "incident", "gate"])
def test_a_file_size_limit_is_a_full_disk_not_a_bug(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    command: str,
    cli: Cli,
    verified: Callable[[Path, str], dict[str, object]],
) -> None:
    # The gate needs suites and trials: the demo's registry; the others the mini one.
    workspace: Path = request.getfixturevalue("demo" if command == "gate" else "ingested")
    db = workspace / ".evalops" / "registry.db"
    url = f"sqlite:///{db}"
    copy_url = _untouched_copy(workspace, tmp_path)
    before = verified(workspace, copy_url)
    held = sqlite_fingerprint(db)
    args = {
        "ingest": ["trials", "ingest", str(_big(workspace, 3000))] if command == "ingest" else [],
        "incident": ["incident", "open", "--title", "t", "--severity", "low",
                     "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x"],
        "gate": ["gate", "check", "--suite", "regression/core", "--build", "build-125"],
    }[command]  # fmt: skip
    # The WAL starts empty: a limit just past the shared-memory index lets the database
    # open and read, and stops the first write transaction's frames.
    result = evalops(workspace, url, *args, limit=36 * 1024)
    assert_named(result, 1, f"database {url}", "disk", "free space", "ulimit -f")
    assert sqlite_fingerprint(db) == held
    assert verified(workspace, url) == before
    # The same command without the limit succeeds (the fault was the disk's).
    again = cli("--db", url, *args, cwd=workspace)
    assert again.code in (0, 3, 4), again.stdout + again.stderr
    assert verified(workspace, url) != before


def _mount_small_filesystem(where: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` at `where`; the reason when this machine cannot."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a small filesystem needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"mount -t tmpfs failed: {done.stderr.strip()}"
    return None


def _skip(reason: str) -> None:
    """Skip with the reason; under CI=true the skip says that CI did not run this check."""
    if os.environ.get("CI") == "true":
        reason = f"CI=true, and this CI machine cannot run the check: {reason}"
    pytest.skip(reason)


@contextmanager
def small_filesystem(where: Path, size: str) -> Iterator[Path]:
    reason = _mount_small_filesystem(where, size)
    if reason is not None:
        _skip(reason)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
def test_a_filesystem_too_small_for_the_ingest_is_a_full_disk(
    ingested: Path, tmp_path: Path, verified: Callable[[Path, str], dict[str, object]]
) -> None:
    source = ingested / ".evalops" / "registry.db"
    checkpoint(source)
    room = source.stat().st_size + 512 * 1024
    with small_filesystem(tmp_path / "small", f"{room // 1024}k") as mounted:
        db = mounted / "registry.db"
        shutil.copy2(source, db)
        url = f"sqlite:///{db}"
        copy_url = _untouched_copy(ingested, tmp_path)
        before = verified(ingested, copy_url)
        result = evalops(ingested, url, "trials", "ingest", str(_big(ingested, 5000)))
        assert_named(result, 1, f"database {url}", "disk is full", "three times")
        assert _trial_count(db) == 300
        assert verified(ingested, url) == before


# --- A lost PostgreSQL connection ------------------------------------------------------


def _pg(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _advisory_lock_holder(url: str) -> int | None:
    import psycopg

    with psycopg.connect(_pg(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        return None if row is None else int(row[0])


#: Enough for the ingest to be terminated well inside its write (a CPU time, see below).
BACKEND_RECORDS = 3000


@pytest.mark.slow
@pytest.mark.postgres
def test_a_backend_terminated_mid_ingest_is_a_lost_connection(
    pg_url: str, workspace: Path, cli: Cli, verified: Callable[[Path, str], dict[str, object]]
) -> None:
    import psycopg

    # trust authentication ignores the password; it must never be shown.
    url = _pg(pg_url).replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    assert cli("--db", url, "init", cwd=workspace).code == 0
    assert cli("--db", url, "sync", cwd=workspace).code == 0
    before = verified(workspace, url)
    big = _big(workspace, BACKEND_RECORDS)
    env = forked.child_env(url, "faults@example.com")
    ingest = forked.start(["trials", "ingest", str(big)], workspace, env, None)
    deadline = time.monotonic() + 120
    holder = None
    while holder is None:
        assert ingest.progress()[0], "the ingest ended before it took the writer lock"
        assert time.monotonic() < deadline
        holder = _advisory_lock_holder(url)
        time.sleep(0.02)
    # Somewhere in the middle of its work: a CPU time of the ingest's own (an unkilled one
    # spends about 0.7 s in its write), whatever the machine's load.
    at = ingest.progress()[1] + random.Random(41).uniform(0.1, 0.3)
    while (progress := ingest.progress())[1] < at:
        assert progress[0], "the ingest must still be writing when it is terminated"
        time.sleep(0.002)
    with psycopg.connect(_pg(pg_url), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (holder,)).fetchone() == (True,)
    result = ingest.wait(300)
    masked = url.replace(":s3cret@", ":***@")
    assert_named(result, 2, f"lost the connection to database {masked}", "run the command again")
    assert "s3cret" not in result.stdout + result.stderr
    assert verified(workspace, url) == before
    rerun = cli("--db", url, "--json", "trials", "ingest", str(big), cwd=workspace)
    assert rerun.code == 0, rerun.stdout + rerun.stderr
    assert rerun.json()["ingested"] == BACKEND_RECORDS


# --- A damaged SQLite file -------------------------------------------------------------


def _page_size(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("PRAGMA page_size").fetchone()[0])
    finally:
        con.close()


def _root_page(db: Path, name: str) -> int:
    con = sqlite3.connect(db)
    try:
        return int(
            con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        )
    finally:
        con.close()


def _leaf_page(db: Path, table: str) -> int:
    """A leaf page of `table` (dbstat when SQLite has it, else a page below its root)."""
    con = sqlite3.connect(db)
    try:
        row = con.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno "
            "LIMIT 1",
            (table,),
        ).fetchone()
        return int(row[0])
    except sqlite3.OperationalError:
        return _root_page(db, table)
    finally:
        con.close()


def _unique_index(db: Path, table: str, *key: str) -> str:
    con = sqlite3.connect(db)
    try:
        for _, name, unique, *_rest in con.execute(f"PRAGMA index_list('{table}')"):
            columns = [r[2] for r in con.execute(f"PRAGMA index_info('{name}')")]
            if unique and columns == list(key):
                return str(name)
    finally:
        con.close()
    raise AssertionError(f"no unique index on {table}({', '.join(key)})")


def _overwrite_page(db: Path, page: int) -> None:
    size = _page_size(db)
    garbage = random.Random(page).randbytes(size)
    with db.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(garbage)


def _integrity_message(db: Path) -> str:
    """SQLite's own first complaint, the reference the errors must carry."""
    con = sqlite3.connect(db)
    try:
        lines = str(con.execute("PRAGMA integrity_check(1)").fetchone()[0]).splitlines()
    finally:
        con.close()
    return next(line for line in lines if not line.startswith("*** in database"))


@pytest.mark.parametrize(
    "what",
    ["the trial_id unique index", "ix_trial_eval_case", "a trial table page"],
)
def test_an_overwritten_page_is_a_damaged_database(
    ingested: Path, tmp_path: Path, what: str, verified: Callable[[Path, str], dict[str, object]]
) -> None:
    db = ingested / ".evalops" / "registry.db"
    url = f"sqlite:///{db}"
    copy_url = _untouched_copy(ingested, tmp_path)
    before = verified(ingested, copy_url)
    page = {
        # The re-ingest rule relies on a trial id being unique per content (0004_voids).
        "the trial_id unique index": lambda: _root_page(
            db, _unique_index(db, "trial", "trial_id", "record_digest")
        ),
        "ix_trial_eval_case": lambda: _root_page(db, "ix_trial_eval_case"),
        "a trial table page": lambda: _leaf_page(db, "trial"),
    }[what]()
    _overwrite_page(db, page)
    first = _integrity_message(db)

    result = evalops(ingested, url, "verify")
    assert_named(result, 6, "the database is damaged", first, "restore it from a backup",
                 outcome=None)  # fmt: skip
    checked = evalops(ingested, url, "db", "check")
    assert_named(checked, 6, f"database {url} is damaged", first, "restore it from a backup")

    # A writer that meets the damage says so, and writes nothing on.
    if what != "a trial table page":
        held = sqlite_fingerprint(db)
        ingest = evalops(ingested, url, "trials", "ingest", str(_big(ingested, 50, "new")))
        assert_named(ingest, 6, f"database {url} is damaged", "malformed", "restore")
        assert sqlite_fingerprint(db) == held
    else:
        listed = evalops(ingested, url, "trials", "list")
        assert_named(listed, 6, f"database {url} is damaged", "malformed", "restore")
    assert verified(ingested, copy_url) == before


@pytest.mark.parametrize(
    "engine", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_table_dropped_by_hand_is_a_damaged_database_for_every_command(
    request: pytest.FixtureRequest, ingested: Path, engine: str
) -> None:
    """A table of the schema gone (dropped by hand): every command that meets it says the
    database is damaged (exit 6), as `verify` does, not "internal error"."""
    if engine == "sqlite":
        url = f"sqlite:///{ingested / '.evalops' / 'registry.db'}"
        con = sqlite3.connect(url.removeprefix("sqlite:///"))
        with con:
            con.execute("DROP TABLE voided_trial")
        con.close()
    else:
        import psycopg

        url = _pg(request.getfixturevalue("pg_url"))
        for args in (["init"], ["sync"]):
            assert evalops(ingested, url, *args).code == 0
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE voided_trial CASCADE")
    for args in (
        ["trials", "list"],
        ["trials", "ingest", str(_big(ingested, 3, "dropped"))],
    ):
        result = evalops(ingested, url, *args)
        assert_named(result, 6, "is damaged", "voided_trial", "restore it from a backup")


@pytest.mark.parametrize(
    ("said", "damaged"),
    [
        ("no such table: voided_trial", True),
        ("no such table: main.voided_trial", True),
        ("no such column: hash", True),
        ("no such column: t.record_digest", True),
        ("no such table: voided_trials", False),  # a name no schema has: a bug, not damage
        ("no such column: hsah", False),
    ],
)
def test_a_missing_table_or_column_is_damage_only_when_the_schema_has_it(
    said: str, damaged: bool
) -> None:
    """A statement naming what evalops's schema has, which the database lacks, met a
    database edited by hand (exit 6); one naming what no schema has is evalops's own bug,
    and stays an internal error (no fault), never "restore it from a backup"."""
    from evalops.errors import DamagedDatabase
    from evalops.store.faults import storage_fault

    fault = storage_fault(sqlite3.OperationalError(said), "sqlite:///registry.db")
    assert isinstance(fault, DamagedDatabase) if damaged else fault is None, (said, fault)


def test_a_database_whose_schema_revision_was_removed_is_damaged_not_new(
    ingested: Path,
) -> None:
    """The alembic_version row deleted by hand: `verify` said "run evalops init", and init
    then failed on the tables it found. Every command says the database is damaged."""
    db = ingested / ".evalops" / "registry.db"
    url = f"sqlite:///{db}"
    con = sqlite3.connect(db)
    with con:
        con.execute("DELETE FROM alembic_version")
    con.close()
    held = sqlite_fingerprint(db)
    for args in (["verify"], ["init"], ["db", "upgrade"], ["trials", "list"]):
        result = evalops(ingested, url, *args)
        assert_named(result, 6, "is damaged", "no schema revision", "restore it from a backup")
        assert sqlite_fingerprint(db) == held, args


# --- A database from a newer evalops --------------------------------------------------

NEWER = "9999"


def _stamp(url: str, revision: str) -> None:
    if url.startswith("sqlite:///"):
        con = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            with con:
                con.execute("UPDATE alembic_version SET version_num = ?", (revision,))
        finally:
            con.close()
        return
    import psycopg

    with psycopg.connect(_pg(url), autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (revision,))


def _pg_dump(url: str) -> list[object]:
    """Every row of every table of a PostgreSQL database, in a stable order."""
    import psycopg

    out: list[object] = []
    with psycopg.connect(_pg(url), autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "ORDER BY tablename"
            )
        ]
        for table in tables:
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            out.append((table, sorted(repr(r) for r in rows)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_newer_schema_is_named_and_left_unchanged(
    request: pytest.FixtureRequest,
    ingested: Path,
    tmp_path: Path,
    engine: str,
    verified: Callable[[Path, str], dict[str, object]],
) -> None:
    if engine == "sqlite":
        url = f"sqlite:///{ingested / '.evalops' / 'registry.db'}"
    else:
        url = _pg(request.getfixturevalue("pg_url"))
        for args in (["init"], ["sync"]):
            assert evalops(ingested, url, *args).code == 0
    copy_url = _untouched_copy(ingested, tmp_path)
    before = verified(ingested, copy_url)
    _stamp(url, NEWER)

    def state() -> object:
        if engine == "sqlite":
            return sqlite_fingerprint(Path(url.removeprefix("sqlite:///")))
        return _pg_dump(url)

    held = state()
    named = f"is at {NEWER}, newer than this evalops (head {HEAD_REVISION}): use a newer evalops"
    for args in (
        ["db", "upgrade"],
        ["init"],
        ["db", "downgrade", "base", "--force-destroy-data"],
        ["db", "check"],
        ["verify"],
        ["trials", "list"],
        ["gate", "list"],
        ["incident", "list"],
        ["incident", "open", "--title", "t", "--severity", "low",
         "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x"],
        ["trials", "ingest", str(_big(ingested, 5, "newer"))],
    ):  # fmt: skip
        result = evalops(ingested, url, *args)
        assert_named(result, 2, named, outcome="nothing changed")
        assert "db upgrade" not in result.stderr, (args, result.stderr)
        assert state() == held, args
    as_json = evalops(ingested, url, "--json", "gate", "list")
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == 2 and named in error["message"]
    current = evalops(ingested, url, "--json", "db", "current")
    assert current.code == 0, current.stderr
    assert json.loads(current.stdout)["revision"] == NEWER
    assert verified(ingested, copy_url) == before


# --- A file held exclusively by another process ---------------------------------------

_HOLDER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA locking_mode=EXCLUSIVE")
con.execute("BEGIN EXCLUSIVE")
con.execute("SELECT count(*) FROM trial").fetchone()
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def held_exclusively(db: Path) -> Iterator[None]:
    """Another process (a backup tool, say) holds the file with locking_mode=EXCLUSIVE."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate(timeout=60)


@pytest.mark.slow
def test_a_file_held_exclusively_is_a_busy_registry(
    ingested: Path, tmp_path: Path, verified: Callable[[Path, str], dict[str, object]]
) -> None:
    db = ingested / ".evalops" / "registry.db"
    url = f"sqlite:///{db}"
    copy_url = _untouched_copy(ingested, tmp_path)
    before = verified(ingested, copy_url)
    held = sqlite_fingerprint(db)
    with held_exclusively(db):
        for args in (
            ["incident", "open", "--title", "t", "--severity", "low",
             "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x"],
            ["trials", "ingest", str(_big(ingested, 5, "locked"))],
            ["gate", "list"],
        ):  # fmt: skip
            started = time.monotonic()
            result = evalops(ingested, url, "--lock-timeout", "1", *args)
            assert_named(result, 1, BUSY_MESSAGE, f"database {url}", "locked by another process")
            assert time.monotonic() - started < 60  # it waited for --lock-timeout, not longer
        as_json = evalops(ingested, url, "--json", "--lock-timeout", "1", "gate", "list")
        error = json.loads(as_json.stdout)["error"]
        assert as_json.code == 1 and error["code"] == 1
        assert error["message"].startswith(BUSY_MESSAGE)
    assert sqlite_fingerprint(db) == held
    assert verified(ingested, url) == before


# --- A read-only directory --------------------------------------------------------------


@contextmanager
def read_only_directory(source: Path, where: Path) -> Iterator[Path]:
    """`source` (a directory) seen read-only at `where`: a read-only bind mount as root
    (root writes through permissions), its permissions otherwise."""
    if os.geteuid() != 0:
        shutil.copytree(source, where)
        where.chmod(0o555)
        try:
            yield where
        finally:
            where.chmod(0o755)
        return
    where.mkdir()
    done = subprocess.run(["mount", "--bind", str(source), str(where)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        _skip(f"mount --bind failed: {done.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], capture_output=True,
                            text=True, check=False)  # fmt: skip
        if ro.returncode != 0:
            _skip(f"mount -o remount,bind,ro failed: {ro.stderr.strip()}")
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
def test_a_read_only_directory_is_named(
    ingested: Path, tmp_path: Path, verified: Callable[[Path, str], dict[str, object]]
) -> None:
    source = ingested / ".evalops"
    checkpoint(source / "registry.db")
    copy_url = _untouched_copy(ingested, tmp_path)
    before = verified(ingested, copy_url)
    held = sqlite_fingerprint(source / "registry.db")
    with read_only_directory(source, tmp_path / "ro") as ro:
        db = ro / "registry.db"
        url = f"sqlite:///{db}"
        for args in (
            ["gate", "list"],
            ["verify"],
            ["incident", "open", "--title", "t", "--severity", "low",
             "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x"],
        ):  # fmt: skip
            result = evalops(ingested, url, *args)
            assert_named(
                result,
                2,
                f"database {url}: its directory {ro} is read-only",
                "registry.db-wal and registry.db-shm",
                "copy the database to a writable directory",
            )
    assert sqlite_fingerprint(source / "registry.db") == held
    assert verified(ingested, f"sqlite:///{source / 'registry.db'}") == before


def test_an_unknown_older_revision_is_refused_unchanged(ingested: Path) -> None:
    db = ingested / ".evalops" / "registry.db"
    url = f"sqlite:///{db}"
    _stamp(url, "0000")
    held = sqlite_fingerprint(db)
    for args in (["db", "upgrade"], ["init"]):
        result = evalops(ingested, url, *args)
        assert_named(
            result, 2, f"is at 0000, a revision no migration of this evalops knows (head "
            f"{HEAD_REVISION})", outcome="nothing changed"
        )  # fmt: skip
        assert sqlite_fingerprint(db) == held
