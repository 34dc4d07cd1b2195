"""Fail-closed fixture cassettes for harness authors (RFC 0244 section D).

    from evalops.cassette import Cassette, ToolError

    cassette = Cassette(task)              # a fresh cassette for every trial
    reply = cassette.call("crm:lookup-order", {"orderId": "A-1"})
    if isinstance(reply, ToolError):       # a miss: hand the error to the agent
        ...
    record["fixture_misses"] = cassette.misses

Each call is served the first unconsumed `toolResponses` entry whose tool and arguments
match; each entry is consumed once, so repeated calls walk a scripted sequence. With
`onMiss: fail` (or absent) a miss returns a ToolError, is counted, and never reaches a live
tool. With `onMiss: live` a miss is counted and passed to the `live` callable you supply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evalops.domain.specs import EvalTaskSpec, ExpectedCall, ToolResponse
from evalops.domain.trajectory import ObservedCall, call_matches

LiveTool = Callable[[str, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class ToolError:
    """What a fail-closed miss returns to the agent instead of a tool result."""

    tool: str
    message: str


class Cassette:
    """Scripted tool responses for one trial of one task."""

    def __init__(self, task: EvalTaskSpec | Mapping[str, Any], live: LiveTool | None = None):
        spec = task if isinstance(task, EvalTaskSpec) else EvalTaskSpec.model_validate(task)
        fixtures = spec.fixtures
        self.on_miss = (fixtures.onMiss if fixtures else None) or "fail"
        self._entries: list[ToolResponse] = list(fixtures.toolResponses) if fixtures else []
        self._consumed = [False] * len(self._entries)
        self._live = live
        self.misses = 0
        self.calls = 0

    def fresh(self) -> Cassette:
        """A new cassette for the next trial: nothing consumed, no misses."""
        clone = Cassette.__new__(Cassette)
        clone.on_miss = self.on_miss
        clone._entries = self._entries
        clone._consumed = [False] * len(self._entries)
        clone._live = self._live
        clone.misses = 0
        clone.calls = 0
        return clone

    def call(self, tool: str, args: Mapping[str, Any] | None = None) -> Any:
        """The scripted response, a ToolError on a fail-closed miss, or the live result."""
        self.calls += 1
        observed = ObservedCall(tool, dict(args or {}))
        for index, entry in enumerate(self._entries):
            if self._consumed[index]:
                continue
            pattern = ExpectedCall(tool=entry.tool, args=entry.args, argsMatch=entry.argsMatch)
            if call_matches(pattern, observed):
                self._consumed[index] = True
                return entry.response
        self.misses += 1
        if self.on_miss == "live" and self._live is not None:
            return self._live(tool, observed.args)
        return ToolError(tool, f"no fixture matches this call to {tool} (fail closed)")
