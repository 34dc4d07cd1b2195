"""`gate check --junit FILE --report FILE`: a file that cannot be written refuses the check
before anything is decided (exit 2, nothing written: README "Exit codes"), naming the option
that was given. A decision stored and then hidden behind a write error would leave CI with
exit 2 and no verdict while the registry holds one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli

CHECK = ("gate", "check", "--build", "build-124", "--suite", "regression/core")


def _state(demo: Path) -> tuple[int, int]:
    """(gate decisions stored, audit events): what a refused command must leave alone."""
    con = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        decisions = con.execute("SELECT count(*) FROM gate_decision").fetchone()[0]
        events = con.execute("SELECT count(*) FROM audit_event").fetchone()[0]
    finally:
        con.close()
    return int(decisions), int(events)


@pytest.mark.parametrize("option", ["--junit", "--report"])
def test_an_output_under_a_file_refuses_the_check_with_nothing_stored(
    demo: Path, cli: Cli, option: str
) -> None:
    blocker = demo / "not-a-directory"
    blocker.write_text("a file, where the output's directory would be\n", encoding="utf-8")
    before = _state(demo)
    done = cli(*CHECK, option, str(blocker / "out" / "gate.xml"), cwd=demo)
    assert done.code == 2, done.stdout + done.stderr
    assert option in done.stderr and "not-a-directory" in done.stderr
    assert "--output" not in done.stderr
    assert _state(demo) == before
    assert done.stdout == ""


@pytest.mark.parametrize("option", ["--junit", "--report"])
def test_an_output_that_is_a_directory_refuses_the_check_with_nothing_stored(
    demo: Path, cli: Cli, option: str
) -> None:
    before = _state(demo)
    done = cli(*CHECK, option, str(demo), cwd=demo)
    assert done.code == 2, done.stdout + done.stderr
    assert f"{option}: is a directory" in done.stderr
    assert _state(demo) == before


def test_a_write_that_fails_after_the_decision_still_prints_it_and_its_exit_code(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path was writable when checked and the write failed later (a disk that filled
    up): the decision is stored, so its verdict and exit code are what the command says,
    with the error and how to write the file again."""
    from evalops.cli import output
    from evalops.errors import InputError

    def full_disk(path: str, text: object, field: str = "--output") -> str:
        raise InputError("cannot write: No space left on device", path, field=field)

    expected = cli(*CHECK, "--dry-run", "--json", cwd=demo).json()["decision"]
    before = _state(demo)
    monkeypatch.setattr(output, "write_output", full_disk)
    done = cli(*CHECK, "--report", str(demo / "gate.md"), cwd=demo)
    assert done.code == {"pass": 0, "hold": 3, "block": 4}[expected], done.stderr
    assert _state(demo)[0] == before[0] + 1
    gate_id = f"GATE-{before[0] + 1}"
    assert f"{gate_id}" in done.stdout
    assert "--report: cannot write: No space left on device" in done.stderr
    assert f"evalops gate show {gate_id}" in done.stderr


def test_a_writable_output_under_new_directories_is_written(demo: Path, cli: Cli) -> None:
    """The parents of an output are created (docs/cli.md), so a path under directories that
    do not exist yet is not refused by the check made before deciding."""
    target = demo / "ci" / "artifacts" / "gate.xml"
    done = cli(*CHECK, "--junit", str(target), cwd=demo)
    assert done.code in (0, 3, 4), done.stderr
    assert target.read_text(encoding="utf-8").startswith("<?xml")
