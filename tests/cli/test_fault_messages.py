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
