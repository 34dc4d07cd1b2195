"""What an unknown-id error names: a handful of ids, the close match, the numbered id."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.suggestions import (
    MAX_COMPARED,
    SHOWN_IDS,
    close_match,
    numbered_guess,
    some_of,
    unknown_id,
)


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


@settings(max_examples=300, deadline=None)
@given(
    given_id=st.text(alphabet="abcdef-", min_size=1, max_size=12),
    ids=st.lists(st.text(alphabet="abcdef-", min_size=1, max_size=24), max_size=60),
)
def test_leaving_out_ids_too_short_or_long_to_match_changes_nothing(
    given_id: str, ids: list[str]
) -> None:
    """Below the size cap only ids no ratio could bring to the cutoff are left out: the
    answer is difflib's over every id."""
    if any(i.lower() == given_id.lower() for i in ids):
        return
    expected = difflib.get_close_matches(given_id, ids, n=1)
    assert close_match(given_id, ids) == (expected[0] if expected else None)


def test_a_huge_registry_is_compared_only_in_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error message must not take seconds: difflib never sees more than MAX_COMPARED
    ids; a typo is still found among the ids sharing its first character when they are few
    enough, and no suggestion is made when even they are too many."""
    seen: list[int] = []
    real = difflib.get_close_matches

    def counting(word: str, possibilities: list[str], **kwargs: object) -> list[str]:
        seen.append(len(possibilities))
        return real(word, possibilities, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(difflib, "get_close_matches", counting)
    ids = [f"{'xyz'[i % 3]}task-{i:06d}" for i in range(100_000)]
    ids.append("refund-once-in-order")
    assert close_match("refund-once-in-ordr", ids) == "refund-once-in-order"
    assert close_match("xtask-00001x", ids) is None  # 33,334 ids start with x: not compared
    assert seen and max(seen) <= MAX_COMPARED
