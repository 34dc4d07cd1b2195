"""What an unknown-id error names: a handful of ids, the close match, the numbered id."""

from __future__ import annotations

import pytest

from evalops.domain.suggestions import SHOWN_IDS, close_match, numbered_guess, some_of, unknown_id


def test_some_of_names_a_handful_then_counts_the_rest() -> None:
    ids = [f"t{i}" for i in range(SHOWN_IDS + 3)]
    assert some_of(ids) == ", ".join(ids[:SHOWN_IDS]) + " and 3 more"
    assert some_of(ids[:SHOWN_IDS]) == ", ".join(ids[:SHOWN_IDS])
    assert some_of([]) == "none"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("frist-task", "first-task"), ("FIRST-TASK", "first-task"), ("zzz", None)],
)
def test_close_match(given: str, expected: str | None) -> None:
    assert close_match(given, ["first-task", "second-task"]) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [("2", "GATE-2"), ("gate-2", "GATE-2"), ("gate2", "GATE-2"), ("GATE-02", "GATE-2"),
     ("GATE-2", None), ("INC-2", None), ("two", None)],
)  # fmt: skip
def test_numbered_guess(given: str, expected: str | None) -> None:
    assert numbered_guess(given, "GATE-") == expected


def test_the_sync_step_only_when_nothing_comes_close() -> None:
    close = unknown_id("task", "frist-task", ["first-task"])
    assert close == (
        "task 'frist-task' is not registered; did you mean 'first-task'? "
        "(tasks registered: first-task)"
    )
    far = unknown_id("suite", "main", ["regression/core"], status="in force")
    assert far.startswith("suite 'main' is not in force; suites in force: regression/core (")
    assert far.endswith("run `evalops sync`)")
