"""`evalops trials import inspect|promptfoo`: a harness's run in, trials through ingest.

The service resolves what the map names against the registry (the execution profile, each
task's digest and grader set, every scorer's grader and the states it may produce), runs the
importer over each source file lazily and feeds its records to `ingest_records`: the same
validation, classification, idempotency and all-or-nothing transaction as `trials ingest`,
with the map's digest and the source tool in the ingest's audit event.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain.reruns import TrialNode, resolve_reruns
from evalops.domain.specs import EvalTaskSpec, GraderSet
from evalops.domain.stats import pass_at_k, pass_hat_k
from evalops.domain.trial_record import TrialRecord
from evalops.errors import InputError
from evalops.importers.common import (
    Item,
    Resolved,
    ResolvedExecution,
    ResolvedTask,
    Skipped,
    SourceSummary,
    Translated,
    Unmapped,
)
from evalops.registry.definitions import pydantic_error
from evalops.registry.import_maps import LoadedMap, load_import_map
from evalops.registry.load import Document
from evalops.services.authority import UNSIGNED, Signing
from evalops.services.ingest import IngestResult, ingest_records
from evalops.store import queries
from evalops.store.engine import read_session
from evalops.store.tables import ExecutionProfileRow, GraderSetRow, PolicyRow, TaskRevision

Source = Literal["inspect", "promptfoo"]
MAX_LISTED = 100
# Grader states any grader may be mapped to besides its own `produces` (DESIGN.md 5.3).
ALWAYS_ALLOWED = frozenset({"grader_invalid"})


@dataclass
class ImportResult:
    """What an import did (or, with --dry-run, would do)."""

    source: str
    map_digest: str
    ingest: IngestResult = field(default_factory=IngestResult)
    skipped: Counter[str] = field(default_factory=Counter)
    unmapped: dict[str, list[str]] = field(default_factory=dict)
    tasks: list[dict[str, Any]] | None = None
    output: str | None = None
    written: int | None = None
    sources: list[SourceSummary] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The `trials ingest --json` shape plus the import's own keys (DESIGN.md 11)."""
        out = self.ingest.as_dict()
        out.update(
            {
                "source": self.source,
                "map_digest": self.map_digest,
                "skipped": dict(sorted(self.skipped.items())),
            }
        )
        if self.tasks is not None:
            out["tasks"] = self.tasks
            out["unmapped"] = self.unmapped
        if self.output is not None:
            out["output"] = self.output
            out["written"] = self.written
        return out


# --------------------------------------------------------------------------- resolution


def _executions(session: Session, ids: list[str]) -> dict[str, ExecutionProfileRow]:
    """The execution profiles in force with these ids (DESIGN.md section 4)."""
    forced = queries.in_force_rows(session, "execution_profile")
    return {i: forced[i] for i in ids if i in forced}


def _resolve_execution(
    loaded: LoadedMap, rows: dict[str, ExecutionProfileRow], execution_id: str, *loc: str
) -> ResolvedExecution:
    row = rows.get(execution_id)
    if row is None:
        raise loaded.error(
            f"execution profile {execution_id!r} is not registered (run evalops sync)", *loc
        )
    model = json.loads(row.document)["model"]
    return ResolvedExecution(
        execution_id, row.execution_digest, f"{model['provider']}/{model['name']}"
    )


