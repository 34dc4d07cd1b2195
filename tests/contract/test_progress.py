"""`make test` says what is running while no test ends (tests/progress.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.progress import Heartbeat

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_a_run_with_a_long_test_names_it_while_it_runs(tmp_path: Path) -> None:
    """Under xdist (as `make test` runs): the controller hears the workers' test starts."""
    (tmp_path / "test_long.py").write_text(
        textwrap.dedent(
            """
            import time

            def test_quick():
                pass

            def test_takes_a_while():
                time.sleep(4)
            """
        )
    )
    env = {**os.environ, "EVALOPS_TEST_HEARTBEAT": "1", "PYTHONPATH": str(ROOT)}
    # Only the plugins under test (xdist, the heartbeat): importing every installed one
    # (hypothesis, pytest-alembic, ...) in the controller and its worker was three
    # quarters of the child run's CPU.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "1",
            "-p",
            "xdist.plugin",
            "-p",
            "tests.progress",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_long.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    beats = [line for line in out.stdout.splitlines() if line.startswith("... ")]
    assert beats, out.stdout
    assert "of 2 tests done after" in beats[-1]
    assert "running: test_long.py::test_takes_a_while (" in beats[-1]
    # A test that has ended is not named (a beat may fall while test_quick runs: under
    # load its report can reach the controller after a tick, so only the last beat counts).
    assert "test_quick" not in beats[-1]


def test_no_line_while_tests_keep_ending() -> None:
    clock = [100.0]
    beat = Heartbeat(print, interval=30, clock=lambda: clock[0])
    beat.collected(3)
    beat.began("a.py::t1")
    clock[0] = 110.0
    beat.ended("a.py::t1")
    beat.began("a.py::t2")
    now = 110.0  # the last test ended then
    assert beat.line(now + 29) is None
    text = beat.line(now + 31)
    assert text is not None and text.startswith("... 1 of 3 tests done after 41s; running: ")
    assert "a.py::t2 (31s)" in text
    assert beat.line(now + 32) is None  # once per interval, not on every tick
