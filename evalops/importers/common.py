"""What both importers share: resolved definitions, trial ids, errors, record assembly.

An importer is a pure translation: a source log plus the map plus the registered
definitions (`Resolved`) in, `evalops.trial/v1` record dicts out. It never touches the
database; `evalops.services.ingest.imports` resolves the definitions and feeds the records to the
same ingest path as `trials ingest`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from evalops.domain.canonical import canonical_json
from evalops.domain.digests import eval_case_digest
from evalops.domain.import_map import ScorerMap
from evalops.domain.timestamps import format_timestamp, parse_timestamp
from evalops.errors import InputError
from evalops.registry.import_maps import LoadedMap

# How unmapped samples, scorers and providers are handled: refused (exit 2), skipped and
# counted (--skip-unmapped), or listed (--dry-run).
Unmapped = Literal["error", "skip", "report"]

SCHEMA = "evalops.trial/v1"
MAX_MESSAGE = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class ResolvedTask:
    """A registered task as an import target."""

    task_id: str
    task_digest: str
    grader_set_digest: str
    blocking: tuple[str, ...]
    """Blocking graders: each needs a result, else the trial is missing evidence."""
    k: int
    """k of pass@k / pass^k (the task's `trials.k`, else `trials.count`, else 1)."""


@dataclass(frozen=True)
class ResolvedExecution:
    execution_id: str
    execution_digest: str
    model: str
    """`provider/name` of the profile's model, as Inspect names models."""


@dataclass(frozen=True)
class Resolved:
    """The map with every id it names resolved to registered definitions."""

    map: LoadedMap
    tasks: Mapping[str, ResolvedTask]
    executions: Mapping[str, ResolvedExecution]


@dataclass(frozen=True)
class Translated:
    """One trial record, with where it came from (`A-1/2`: sample A-1, epoch 2)."""

    file: str
    label: str
    task_id: str
    record: dict[str, Any]
    sample: str = ""
    """The source sample (Inspect sample id, promptfoo test identity) the trial executed:
    one task receives one sample per run."""
    aliases: tuple[str, ...] = ()
    """Ids an earlier evalops version gave this trial: one stored under any of them is this
    trial imported before, so the import counts it and stores nothing."""


@dataclass(frozen=True)
class Skipped:
    """Something the import left out, and why (counted in `skipped`)."""

    file: str
    label: str
    reason: str
    """`invalidated`, `cancelled_by_harness`, `unmapped_sample`, `unmapped_scorer`,
    `unmapped_provider`, `unmapped_task`."""
    name: str | None = None
    """The unmapped sample, scorer or provider."""
    trial_ids: tuple[str, ...] = field(default=(), compare=False)
    """An invalidated sample's trial ids (and those an earlier evalops gave them): stored
    by an earlier import, they still count until voided."""


@dataclass
class SourceSummary:
    """What a dry run shows about one source file besides its trials."""

    file: str
    producer: str
    run_id: str
    reductions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """evalops task id -> the source tool's own reduction of that task's epochs."""
    agents: dict[str, set[str]] = field(default_factory=dict)
    """evalops task id -> agent ids seen in its tool calls."""


Item = Translated | Skipped


def trial_id(prefix: str, *source_ids: object) -> str:
    """`<prefix>-` + the first 16 hex digits of sha256(canonical JSON of the source ids).

    Deterministic, so importing a log twice gives the same ids and the second import is a
    counted no-op; see the README for the exact ids of each source.
    """
    return f"{prefix}-{hashlib.sha256(canonical_json(list(source_ids))).hexdigest()[:16]}"


def at(file: str, label: str, message: str, field_path: str | None = None) -> InputError:
    """`file: sample/epoch: field: what` (no line: a sample is not a line)."""
    where = f"{label}: {field_path}" if field_path else label
    return InputError(message, file, None, where)


def short_message(text: str) -> str:
    """An error message fit for `runtime.message`: one line, no control characters."""
    line = text.strip().splitlines()[0] if text.strip() else "error"
    return _CONTROL.sub(" ", line)[:MAX_MESSAGE]


def content_digest(value: Any) -> str:
    """sha256 of a source record's JSON with sorted keys and no whitespace.

    It identifies what was executed, not the file that carries it: the same sample read from
    a `.eval`, its `.json` conversion or a renamed copy has one digest. (Not RFC 8785: source
    logs hold NaN, which that form cannot write.)
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes (the source_log artifact's digest)."""
    h = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(READ_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def plus_ms(start: str, milliseconds: float) -> str:
    return format_timestamp(parse_timestamp(start) + timedelta(milliseconds=milliseconds))


@functools.lru_cache(maxsize=4096)
def _case_digest(task_digest: str, execution_digest: str, grader_set_digest: str) -> str:
    return eval_case_digest(task_digest, execution_digest, grader_set_digest)


def base_record(
    *,
    trial: str,
    run_id: str,
    attempt_id: str,
    target: ResolvedTask,
    execution: ResolvedExecution,
    trial_index: int,
    started_at: str,
    completed_at: str,
) -> dict[str, Any]:
    """The identity part of a record; the importer adds results, runtime and the rest."""
    return {
        "schema": SCHEMA,
        "trial_id": trial,
        "run_id": run_id,
        "attempt_id": attempt_id,
        "task_id": target.task_id,
        "task_digest": target.task_digest,
        "execution_digest": execution.execution_digest,
        "grader_set_digest": target.grader_set_digest,
        "eval_case_digest": _case_digest(
            target.task_digest, execution.execution_digest, target.grader_set_digest
        ),
        "trial_index": trial_index,
        "started_at": started_at,
        "completed_at": completed_at,
    }


def grader_result(
    scorer: ScorerMap, value: object, score: object, *, blocking: bool = True
) -> tuple[dict[str, Any] | None, str]:
    """A grader result for one source value, and the label saying what happened to it.

    A value the map does not list, or NaN, is `grader_invalid` for a blocking grader; a
    non-blocking grader only adds labels, so its unmapped value is the label
    `diagnostic:<grader>:unmapped` and no result (it never changes the class). A number in
    [0, 1] also becomes the result's score.
    """
    state = scorer.state_of(value)
    if state is None and not blocking:
        return None, f"diagnostic:{scorer.grader_id}:unmapped"
    result: dict[str, Any] = {
        "grader_id": scorer.grader_id,
        "grader_version": scorer.grader_version,
    }
    label = ""
    if state is None:
        result["state"] = "grader_invalid"
        nan = isinstance(value, float) and math.isnan(value)
        result["reason"] = "unscored" if nan else "unmapped_value"
        label = result["reason"]
    else:
        result["state"] = state
    if (
        isinstance(score, int | float)
        and not isinstance(score, bool)
        and math.isfinite(score)
        and 0 <= score <= 1
    ):
        result["score"] = float(score)
    return result, label


SOURCE_FILE = "source_file"
"""The artifact naming the file a trial was imported from (`<file>#<where in it>`): the way
back to the run that produced it. Run-bound, like the run id: a renamed or converted copy
of the same log differs only there, and re-imports as a counted no-op (docs/importers.md)."""


def source_file_artifact(file: str, producer: str, where: str) -> dict[str, Any]:
    return {"kind": SOURCE_FILE, "producer": producer, "location": f"{file}#{where}"}