def resolve(session: Session, loaded: LoadedMap) -> Resolved:
    """Every id the map names, resolved to registered definitions; else exit 2 at the map."""
    spec = loaded.spec
    rows = _executions(session, spec.execution_ids())
    executions: dict[str, ResolvedExecution] = {}
    if spec.execution is not None:
        executions[spec.execution] = _resolve_execution(loaded, rows, spec.execution, "execution")
    for provider, execution_id in (spec.providers or {}).items():
        executions[execution_id] = _resolve_execution(
            loaded, rows, execution_id, "providers", provider
        )
    rows_by_task = _task_rows(session, spec.task_ids())
    grader_sets: dict[str, tuple[GraderSetRow, GraderSet] | None] = {}
    tasks: dict[str, ResolvedTask] = {}
    checked: set[tuple[str, str]] = set()
    for key, task_map in spec.tasks.items():
        placements: list[tuple[str, tuple[str, ...]]] = [
            (task_id, ("tasks", key, "samples", sample))
            for sample, task_id in (task_map.samples or {}).items()
        ]
        if task_map.task is not None:
            placements.append((task_map.task, ("tasks", key, "task")))
        for task_id, loc in placements:
            row = rows_by_task.get(task_id)
            if row is None:
                raise loaded.error(f"task {task_id!r} is not registered (run evalops sync)", *loc)
            if row.grader_set_id not in grader_sets:
                found = queries.grader_set_row(session, row.grader_set_id)
                grader_sets[row.grader_set_id] = (
                    (found, queries.grader_set_spec(found)) if found else None
                )
            grader_set = grader_sets[row.grader_set_id]
            if grader_set is None:
                raise loaded.error(
                    f"task {task_id}'s grader set {row.grader_set_id!r} is not registered", *loc
                )
            grader_row, graders = grader_set
            if task_id not in tasks:
                tasks[task_id] = _target(row, grader_row, graders)
            if (key, grader_row.grader_set_digest) not in checked:
                checked.add((key, grader_row.grader_set_digest))
                _check_scorers(loaded, key, tasks[task_id], graders)
    return Resolved(loaded, tasks, executions)


def _task_rows(session: Session, task_ids: list[str]) -> dict[str, TaskRevision]:
    """The task revision in force of each task (as `queries.task_row`)."""
    forced = queries.in_force_rows(session, "task")
    return {t: forced[t] for t in task_ids if t in forced}


def _target(row: TaskRevision, grader_row: GraderSetRow, graders: GraderSet) -> ResolvedTask:
    # The stored document was validated when it was synced; only the trial plan is read.
    plan = json.loads(row.document)["contract"].get("trials") or {}
    return ResolvedTask(
        task_id=row.task_id,
        task_digest=row.task_digest,
        grader_set_digest=grader_row.grader_set_digest,
        blocking=tuple(g.id for g in graders.graders if g.blocking),
        k=int(plan.get("k") or plan.get("count") or 1),
    )


def _check_scorers(loaded: LoadedMap, key: str, target: ResolvedTask, graders: GraderSet) -> None:
    """Each scorer names a grader of the task's grader set, its version, states it produces."""
    for name, scorer in loaded.spec.tasks[key].scorers.items():
        loc = ("tasks", key, "scorers", name)
        grader = graders.grader(scorer.grader_id)
        if grader is None:
            raise loaded.error(
                f"grader {scorer.grader_id!r} is not in grader set {graders.id} of task "
                f"{target.task_id}",
                *loc,
                "grader_id",
            )
        if grader.version != scorer.grader_version:
            raise loaded.error(
                f"grader {grader.id} is version {grader.version} in grader set {graders.id}, "
                f"not {scorer.grader_version}",
                *loc,
                "grader_version",
            )
        allowed = set(grader.produces) | ALWAYS_ALLOWED
        for value, state in scorer.values.items():
            if state not in allowed:
                raise loaded.error(
                    f"{state} is not a state grader {grader.id} produces "
                    f"({', '.join(grader.produces)})",
                    *loc,
                    "values",
                    value,
                )


def case_definitions(
    engine: Engine, task_id: str, execution_id: str
) -> tuple[EvalTaskSpec, str, GraderSet, str, str]:
    """(task spec, task_digest, grader set, grader_set_digest, execution_digest) as registered."""
    with read_session(engine) as session:
        row = queries.task_row(session, task_id)
        if row is None:
            raise InputError(
                f"task {task_id!r} is not registered (run evalops sync)", field="--task"
            )
        spec = queries.task_spec(row)
        grader_row = queries.grader_set_row(session, spec.grader_set)
        if grader_row is None:
            raise InputError(
                f"task {task_id}'s grader set {spec.grader_set!r} is not registered", field="--task"
            )
        execution = _executions(session, [execution_id]).get(execution_id)
        if execution is None:
            raise InputError(
                f"execution profile {execution_id!r} is not registered (run evalops sync)",
                field="--execution",
            )
        return (
            spec,
            row.task_digest,
            queries.grader_set_spec(grader_row),
            grader_row.grader_set_digest,
            execution.execution_digest,
        )


def _max_attempts(session: Session) -> dict[str, int]:
    """The rerun rule of the gate policy in force (none registered: no rerun stands in)."""
    row = session.exec(
        select(PolicyRow).where(PolicyRow.kind == "gate_policy").order_by(col(PolicyRow.id).desc())
    ).first()
    if row is None:
        return {}
    rule = json.loads(row.document).get("reruns") or {}
    return dict(rule.get("max_attempts_by_class") or {})


