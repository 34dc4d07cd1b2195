"""Faults and bugs from the database driver, in-process (docs/troubleshooting.md).

A storage fault raised anywhere below a command (here: where `incident open` writes) is
named by its cause with its exit code, whichever way the driver's error arrives (raw, or
wrapped by SQLAlchemy with the statement and its parameters); a driver error that is no
fault stays an internal error (a bug), but shows only the driver's first line: never the
statement, its bind parameters or SQLAlchemy's link.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError, ProgrammingError

from tests.conftest import Cli

OPEN = ["incident", "open", "--title", "t", "--severity", "low",
        "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", "trace://x"]  # fmt: skip
STATEMENT = "INSERT INTO incident (title) VALUES (?)"
SECRET = "a stored value that must not be shown"


def _raising(error: BaseException):  # type: ignore[no-untyped-def]
    def fail(*_args: object, **_kwargs: object) -> None:
        raise error

    return fail


def _sqlite_error(message: str, name: str) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorname = name
    return error


@pytest.mark.parametrize(
    "fault",
    [
        (_sqlite_error("database or disk is full", "SQLITE_FULL"), 1, "the disk is full"),
        (_sqlite_error("disk I/O error", "SQLITE_IOERR_WRITE"), 1, "ulimit -f"),
        (
            sqlite3.DatabaseError("database disk image is malformed"),
            6,
            "is damaged (SQLite: database disk image is malformed)",
        ),
        (
            _sqlite_error("database is locked", "SQLITE_BUSY"),
            1,
            "registry is busy: another writer holds it",
        ),
    ],
)
@pytest.mark.parametrize("wrapped", [True, False])
def test_a_storage_fault_is_named_raw_or_wrapped(
    synced: Path,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    fault: tuple[BaseException, int, str],
    wrapped: bool,
) -> None:
    driver, code, named = fault
    raised = OperationalError(STATEMENT, {"title": SECRET}, driver) if wrapped else driver
    monkeypatch.setattr("evalops.services.registry.incidents.open_incident", _raising(raised))
    result = cli("--json", *OPEN, cwd=synced)
    assert result.code == code, result.stdout + result.stderr
    assert named in result.stderr and "nothing was stored" in result.stderr
    assert result.json()["error"]["code"] == code
    assert "database sqlite:///.evalops/registry.db" in result.stderr  # the URL in use
    for word in ("bug in evalops", "internal error", SECRET, "INSERT", "sqlalche.me"):
        assert word not in result.stdout + result.stderr


def test_a_driver_error_that_is_no_fault_stays_a_bug_of_one_line(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised = ProgrammingError(STATEMENT, {"title": SECRET}, sqlite3.ProgrammingError("oops"))
    monkeypatch.setattr("evalops.services.registry.incidents.open_incident", _raising(raised))
    result = cli(*OPEN, cwd=synced)
    assert result.code == 1
    assert "internal error: ProgrammingError: (sqlite3.ProgrammingError) oops" in result.stderr
    assert "this is a bug in evalops" in result.stderr
    for word in (SECRET, "INSERT", "sqlalche.me"):
        assert word not in result.stdout + result.stderr


def test_an_output_path_that_cannot_be_written_is_named_with_its_cause(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """Paths the environment refuses (a file where a directory is needed, a file that is
    already there) are exit 2 naming the path and the cause: not internal errors."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    cases = {
        ("schema", "export", str(a_file / "schemas")): "Not a directory",
        ("schema", "export", str(a_file)): "File exists",
        ("demo", "--dir", str(a_file)): "Not a directory",
    }
    for args, cause in cases.items():
        result = cli(*args, cwd=demo)
        assert result.code == 2, (args, result.stdout + result.stderr)
        assert result.stderr.startswith("error: ") and cause in result.stderr, result.stderr
        assert "internal error" not in result.stderr
        assert result.stderr.count("\n") == 1


