"""Trajectory grading (RFC 0244 section A; docs/classification.md): pure, no database.

The four match modes, argsMatch, JSON deep equality, forbidden tools, delegate filtering,
the mode-independent `matchedCount` and the content-free block, checked on the RFC's own
example and on hand-built cases, then against brute force on small random inputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain.specs import ExpectedCall, TrajectoryExpectation
from evalops.domain.trajectory import (
    ObservedCall,
    TrajectoryResult,
    call_matches,
    grade,
    json_deep_equal,
    json_subset,
    maximum_matching,
    observed_trajectory,
)

MODES = ("exact", "in-order", "any-order", "subset")
BLOCK_KEYS = {"mode", "matched", "expectedCount", "observedCount", "matchedCount", "forbiddenCount"}


def expectation(
    mode: str,
    calls: Sequence[dict[str, Any]],
    forbidden: Sequence[str] = (),
    include_delegates: bool = False,
) -> TrajectoryExpectation:
    return TrajectoryExpectation.model_validate(
        {
            "match": mode,
            "calls": list(calls),
            "forbidden": list(forbidden),
            "includeDelegates": include_delegates,
        }
    )


def obs(tool: str, agent: str | None = None, **args: Any) -> ObservedCall:
    return ObservedCall(tool, args, agent)


def block(
    mode: str,
    matched: bool,
    expected: int,
    observed: int,
    matched_count: int,
    forbidden: int,
) -> dict[str, Any]:
    return {
        "mode": mode,
        "matched": matched,
        "expectedCount": expected,
        "observedCount": observed,
        "matchedCount": matched_count,
        "forbiddenCount": forbidden,
    }


# ----------------------------------------------------------------- the RFC's example suite

# RFC 0244 section A, verbatim: look the order up, then refund 4200 (args subset), in order,
# never call billing:refund-all, only the target agent's own calls.
RFC_CALLS = [
    {"tool": "crm:lookup-order", "argsMatch": "ignore"},
    {"tool": "billing:refund", "args": {"amountMinor": 4200}, "argsMatch": "subset"},
]
RFC_EXPECTATION = expectation("in-order", RFC_CALLS, forbidden=["billing:refund-all"])

LOOKUP = obs("crm:lookup-order", "support", orderId="A-1")
REFUND = obs("billing:refund", "support", orderId="A-1", amountMinor=4200, currency="EUR")


def test_rfc_in_order_with_args_subset_matches() -> None:
    reply = obs("helpdesk:reply", "support", ticketId="T-1042")
    result = grade(RFC_EXPECTATION, [LOOKUP, REFUND, reply], "support")
    assert result.block() == block("in-order", True, 2, 3, 2, 0)


def test_rfc_wrong_order_is_unmatched_but_both_calls_count() -> None:
    result = grade(RFC_EXPECTATION, [REFUND, LOOKUP], "support")
    assert result.block() == block("in-order", False, 2, 2, 2, 0)
    assert result.explanations, "an unmatched grade explains itself"


def test_rfc_forbidden_hit_reproduces_the_rfc_summary_block() -> None:
    # The RFC's reporting example: in-order, unmatched, 2 expected, 3 observed, 1 matched,
    # 1 forbidden. The refund of the wrong amount does not match the subset args.
    wrong_amount = obs("billing:refund", "support", orderId="A-1", amountMinor=999)
    refund_all = obs("billing:refund-all", "support", customerId="C-77")
    result = grade(RFC_EXPECTATION, [LOOKUP, wrong_amount, refund_all], "support")
    assert result.block() == {
        "mode": "in-order",
        "matched": False,
        "expectedCount": 2,
        "observedCount": 3,
        "matchedCount": 1,
        "forbiddenCount": 1,
    }


def test_rfc_forbidden_hit_fails_an_otherwise_matching_path() -> None:
    refund_all = obs("billing:refund-all", "support")
    result = grade(RFC_EXPECTATION, [LOOKUP, REFUND, refund_all], "support")
    assert result.block() == block("in-order", False, 2, 3, 2, 1)


def test_rfc_trajectory_only_subset_with_repeats() -> None:
    # Subset: no tools beyond the expected ones, each observed call matched to a distinct
    # expected call, so repeats need repeated expected entries.
    exp = expectation(
        "subset",
        [
            {"tool": "crm:lookup-order"},
            {"tool": "crm:lookup-order"},
            {"tool": "billing:refund", "args": {"amountMinor": 4200}, "argsMatch": "subset"},
        ],
    )
    two_lookups = grade(exp, [LOOKUP, LOOKUP, REFUND], "support")
    assert two_lookups.block() == block("subset", True, 3, 3, 3, 0)
    fewer = grade(exp, [LOOKUP, REFUND], "support")
    assert fewer.block() == block("subset", True, 3, 2, 2, 0)
    three_lookups = grade(exp, [LOOKUP, LOOKUP, LOOKUP], "support")
    assert three_lookups.block() == block("subset", False, 3, 3, 2, 0)


def test_rfc_exact_args_mismatch() -> None:
    exp = expectation(
        "exact",
        [
            {"tool": "crm:lookup-order"},
            {"tool": "billing:refund", "args": {"amountMinor": 4200}, "argsMatch": "exact"},
        ],
    )
    # REFUND carries orderId and currency too: exact argsMatch needs deep equality.
    result = grade(exp, [LOOKUP, REFUND], "support")
    assert result.block() == block("exact", False, 2, 2, 1, 0)
    only_amount = obs("billing:refund", "support", amountMinor=4200)
    assert grade(exp, [LOOKUP, only_amount], "support").matched


def test_example_registry_task_carries_the_rfc_expectation() -> None:
    import yaml

    from evalops.domain.specs import EvalTaskSpec
    from tests.helpers import EXAMPLE_REGISTRY

    raw = yaml.safe_load(
        (EXAMPLE_REGISTRY / "tasks" / "support-refund-in-order.yaml").read_text("utf-8")
    )
    task = EvalTaskSpec.model_validate(raw)
    assert task.contract.expected is not None
    assert task.contract.expected.trajectory == RFC_EXPECTATION


# ----------------------------------------------------------------- each mode, hand-built


@pytest.mark.parametrize(
    ("mode", "observed", "matched", "matched_count"),
    [
        # exact: same length and each position matches
        ("exact", ["a", "b", "c"], True, 3),
        ("exact", ["a", "c", "b"], False, 3),
        ("exact", ["a", "b", "c", "d"], False, 3),
        ("exact", ["a", "b"], False, 2),
        ("exact", [], False, 0),
        # in-order: expected is a subsequence of observed, extras allowed
        ("in-order", ["a", "b", "c"], True, 3),
        ("in-order", ["x", "a", "y", "b", "z", "c"], True, 3),
        ("in-order", ["a", "c", "b"], False, 3),
        ("in-order", ["a", "b"], False, 2),
        # any-order: every expected call matched to a distinct observed call
        ("any-order", ["c", "a", "b"], True, 3),
        ("any-order", ["c", "x", "a", "b", "a"], True, 3),
        ("any-order", ["a", "a", "b"], False, 2),
        ("any-order", [], False, 0),
        # subset: every observed call matched to a distinct expected call
        ("subset", ["c", "a"], True, 2),
        ("subset", ["b", "c", "a"], True, 3),
        ("subset", [], True, 0),
        ("subset", ["a", "a"], False, 1),
        ("subset", ["a", "x"], False, 1),
    ],
)
def test_modes_on_hand_built_cases(
    mode: str, observed: list[str], matched: bool, matched_count: int
) -> None:
    exp = expectation(mode, [{"tool": "a"}, {"tool": "b"}, {"tool": "c"}])
    result = grade(exp, [obs(t) for t in observed])
    assert result.block() == block(mode, matched, 3, len(observed), matched_count, 0)


def test_matched_count_is_mode_independent() -> None:
    observed = [obs("c"), obs("b"), obs("x"), obs("a")]
    counts = set()
    for mode in MODES:
        exp = expectation(mode, [{"tool": "a"}, {"tool": "b"}, {"tool": "c"}])
        counts.add(grade(exp, observed).matched_count)
    assert counts == {3}


def test_empty_expectation() -> None:
    assert grade(expectation("exact", []), []).matched
    assert grade(expectation("in-order", []), [obs("a")]).matched
    assert grade(expectation("any-order", []), [obs("a")]).matched
    assert not grade(expectation("subset", []), [obs("a")]).matched
    assert not grade(expectation("exact", []), [obs("a")]).matched


# ------------------------------------------------- greedy first-match gives the wrong answer

OVERLAP_EXPECTED = [
    {"tool": "a", "args": {}, "argsMatch": "subset"},  # matches any call to a
    {"tool": "a", "args": {"x": 1}, "argsMatch": "subset"},  # only a{x:1}
]
OVERLAP_OBSERVED = [obs("a", x=1), obs("a", z=3)]


def _greedy_expected_first(exp: TrajectoryExpectation, observed: list[ObservedCall]) -> int:
    used: set[int] = set()
    for call in exp.calls:
        for j, seen in enumerate(observed):
            if j not in used and call_matches(call, seen):
                used.add(j)
                break
    return len(used)


def _greedy_observed_first(exp: TrajectoryExpectation, observed: list[ObservedCall]) -> int:
    used: set[int] = set()
    for seen in observed:
        for i, call in enumerate(exp.calls):
            if i not in used and call_matches(call, seen):
                used.add(i)
                break
    return len(used)


def test_any_order_overlapping_args_needs_a_maximum_matching() -> None:
    exp = expectation("any-order", OVERLAP_EXPECTED)
    # The trap this test guards: greedy gives a{} the only a{x:1}, leaving a{x:1} nothing.
    assert _greedy_expected_first(exp, OVERLAP_OBSERVED) == 1
    result = grade(exp, OVERLAP_OBSERVED)
    assert result.block() == block("any-order", True, 2, 2, 2, 0)


def test_subset_overlapping_args_needs_a_maximum_matching() -> None:
    exp = expectation("subset", OVERLAP_EXPECTED)
    assert _greedy_observed_first(exp, OVERLAP_OBSERVED) == 1
    result = grade(exp, OVERLAP_OBSERVED)
    assert result.block() == block("subset", True, 2, 2, 2, 0)


def test_ignore_args_overlap_in_subset_mode() -> None:
    # The same trap with argsMatch ignore as the catch-all, listed first.
    exp = expectation(
        "subset",
        [
            {"tool": "a", "argsMatch": "ignore"},
            {"tool": "a", "args": {"x": 1}, "argsMatch": "exact"},
        ],
    )
    result = grade(exp, [obs("a", x=1), obs("a", x=2)])
    assert result.matched
    assert result.matched_count == 2


def test_matched_count_beats_greedy_in_every_mode() -> None:
    for mode in MODES:
        result = grade(expectation(mode, OVERLAP_EXPECTED), OVERLAP_OBSERVED)
        assert result.matched_count == 2, mode


def test_in_order_with_overlapping_args() -> None:
    exp = expectation("in-order", OVERLAP_EXPECTED)
    # a{} then a{x:1}: no a{x:1} comes after any a call here.
    assert not grade(exp, OVERLAP_OBSERVED).matched
    assert grade(exp, [obs("a", x=1), obs("a", z=3), obs("a", x=1)]).matched
    assert grade(exp, [obs("a", z=3), obs("a", x=1)]).matched


def test_exact_with_overlapping_args_is_positional() -> None:
    exp = expectation("exact", OVERLAP_EXPECTED)
    assert not grade(exp, OVERLAP_OBSERVED).matched
    assert grade(exp, [obs("a", z=3), obs("a", x=1, y=2)]).matched


# --------------------------------------------------------------------- JSON deep equality


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (1.0, 1, True),
        (0, -0.0, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (True, True, True),
        ("1", 1, False),
        (1, "1", False),
        (None, None, True),
        (None, 0, False),
        (None, False, False),
        ([1, 2], [1.0, 2.0], True),
        ([1, 2], [2, 1], False),
        ([1, 2], [1, 2, 3], False),
        ([True], [1], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": {"b": [1, {"c": True}]}}, {"a": {"b": [1.0, {"c": True}]}}, True),
        ({"a": {"b": [1, {"c": True}]}}, {"a": {"b": [1.0, {"c": 1}]}}, False),
        ([], {}, False),
        ("", None, False),
    ],
)
def test_json_deep_equal(a: Any, b: Any, equal: bool) -> None:
    assert json_deep_equal(a, b) is equal
    assert json_deep_equal(b, a) is equal


def test_true_vs_1_in_args() -> None:
    for how in ("exact", "subset"):
        call = ExpectedCall(tool="t", args={"flag": True}, argsMatch=how)
        assert call_matches(call, obs("t", flag=True))
        assert not call_matches(call, obs("t", flag=1)), how
        one = ExpectedCall(tool="t", args={"flag": 1}, argsMatch=how)
        assert not call_matches(one, obs("t", flag=True)), how


def test_1_vs_1_0_in_args() -> None:
    for how in ("exact", "subset"):
        call = ExpectedCall(tool="t", args={"amountMinor": 4200}, argsMatch=how)
        assert call_matches(call, obs("t", amountMinor=4200.0)), how
        assert not call_matches(call, obs("t", amountMinor="4200")), how
        assert not call_matches(call, obs("t", amountMinor=4200.5)), how


def test_trajectory_grade_reads_true_vs_1() -> None:
    exp = expectation("exact", [{"tool": "t", "args": {"confirm": True}, "argsMatch": "exact"}])
    assert grade(exp, [obs("t", confirm=True)]).matched
    assert not grade(exp, [obs("t", confirm=1)]).matched
    exp_num = expectation("exact", [{"tool": "t", "args": {"n": 1}, "argsMatch": "exact"}])
    assert grade(exp_num, [obs("t", n=1.0)]).matched


# ------------------------------------------------------------------ nested subset key paths


@pytest.mark.parametrize(
    ("observed", "present"),
    [
        ({"order": {"id": "A-1", "amount": {"minor": 4200, "currency": "EUR"}}}, True),
        (
            {
                "order": {"id": "A-1", "amount": {"minor": 4200.0, "currency": "EUR"}, "n": 1},
                "note": "x",
            },
            True,
        ),
        ({"order": {"id": "A-1", "amount": {"minor": 4200}}}, False),  # a leaf missing
        ({"order": {"id": "A-1", "amount": {"minor": 42, "currency": "EUR"}}}, False),
        ({"order": {"id": "A-1", "amount": 4200}}, False),  # object expected, scalar seen
        ({"order": {"amount": {"minor": 4200, "currency": "EUR"}}}, False),  # sibling missing
        ({"order": "A-1"}, False),
        ({}, False),
    ],
)
def test_nested_subset_key_paths(observed: dict[str, Any], present: bool) -> None:
    expected = {"order": {"id": "A-1", "amount": {"minor": 4200, "currency": "EUR"}}}
    assert json_subset(expected, observed) is present
    call = ExpectedCall(tool="t", args=expected, argsMatch="subset")
    assert call_matches(call, ObservedCall("t", observed)) is present


def test_subset_arrays_are_values_not_key_paths() -> None:
    expected = {"items": [1, {"sku": "X"}]}
    assert json_subset(expected, {"items": [1.0, {"sku": "X"}], "more": True})
    assert not json_subset(expected, {"items": [1, {"sku": "X"}, 2]})
    assert not json_subset(expected, {"items": [1, {"sku": "X", "qty": 2}]})
    assert not json_subset(expected, {"items": [{"sku": "X"}, 1]})


def test_subset_nested_true_vs_1() -> None:
    assert not json_subset({"a": {"b": True}}, {"a": {"b": 1}})
    assert json_subset({"a": {"b": 1}}, {"a": {"b": 1.0, "c": None}})


def test_exact_args_are_not_a_subset_check() -> None:
    call = ExpectedCall(tool="t", args={"a": {"b": 1}}, argsMatch="exact")
    assert call_matches(call, obs("t", a={"b": 1.0}))
    assert not call_matches(call, obs("t", a={"b": 1, "c": 2}))
    assert not call_matches(call, obs("t", a={"b": 1}, z=0))


def test_ignore_args_and_tool_names() -> None:
    call = ExpectedCall(tool="crm:lookup-order", args={"orderId": "A-1"}, argsMatch="ignore")
    assert call_matches(call, obs("crm:lookup-order", orderId="B-2"))
    assert not call_matches(call, obs("crm:lookup-orders", orderId="A-1"))
    assert not call_matches(call, obs("CRM:lookup-order"))
    default = ExpectedCall(tool="t")
    assert default.argsMatch == "ignore"
    assert call_matches(default, obs("t", anything=[1, 2]))


# ----------------------------------------------------------------- forbidden under every mode


@pytest.mark.parametrize("mode", MODES)
def test_forbidden_listed_and_made_fails_every_mode(mode: str) -> None:
    # Expected lists the forbidden tool itself, so without `forbidden` every mode matches.
    calls = [{"tool": "crm:lookup-order"}, {"tool": "billing:refund-all"}]
    observed = [obs("crm:lookup-order"), obs("billing:refund-all")]
    assert grade(expectation(mode, calls), observed).matched
    result = grade(expectation(mode, calls, forbidden=["billing:refund-all"]), observed)
    assert result.block() == block(mode, False, 2, 2, 2, 1)


@pytest.mark.parametrize("mode", ("in-order", "any-order"))
def test_forbidden_extra_call_fails_modes_that_allow_extras(mode: str) -> None:
    calls = [{"tool": "a"}]
    observed = [obs("a"), obs("bad"), obs("bad")]
    assert grade(expectation(mode, calls), observed).matched
    result = grade(expectation(mode, calls, forbidden=["bad"]), observed)
    assert result.block() == block(mode, False, 1, 3, 1, 2)


@pytest.mark.parametrize("mode", MODES)
def test_forbidden_tool_not_called_does_not_fail(mode: str) -> None:
    exp = expectation(mode, [{"tool": "a"}], forbidden=["bad", "worse"])
    result = grade(exp, [obs("a")])
    assert result.block() == block(mode, True, 1, 1, 1, 0)


# --------------------------------------------------------------------- delegates in and out

DELEGATED = [
    obs("crm:lookup-order", "support"),
    obs("billing:refund-all", "helper"),  # a delegate's forbidden call
    obs("billing:refund", "support", amountMinor=4200),
    obs("kb:search", "helper"),
    obs("helpdesk:reply", None),  # a call with no agent id
]


def test_target_agent_filtering_excludes_delegates() -> None:
    assert observed_trajectory(DELEGATED, "support", False) == [DELEGATED[0], DELEGATED[2]]
    result = grade(RFC_EXPECTATION, DELEGATED, "support")
    # The delegate's forbidden call is not in the target agent's trajectory.
    assert result.block() == block("in-order", True, 2, 2, 2, 0)


def test_target_agent_filtering_in_exact_mode() -> None:
    exp = expectation("exact", RFC_CALLS)
    assert grade(exp, DELEGATED, "support").matched
    assert not grade(exp, DELEGATED, "helper").matched
    assert grade(exp, DELEGATED, "helper").observed_count == 2


def test_include_delegates_grades_every_call_in_log_order() -> None:
    exp = expectation("in-order", RFC_CALLS, ["billing:refund-all"], include_delegates=True)
    assert observed_trajectory(DELEGATED, "support", True) == DELEGATED
    result = grade(exp, DELEGATED, "support")
    assert result.block() == block("in-order", False, 2, 5, 2, 1)
    exact = expectation("exact", RFC_CALLS, include_delegates=True)
    assert not grade(exact, DELEGATED, "support").matched


def test_include_delegates_subset_sees_delegate_tools() -> None:
    own_only = expectation("subset", RFC_CALLS)
    assert grade(own_only, DELEGATED, "support").matched
    with_delegates = expectation("subset", RFC_CALLS, include_delegates=True)
    result = grade(with_delegates, DELEGATED, "support")
    assert result.block() == block("subset", False, 2, 5, 2, 0)


def test_record_without_target_agent_grades_every_call() -> None:
    assert observed_trajectory(DELEGATED, None, False) == DELEGATED
    result = grade(RFC_EXPECTATION, DELEGATED, None)
    assert result.block() == block("in-order", False, 2, 5, 2, 1)
    assert grade(RFC_EXPECTATION, DELEGATED).observed_count == 5


def test_target_agent_with_no_own_calls() -> None:
    result = grade(RFC_EXPECTATION, DELEGATED, "nobody")
    assert result.block() == block("in-order", False, 2, 0, 0, 0)


# ----------------------------------------------------------------------- content-free block


def test_block_keys_are_exactly_the_rfc_counts() -> None:
    result = grade(RFC_EXPECTATION, [LOOKUP, REFUND, obs("billing:refund-all", "support")])
    out = result.block()
    assert set(out) == BLOCK_KEYS
    assert isinstance(out["matched"], bool)
    for key in BLOCK_KEYS - {"mode", "matched"}:
        assert type(out[key]) is int, key
    assert out["mode"] in MODES
    # No tool name, argument or result leaks into the block.
    text = repr(out)
    for leak in ("billing", "crm", "refund", "4200", "A-1", "support"):
        assert leak not in text


def test_block_round_trips() -> None:
    result = grade(RFC_EXPECTATION, [REFUND, LOOKUP], "support")
    again = TrajectoryResult.from_block(result.block())
    assert again.block() == result.block()


# ------------------------------------------------------------------ maximum matching itself


def test_maximum_matching_finds_augmenting_paths() -> None:
    # left 0 can use right 0 or 1, left 1 only right 0: greedy 0->0 blocks left 1.
    assert maximum_matching([[0, 1], [0]], 2) == [1, 0]
    assert maximum_matching([[0], [0], [0]], 1).count(None) == 2
    assert maximum_matching([], 3) == []
    assert maximum_matching([[], []], 0) == [None, None]


# --------------------------------------------------------------- brute force on small inputs

TOOLS = ("a", "b")
# Values that are JSON-deep-equal without being alike (1 and 1.0, 2^60 as int and float,
# [1] and [1.0]) and alike-looking values that are not (true and 1): the matching groups
# interchangeable calls, and must never group two that compare differently.
ARG_VALUES = st.sampled_from(
    [1, 1.0, True, "1", None, [1], [1.0], {"y": 1}, {"y": 1.0}, {}, 2**60, float(2**60), -0.0]
)
ARGS = st.dictionaries(st.sampled_from(["x", "y"]), ARG_VALUES, max_size=2)
EXPECTED_CALL = st.builds(
    lambda tool, args, how: {"tool": tool, "args": args, "argsMatch": how},
    st.sampled_from(TOOLS),
    ARGS,
    st.sampled_from(["ignore", "exact", "subset"]),
)
OBSERVED_CALL = st.builds(ObservedCall, st.sampled_from((*TOOLS, "c")), ARGS)


def _brute_matching(exp: TrajectoryExpectation, observed: Sequence[ObservedCall]) -> int:
    """Exhaustive maximum one-to-one matching size."""

    def best(i: int, used: frozenset[int]) -> int:
        if i == len(exp.calls):
            return 0
        out = best(i + 1, used)
        for j, seen in enumerate(observed):
            if j not in used and call_matches(exp.calls[i], seen):
                out = max(out, 1 + best(i + 1, used | {j}))
        return out

    return best(0, frozenset())


def _brute_in_order(exp: TrajectoryExpectation, observed: Sequence[ObservedCall]) -> bool:
    n = len(exp.calls)
    return any(
        all(call_matches(exp.calls[i], observed[j]) for i, j in enumerate(positions))
        for positions in itertools.combinations(range(len(observed)), n)
    )


@settings(max_examples=250, deadline=None)
@given(
    st.lists(EXPECTED_CALL, max_size=4),
    st.lists(OBSERVED_CALL, max_size=5),
    st.sampled_from(MODES),
    st.lists(st.sampled_from((*TOOLS, "c")), max_size=1),
)
def test_grade_agrees_with_brute_force(
    calls: list[dict[str, Any]],
    observed: list[ObservedCall],
    mode: str,
    forbidden: list[str],
) -> None:
    exp = expectation(mode, calls, forbidden)
    result = grade(exp, observed)
    best = _brute_matching(exp, observed)
    assert result.matched_count == best
    assert result.expected_count == len(calls)
    assert result.observed_count == len(observed)
    forbidden_count = sum(1 for c in observed if c.tool in forbidden)
    assert result.forbidden_count == forbidden_count
    if mode == "exact":
        ok = len(calls) == len(observed) and all(
            call_matches(e, o) for e, o in zip(exp.calls, observed, strict=False)
        )
    elif mode == "in-order":
        ok = _brute_in_order(exp, observed)
    elif mode == "any-order":
        ok = best == len(calls)
    else:
        ok = best == len(observed)
    assert result.matched is (ok and forbidden_count == 0)
    assert set(result.block()) == BLOCK_KEYS


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=5, unique=True), max_size=5))
def test_maximum_matching_is_maximum_and_valid(adjacency: list[list[int]]) -> None:
    result = maximum_matching(adjacency, 5)
    assert len(result) == len(adjacency)
    rights = [r for r in result if r is not None]
    assert len(rights) == len(set(rights))
    for left, right in enumerate(result):
        assert right is None or right in adjacency[left]

    def best(i: int, used: frozenset[int]) -> int:
        if i == len(adjacency):
            return 0
        out = best(i + 1, used)
        for r in adjacency[i]:
            if r not in used:
                out = max(out, 1 + best(i + 1, used | {r}))
        return out

    assert len(rights) == best(0, frozenset())


# -- what reports and `trials show` read back from a graded trajectory ---------------------


def test_the_block_in_words_names_mode_counts_and_verdict() -> None:
    from evalops.domain.trajectory import TrajectoryResult

    ok = TrajectoryResult("in-order", True, 2, 3, 2, 0)
    assert ok.describe() == (
        "matched (in-order): 2 of 2 expected calls matched, 3 observed, 0 forbidden"
    )
    bad = TrajectoryResult("exact", False, 1, 5, 0, 1)
    assert bad.describe() == (
        "NOT matched (exact): 0 of 1 expected call matched, 5 observed, 1 forbidden"
    )


def test_the_stored_block_keeps_tool_names_and_states_and_reads_back_whole() -> None:
    from evalops.domain.trajectory import TrajectoryResult

    result = TrajectoryResult(
        "any-order",
        False,
        2,
        1,
        1,
        1,
        explanations=("not stored",),
        calls=(("crm:lookup", "matched"), ("billing:refund", "missing")),
        forbidden_called=("billing:refund-twice",),
    )
    stored = result.stored()
    assert stored == {
        "mode": "any-order",
        "matched": False,
        "expectedCount": 2,
        "observedCount": 1,
        "matchedCount": 1,
        "forbiddenCount": 1,
        "expected": [
            {"tool": "crm:lookup", "state": "matched"},
            {"tool": "billing:refund", "state": "missing"},
        ],
        "forbiddenCalled": ["billing:refund-twice"],
    }
    again = TrajectoryResult.from_block(stored)
    assert (again.calls, again.forbidden_called) == (result.calls, result.forbidden_called)
    assert again.block() == result.block()
    # A block stored before the per-call detail was kept reads back with none.
    old = TrajectoryResult.from_block(result.block())
    assert (old.calls, old.forbidden_called, old.block()) == ((), (), result.block())


def test_each_expected_call_is_matched_out_of_order_or_missing_by_mode() -> None:
    from evalops.domain.trajectory import ObservedCall, call_states

    a, b = ExpectedCall(tool="a"), ExpectedCall(tool="b")
    seen_ba = [ObservedCall("b", {}), ObservedCall("a", {})]
    # exact: each call at its own position.
    assert call_states("exact", [a, b], seen_ba, [True, True]) == ["out_of_order"] * 2
    assert call_states("exact", [a, b], [ObservedCall("a", {})], [True, False]) == [
        "matched",
        "missing",
    ]
    # in-order: `a` found, then `b` must come after it.
    assert call_states("in-order", [a, b], seen_ba, [True, True]) == ["matched", "out_of_order"]
    assert call_states(
        "in-order", [a, b], [ObservedCall("a", {}), ObservedCall("b", {})], [True, True]
    ) == ["matched", "matched"]
    # any-order: found anywhere is matched; not found is missing.
    assert call_states("any-order", [a, b], seen_ba[:1], [False, True]) == ["missing", "matched"]


def test_an_unmatched_expected_call_is_described_by_how_its_arguments_match() -> None:
    """The explanation names the tool and, unless its arguments are ignored or absent,
    whether they must be exactly these or include these (the keys, sorted)."""
    from evalops.domain.specs import TrajectoryExpectation
    from evalops.domain.trajectory import ObservedCall, grade

    expectation = TrajectoryExpectation.model_validate(
        {
            "match": "any-order",
            "calls": [
                {"tool": "a:ignored", "args": {"x": 1}, "argsMatch": "ignore"},
                {"tool": "b:bare", "argsMatch": "exact"},
                {"tool": "c:exact", "args": {"z": 1, "y": 2}, "argsMatch": "exact"},
                {"tool": "d:subset", "args": {"q": 1, "p": 2}, "argsMatch": "subset"},
            ],
        }
    )
    result = grade(expectation, [ObservedCall("other:tool", {}, None)])
    assert result.explanations == (
        "expected a call to a:ignored, but no observed call matched",
        "expected a call to b:bare, but no observed call matched",
        "expected a call to c:exact with exactly these arguments y, z, but no observed call "
        "matched",
        "expected a call to d:subset with arguments including p, q, but no observed call matched",
    )


def test_json_deep_equal_compares_strings_by_value() -> None:
    from evalops.domain.trajectory import json_deep_equal

    assert json_deep_equal("a", "a") is True
    assert json_deep_equal("a", "b") is False
    assert json_deep_equal(["a"], ["b"]) is False
    assert json_deep_equal({"k": "a"}, {"k": "b"}) is False


def _expect(match: str, tools: list[str], forbidden: Sequence[str] = ()) -> TrajectoryExpectation:
    return TrajectoryExpectation.model_validate(
        {"match": match, "calls": [{"tool": t} for t in tools], "forbidden": list(forbidden)}
    )


def _seen(*tools: str) -> list[ObservedCall]:
    return [ObservedCall(t, {}, None) for t in tools]


def test_each_mode_explains_a_mismatch_in_words() -> None:
    """What `trials show` prints under an unmatched trajectory, mode by mode, and each
    expected call's state (docs/classification.md: exact, in-order, any-order, subset)."""
    from evalops.domain.trajectory import grade

    short = grade(_expect("exact", ["t:a", "t:b"]), _seen("t:a"))
    assert short.explanations == (
        "expected a call to t:b, but no observed call matched",
        "exact mode needs 2 calls in order, 1 was made",
    )
    assert short.calls == (("t:a", "matched"), ("t:b", "missing"))
    long = grade(_expect("exact", ["t:a"]), _seen("t:a", "t:x", "t:y"))
    assert long.explanations == ("exact mode needs 1 call in order, 3 were made",)
    swapped = grade(_expect("exact", ["t:a", "t:b"]), _seen("t:b", "t:a"))
    assert (swapped.matched, swapped.explanations) == (False, ())
    assert swapped.calls == (("t:a", "out_of_order"), ("t:b", "out_of_order"))
    in_order = grade(_expect("in-order", ["t:a", "t:b"]), _seen("t:b", "t:a"))
    assert in_order.explanations == ("every expected call was made, but not in the expected order",)
    one_missing = grade(_expect("in-order", ["t:a", "t:b"]), _seen("t:a", "t:x"))
    assert one_missing.explanations == ("expected a call to t:b, but no observed call matched",)
    subset = grade(_expect("subset", ["t:a"]), _seen("t:a", "t:x", "t:y"))
    assert subset.explanations == ("2 observed calls beyond the expected ones",)
    assert subset.calls == (("t:a", "matched"),)


