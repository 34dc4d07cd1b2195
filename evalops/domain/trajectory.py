"""Trajectory grading (RFC 0244 section A; docs/classification.md), as pure functions.

"Matched to a distinct" always means a maximum bipartite matching, never a greedy first
match: with overlapping `argsMatch` a greedy pass can take the only observed call a later
expected call could use, and call a matchable trajectory unmatched.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalops.domain.humanize import plural
from evalops.domain.matching import grouped_matching, maximum_matching

if TYPE_CHECKING:  # the stored result block is read without the spec models (pydantic)
    from evalops.domain.specs import ExpectedCall, TrajectoryExpectation

if TYPE_CHECKING:
    from evalops.domain.gate_documents import TrajectoryCounts

__all__ = ["ObservedCall", "TrajectoryResult", "grade", "maximum_matching"]

CALL_STATES = ("matched", "out_of_order", "missing")
"""What became of one expected call: made where the mode wants it; made, but not where the
mode wants it (exact and in-order modes); or never made (no distinct observed call)."""


@dataclass(frozen=True)
class ObservedCall:
    tool: str
    args: Mapping[str, Any]
    agent_id: str | None = None


@dataclass(frozen=True)
class TrajectoryResult:
    """The content-free block of RFC 0244 (counts only), plus explanations for people."""

    mode: str
    matched: bool
    expected_count: int
    observed_count: int
    matched_count: int
    forbidden_count: int
    explanations: tuple[str, ...] = ()
    calls: tuple[tuple[str, str], ...] = ()
    """(tool name, state) of each expected call in order, a state of CALL_STATES."""
    forbidden_called: tuple[str, ...] = ()
    """The forbidden tools that were called, by name (sorted, each once)."""

    def block(self) -> TrajectoryCounts:
        return {
            "mode": self.mode,
            "matched": self.matched,
            "expectedCount": self.expected_count,
            "observedCount": self.observed_count,
            "matchedCount": self.matched_count,
            "forbiddenCount": self.forbidden_count,
        }

    def stored(self) -> dict[str, Any]:
        """The block as a trial row keeps it: the counts, plus each expected call's tool
        name and state and the forbidden tools called, for the drill-down of reports
        (docs/verify.md). Tool names only: arguments are never stored."""
        return {
            **self.block(),
            "expected": [{"tool": tool, "state": state} for tool, state in self.calls],
            "forbiddenCalled": list(self.forbidden_called),
        }

    def describe(self) -> str:
        """The block in words: `matched (in-order): 2 of 2 expected calls matched,
        3 observed, 0 forbidden`."""
        verdict = "matched" if self.matched else "NOT matched"
        words = (
            f"{verdict} ({self.mode}): {self.matched_count} of "
            f"{plural(self.expected_count, 'expected call')} matched, "
            f"{self.observed_count} observed, {self.forbidden_count} forbidden"
        )
        if (
            not self.matched
            and not self.forbidden_count
            and (self.matched_count == self.expected_count)
        ):
            # Every expected call was made: "2 of 2 matched" beside NOT matched reads as a
            # contradiction unless the mode's own rule (their order, nothing else) is named.
            words += f"; every expected call was made, but not as {self.mode} requires"
        return words

    @classmethod
    def from_block(cls, block: Mapping[str, Any]) -> TrajectoryResult:
        """A stored block; one stored before the per-call detail was kept has none."""
        return cls(
            mode=block["mode"],
            matched=block["matched"],
            expected_count=block["expectedCount"],
            observed_count=block["observedCount"],
            matched_count=block["matchedCount"],
            forbidden_count=block["forbiddenCount"],
            calls=tuple((c["tool"], c["state"]) for c in block.get("expected") or ()),
            forbidden_called=tuple(block.get("forbiddenCalled") or ()),
        )


def json_deep_equal(a: Any, b: Any) -> bool:
    """JSON equality: `1 == 1.0`, but `true != 1` and `"1" != 1`; arrays element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_deep_equal(a[k], b[k]) for k in a)
    return False


