"""The import map (`import-map/v1`, docs/importers.md): how a harness's run becomes trials.

A map says which evalops task each source sample is, which grader each scorer stands for and
what each scorer value means, which execution profile the run evaluated, how tool names
translate and what a runtime error or a limit means. It is strict like every spec: unknown
fields are errors, so a typo never silently drops evidence. Its digest (the whole object,
like a policy's) goes into the import's audit event.
"""

from __future__ import annotations

import json
import math
import re
from typing import Literal

from pydantic import PrivateAttr, model_validator

from evalops.domain.canonical import canonical_text
from evalops.domain.spec_rules import SpecValueError
from evalops.domain.spec_words import GraderState
from evalops.domain.specs import Strict
from evalops.domain.vocabulary import Id, NonEmptyStr, PositiveInt

# A runtime status other than `ok`: what a source error or limit becomes.
FailStatus = Literal["agent_error", "runtime_error", "infrastructure_error", "timeout"]

# Inspect's sample limit types (`EvalSampleLimit.type`, inspect-ai 0.3.285).
InspectLimit = Literal[
    "context", "time", "working", "message", "token", "turn", "cost", "operator", "custom"
]


def value_key(value: object) -> str | None:
    """The map key a source score value is looked up under; None when it has none.

    Strings are themselves; booleans are `true` / `false`; numbers are their canonical
    JSON text (RFC 8785), so `1`, `1.0` and `1e0` are one key. NaN, lists and objects have
    no key: such a value is always `grader_invalid`.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return canonical_text(value)
    return None


def _map_key(text: str) -> str:
    """A key written in a map's `values`, normalized the way `value_key` reads values."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, int | float) and not isinstance(parsed, bool):
        return value_key(parsed) or text
    return text


class ScorerMap(Strict):
    """One source scorer (Inspect) or assertion metric (promptfoo) as one evalops grader."""

    grader_id: Id
    """The grader of the task's grader set this scorer stands for."""
    grader_version: PositiveInt
    """Its version; must equal the registered grader's."""
    values: dict[str, GraderState]
    """Source value -> grader state. Inspect: the score value (`C`, `I`, `1`, ...);
    promptfoo: the assertion's `pass` as `"true"` / `"false"`. A value with no entry, or
    NaN, makes the result `grader_invalid`."""

    _lookup: dict[str, GraderState] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _distinct_keys(self) -> ScorerMap:
        seen: dict[str, str] = {}
        for key, state in self.values.items():
            normal = _map_key(key)
            if normal in seen:
                raise SpecValueError(
                    f"{key!r} and {seen[normal]!r} are the same value", "values", key
                )
            seen[normal] = key
            self._lookup[normal] = state
        return self

    def state_of(self, value: object) -> GraderState | None:
        """The grader state a source value maps to (None: unmapped or NaN)."""
        key = value_key(value)
        if key is None:
            return None
        # Private attributes live in `__pydantic_private__`; reading them as attributes
        # goes through BaseModel.__getattr__, a Python call for every score imported.
        lookup: dict[str, GraderState] = (self.__pydantic_private__ or {})["_lookup"]
        return lookup.get(key)


class TaskMap(Strict):
    """One source task (Inspect `eval.task`) or one promptfoo test."""

    task_version: int | NonEmptyStr | None = None
    """Inspect only: refuse a log whose `eval.task_version` differs."""
    samples: dict[NonEmptyStr, Id] | None = None
    """Inspect: sample id -> evalops task id (one sample per task)."""
    task: Id | None = None
    """promptfoo: the evalops task id this test is."""
    scorers: dict[NonEmptyStr, ScorerMap] = {}
    """Scorer name (Inspect) or assertion metric, else type (promptfoo) -> grader."""

    @model_validator(mode="after")
    def _one_grader_per_scorer(self) -> TaskMap:
        seen: dict[str, str] = {}
        for name, scorer in self.scorers.items():
            if scorer.grader_id in seen:
                raise SpecValueError(
                    f"scorers {seen[scorer.grader_id]!r} and {name!r} both map to grader "
                    f"{scorer.grader_id} (a trial carries at most one result per grader)",
                    "scorers",
                    name,
                    "grader_id",
                )
            seen[scorer.grader_id] = name
        if self.samples is not None:
            owners: dict[str, str] = {}
            for sample, task_id in self.samples.items():
                if task_id in owners:
                    raise SpecValueError(
                        f"samples {owners[task_id]!r} and {sample!r} both map to task "
                        f"{task_id} (one task receives at most one sample per log)",
                        "samples",
                        sample,
                    )
                owners[task_id] = sample
        return self


class ErrorPattern(Strict):
    """A regular expression over the error text and the status it means."""

    match: NonEmptyStr
    """Python regular expression, searched in the error message."""
    status: FailStatus
    """Runtime status of an attempt whose error matches."""

    @model_validator(mode="after")
    def _compiles(self) -> ErrorPattern:
        try:
            re.compile(self.match)
        except re.error as exc:
            raise SpecValueError(f"invalid regular expression: {exc}", "match") from None
        return self