def test_forbidden_calls_are_named_once_each() -> None:
    from evalops.domain.trajectory import grade

    result = grade(
        _expect("any-order", ["t:a"], forbidden=["t:f", "t:g"]),
        _seen("t:g", "t:a", "t:f", "t:g"),
    )
    assert result.matched is False
    assert result.forbidden_count == 3
    assert result.explanations == ("3 calls to forbidden tools: t:f, t:g",)
    assert result.forbidden_called == ("t:f", "t:g")
    # A forbidden tool that is also the expected call: every observed call is matched, yet
    # the trajectory is not, and no call is "beyond the expected ones".
    own = grade(_expect("subset", ["t:f"], forbidden=["t:f"]), _seen("t:f"))
    assert (own.matched, own.explanations) == (False, ("1 call to forbidden tools: t:f",))


# -- the matching's shortcuts: interchangeable calls grouped, candidates found by index ------
#
# The maximum matching groups calls with the same tool and arguments into one node and finds
# an expected call's candidates through indexes on tool, whole arguments and top-level
# argument values (evalops/domain/matching.py, `_Candidates`). Both key arguments by their
# JSON text: these cases are the ones where the text and JSON equality could part ways.


@pytest.mark.parametrize("mode", ("any-order", "subset"))
def test_arguments_in_another_key_order_are_the_same_arguments(mode: str) -> None:
    """JSON objects are unordered: json_deep_equal compares keys, not their order, so an
    observed call that writes the expected arguments in another order matches, whole
    (exact) or as an array value (subset)."""
    exp = expectation(
        mode,
        [
            {"tool": "t", "args": {"a": 1, "b": 2}, "argsMatch": "exact"},
            {"tool": "u", "args": {"items": [{"sku": "X", "qty": 2}]}, "argsMatch": "subset"},
        ],
    )
    observed = [
        ObservedCall("u", {"note": "n", "items": [{"qty": 2, "sku": "X"}]}),
        ObservedCall("t", {"b": 2, "a": 1}),
    ]
    assert grade(exp, observed).block() == block(mode, True, 2, 2, 2, 0)