def json_subset(expected: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    """Every key path of `expected` is in `observed` with a JSON-deep-equal value.

    Objects are compared key path by key path (extra observed keys are fine at every
    depth); any other value, arrays included, must be deep-equal.
    """
    for key, value in expected.items():
        if key not in observed:
            return False
        seen = observed[key]
        if isinstance(value, dict) and value:
            if not isinstance(seen, dict) or not json_subset(value, seen):
                return False
        elif not json_deep_equal(value, seen):
            return False
    return True


def call_matches(expected: ExpectedCall, observed: ObservedCall) -> bool:
    if expected.tool != observed.tool:
        return False
    if expected.argsMatch == "ignore":
        return True
    args = expected.args or {}
    if expected.argsMatch == "exact":
        return json_deep_equal(dict(args), dict(observed.args))
    return json_subset(args, observed.args)


def observed_trajectory(
    calls: Sequence[ObservedCall], target_agent_id: str | None, include_delegates: bool
) -> list[ObservedCall]:
    """The target agent's own calls, in order (all calls with delegates or no target)."""
    if include_delegates or target_agent_id is None:
        return list(calls)
    return [c for c in calls if c.agent_id == target_agent_id]


def _in_order(expected: Sequence[ExpectedCall], observed: Sequence[ObservedCall]) -> bool:
    # Earliest-match is optimal for subsequence existence, whatever the match predicate:
    # taking the earliest fitting call never leaves less room for the calls after it.
    position = 0
    for call in expected:
        while position < len(observed) and not call_matches(call, observed[position]):
            position += 1
        if position == len(observed):
            return False
        position += 1
    return True


def _normalized(value: Any) -> Any:
    """`value` with every integral float made an int, so that two values are JSON-deep-equal
    exactly when their normalized forms serialize alike (`1` and `1.0` are one number,
    `true` and `1` are not, integers beyond 2^53 compare exactly)."""
    if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


# One encoder for every key: `json.dumps` with options builds a new one per call.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _args_key(args: Any) -> str | None:
    """A key equal exactly for JSON-deep-equal values; None for a value that has none
    (then the call is compared with every candidate, as before)."""
    try:
        return _KEY_ENCODER.encode(_normalized(args))
    except (TypeError, ValueError):
        return None


def _observed_groups(observed: Sequence[ObservedCall]) -> list[tuple[list[int], str | None]]:
    """Indices of observed calls grouped by (tool, arguments): interchangeable calls; each
    group with its arguments' key (None: a call alone, whose arguments have none)."""
    groups: dict[tuple[str, str], list[int]] = {}
    alone: list[tuple[list[int], str | None]] = []
    for j, call in enumerate(observed):
        key = _args_key(dict(call.args))
        if key is None:
            alone.append(([j], None))
        else:
            groups.setdefault((call.tool, key), []).append(j)
    return [*((members, key) for (_, key), members in groups.items()), *alone]


def _expected_groups(
    expected: Sequence[ExpectedCall],
) -> list[tuple[list[int], str | None]]:
    """Indices of expected calls grouped by tool, argsMatch and (unless ignored) args; each
    group with its arguments' key (None when ignored, or when the arguments have none)."""
    groups: dict[tuple[str, str, str | None], list[int]] = {}
    alone: list[tuple[list[int], str | None]] = []
    for i, call in enumerate(expected):
        key = None if call.argsMatch == "ignore" else _args_key(call.args or {})
        if key is None and call.argsMatch != "ignore":
            alone.append(([i], None))
        else:
            groups.setdefault((call.tool, call.argsMatch, key), []).append(i)
    return [*((members, key) for (_, _, key), members in groups.items()), *alone]


class _Candidates:
    """The observed groups an expected call can match, found through indexes on tool,
    whole arguments and top-level argument values instead of trying every group."""

    def __init__(
        self, observed: Sequence[ObservedCall], groups: list[tuple[list[int], str | None]]
    ) -> None:
        self.by_tool: dict[str, list[int]] = {}
        self.by_args: dict[tuple[str, str | None], list[int]] = {}
        self.by_value: dict[tuple[str, str, str | None], list[int]] = {}
        for g, (members, key) in enumerate(groups):
            call = observed[members[0]]
            self.by_tool.setdefault(call.tool, []).append(g)
            self.by_args.setdefault((call.tool, key), []).append(g)
            for name, value in call.args.items():
                self.by_value.setdefault((call.tool, name, _args_key(value)), []).append(g)

    def of(self, call: ExpectedCall, key: str | None) -> list[int]:
        """`call`'s candidates; `key`: its arguments' key (`_args_key`), None if ignored."""
        if call.argsMatch == "exact" and key is not None:
            return self.by_args.get((call.tool, key), [])
        if call.argsMatch == "subset":
            for name, value in (call.args or {}).items():
                if isinstance(value, dict) and value:
                    continue
                value_key = _args_key(value)
                if value_key is not None:
                    return self.by_value.get((call.tool, name, value_key), [])
        return self.by_tool.get(call.tool, [])


def _matched_expected(
    expected: Sequence[ExpectedCall], observed: Sequence[ObservedCall]
) -> list[bool]:
    """Which expected calls a maximum one-to-one matching covers (interchangeable calls
    are equivalent, so the first ones of each group are the matched ones)."""
    left = _expected_groups(expected)
    right = _observed_groups(observed)
    candidates = _Candidates(observed, right)
    pairs = [
        (g, h)
        for g, (members, key) in enumerate(left)
        for h in candidates.of(expected[members[0]], key)
        if call_matches(expected[members[0]], observed[right[h][0][0]])
    ]
    counts = grouped_matching([len(m) for m, _ in left], [len(m) for m, _ in right], pairs)
    covered = [False] * len(expected)
    for (members, _), count in zip(left, counts, strict=True):
        for i in members[:count]:
            covered[i] = True
    return covered


def _in_order_hits(
    expected: Sequence[ExpectedCall], observed: Sequence[ObservedCall]
) -> list[bool]:
    """Which expected calls an earliest-match walk finds after the previous found one
    (a call it cannot find there is skipped, and the walk goes on from where it was).
    Observed positions are indexed by tool, so a skipped call costs only its tool's calls."""
    by_tool: dict[str, list[int]] = {}
    for j, seen in enumerate(observed):
        by_tool.setdefault(seen.tool, []).append(j)
    hits: list[bool] = []
    position = 0
    for call in expected:
        places = by_tool.get(call.tool, [])
        start = bisect_left(places, position)
        found = next((j for j in places[start:] if call_matches(call, observed[j])), None)
        hits.append(found is not None)
        if found is not None:
            position = found + 1
    return hits


def call_states(
    mode: str,
    expected: Sequence[ExpectedCall],
    observed: Sequence[ObservedCall],
    covered: Sequence[bool],
) -> list[str]:
    """The state (CALL_STATES) of each expected call: `missing` when no distinct observed
    call matches it; for exact and in-order modes `out_of_order` when one does, but not
    at its place (exact: the same position; in-order: after the calls found before it)."""
    if mode == "exact":
        placed: list[bool] = [
            j < len(observed) and call_matches(call, observed[j]) for j, call in enumerate(expected)
        ]
    elif mode == "in-order":
        placed = _in_order_hits(expected, observed)
    else:
        placed = list(covered)
    return [
        "matched" if hit and place else "out_of_order" if hit else "missing"
        for hit, place in zip(covered, placed, strict=True)
    ]


def _describe(call: ExpectedCall) -> str:
    if call.argsMatch == "ignore" or not call.args:
        return f"a call to {call.tool}"
    keys = ", ".join(sorted(call.args))
    how = "exactly these arguments" if call.argsMatch == "exact" else "arguments including"
    return f"a call to {call.tool} with {how} {keys}"


def grade(
    expectation: TrajectoryExpectation,
    calls: Sequence[ObservedCall],
    target_agent_id: str | None = None,
) -> TrajectoryResult:
    observed = observed_trajectory(calls, target_agent_id, expectation.includeDelegates)
    expected = expectation.calls
    covered = _matched_expected(expected, observed)
    matched_count = sum(covered)
    forbidden = set(expectation.forbidden)
    forbidden_count = sum(1 for c in observed if c.tool in forbidden)
    mode = expectation.match
    if mode == "exact":
        ok = len(expected) == len(observed) and all(
            call_matches(e, o) for e, o in zip(expected, observed, strict=False)
        )
    elif mode == "in-order":
        ok = _in_order(expected, observed)
    elif mode == "any-order":
        ok = matched_count == len(expected)
    else:  # subset: every observed call matched to a distinct expected call
        ok = matched_count == len(observed)
    matched = ok and forbidden_count == 0
    explanations: list[str] = []
    if not matched:
        for call, hit in zip(expected, covered, strict=True):
            if not hit:
                explanations.append(f"expected {_describe(call)}, but no observed call matched")
        if mode == "exact" and len(expected) != len(observed):
            explanations.append(
                f"exact mode needs {plural(len(expected), 'call')} in order, "
                f"{len(observed)} {'was' if len(observed) == 1 else 'were'} made"
            )
        elif mode == "in-order" and matched_count == len(expected):
            explanations.append("every expected call was made, but not in the expected order")
        elif mode == "subset" and matched_count < len(observed):
            explanations.append(
                f"{plural(len(observed) - matched_count, 'observed call')} beyond the expected ones"
            )
        if forbidden_count:
            tools = sorted({c.tool for c in observed if c.tool in forbidden})
            explanations.append(
                f"{plural(forbidden_count, 'call')} to forbidden tools: {', '.join(tools)}"
            )
    states = call_states(mode, expected, observed, covered)
    return TrajectoryResult(
        mode,
        matched,
        len(expected),
        len(observed),
        matched_count,
        forbidden_count,
        tuple(explanations),
        calls=tuple((call.tool, state) for call, state in zip(expected, states, strict=True)),
        forbidden_called=tuple(sorted({c.tool for c in observed if c.tool in forbidden})),
    )
