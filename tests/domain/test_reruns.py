"""Reruns (docs/classification.md): which trial counts, without ever dropping one. Pure.

With the example gate policy's `max_attempts_by_class: {infrastructure_invalid: 2,
grader_invalid: 1}`, the count is of attempts, the first included (as
`retry_policy.max_attempts`): one rerun may stand in for a timed-out trial, a third attempt
may not, and no rerun stands in for a grader_invalid trial. A rerun of any other class is
stored, labelled `rerun_not_permitted`, and excluded, and its parent keeps counting.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.reruns import (
    NO_RERUNS,
    RERUN_NOT_PERMITTED,
    TrialNode,
    attempt_allowed,
    resolve_reruns,
)
from evalops.domain.stats import TaskTrials, task_block
from evalops.domain.vocabulary import CANONICAL_PRECEDENCE

LIMITS = {"infrastructure_invalid": 2, "grader_invalid": 1}


def node(trial_id: str, cls: str, parent: str | None = None) -> TrialNode:
    return TrialNode(trial_id, parent, cls)


def chain(prefix: str, classes: Sequence[str]) -> list[TrialNode]:
    """An original and its reruns, each the rerun of the one before."""
    out: list[TrialNode] = []
    for i, cls in enumerate(classes):
        out.append(node(f"{prefix}-{i}", cls, out[-1].trial_id if out else None))
    return out


def test_label_name() -> None:
    assert RERUN_NOT_PERMITTED == "rerun_not_permitted"


def test_rerun_of_infrastructure_invalid_stands_in() -> None:
    trials = chain("t", ["infrastructure_invalid", "task_pass"])
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset()
    assert out.first_results == {"t-0": "infrastructure_invalid"}
    assert out.rerun_count == 1
    assert out.invalid_count == 1


def test_no_rerun_stands_in_for_grader_invalid() -> None:
    # grader_invalid: 1 attempt, the first included: fix the grader, run the build again.
    out = resolve_reruns(chain("t", ["grader_invalid", "task_pass"]), LIMITS)
    assert out.effective == ("t-0",)
    assert out.not_permitted == frozenset({"t-1"})
    assert out.invalid_count == 1


def test_rerun_of_hard_constraint_fail_is_stored_labelled_and_excluded() -> None:
    trials = chain("t", ["hard_constraint_fail", "task_pass"])
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-0",)  # the hard failure still counts
    assert out.not_permitted == frozenset({"t-1"})
    assert out.first_results == {"t-0": "hard_constraint_fail"}
    assert out.rerun_count == 1
    assert out.invalid_count == 0


@pytest.mark.parametrize(
    "cls",
    [
        "ambiguous_external_effect",
        "missing_required_evidence",  # not listed in this policy's max_attempts_by_class
        "agent_error",
        "runtime_error",
        "task_fail",
        "task_pass",
    ],
)
def test_rerun_of_an_unlisted_class_is_not_permitted(cls: str) -> None:
    out = resolve_reruns(chain("t", [cls, "task_pass", "task_pass"]), LIMITS)
    assert out.effective == ("t-0",)
    assert out.not_permitted == frozenset({"t-1", "t-2"})
    assert out.rerun_count == 2


def test_missing_required_evidence_stands_in_when_the_policy_allows_two_attempts() -> None:
    trials = chain("t", ["missing_required_evidence", "task_pass"])
    assert resolve_reruns(trials, {**LIMITS, "missing_required_evidence": 1}).effective == ("t-0",)
    out = resolve_reruns(trials, {**LIMITS, "missing_required_evidence": 2})
    assert out.effective == ("t-1",)


def test_no_limits_means_no_stand_ins() -> None:
    out = resolve_reruns(chain("t", ["infrastructure_invalid", "task_pass"]), {})
    assert out.effective == ("t-0",)
    assert out.not_permitted == frozenset({"t-1"})


# ------------------------------------------------------------------------- chain limits


def test_infrastructure_chain_within_the_limit() -> None:
    trials = chain("t", ["infrastructure_invalid", "task_pass"])
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset()
    assert out.rerun_count == 1
    assert out.first_results == {"t-0": "infrastructure_invalid"}


def test_infrastructure_chain_beyond_the_limit() -> None:
    classes = ["infrastructure_invalid"] * 3 + ["task_pass", "task_pass"]
    out = resolve_reruns(chain("t", classes), LIMITS)
    # Two attempts: the first rerun may stand in; the third attempt (and everything after
    # it) is excluded, and the last permitted attempt (still infrastructure_invalid) counts.
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset({"t-2", "t-3", "t-4"})
    assert out.rerun_count == 4
    assert out.first_results == {"t-0": "infrastructure_invalid"}
    assert out.invalid_count == 1


def test_grader_invalid_chain_beyond_the_limit() -> None:
    out = resolve_reruns(chain("t", ["grader_invalid", "grader_invalid", "task_pass"]), LIMITS)
    assert out.effective == ("t-0",)
    assert out.not_permitted == frozenset({"t-1", "t-2"})
    assert out.rerun_count == 2


def test_the_limit_of_every_earlier_class_bounds_the_chain() -> None:
    # attempt 3 would need 3 <= 2 (infrastructure_invalid) and 3 <= 1 (grader_invalid)
    limits = {"infrastructure_invalid": 3, "grader_invalid": 1}
    classes = ["infrastructure_invalid", "grader_invalid", "task_pass"]
    out = resolve_reruns(chain("t", classes), limits)
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset({"t-2"})
    relaxed = resolve_reruns(chain("t", classes), {**limits, "grader_invalid": 3})
    assert relaxed.effective == ("t-2",)


def test_an_earlier_stricter_class_bounds_the_chain_after_a_looser_latest_one() -> None:
    # The latest class alone would allow attempt 3 (3 <= 3); the first attempt's class does
    # not (3 <= 2), and every earlier class bounds the chain.
    limits = {"grader_invalid": 2, "infrastructure_invalid": 3}
    classes = ["grader_invalid", "infrastructure_invalid", "task_pass"]
    out = resolve_reruns(chain("t", classes), limits)
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset({"t-2"})
    # The same chain with the stricter class last: attempt 3 is refused by it as well.
    swapped = ["infrastructure_invalid", "grader_invalid", "task_pass"]
    assert resolve_reruns(chain("t", swapped), limits).effective == ("t-1",)


@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
def test_attempt_allowed_is_at_most_the_limit_of_every_earlier_class(attempt: int) -> None:
    limits = {"grader_invalid": 2, "infrastructure_invalid": 3}
    earlier = ["grader_invalid", "infrastructure_invalid"]
    assert attempt_allowed(attempt, earlier, limits) == (attempt <= 2)
    assert attempt_allowed(attempt, ["infrastructure_invalid"], limits) == (attempt <= 3)
    # An unlisted class allows one attempt: no rerun.
    assert attempt_allowed(attempt, ["task_fail"], limits) == (attempt <= 1)
    assert attempt_allowed(attempt, [], limits)


def test_a_permitted_rerun_that_fails_hard_counts_and_is_not_rerun() -> None:
    trials = chain("t", ["infrastructure_invalid", "hard_constraint_fail", "task_pass"])
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-1",)
    assert out.not_permitted == frozenset({"t-2"})


# --------------------------------------------------------------- several trials of a task


def test_several_originals_first_results_and_counts() -> None:
    trials = [
        *chain("a", ["task_pass"]),
        *chain("b", ["hard_constraint_fail", "task_pass"]),
        *chain("c", ["infrastructure_invalid", "task_pass"]),
        *chain("d", ["grader_invalid", "grader_invalid", "task_pass"]),
        *chain("e", ["task_fail"]),
    ]
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("a-0", "b-0", "c-1", "d-0", "e-0")
    assert out.not_permitted == frozenset({"b-1", "d-1", "d-2"})
    assert out.first_results == {
        "a-0": "task_pass",
        "b-0": "hard_constraint_fail",
        "c-0": "infrastructure_invalid",
        "d-0": "grader_invalid",
        "e-0": "task_fail",
    }
    assert out.rerun_count == 4
    assert out.invalid_count == 2


def test_the_hard_failure_still_counts_in_the_statistics() -> None:
    trials = [
        *chain("a", ["task_pass"]),
        *chain("b", ["hard_constraint_fail", "task_pass"]),
        *chain("c", ["infrastructure_invalid", "task_pass"]),
    ]
    by_id = {t.trial_id: t for t in trials}
    out = resolve_reruns(trials, LIMITS)
    classes = [by_id[i].classification for i in out.effective]
    assert classes == ["task_pass", "hard_constraint_fail", "task_pass"]
    passed = tuple(c == "task_pass" for c in classes)
    block = task_block(TaskTrials("t", 3, passed, tuple(float(p) for p in passed)))
    assert (block["n"], block["passedCount"], block["passHatK"]) == (3, 2, 0.0)


def test_reruns_listed_before_their_parents() -> None:
    trials = list(reversed(chain("t", ["infrastructure_invalid", "task_pass"])))
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-1",)
    assert out.first_results == {"t-0": "infrastructure_invalid"}


# ------------------------------------------------------------- nothing is ever dropped

CLASS = st.sampled_from(CANONICAL_PRECEDENCE)


@st.composite
def forests(draw: st.DrawFn, siblings: bool) -> list[TrialNode]:
    """Originals, each with a chain of reruns (with `siblings`: a random tree of them)."""
    trials: list[TrialNode] = []
    for o in range(draw(st.integers(1, 4))):
        root = node(f"o{o}", draw(CLASS))
        trials.append(root)
        members = [root]
        for r in range(draw(st.integers(0, 4))):
            branch = siblings and draw(st.booleans())
            parent = draw(st.sampled_from(members)) if branch else members[-1]
            kid = node(f"o{o}-r{r}", draw(CLASS), parent.trial_id)
            trials.append(kid)
            members.append(kid)
    return trials


def test_reruns_of_an_excluded_sibling_rerun_are_labelled_too() -> None:
    # A hard failure rerun twice (two siblings), and the second rerun rerun again: no rerun
    # of a hard failure may stand in, so all three are stored and not permitted.
    trials = [
        node("t", "hard_constraint_fail"),
        node("t-r0", "task_pass", "t"),
        node("t-r1", "infrastructure_invalid", "t"),
        node("t-r1-r0", "task_pass", "t-r1"),
    ]
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t",)
    assert out.not_permitted == frozenset({"t-r0", "t-r1", "t-r1-r0"})
    assert out.rerun_count == 3


@settings(max_examples=100, deadline=None)
@given(forests(siblings=False))
def test_every_trial_of_rerun_chains_is_accounted_for(trials: list[TrialNode]) -> None:
    check_accounted_for(trials)


@settings(max_examples=100, deadline=None)
@given(forests(siblings=True))
def test_every_trial_of_rerun_trees_is_accounted_for(trials: list[TrialNode]) -> None:
    check_accounted_for(trials)


def check_accounted_for(trials: list[TrialNode]) -> None:
    out = resolve_reruns(trials, LIMITS)
    by_id = {t.trial_id: t for t in trials}
    originals = [t for t in trials if t.parent_trial_id is None]

    def root(trial_id: str) -> str:
        t = by_id[trial_id]
        while t.parent_trial_id is not None:
            t = by_id[t.parent_trial_id]
        return t.trial_id

    def depth(trial_id: str) -> int:
        t, d = by_id[trial_id], 0
        while t.parent_trial_id is not None:
            t, d = by_id[t.parent_trial_id], d + 1
        return d

    # One effective trial per original, from its own tree, never an excluded one.
    assert [root(i) for i in out.effective] == [t.trial_id for t in originals]
    assert not set(out.effective) & out.not_permitted
    assert out.first_results == {t.trial_id: t.classification for t in originals}
    assert out.rerun_count == len(trials) - len(originals)
    assert out.invalid_count == sum(
        t.classification in ("infrastructure_invalid", "grader_invalid") for t in originals
    )
    for trial_id in out.effective:
        t = by_id[trial_id]
        # Every step of the effective chain was permitted by its parent's class.
        assert depth(trial_id) <= max(LIMITS.values())
        while t.parent_trial_id is not None:
            parent = by_id[t.parent_trial_id]
            assert parent.classification in LIMITS
            t = parent
    # Every rerun is either on an effective chain or stored as not permitted.
    on_chains: set[str] = set()
    for trial_id in out.effective:
        t = by_id[trial_id]
        on_chains.add(t.trial_id)
        while t.parent_trial_id is not None:
            t = by_id[t.parent_trial_id]
            on_chains.add(t.trial_id)
    assert on_chains | out.not_permitted == set(by_id)
    assert not on_chains & out.not_permitted


LIMIT_CLASSES = ("infrastructure_invalid", "grader_invalid", "missing_required_evidence")
# Every listed class gets a limit and chains are mostly of listed classes, so that an earlier
# class stricter than the latest one (the case a latest-class-only rule gets wrong) is common.
limit_maps = st.fixed_dictionaries({c: st.integers(1, 4) for c in LIMIT_CLASSES})
invalid_chains = st.lists(st.sampled_from([*LIMIT_CLASSES, "task_pass"]), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(invalid_chains, limit_maps)
def test_the_effective_attempt_is_the_longest_prefix_every_earlier_class_allows(
    classes: list[str], limits: dict[str, int]
) -> None:
    """Brute force over one chain: attempt N stands only if N <= limit(c) for every earlier c."""
    from hypothesis import event

    reach = 1
    for n in range(2, len(classes) + 1):
        if any(n > limits.get(c, 1) for c in classes[: n - 1]):
            break
        reach = n
    # Would the latest earlier class alone have let the chain go on?
    stricter_earlier = reach < len(classes) and reach + 1 <= limits.get(classes[reach - 1], 1)
    event(f"stopped by an earlier class, not the latest: {stricter_earlier}")
    out = resolve_reruns(chain("t", classes), limits)
    assert out.effective == (f"t-{reach - 1}",)
    assert out.not_permitted == frozenset(f"t-{i}" for i in range(reach, len(classes)))


def test_a_rerun_whose_parent_is_not_among_the_trials_never_counts() -> None:
    # Its parent is not evidence here (another build or revision): the rerun and its own
    # reruns are stored as not permitted, never an extra original.
    trials = [
        node("a", "task_pass"),
        node("x-r0", "task_pass", "gone"),
        node("x-r0-r0", "task_pass", "x-r0"),
    ]
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("a",)
    assert out.not_permitted == frozenset({"x-r0", "x-r0-r0"})
    assert out.first_results == {"a": "task_pass"}
    assert out.rerun_count == 2


def test_of_several_reruns_of_one_trial_the_first_stored_is_the_candidate() -> None:
    trials = [
        node("t", "infrastructure_invalid"),
        node("t-late", "task_fail", "t"),
        node("t-later", "task_pass", "t"),
    ]
    out = resolve_reruns(trials, LIMITS)
    assert out.effective == ("t-late",)
    assert out.not_permitted == frozenset({"t-later"})
    swapped = resolve_reruns([trials[0], trials[2], trials[1]], LIMITS)
    assert swapped.effective == ("t-later",)
    assert swapped.not_permitted == frozenset({"t-late"})


def test_the_invalid_count_is_of_originals_whose_first_result_was_an_invalid_run() -> None:
    trials = [
        *chain("a", ["infrastructure_invalid", "infrastructure_invalid"]),
        *chain("b", ["grader_invalid"]),
        *chain("c", ["task_fail", "infrastructure_invalid"]),
        *chain("d", ["missing_required_evidence"]),
    ]
    out = resolve_reruns(trials, LIMITS)
    assert out.invalid_count == 2  # a and b; a rerun's class and other blocked classes aside
    assert out.rerun_count == 2


@pytest.mark.parametrize(
    "limits", [{}, {"infrastructure_invalid": 2}, {"grader_invalid": 1, "task_fail": 3}]
)
def test_no_trials_resolve_to_the_shared_empty_outcome(limits: dict[str, int]) -> None:
    # The compact evaluator uses NO_RERUNS for a task with no rerun chain instead of
    # resolving: nothing stands in, nothing is excluded, no rerun, no invalid original.
    for outcome in (resolve_reruns([], limits), NO_RERUNS):
        assert outcome.effective == ()
        assert outcome.not_permitted == frozenset()
        assert dict(outcome.first_results) == {}
        assert (outcome.rerun_count, outcome.invalid_count) == (0, 0)
    assert resolve_reruns([], limits) == NO_RERUNS