@pytest.mark.parametrize("mode", ("any-order", "subset"))
def test_an_integral_float_is_the_integer_it_equals_when_matching(mode: str) -> None:
    """`1 == 1.0` in JSON (json_deep_equal), whichever side writes the float, for exact
    arguments and for a subset's top-level value: each call is matched, not only equal."""
    exp = expectation(
        mode,
        [
            {"tool": "t", "args": {"n": 1}, "argsMatch": "exact"},
            {"tool": "t", "args": {"k": 3.0}, "argsMatch": "exact"},
            {"tool": "t", "args": {"m": 2}, "argsMatch": "subset"},
        ],
    )
    observed = [obs("t", m=2.0, extra=0), obs("t", k=3), obs("t", n=1.0)]
    assert grade(exp, observed).block() == block(mode, True, 3, 3, 3, 0)


@pytest.mark.parametrize("mode", ("any-order", "subset"))
def test_arrays_that_differ_are_different_arguments(mode: str) -> None:
    """`[1]` and `[2]` are different values (json_deep_equal compares arrays element-wise):
    calls that differ only inside an array are not interchangeable, each is matched to its
    own."""
    exp = expectation(
        mode,
        [
            {"tool": "t", "args": {"v": [1]}, "argsMatch": "exact"},
            {"tool": "t", "args": {"v": [2]}, "argsMatch": "exact"},
            {"tool": "t", "args": {"w": [3]}, "argsMatch": "subset"},
        ],
    )
    observed = [obs("t", w=[4]), obs("t", v=[2]), obs("t", w=[3]), obs("t", v=[1])]
    result = grade(exp, observed)
    assert result.matched_count == 3
    assert result.calls == (("t", "matched"),) * 3
    assert result.matched is (mode == "any-order")  # subset: t{w:[4]} matches nothing


