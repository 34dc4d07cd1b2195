"""`gate check` runs with Python's cycle collector off, and leaves it as it found it.

The collector ran 619 times while a 10,000-task decision was made and freed nothing
(benchmarks/RESULTS.md); `collector_paused` turns it off for the command's work. What
these tests hold: the decision is made with the collector off, its exit code is the
decision's, and afterwards the collector is on again (or still off, when it was off), also
when the command fails.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops.cli.context import collector_paused
from evalops.domain.gate import evaluate_stored
from tests.conftest import Cli

SUITE = "regression/core"


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
