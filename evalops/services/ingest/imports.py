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
from evalops.errors import InputError, InputErrors
from evalops.files import follow_umask
from evalops.importers.common import (
    SOURCE_FILE,
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
from evalops.services.authority.acts import UNSIGNED, Signing
from evalops.services.gate.policies import AppliedPolicy, gate_policies_of_task, max_attempts
from evalops.services.ingest.records import IngestResult, ingest_records
from evalops.services.registry.unknown_ids import not_registered
from evalops.store import queries
from evalops.store.engine import read_session
from evalops.store.tables import ExecutionProfileRow, GraderSetRow, TaskRevision

Source = Literal["inspect", "promptfoo"]
MAX_LISTED = 100
# Grader states any grader may be mapped to besides its own `produces` (docs/formats.md).
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
        """The `trials ingest --json` shape plus the import's own keys (docs/cli.md)."""
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
    """The execution profiles in force with these ids (the latest sync's)."""
    return queries.in_force_rows_of(session, "execution_profile", ids)


def _resolve_execution(
    session: Session,
    loaded: LoadedMap,
    rows: dict[str, ExecutionProfileRow],
    execution_id: str,
    *loc: str,
) -> ResolvedExecution:
    row = rows.get(execution_id)
    if row is None:
        raise loaded.error(not_registered(session, "execution_profile", execution_id), *loc)
    model = json.loads(row.document)["model"]
    return ResolvedExecution(
        execution_id, row.execution_digest, f"{model['provider']}/{model['name']}"
    )


def resolve(session: Session, loaded: LoadedMap) -> Resolved:
    """Every id the map names, resolved to registered definitions; else exit 2 at the map,
    naming every place it is wrong in one run (a typo of a task and of a grader version
    are two lines, not two runs)."""
    errors: list[InputError] = []
    executions = _resolved_executions(session, loaded, errors)
    tasks = _resolved_tasks(session, loaded, errors)
    if errors:
        raise InputErrors.of(errors)  # an error of several problems contributes each
    return Resolved(loaded, tasks, executions)


def _resolved_executions(
    session: Session, loaded: LoadedMap, errors: list[InputError]
) -> dict[str, ResolvedExecution]:
    spec = loaded.spec
    rows = _executions(session, spec.execution_ids())
    named: list[tuple[str, tuple[str, ...]]] = []
    if spec.execution is not None:
        named.append((spec.execution, ("execution",)))
    named += [(e, ("providers", p)) for p, e in (spec.providers or {}).items()]
    executions: dict[str, ResolvedExecution] = {}
    for execution_id, where in named:
        try:
            executions[execution_id] = _resolve_execution(
                session, loaded, rows, execution_id, *where
            )
        except InputError as error:
            errors.append(error)
    return executions


def _resolved_tasks(
    session: Session, loaded: LoadedMap, errors: list[InputError]
) -> dict[str, ResolvedTask]:
    spec = loaded.spec
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
                errors.append(loaded.error(not_registered(session, "task", task_id), *loc))
                continue
            if row.grader_set_id not in grader_sets:
                found = queries.grader_set_row(session, row.grader_set_id)
                grader_sets[row.grader_set_id] = (
                    (found, queries.grader_set_spec(found)) if found else None
                )
            grader_set = grader_sets[row.grader_set_id]
            if grader_set is None:
                errors.append(
                    loaded.error(
                        f"task {task_id}'s grader set {row.grader_set_id!r} is not registered",
                        *loc,
                    )
                )
                continue
            grader_row, graders = grader_set
            if task_id not in tasks:
                tasks[task_id] = _target(row, grader_row, graders)
            if (key, grader_row.grader_set_digest) not in checked:
                checked.add((key, grader_row.grader_set_digest))
                _check_task_map(loaded, key, tasks[task_id], graders, errors)
    return tasks


def _check_task_map(
    loaded: LoadedMap,
    key: str,
    target: ResolvedTask,
    graders: GraderSet,
    errors: list[InputError],
) -> None:
    """The map's scorers and row verdict against the task's grader set, each problem noted."""
    try:
        _check_scorers(loaded, key, target, graders)
    except InputError as error:
        errors.append(error)
    try:
        _check_row_verdict(loaded, target, graders)
    except InputError as error:
        errors.append(error)


def _task_rows(session: Session, task_ids: list[str]) -> dict[str, TaskRevision]:
    """The task revision in force of each task the map names (not of every registered
    task: start-up does not grow with the registry)."""
    return queries.in_force_rows_of(session, "task", task_ids)


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


def _check_row_verdict(loaded: LoadedMap, target: ResolvedTask, graders: GraderSet) -> None:
    """The row_verdict grader is in every mapped test's grader set and can fail a row."""
    verdict = loaded.spec.row_verdict
    if verdict is None:
        return
    grader = graders.grader(verdict.grader_id)
    if grader is None:
        raise loaded.error(
            f"grader {verdict.grader_id!r} is not in grader set {graders.id} of task "
            f"{target.task_id}",
            "row_verdict",
            "grader_id",
        )
    if grader.version != verdict.grader_version:
        raise loaded.error(
            f"grader {grader.id} is version {grader.version} in grader set {graders.id}, "
            f"not {verdict.grader_version}",
            "row_verdict",
            "grader_version",
        )
    missing = [s for s in ("task_pass", "task_fail") if s not in grader.produces]
    if missing:
        raise loaded.error(
            f"grader {grader.id} does not produce {', '.join(missing)} (a row's verdict is "
            "task_pass or task_fail)",
            "row_verdict",
            "grader_id",
        )
    if not grader.blocking:
        # Its verdict stands for the source's own; a non-blocking grader's task_fail only
        # labels the trial, and a row the source failed would pass.
        raise loaded.error(
            f"grader {grader.id} is not blocking in grader set {graders.id}: a row's verdict "
            "must be able to fail the trial (a source's failure is never overruled into a "
            "pass); name a blocking grader",
            "row_verdict",
            "grader_id",
        )


def case_definitions(
    engine: Engine, task_id: str, execution_id: str
) -> tuple[EvalTaskSpec, str, GraderSet, str, str]:
    """(task spec, task_digest, grader set, grader_set_digest, execution_digest) as registered."""
    with read_session(engine) as session:
        row = queries.task_row(session, task_id)
        if row is None:
            raise InputError(not_registered(session, "task", task_id), field="--task")
        spec = queries.task_spec(row)
        grader_row = queries.grader_set_row(session, spec.grader_set)
        if grader_row is None:
            raise InputError(
                f"task {task_id}'s grader set {spec.grader_set!r} is not registered", field="--task"
            )
        execution = _executions(session, [execution_id]).get(execution_id)
        if execution is None:
            raise InputError(
                not_registered(session, "execution_profile", execution_id), field="--execution"
            )
        return (
            spec,
            row.task_digest,
            queries.grader_set_spec(grader_row),
            grader_row.grader_set_digest,
            execution.execution_digest,
        )


def _rerun_policies(session: Session, task_ids: list[str]) -> dict[str, list[AppliedPolicy]]:
    """Per task, the gate policies whose rerun rule the preview applies: those the gate
    applies to the suites the task is in (`policies.gate_policies_of_task`, the gate's own
    rule; none: no rerun stands in)."""
    return {task_id: gate_policies_of_task(session, task_id) for task_id in task_ids}


# ------------------------------------------------------------------------------ running


def _open(
    source: Source,
    path: Path,
    resolved: Resolved,
    unmapped: Unmapped,
    started_at: str | None,
    allow_incomplete: bool,
) -> tuple[SourceSummary, Iterator[Item]]:
    name = str(path)
    if source == "inspect":
        from evalops.importers.inspect import read_inspect

        return read_inspect(
            path, name, resolved, unmapped=unmapped, allow_incomplete=allow_incomplete
        )
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
    allow_incomplete: bool = False
    audit: dict[str, Any] = field(default_factory=dict)
    """The ingest's audit payload extras; `skipped` is filled in once every file is read."""
    owners: dict[tuple[str, str, str], str] = field(default_factory=dict)
    listed: dict[str, dict[str, int]] = field(default_factory=dict)
    """Kind (`samples`, `scorers`, `tasks`) -> "file: name" -> how many times it was met."""
    invalidated: list[Skipped] = field(default_factory=list)
    """Samples the log marks invalidated, with their trial ids."""

    def refuse_invalidated_stored(self, session: Session) -> None:
        """A sample the log invalidated after an earlier import stored its trial still
        counts: an invalidation in a log is no void in the registry. Refused (the whole
        import), naming the trial and the void that leaves it out."""
        wanted = {tid: item for item in self.invalidated for tid in item.trial_ids}
        if not wanted:
            return
        from evalops.store import queries
        from evalops.store.tables import Trial

        ids = sorted(wanted)
        live: list[str] = []
        for start in range(0, len(ids), 500):
            live += session.exec(
                select(Trial.trial_id).where(
                    col(Trial.trial_id).in_(ids[start : start + 500]), ~queries.voided(None)
                )
            ).all()
        if not live:
            return
        first = sorted(live)[0]
        item = wanted[first]
        more = f" (and {len(live) - 1} more)" if len(live) > 1 else ""
        raise InputError(
            f"sample {item.label} is invalidated in the log, but its trial {first}{more} was "
            "imported before: an invalidation in a log is no void in the registry, and the "
            f"trial still counts; leave it out with `evalops trials void {first} --reason "
            "REASON`, then import again",
            item.file,
            field="invalidation",
        )

    def records(self) -> Iterator[Translated]:
        for path in self.files:
            summary, items = _open(
                self.source,
                path,
                self.resolved,
                self.unmapped_mode,
                self.started_at,
                self.allow_incomplete,
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
        if item.trial_ids:
            self.invalidated.append(item)
        if item.reason.startswith("unmapped_") and item.name is not None:
            kind = item.reason.removeprefix("unmapped_") + "s"
            names = self.listed.setdefault(kind, {})
            key = f"{item.file}: {item.name}"
            if key in names or len(names) < MAX_LISTED:
                names[key] = names.get(key, 0) + 1

    def unmapped_problem(self) -> InputError | None:
        """Every unmapped sample, scorer and task met, with how often: what a dry run
        without --skip-unmapped refuses, all at once rather than the first."""
        parts = [
            f"{kind[:-1]} {name.split(': ', 1)[-1]} ({name.split(': ', 1)[0]}, {n}x)"
            for kind, names in sorted(self.listed.items())
            for name, n in names.items()
        ]
        if not parts:
            return None
        total = sum(
            n for reason, n in self.result.skipped.items() if reason.startswith("unmapped_")
        )
        return InputError(
            f"{len(parts)} unmapped ({total} in all): {'; '.join(parts)}; map them, or pass "
            "--skip-unmapped",
            str(self.files[0]) if len(self.files) == 1 else None,
        )

    def _claim(self, summary: SourceSummary, item: Translated) -> None:
        """One task receives one sample per run, whichever files carry the run (a copy of
        a log carries the same samples: its trials are the same executions)."""
        key = (summary.run_id, item.task_id, str(item.record["execution_digest"]))
        owner = self.owners.setdefault(key, f"{item.sample}\n{item.file}")
        sample, file = owner.split("\n", 1)
        if sample != item.sample:
            raise InputError(
                f"task {item.task_id} already received sample {sample!r} of run "
                f"{summary.run_id} from {file} (one task receives at most one sample per run)",
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
    allow_incomplete: bool = False,
    on_record: Callable[[int], None] | None = None,
    signing: Signing = UNSIGNED,
) -> ImportResult:
    """Import source files through the map (see the module docstring); `on_record` hears
    each record translated (a progress display). A dry run runs every check the import
    runs and refuses what it refuses."""
    if dry_run and output is not None:
        raise InputError("give --dry-run or -o, not both", field="--dry-run")
    loaded = load_import_map(map_path)
    if loaded.spec.source != source:
        raise loaded.error(
            f"this map is for {loaded.spec.source}, not {source} "
            f"(`evalops trials import {loaded.spec.source} ...`)",
            "source",
        )
    for path in files:
        if not path.is_file():
            raise InputError(f"{source} log not found", str(path))
    with read_session(engine) as session:
        resolved = resolve(session, loaded)
        policies = _rerun_policies(session, loaded.spec.task_ids()) if dry_run else {}
    result = ImportResult(source, loaded.digest)
    # A dry run reads on past an unmapped sample or scorer, to name every one of them.
    mode: Unmapped = "report" if dry_run else ("skip" if skip_unmapped else "error")
    feed = _Feed(
        source,
        files,
        resolved,
        mode,
        started_at,
        result,
        allow_incomplete,
        audit={"source": source, "map": str(map_path), "map_digest": loaded.digest},
    )
    if output is not None:
        result.written = _write(feed.records(), output)
        result.output = str(output)
        return result
    stats = _TaskStats() if dry_run else None
    result.ingest = ingest_records(
        engine,
        ((t.file, t.label, t.record, t.aliases) for t in feed.records()),
        files=[str(f) for f in files],
        actor=actor,
        now=now,
        audit_extra=feed.audit,
        dry_run=dry_run,
        observe=stats.observe if stats else None,
        on_record=on_record,
        same_execution=_SameExecution(),
        signing=signing,
        check=feed.refuse_invalidated_stored,
    )
    if stats is not None:
        problem = None if skip_unmapped else feed.unmapped_problem()
        if problem is not None:
            raise problem
        result.tasks = stats.report(resolved, result.sources, policies)
        result.unmapped = {kind: list(names) for kind, names in sorted(feed.listed.items())}
    return result


# Fields that name the run and log a trial was read from, not the execution: a sample an
# eval-retry log copied, or a converted or renamed log, differs only in these.
_RUN_BOUND = ("run_id", "attempt_id")


@dataclass
class _SameExecution:
    """What differs between a stored trial and the same trial read again (nothing: the
    same execution, a counted no-op)."""

    file_digests: dict[str, str] = field(default_factory=dict)

    def __call__(self, stored: dict[str, Any], new: dict[str, Any], file: str) -> list[str]:
        before, after = _execution_view(stored), _execution_view(new)
        if _source_digests(stored) != _source_digests(new) and _source_digests(stored) == [
            self._file_digest(file)
        ]:
            # Imported by an earlier evalops, whose provenance digested the whole file:
            # this very file, so the rest of the record decides.
            before.pop("artifact_manifest", None)
            after.pop("artifact_manifest", None)
        return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))

    def _file_digest(self, file: str) -> str:
        if file not in self.file_digests:
            from evalops.importers.common import file_digest

            self.file_digests[file] = file_digest(Path(file))
        return self.file_digests[file]