def test_a_nested_object_argument_is_matched_key_path_by_key_path_in_a_grade() -> None:
    """A subset's object value is compared key path by key path (json_subset: extra observed
    keys are fine at every depth), when grading as when comparing one call."""
    exp = expectation(
        "any-order",
        [{"tool": "t", "args": {"order": {"id": "A-1"}, "currency": "EUR"}, "argsMatch": "subset"}],
    )
    seen = obs("t", order={"id": "A-1", "amount": 4200}, currency="EUR")
    assert call_matches(exp.calls[0], seen)
    assert grade(exp, [seen]).block() == block("any-order", True, 1, 1, 1, 0)


@pytest.mark.parametrize("mode", ("any-order", "subset"))
def test_integers_too_long_to_write_as_text_are_still_matched_call_by_call(mode: str) -> None:
    """Python refuses to write an integer of more than 4,300 digits as text, so arguments
    holding one have no JSON text to group or index them by (`_args_key`); they are
    compared with every candidate instead, and still compare exactly: `big` and `big + 1`
    are two values, each expected call matched to its own observed call."""
    big = 10**5000
    exp = expectation(
        mode,
        [
            {"tool": "t", "args": {"n": big}, "argsMatch": "exact"},
            {"tool": "t", "args": {"n": big + 1}, "argsMatch": "exact"},
            {"tool": "t", "args": {"n": big}, "argsMatch": "subset"},
        ],
    )
    observed = [obs("t", n=big + 1), obs("t", n=big, note="x"), obs("t", n=big)]
    assert grade(exp, observed).block() == block(mode, True, 3, 3, 3, 0)
    assert grade(exp, observed[:2]).matched_count == 2


