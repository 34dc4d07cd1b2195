"""`gate check` runs with Python's cycle collector off, and leaves it as it found it.

The collector ran 619 times while a 10,000-task decision was made and freed nothing
(benchmarks/RESULTS.md); `collector_paused` turns it off for the command's work. What
these tests hold: the decision is made with the collector off, its exit code is the
decision's, and afterwards the collector is on again (or still off, when it was off), also
when the command fails; what the work still holds then is in the oldest generation, not
walked once more by a young collection, and objects frozen before stay frozen.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops.cli.context import collector_paused
from evalops.domain.gate import evaluate_stored
from tests.conftest import Cli

SUITE = "regression/core"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def collector_on() -> Iterator[None]:
    """The collector on for the test, and as it was afterwards."""
    was_on = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_on:
            gc.disable()


def test_the_collector_is_off_inside_and_on_again_after(collector_on: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_on_again_after_an_error(collector_on: None) -> None:
    with pytest.raises(ZeroDivisionError), collector_paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def _in_a_fresh_interpreter(lines: list[str]) -> None:
    """Run `lines` in a fresh interpreter (nothing frozen, as a command's process): they
    print "ok" at the end, or an assertion fails."""
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_what_the_work_holds_ends_in_the_oldest_generation_unwalked() -> None:
    # In a command's own process, what the paused work made and still holds is in the
    # oldest generation afterwards, nothing stays frozen, and no young collection is due.
    _in_a_fresh_interpreter(
        [
            "import gc",
            "from evalops.cli.context import collector_paused, mark_own_process",
            "mark_own_process()",
            "assert gc.get_freeze_count() == 0",
            "with collector_paused():",
            "    kept = [[i] for i in range(50_000)]",
            "assert gc.isenabled() and gc.get_freeze_count() == 0",
            "assert gc.get_count()[0] < 100, gc.get_count()",
            "oldest = {id(o) for o in gc.get_objects(generation=2)}",
            "assert all(gc.is_tracked(o) and id(o) in oldest for o in kept[::1000])",
            "print('ok')",
        ]
    )


def test_a_program_calling_main_keeps_its_frozen_objects_frozen() -> None:
    # A program that calls `main` and froze its heap (a test process does:
    # tests/gc_tuning.py) keeps it frozen: the paused work does not thaw it.
    _in_a_fresh_interpreter(
        [
            "import gc",
            "from evalops.cli.context import collector_paused",
            "before = [[i] for i in range(1_000)]",
            "gc.freeze()",
            "frozen = gc.get_freeze_count()",
            "assert frozen > 0",
            "with collector_paused():",
            "    made = [[i] for i in range(1_000)]",
            "assert gc.get_freeze_count() == frozen and gc.isenabled()",
            "print('ok')",
        ]
    )


def test_a_stored_gate_check_decides_with_the_collector_off_and_turns_it_on_again(
    demo: Path, cli: Cli, collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def watched(inputs: Any) -> Any:
        seen.append(gc.isenabled())
        return evaluate_stored(inputs)

    monkeypatch.setattr("evalops.services.gate.check.evaluate_stored", watched)
    done = cli("gate", "check", "--build", "build-124", "--suite", SUITE, "--json", cwd=demo)
    # The demo's build-124 holds a hard failure: blocked (exit 4), as without the pause.
    assert done.code == 4, done.stdout + done.stderr
    assert done.json()["decision"] == "block"
    assert seen == [False]
    assert gc.isenabled()


def test_a_failing_gate_check_turns_the_collector_on_again(
    demo: Path, cli: Cli, collector_on: None
) -> None:
    done = cli("gate", "check", "--build", "no-such-build", "--suite", SUITE, cwd=demo)
    assert done.code == 2, done.stdout + done.stderr
    assert gc.isenabled()


def test_outside_a_command_s_own_process_frozen_objects_are_neither_counted_nor_moved(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting the frozen objects walks all of them (50 ms for a test process's heap, at
    every `gate check` of the suite); moving them would thaw what the caller froze."""

    def refused(*_: object) -> None:
        raise AssertionError("the frozen generation was touched")

    for name in ("freeze", "unfreeze", "get_freeze_count"):
        monkeypatch.setattr(gc, name, refused)
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_evalops_entry_point_marks_its_process_as_the_command_s() -> None:
    _in_a_fresh_interpreter(
        [
            "from evalops.cli import context, main",
            "assert not context.is_own_process()",
            "main.main = lambda argv=None: 0",
            "try:",
            "    main.run()",
            "except SystemExit as done:",
            "    assert done.code == 0",
            "assert context.is_own_process()",
            "print('ok')",
        ]
    )


def test_the_entry_point_leaves_what_is_alive_frozen_for_the_interpreter_s_exit() -> None:
    # The interpreter's last collection at exit would walk every module's objects to free
    # what the process's end frees anyway: `run` freezes them first, and keeps the exit
    # code of the command (3 here: not 0 or 1).
    _in_a_fresh_interpreter(
        [
            "import gc",
            "from evalops.cli import main",
            "main.main = lambda argv=None: 3",
            "assert gc.get_freeze_count() == 0",
            "try:",
            "    main.run()",
            "except SystemExit as done:",
            "    assert done.code == 3, done.code",
            "assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()",
            "print('ok')",
        ]
    )


def test_a_command_run_by_the_entry_point_still_writes_everything_and_its_exit_code(
    tmp_path: Path,
) -> None:
    # A real command through `evalops`: its output reaches the pipe whole and its exit
    # code is the command's, with nothing left to the skipped collection.
    done = subprocess.run(
        [sys.executable, "-c", "from evalops.cli.main import run; run()", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("evalops ")
    assert done.stderr == ""