# ------------------------------------------------------------------------------ running


def _open(
    source: Source, path: Path, resolved: Resolved, unmapped: Unmapped, started_at: str | None
) -> tuple[SourceSummary, Iterator[Item]]:
    name = str(path)
    if source == "inspect":
        from evalops.importers.inspect import read_inspect

        return read_inspect(path, name, resolved, unmapped=unmapped)
    from evalops.importers.promptfoo import read_promptfoo

    return read_promptfoo(path, name, resolved, unmapped=unmapped, started_at=started_at)


@dataclass
class _Feed:
    """Runs the importers over every file and counts what they left out."""

    source: Source
    files: list[Path]
    resolved: Resolved
    unmapped_mode: Unmapped
    started_at: str | None
    result: ImportResult
    audit: dict[str, Any] = field(default_factory=dict)
    """The ingest's audit payload extras; `skipped` is filled in once every file is read."""
    owners: dict[tuple[str, str, str], str] = field(default_factory=dict)
    listed: dict[str, dict[str, None]] = field(default_factory=dict)

    def records(self) -> Iterator[Translated]:
        for path in self.files:
            summary, items = _open(
                self.source, path, self.resolved, self.unmapped_mode, self.started_at
            )
            self.result.sources.append(summary)
            for item in items:
                if isinstance(item, Skipped):
                    self._skip(item)
                    continue
                self._claim(summary, item)
                yield item
        self.audit["skipped"] = dict(sorted(self.result.skipped.items()))

    def _skip(self, item: Skipped) -> None:
        self.result.skipped[item.reason] += 1
        if item.reason.startswith("unmapped_") and item.name is not None:
            kind = item.reason.removeprefix("unmapped_") + "s"
            names = self.listed.setdefault(kind, {})
            if len(names) < MAX_LISTED:
                names[f"{item.file}: {item.name}"] = None

    def _claim(self, summary: SourceSummary, item: Translated) -> None:
        """One task receives one sample per run: the same run in two files is refused."""
        key = (summary.run_id, item.task_id, str(item.record["execution_digest"]))
        owner = self.owners.setdefault(key, item.file)
        if owner != item.file:
            raise InputError(
                f"task {item.task_id} already received run {summary.run_id} from {owner} "
                "(one task receives at most one sample per run)",
                item.file,
                None,
                item.label,
            )


def import_trials(
    engine: Engine,
    source: Source,
    files: list[Path],
    map_path: Path,
    *,
    actor: str,
    now: datetime,
    dry_run: bool = False,
    output: Path | None = None,
    skip_unmapped: bool = False,
    started_at: str | None = None,
    on_record: Callable[[int], None] | None = None,
    signing: Signing = UNSIGNED,
) -> ImportResult:
    """Import source files through the map (see the module docstring); `on_record` hears
    each record translated (a progress display)."""
    if dry_run and output is not None:
        raise InputError("give --dry-run or -o, not both", field="--dry-run")
    loaded = load_import_map(map_path)
    if loaded.spec.source != source:
        raise loaded.error(
            f"this map is for {loaded.spec.source}, not {source} "
            f"(evalops trials import {loaded.spec.source} ...)",
            "source",
        )
    for path in files:
        if not path.is_file():
            raise InputError(f"{source} log not found", str(path))
    with read_session(engine) as session:
        resolved = resolve(session, loaded)
        max_attempts = _max_attempts(session)
    result = ImportResult(source, loaded.digest)
    mode: Unmapped = "report" if dry_run else ("skip" if skip_unmapped else "error")
    feed = _Feed(
        source,
        files,
        resolved,
        mode,
        started_at,
        result,
        audit={"source": source, "map": str(map_path), "map_digest": loaded.digest},
    )
    if output is not None:
        result.written = _write(feed.records(), output)
        result.output = str(output)
        return result
    stats = _TaskStats() if dry_run else None
    result.ingest = ingest_records(
        engine,
        ((t.file, t.label, t.record) for t in feed.records()),
        files=[str(f) for f in files],
        actor=actor,
        now=now,
        audit_extra=feed.audit,
        dry_run=dry_run,
        observe=stats.observe if stats else None,
        on_record=on_record,
        signing=signing,
    )
    if stats is not None:
        result.tasks = stats.report(resolved, result.sources, max_attempts)
        result.unmapped = {kind: list(names) for kind, names in sorted(feed.listed.items())}
    return result