def test_a_full_disk_under_an_output_file_is_a_storage_fault() -> None:
    """ENOSPC about a named file: exit 1 as a full disk under the database is (docs/cli.md,
    "the storage failed"), the path named; an OSError naming no file stays a bug."""
    import errno

    from evalops.cli.file_faults import file_fault

    full = file_fault(OSError(errno.ENOSPC, "No space left on device", "/out/x.jsonl"))
    assert full is not None and full.exit_code == 1
    assert "/out/x.jsonl" in str(full) and "No space left on device" in str(full)
    assert file_fault(OSError(errno.ENOSPC, "No space left on device")) is None
    assert file_fault(ValueError("x")) is None


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("trials", "list", "--limit", "99999999999999999999"), "--limit"),
        (("gate", "list", "--limit", "99999999999999999999"), "--limit"),
        (("--lock-timeout", "inf", "gate", "list"), "--lock-timeout"),
        (("--lock-timeout", "1e400", "gate", "list"), "--lock-timeout"),
        (("trials", "void", "--batch", "99999999999999999999", "--reason", "x"), "--batch"),
        (
            (
                "trials",
                "reconcile",
                "t",
                "--effect",
                "k",
                "--status",
                "committed",
                "--evidence",
                "x",
                "--index",
                "9007199254740993",
            ),
            "--index",
        ),
    ],
)
def test_a_number_beyond_what_the_store_or_the_driver_takes_is_a_usage_error(
    demo: Path, cli: Cli, args: tuple[str, ...], option: str
) -> None:
    """Integers beyond a database's 64 bits (or canonical JSON's 2^53) and timeouts of
    infinity overflowed inside the driver: exit 2 naming the option, nothing recorded."""
    before = (
        sqlite3.connect(demo / ".evalops" / "registry.db")
        .execute("SELECT count(*) FROM audit_event")
        .fetchone()
    )
    result = cli(*args, cwd=demo)
    assert result.code == 2, result.stdout + result.stderr
    assert f"Invalid value for '{option}'" in result.stderr
    assert "internal error" not in result.stderr
    after = (
        sqlite3.connect(demo / ".evalops" / "registry.db")
        .execute("SELECT count(*) FROM audit_event")
        .fetchone()
    )
    assert after == before


def test_an_output_that_is_a_pipe_or_a_link_is_written_through_not_replaced(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """`-o` onto a named pipe hands the report to its reader (the pipe stays a pipe); onto
    a symbolic link it writes the link's target (the link stays a link). Both were
    replaced by a regular file, and a reader of the pipe got nothing."""
    import os
    import stat
    import threading

    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = cli("report", "audit", "GATE-3", "-o", str(fifo), cwd=demo)
    reader.join(timeout=30)
    assert done.code == 0, done.stdout + done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and got[0].startswith(b"<!-- evalops-audit-head:")
    target = tmp_path / "real.md"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    done = cli("report", "audit", "GATE-3", "-o", str(link), cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    assert link.is_symlink() and target.read_text(encoding="utf-8").startswith("<!-- evalops")
    # A directory that is a link leading nowhere (a loop) is named, not "File exists".
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    looped = cli("report", "audit", "GATE-3", "-o", str(tmp_path / "loop-a" / "x.md"), cwd=demo)
    assert looped.code == 2, looped.stdout + looped.stderr
    assert "is a symbolic link that leads nowhere" in looped.stderr


def test_a_database_stamped_by_another_alembic_project_is_not_called_newer(
    demo: Path, cli: Cli
) -> None:
    """An `alembic_version` of `abc123` is no evalops revision (evalops numbers them): the
    message says so instead of advising a newer evalops, and nothing changes."""
    from tests.helpers import sqlite_fingerprint

    db = demo / ".evalops" / "registry.db"
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'abc123'")
    held = sqlite_fingerprint(db)
    for args in (("gate", "list"), ("verify",), ("db", "upgrade"), ("init",)):
        result = cli(*args, cwd=demo)
        assert result.code == 2, (args, result.stdout + result.stderr)
        assert "is at revision 'abc123', which no evalops migration has" in result.stderr
        assert "newer" not in result.stderr, result.stderr
        assert sqlite_fingerprint(db) == held, args


@pytest.mark.parametrize("command", ["upgrade", "downgrade"])
def test_an_empty_revision_is_a_usage_error(demo: Path, cli: Cli, command: str) -> None:
    result = cli("db", command, "", cwd=demo)
    assert result.code == 2, result.stdout + result.stderr
    assert "give the revision to migrate" in result.stderr
    assert "internal error" not in result.stderr