class RuntimeMap(Strict):
    """What source errors and limits mean as `runtime.status`."""

    error: FailStatus = "runtime_error"
    """Status of an error no pattern matches."""
    error_patterns: list[ErrorPattern] = []
    """Checked in order; the first match wins."""
    limits: dict[InspectLimit, FailStatus] = {}
    """Inspect: a sample stopped by this limit gets this status. Every limit a log reports
    must be listed: an unlisted one is refused (naming the sample and the limit), never
    read as a completed run."""

    def status_of(self, message: str) -> FailStatus:
        for pattern in self.error_patterns:
            if re.search(pattern.match, message):
                return pattern.status
        return self.error


class RowVerdict(Strict):
    """promptfoo: the grader that carries a row's own verdict (`success`)."""

    grader_id: Id
    """A grader of each mapped test's grader set that produces `task_fail` (and
    `task_pass`); no scorer may map to it."""
    grader_version: PositiveInt
    """Its version; must equal the registered grader's."""


class ImportMap(Strict):
    """`import-map/v1`: how one harness's runs map onto registered definitions."""

    spec_schema_version: Literal["import-map/v1"]
    """Format version."""
    source: Literal["inspect", "promptfoo"]
    """Which harness wrote the logs."""
    execution: Id | None = None
    """The execution profile the run evaluated (promptfoo: or `providers`)."""
    providers: dict[NonEmptyStr, Id] | None = None
    """promptfoo: provider label (else id) -> execution profile id."""
    target_agent_id: NonEmptyStr | None = None
    """The agent under test: tool calls outside any named agent span belong to it."""
    tasks: dict[NonEmptyStr, TaskMap]
    """Inspect `eval.task` / promptfoo test: its description (else the canonical JSON of its
    vars); `<description>#<vars digest>` when two tests share one description."""
    tools: dict[NonEmptyStr, NonEmptyStr] = {}
    """Source tool name -> the spec's tool name (Inspect names cannot contain `:`)."""
    runtime: RuntimeMap = RuntimeMap()
    """Runtime status of errors and limits."""
    row_verdict: RowVerdict | None = None
    """promptfoo: receives `task_fail` for a row promptfoo failed (`success: false`) and
    `task_pass` for one it passed, so a row failed on its aggregate (a test `threshold`)
    while every assertion passed is never imported as a pass. Required when such a row
    appears."""

    @model_validator(mode="after")
    def _fits_source(self) -> ImportMap:
        if self.source == "inspect":
            if self.execution is None:
                raise SpecValueError("an inspect map names its execution profile", "execution")
            if self.providers is not None:
                raise SpecValueError("providers is for promptfoo maps", "providers")
            if self.row_verdict is not None:
                raise SpecValueError("row_verdict is for promptfoo maps", "row_verdict")
        elif (self.execution is None) == (self.providers is None):
            raise SpecValueError(
                "a promptfoo map names exactly one of execution and providers", "execution"
            )
        owners: dict[str, str] = {}
        for key, task in self.tasks.items():
            if self.source == "inspect":
                if task.samples is None or task.task is not None:
                    raise SpecValueError(
                        "an inspect task maps its samples (samples:), not task:", "tasks", key
                    )
                continue
            if task.task is None or task.samples is not None:
                raise SpecValueError(
                    "a promptfoo test maps to one task (task:), not samples:", "tasks", key
                )
            if task.task_version is not None:
                raise SpecValueError(
                    "promptfoo tests have no task_version", "tasks", key, "task_version"
                )
            if task.task in owners:
                raise SpecValueError(
                    f"tests {owners[task.task]!r} and {key!r} both map to task {task.task} "
                    "(one task receives at most one sample per log)",
                    "tasks",
                    key,
                    "task",
                )
            owners[task.task] = key
            if self.row_verdict is not None:
                for name, scorer in task.scorers.items():
                    if scorer.grader_id == self.row_verdict.grader_id:
                        raise SpecValueError(
                            f"scorer {name!r} maps to the row_verdict grader "
                            f"{scorer.grader_id} (a trial carries at most one result per "
                            "grader)",
                            "tasks",
                            key,
                            "scorers",
                            name,
                            "grader_id",
                        )
        return self

    def task_ids(self) -> list[str]:
        """Every evalops task the map names, in map order, once each."""
        out: dict[str, None] = {}
        for task in self.tasks.values():
            for task_id in (task.samples or {}).values():
                out[task_id] = None
            if task.task is not None:
                out[task.task] = None
        return list(out)

    def execution_ids(self) -> list[str]:
        if self.providers is not None:
            return list(dict.fromkeys(self.providers.values()))
        return [self.execution] if self.execution else []