def _write(records: Iterator[Translated], output: Path) -> int:
    """Validated records to OUT.jsonl, atomically: a failure leaves no partial file."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=output.name, suffix=".tmp", dir=output.parent)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            for item in records:
                try:
                    TrialRecord.model_validate(item.record)
                except ValidationError as exc:
                    err = pydantic_error(Document(item.file, item.record, {}), exc)
                    raise InputError(
                        err.message, item.file, None, f"{item.label}: {err.field}"
                    ) from None
                out.write(json.dumps(item.record, sort_keys=True, ensure_ascii=False) + "\n")
                count += 1
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


# ----------------------------------------------------------------------- dry-run report


@dataclass
class _TaskStats:
    """Per task: every imported trial's id, parent and class, for the dry-run numbers."""

    nodes: dict[tuple[str, str], list[TrialNode]] = field(default_factory=dict)
    """(task id, execution digest) -> its trials: each pair is one eval case."""

    def observe(self, row: dict[str, Any]) -> None:
        self.nodes.setdefault((row["task_id"], row["execution_digest"]), []).append(
            TrialNode(row["trial_id"], row["parent_trial_id"], row["classification"])
        )

    def report(
        self,
        resolved: Resolved,
        sources: list[SourceSummary],
        max_attempts: dict[str, int],
    ) -> list[dict[str, Any]]:
        mapped = _mapped_graders(resolved)
        out = []
        cases = [
            (task_id, execution)
            for task_id in resolved.map.spec.task_ids()
            for execution in resolved.executions.values()
        ]
        for task_id, execution in cases:
            target = resolved.tasks[task_id]
            nodes = self.nodes.get((task_id, execution.execution_digest), [])
            if not nodes and len(resolved.executions) > 1:
                continue  # a provider that did not run this test
            outcome = resolve_reruns(nodes, max_attempts)
            classes = {n.trial_id: n.classification for n in nodes}
            effective = [classes[t] for t in outcome.effective]
            n, c, k = len(effective), sum(1 for x in effective if x == "task_pass"), target.k
            reductions = [s.reductions[task_id] for s in sources if task_id in s.reductions]
            out.append(
                {
                    "task_id": task_id,
                    "execution": execution.execution_id,
                    "trials": len(nodes),
                    "n": n,
                    "passedCount": c,
                    "k": k,
                    "passAtK": float(pass_at_k(n, c, k)) if n >= k else None,
                    "passHatK": float(pass_hat_k(n, c, k)) if n >= k else None,
                    "classes": dict(sorted(Counter(classes.values()).items())),
                    "source_reduction": reductions[0]
                    if len(reductions) == 1
                    else (reductions or None),
                    "differences": _differences(
                        nodes, effective, target, mapped.get(task_id, set())
                    )
                    if reductions
                    else [],
                    "graders_without_scorer": [
                        g for g in target.blocking if g not in mapped.get(task_id, set())
                    ],
                    "agents": sorted(set().union(*(s.agents.get(task_id, set()) for s in sources))),
                }
            )
        return out


def _mapped_graders(resolved: Resolved) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for task_map in resolved.map.spec.tasks.values():
        graders = {s.grader_id for s in task_map.scorers.values()}
        targets = list((task_map.samples or {}).values())
        if task_map.task is not None:
            targets.append(task_map.task)
        for task_id in targets:
            out.setdefault(task_id, set()).update(graders)
    return out


def _differences(
    nodes: list[TrialNode], effective: list[str], target: ResolvedTask, mapped: set[str]
) -> list[str]:
    """Why evalops' pass@k may differ from the source tool's own reduction of the epochs."""
    out = []
    if any(c in ("runtime_error", "agent_error", "infrastructure_invalid") for c in effective):
        out.append("errored epochs count as failures (the source drops them)")
    if len(mapped) > 1 or len(target.blocking) > 1:
        out.append(
            "a trial passes only when every blocking grader and check passes "
            "(the source reduces each scorer alone)"
        )
    if any(n.parent_trial_id is not None for n in nodes):
        out.append(
            "retried attempts are separate trials; a rerun stands in only as the gate policy allows"
        )
    return out