def test_interchangeable_calls_are_one_node_of_the_matching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """matching.py: calls that are interchangeable (the same tool and the same arguments)
    are one node with a capacity, "so that a thousand identical calls cost one node, not a
    million edges". Expected calls are grouped by tool, argsMatch and arguments, the
    arguments of an `ignore` call left out (they are not compared)."""
    from evalops.domain import trajectory
    from evalops.domain.matching import grouped_matching as real

    seen: list[tuple[list[int], list[int], list[tuple[int, int]]]] = []

    def spy(
        left: Sequence[int], right: Sequence[int], pairs: Sequence[tuple[int, int]]
    ) -> list[int]:
        seen.append((list(left), list(right), sorted(pairs)))
        return real(left, right, pairs)

    monkeypatch.setattr(trajectory, "grouped_matching", spy)
    n = 100
    calls = (
        [{"tool": "t", "args": {"x": 1}, "argsMatch": "exact"}] * n
        + [{"tool": "t", "args": {"x": 1}, "argsMatch": "subset"}] * n
        + [{"tool": "u", "args": {"k": i}, "argsMatch": "ignore"} for i in range(n)]
    )
    observed = [obs("t", x=1)] * (2 * n) + [obs("u", k=0)] * n
    result = grade(expectation("any-order", calls), observed)
    assert result.block() == block("any-order", True, 3 * n, 3 * n, 3 * n, 0)
    assert seen == [([n, n, n], [2 * n, n], [(0, 0), (1, 0), (2, 1)])]


