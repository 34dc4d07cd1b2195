"""Per-task flips between a baseline and a candidate, and the "cannot reach alpha" sentence.

Expectations come from the rule in words (docs/verify.md, "Changes since the baseline"),
enumerated by brute force over every presence and pass combination, and from
scipy.stats.binomtest for the smallest p-value an exact test can give.
"""

from __future__ import annotations

import itertools

import pytest
from scipy import stats

from evalops.domain.changes import (
    FLIPS,
    TaskSide,
    alpha_note,
    flip,
    flip_counts,
    smallest_p_value,
    task_changes,
)
from evalops.domain.regression import TaskOutcome, paired_verdict


def side(passed: bool) -> TaskSide:
    return TaskSide(n=3, passed_count=3 if passed else 1, pass_hat_k=None, passed=passed)


# Each build: absent, present and failing, present and passing.
STATES: list[bool | None] = [None, False, True]


def expected_flip(base: bool | None, cand: bool | None) -> str:
    if base is None:
        return "new"
    if cand is None:
        return "missing"
    if base and not cand:
        return "regressed"
    if cand and not base:
        return "improved"
    return "unchanged"


@pytest.mark.parametrize(
    ("base", "cand"),
    [(b, c) for b, c in itertools.product(STATES, STATES) if (b, c) != (None, None)],
)
def test_every_flip_kind(base: bool | None, cand: bool | None) -> None:
    b = None if base is None else side(base)
    c = None if cand is None else side(cand)
    assert flip(b, c) == expected_flip(base, cand)


def test_a_task_absent_from_both_builds_has_no_flip() -> None:
    with pytest.raises(ValueError):
        flip(None, None)


def test_every_combination_of_tasks_sorts_regressed_first_and_counts_match_mcnemar() -> None:
    # Brute force: every assignment of the eight presence/pass states to eight task ids.
    combos = [(b, c) for b, c in itertools.product(STATES, STATES) if (b, c) != (None, None)]
    ids = [f"t-{i}" for i in range(len(combos))][::-1]  # ids in reverse to test the sort
    for rotation in range(len(combos)):
        pairs = combos[rotation:] + combos[:rotation]
        base = {i: side(b) for i, (b, _) in zip(ids, pairs, strict=True) if b is not None}
        cand = {i: side(c) for i, (_, c) in zip(ids, pairs, strict=True) if c is not None}
        rows = task_changes(base, cand)
        assert {r["task_id"] for r in rows} == set(ids)
        flips = [r["flip"] for r in rows]
        n_regressed = flips.count("regressed")
        assert flips[:n_regressed] == ["regressed"] * n_regressed
        assert "regressed" not in flips[n_regressed:]
        for part in (rows[:n_regressed], rows[n_regressed:]):
            assert [r["task_id"] for r in part] == sorted(r["task_id"] for r in part)
        for r, (b, c) in ((r, pairs[ids.index(r["task_id"])]) for r in rows):
            assert r["flip"] == expected_flip(b, c)
            assert (r["baseline"] is None) == (b is None)
            assert (r["candidate"] is None) == (c is None)
        counts = flip_counts(rows)
        assert set(counts) == set(FLIPS) and sum(counts.values()) == len(ids)
        verdict = paired_verdict(
            {k: TaskOutcome(v.passed, 0.0) for k, v in base.items()},
            {k: TaskOutcome(v.passed, 0.0) for k, v in cand.items()},
            method="mcnemar",
            alpha=0.05,
        )
        assert verdict["discordant"] == {
            "baselineOnlyPassed": counts["regressed"],
            "candidateOnlyPassed": counts["improved"],
        }


def test_sides_carry_the_contract_keys() -> None:
    rows = task_changes({"a": TaskSide(5, 4, 0.4, False)}, {})
    assert rows == [
        {
            "task_id": "a",
            "baseline": {"n": 5, "passedCount": 4, "passHatK": 0.4},
            "candidate": None,
            "flip": "missing",
        }
    ]


@pytest.mark.parametrize("pairs", range(1, 13))
@pytest.mark.parametrize("method", ["mcnemar", "sign-test"])
def test_smallest_p_value_is_the_binomial_floor(method: str, pairs: int) -> None:
    # The most extreme outcome: every pair discordant, all one way.
    floor = float(stats.binomtest(pairs, pairs, 0.5).pvalue)
    assert smallest_p_value(method, pairs) == pytest.approx(floor)
    # No other outcome does better.
    assert all(
        float(stats.binomtest(k, m, 0.5).pvalue) >= floor - 1e-12
        for m in range(1, pairs + 1)
        for k in range(m + 1)
    )


def test_the_contract_sentence_for_four_mcnemar_pairs() -> None:
    assert (
        alpha_note("mcnemar", 0.05, 4)
        == "with 4 paired tasks McNemar's smallest p-value is 0.125 > alpha 0.05"
    )


@pytest.mark.parametrize("method", ["mcnemar", "sign-test"])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.0625])
def test_a_sentence_exactly_when_no_outcome_reaches_alpha(method: str, alpha: float) -> None:
    for pairs in range(1, 12):
        reachable = float(stats.binomtest(pairs, pairs, 0.5).pvalue) < alpha
        note = alpha_note(method, alpha, pairs)
        assert (note is None) == reachable, (pairs, note)
        if note is not None:
            assert note.startswith(f"with {pairs} paired task")
            assert f"alpha {alpha:g}" in note


def test_the_floor_equal_to_alpha_cannot_reach_it() -> None:
    # 2 * 0.5**5 == 0.0625: a verdict needs p < alpha.
    assert alpha_note("sign-test", 0.0625, 5) == (
        "with 5 paired tasks the sign test's smallest p-value is 0.0625 = alpha 0.0625"
    )


def test_bootstrap_needs_ten_pairs_and_paired_t_says_nothing() -> None:
    assert alpha_note("paired-bootstrap", 0.05, 9) == (
        "with 9 paired tasks paired-bootstrap cannot reach alpha 0.05: it needs at least 10"
    )
    assert alpha_note("paired-bootstrap", 0.05, 10) is None
    assert alpha_note("paired-t", 0.05, 2) is None
    assert alpha_note("mcnemar", 0.05, 0) is None
    assert alpha_note("mcnemar", 0.05, 1) == (
        "with 1 paired task McNemar's smallest p-value is 1.00 > alpha 0.05"
    )