def _source_logs(record: dict[str, Any]) -> list[dict[str, Any]]:
    manifest = record.get("artifact_manifest")
    artifacts = manifest.get("artifacts") if isinstance(manifest, dict) else None
    return [a for a in artifacts or [] if isinstance(a, dict) and a.get("kind") == "source_log"]


def _source_digests(record: dict[str, Any]) -> list[Any]:
    return [a.get("digest") for a in _source_logs(record)]


def _execution_view(record: dict[str, Any]) -> dict[str, Any]:
    """The record without what names the run and file it was read from: the run ids, the
    source log's location and the source file artifact (absent from trials imported by an
    earlier evalops, so it never makes them differ either)."""
    view = {k: v for k, v in record.items() if k not in _RUN_BOUND}
    manifest = view.get("artifact_manifest")
    if isinstance(manifest, dict) and isinstance(manifest.get("artifacts"), list):
        view["artifact_manifest"] = {
            **manifest,
            "artifacts": [
                {k: v for k, v in a.items() if k != "location"}
                if isinstance(a, dict) and a.get("kind") == "source_log"
                else a
                for a in manifest["artifacts"]
                if not (isinstance(a, dict) and a.get("kind") == SOURCE_FILE)
            ],
        }
    return view


def _write(records: Iterator[Translated], output: Path) -> int:
    """Validated records to OUT.jsonl, atomically: a failure leaves no partial file."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=output.name, suffix=".tmp", dir=output.parent)
    count = 0
    try:
        follow_umask(fd)
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

    seen: set[str] = field(default_factory=set)
    """Trial ids counted: a sample two logs carry (`inspect eval-retry` copies the ones that
    finished) is one trial, stored once, so it is counted once."""

    def observe(self, row: dict[str, Any]) -> None:
        if row["trial_id"] in self.seen:
            return
        self.seen.add(row["trial_id"])
        self.nodes.setdefault((row["task_id"], row["execution_digest"]), []).append(
            TrialNode(row["trial_id"], row["parent_trial_id"], row["classification"])
        )

    def report(
        self,
        resolved: Resolved,
        sources: list[SourceSummary],
        policies: dict[str, list[AppliedPolicy]],
    ) -> list[dict[str, Any]]:
        mapped = _mapped_graders(resolved)
        out = []
        no_policy: list[AppliedPolicy | None] = [None]
        cases = [
            (task_id, execution, policy)
            for task_id in resolved.map.spec.task_ids()
            for execution in resolved.executions.values()
            for policy in (policies.get(task_id) or no_policy)
        ]
        for task_id, execution, policy in cases:
            target = resolved.tasks[task_id]
            nodes = self.nodes.get((task_id, execution.execution_digest), [])
            if not nodes and len(resolved.executions) > 1:
                continue  # a provider that did not run this test
            outcome = resolve_reruns(nodes, max_attempts(policy))
            classes = {n.trial_id: n.classification for n in nodes}
            effective = [classes[t] for t in outcome.effective]
            n, c, k = len(effective), sum(1 for x in effective if x == "task_pass"), target.k
            reductions = [s.reductions[task_id] for s in sources if task_id in s.reductions]
            ours = (
                float(pass_at_k(n, c, k)) if n >= k else None,
                float(pass_hat_k(n, c, k)) if n >= k else None,
            )
            differing = _differing_scorers(reductions, ours, k) if reductions else []
            out.append(
                {
                    "task_id": task_id,
                    "execution": execution.execution_id,
                    "trials": len(nodes),
                    "n": n,
                    "passedCount": c,
                    "k": k,
                    "passAtK": ours[0],
                    "passHatK": ours[1],
                    "classes": dict(sorted(Counter(classes.values()).items())),
                    "source_reduction": reductions[0]
                    if len(reductions) == 1
                    else (reductions or None),
                    # Explained only where a number differs (or none can be compared).
                    "differences": _differences(
                        nodes, effective, target, mapped.get(task_id, set())
                    )
                    if differing is None or differing
                    else [],
                    "differs_from": differing or [],
                    "graders_without_scorer": [
                        g for g in target.blocking if g not in mapped.get(task_id, set())
                    ],
                    "agents": sorted(set().union(*(s.agents.get(task_id, set()) for s in sources))),
                    "gate_policy": policy.named() if policy else None,
                }
            )
        return out


def _differing_scorers(
    reductions: list[Any], ours: tuple[float | None, float | None], k: int
) -> list[str] | None:
    """The source's scorers whose own pass@k / pass^k (Inspect's `pass_at_K`, `pass_k_K`
    reducers) differ from evalops'; None when the source reports none to compare."""
    differing: dict[str, None] = {}
    compared = False
    for reduction in reductions:
        for scorer, reducers in reduction.items() if isinstance(reduction, dict) else ():
            if not isinstance(reducers, dict):
                continue
            for name, mine in ((f"pass_at_{k}", ours[0]), (f"pass_k_{k}", ours[1])):
                theirs = reducers.get(name)
                if not isinstance(theirs, int | float) or isinstance(theirs, bool):
                    continue
                compared = True
                if mine is None or abs(float(theirs) - mine) > 1e-9:
                    differing[str(scorer)] = None
    return list(differing) if compared else None


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