def test_an_expected_call_is_compared_only_with_calls_its_arguments_can_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_Candidates`: an expected call's candidates are found "through indexes on tool,
    whole arguments and top-level argument values instead of trying every group": among a
    hundred calls to one tool, an exact call is compared with the one of its arguments, a
    subset call with the one holding its first top-level value that is not an object."""
    from evalops.domain import trajectory

    compared: list[tuple[str, int]] = []
    real = trajectory.call_matches

    def spy(expected: ExpectedCall, observed: ObservedCall) -> bool:
        compared.append((expected.argsMatch, observed.args["i"]))
        return real(expected, observed)

    monkeypatch.setattr(trajectory, "call_matches", spy)
    observed = [obs("t", i=i, meta={"a": 1, "b": i}) for i in range(100)]
    calls = [
        {"tool": "t", "args": {"i": 7, "meta": {"a": 1, "b": 7}}, "argsMatch": "exact"},
        {"tool": "t", "args": {"meta": {"a": 1}, "i": 8}, "argsMatch": "subset"},
    ]
    result = grade(expectation("any-order", calls), observed)
    assert result.block() == block("any-order", True, 2, 100, 2, 0)
    assert compared == [("exact", 7), ("subset", 8)]


@pytest.mark.parametrize("mode", ("exact", "in-order"))
def test_call_states_refuses_flags_for_another_number_of_calls(mode: str) -> None:
    """call_states answers one state per expected call: where the mode places the calls
    itself, `covered` flags for fewer or more calls than expected are an error, never an
    answer cut short or padded."""
    from evalops.domain.trajectory import call_states

    a, b = ExpectedCall(tool="a"), ExpectedCall(tool="b")
    seen = [ObservedCall("a", {}), ObservedCall("b", {})]
    assert call_states(mode, [a, b], seen, [True, True]) == ["matched", "matched"]
    for covered in ([True], [True, True, True]):
        with pytest.raises(ValueError, match="zip"):
            call_states(mode, [a, b], seen, covered)


def test_not_matched_with_every_expected_call_made_names_the_mode_s_rule() -> None:
    """`NOT matched (in-order): 2 of 2 expected calls matched` read as a contradiction."""
    from evalops.domain.trajectory import TrajectoryResult

    block = {
        "mode": "in-order", "matched": False, "expectedCount": 2, "observedCount": 2,
        "matchedCount": 2, "forbiddenCount": 0,
    }  # fmt: skip
    assert TrajectoryResult.from_block(block).describe() == (
        "NOT matched (in-order): 2 of 2 expected calls matched, 2 observed, 0 forbidden; "
        "every expected call was made, but not as in-order requires"
    )
    # A miss, or a forbidden call, says why by its counts already.
    missed = TrajectoryResult.from_block({**block, "matchedCount": 1}).describe()
    forbidden = TrajectoryResult.from_block({**block, "forbiddenCount": 1}).describe()
    assert "every expected call" not in missed + forbidden
