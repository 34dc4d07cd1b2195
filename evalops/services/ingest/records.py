"""`evalops trials ingest`: TrialRecord JSONL in, classified content-free trials out.

Streaming: files are read line by line and written in batches, so memory does not grow
with file size. All-or-nothing per invocation: everything happens in one serialized write
transaction that is rolled back on any bad line (or, with `--max-bad-records N`, on more
than N). Every problem is reported as `file:line: field.path: what is wrong`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import Table, bindparam
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from evalops.domain import audit_kinds, digests
from evalops.domain.authority import Scope
from evalops.domain.calibration_validity import validity_digest
from evalops.domain.canonical import (
    canonical_json,
    canonical_text,
    encode_trusted,
    sha256_digest,
)
from evalops.domain.classify import Classification, classify
from evalops.domain.timestamps import parse_timestamp
from evalops.domain.trajectory import ObservedCall, TrajectoryResult, grade
from evalops.domain.trial_record import TrialRecord
from evalops.errors import InputError, RejectedRecords, rejected_entry
from evalops.registry.definitions import pydantic_error
from evalops.registry.jsonl import (
    MAX_LINE_BYTES,
    STDIN,
    Line,
    Source,
    count_lines,
    open_source,
    read_lines,
)
from evalops.registry.load import Document, parse_record, regular_record_value
from evalops.services.authority import acts
from evalops.services.authority.acts import (
    UNSIGNED,
    ActRefused,
    Signing,
    authorize,
    record_refusal_apart,
)
from evalops.services.registry.definitions import Definitions
from evalops.store.audit import append_event, next_seq
from evalops.store.bulk import insert_rows
from evalops.store.engine import write_session
from evalops.store.rowdigest import RowsDigest
from evalops.store.tables import (
    ExecutionProfileRow,
    IngestBatch,
    Reconciliation,
    ReviewResult,
    Trial,
    TrialVoid,
    VoidedTrial,
)

if TYPE_CHECKING:
    from evalops.domain.specs import EvalTaskSpec, GraderSet

BATCH_SIZE = 500
MAX_REPORTED = 1000
#: Bad lines counted exactly (each checked) before the rest of a refused ingest is only
#: counted as lines (`unchecked_lines`).
CHECKED_AFTER_REFUSAL = 10_000
#: The way to ids of their own for records written by `trials template` (default ids
#: `trial-0001`... are the same for every task and build).
TRIAL_PREFIX_HINT = "evalops trials template --trial-prefix P gives each batch its own"

__all__ = [
    "MAX_LINE_BYTES",
    "IngestResult",
    "ingest_files",
    "ingest_records",
    "take_line",
    "trials_digest",
]


@dataclass
class IngestResult:
    ingested: int = 0
    skipped_identical: int = 0
    rejected: list[InputError] = field(default_factory=list)
    """The bad records, up to MAX_REPORTED."""
    batch_id: int | None = None
    rejected_total: int = 0
    """Every bad record, listed or not."""
    unattributed_calls: dict[str, int] = field(default_factory=dict)
    """target_agent_id -> tool calls with no agent_id in records naming it: such calls are
    not the target's, so they are not observed (docs/formats.md, RFC 0244 semantics)."""
    unknown_graders: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(grader set id, grader_id a result names that the set does not have) -> [records,
    the set's grader most like it or None]: each such result makes its trial grader_invalid
    (docs/classification.md), which a typo in an id should not do unnoticed."""

    def notes(self) -> list[str]:
        """What was stored as asked but may not be what the author meant."""
        calls = [
            f"{n} tool call{'s' if n != 1 else ''} {'have' if n != 1 else 'has'} no agent_id "
            f"and {'are' if n != 1 else 'is'} not observed for target_agent_id {target} "
            "(give each call the agent_id of the agent that made it, or set the "
            "expectation's includeDelegates)"
            for target, n in sorted(self.unattributed_calls.items())
        ]
        graders = [
            f"{n} record{'s' if n != 1 else ''} {'name' if n != 1 else 'names'} grader "
            f"{grader_id!r}, which grader set {grader_set} does not have"
            + (f" (did you mean {like!r}?)" if like else "")
            + ": such a result counts as grader_invalid, and the grader it was meant for as "
            "missing"
            for (grader_set, grader_id), (n, like) in sorted(self.unknown_graders.items())
        ]
        return calls + graders

    def as_dict(self) -> dict[str, Any]:
        return {
            "unattributed_calls": dict(sorted(self.unattributed_calls.items())),
            "unknown_graders": [
                {"grader_set": s, "grader_id": g, "records": n, "did_you_mean": like}
                for (s, g), (n, like) in sorted(self.unknown_graders.items())
            ],
            "ingested": self.ingested,
            "skipped_identical": self.skipped_identical,
            "rejected": [rejected_entry(e) for e in self.rejected],
            "rejected_total": self.rejected_total,
            "rejected_cap": MAX_REPORTED,
            "batch": self.batch_id,
        }


def _at(line: Line, message: str, field_path: str | None) -> InputError:
    """`file:line: field: what`, or `file: sample/epoch: field: what` for an imported record."""
    if line.label is None:
        return InputError(message, line.file, line.number, field_path)
    where = f"{line.label}: {field_path}" if field_path else line.label
    return InputError(message, line.file, None, where)


def _relocate(error: InputError, line: Line) -> InputError:
    """Errors from parsing one line name that line of the file."""
    return _at(line, error.message, error.field)


@dataclass
class _Prepared:
    line: Line
    row: dict[str, Any]
    parent: str | None
    aliases: tuple[str, ...] = ()


# An importer's judgement of a trial it reads again: what differs between the stored
# record and the new one (both without tool_calls), given the source file; nothing when it
# is the same execution read from another log (a counted no-op).
SameExecution = Callable[[dict[str, Any], dict[str, Any], str], list[str]]


class _Ingester:
    def __init__(
        self,
        session: Session,
        batch_id: int,
        observe: Callable[[dict[str, Any]], None] | None = None,
        same_execution: SameExecution | None = None,
    ) -> None:
        self.same_execution = same_execution
        self.session = session
        self.defs = Definitions(session)
        self.batch_id = batch_id
        self.result = IngestResult(batch_id=batch_id)
        self.hasher = hashlib.sha256()
        self.rejected_count = 0
        self.duplicate_ids = 0
        """Records refused for a trial_id another record has (templates' default ids)."""
        self.unchecked = 0
        """Lines counted but not checked once the ingest was certain to be refused."""
        # Under the writer lock: the ingest's one event and the trials' ids are known now,
        # so every row is digested as it is written (docs/verify.md).
        self.seq = next_seq(session)
        self.next_id = (session.exec(select(func.max(Trial.id))).one() or 0) + 1
        self.rows_digest = RowsDigest()
        # Per chunk: trial id -> its voided rows (record digest, void id, appended to).
        self.voided_parents: dict[str, list[tuple[str, str, bool, str]]] = {}
        self.cases: dict[tuple[str, str, str], str] = {}
        self.grader_sets: set[str] = set()
        # Sees every accepted or identical row (an import's dry run reads classifications).
        self.observe = observe
        # What a signed ingest act names: the stored records' digests in order, and the
        # executions (builds) their trials belong to.
        self.records_hasher = hashlib.sha256()
        self.executions: set[str] = set()

    def refused(self, max_bad_records: int) -> bool:
        """Whether checking more lines is pointless: the refusal is certain (more bad records
        than allowed), the report is full, and CHECKED_AFTER_REFUSAL bad lines are counted
        exactly; what is left is only counted, so a small compressed file expanding to
        millions of bad lines costs time linear in its bytes, not a parse per line."""
        return (
            self.rejected_count > max_bad_records
            and len(self.result.rejected) >= MAX_REPORTED
            and self.rejected_count >= CHECKED_AFTER_REFUSAL
        )

    def reject(self, error: InputError) -> None:
        # Keep counting past the report cap so the abort decision stays right.
        self.rejected_count += 1
        self.result.rejected_total = self.rejected_count
        if len(self.result.rejected) < MAX_REPORTED:
            self.result.rejected.append(error)

    def take(self, items: list[Line | InputError]) -> Iterator[tuple[Line, _Parsed] | None]:
        """The lines of one batch, each parsed (an InputError, or the line and its value),
        or None for a record stored already under its trial_id: its `record_digest` equals
        the stored row's. Those are counted as identical without being validated and
        classified again (they were when first stored), so ingesting a file again whose
        records are all stored costs a hash a line (and a parse for a spelling other than
        canonical or json.dumps's) and one lookup per batch, not a whole ingest
        (docs/formats.md, `take_line`). A new record is parsed once, strictly, as it
        always was."""
        named = [() if isinstance(item, InputError) else _named_ids(item.data) for item in items]
        stored = self._stored_digests({trial_id for ids in named for trial_id in ids})
        for item, ids in zip(items, named, strict=True):
            if isinstance(item, InputError):
                yield Line("", 0, b""), item
                continue
            found = take_line(item, ids, stored)
            yield None if found is None else (item, found)

    def _stored_digests(self, ids: set[str]) -> dict[str, str]:
        """trial_id -> stored record_digest of those of `ids` that are stored (one query)."""
        if not ids:
            return {}
        return {
            trial_id: digest
            for trial_id, digest, _, _ in self.session.connection().execute(
                _KNOWN, {"ids": sorted(ids)}
            )
        }

    def prepare_value(
        self, line: Line, value: dict[str, Any], *, encoder_safe: bool = False
    ) -> _Prepared:
        """Validate and classify one record already parsed (a line, or an imported trial).

        `encoder_safe`: the parser vouched that the C encoder gives the value's RFC 8785
        form (see `registry.load.parse_record`), so it is canonicalized once, fast.
        """
        try:
            record = TrialRecord.model_validate(value)
        except ValidationError as exc:
            raise _relocate(pydantic_error(Document(line.file, value, {}), exc), line) from None
        return self._check(line, value, record, encoder_safe)

    def _fail(self, line: Line, message: str, field_path: str) -> InputError:
        return _at(line, message, field_path)

    def _check(
        self, line: Line, value: dict[str, Any], record: TrialRecord, encoder_safe: bool
    ) -> _Prepared:
        """A valid record checked against the registry and classified, in steps: its task,
        execution and grader set as registered, its eval case, its derived class, then its
        row."""
        task, graders = self._definitions(line, record)
        case = self._eval_case(line, record)
        derived, trajectory = self._classified(line, record, task, graders)
        row = self._row(value, encoder_safe, record, (case, derived, trajectory))
        return _Prepared(line, row, row["parent_trial_id"])

    def _definitions(self, line: Line, record: TrialRecord) -> tuple[EvalTaskSpec, GraderSet]:
        """The record's task (by id and digest) and its grader set's graders, as registered;
        the execution must be registered too."""
        task = self.defs.task(record.task_id, record.task_digest)
        if task is None:
            if self.defs.task_rows(record.task_digest):
                owners = sorted({r.task_id for r in self.defs.task_rows(record.task_digest)})
                raise self._fail(
                    line,
                    f"task_digest {record.task_digest} belongs to {', '.join(owners)}, "
                    f"not {record.task_id}",
                    "task_digest",
                )
            raise self._fail(
                line, f"task_digest {record.task_digest} is not registered", "task_digest"
            )
        if not self.defs.execution_known(record.execution_digest):
            raise self._fail(
                line,
                f"execution_digest {record.execution_digest} is not registered",
                "execution_digest",
            )
        found = self.defs.grader_set(record.grader_set_digest)
        if found is None:
            raise self._fail(
                line,
                f"grader_set_digest {record.grader_set_digest} is not registered",
                "grader_set_digest",
            )
        graders, _, grader_set_id = found
        if grader_set_id != task.grader_set:
            raise self._fail(
                line,
                f"grader_set_digest is grader set {grader_set_id}; task {task.id} uses "
                f"{task.grader_set}",
                "grader_set_digest",
            )
        self.grader_sets.add(record.grader_set_digest)
        return task, graders

    def _eval_case(self, line: Line, record: TrialRecord) -> str:
        """The eval case digest recomputed from the three pins (once per pin triple); a
        record that states one must state this one."""
        key = (record.task_digest, record.execution_digest, record.grader_set_digest)
        case = self.cases.get(key)
        if case is None:
            case = self.cases[key] = digests.eval_case_digest(*key)
        if record.eval_case_digest is not None and record.eval_case_digest != case:
            raise self._fail(
                line,
                f"eval_case_digest {record.eval_case_digest} does not match the recomputed {case}",
                "eval_case_digest",
            )
        return case

    def _note_unknown_graders(self, record: TrialRecord, graders: GraderSet) -> None:
        known = [g.id for g in graders.graders]
        for raw in record.grader_results:
            if raw.grader_id in known:
                continue
            key = (graders.id, raw.grader_id)
            found = self.result.unknown_graders.get(key)
            if found is None:
                from evalops.domain.suggestions import close_match  # only for such a result

                found = self.result.unknown_graders[key] = [0, close_match(raw.grader_id, known)]
            found[0] += 1

    def _classified(
        self, line: Line, record: TrialRecord, task: EvalTaskSpec, graders: GraderSet
    ) -> tuple[Classification, TrajectoryResult | None]:
        """The trajectory graded (when the task expects one) and the class evalops derives;
        a record that claims a class must claim this one."""
        expected = task.contract.expected
        trajectory = None
        if expected is not None and expected.trajectory is not None:
            calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
            trajectory = grade(expected.trajectory, calls, record.target_agent_id)
            target = record.target_agent_id
            if target is not None and not expected.trajectory.includeDelegates:
                # Silently "0 observed" otherwise: a call with no agent_id is nobody's.
                missing = sum(1 for c in calls if c.agent_id is None)
                if missing:
                    found = self.result.unattributed_calls
                    found[target] = found.get(target, 0) + missing
        self._note_unknown_graders(record, graders)
        derived = classify(
            record,
            task,
            graders,
            validity=self.defs.validity(record.grader_set_digest),
            trajectory=trajectory,
        )
        claimed = record.primary_classification
        if claimed is not None and claimed != derived.primary:
            why = derived.reasons[0] if derived.reasons else "no failure found"
            raise self._fail(
                line,
                f"primary_classification claims {claimed}, evalops derives {derived.primary} "
                f"({why})",
                "primary_classification",
            )
        return derived, trajectory

    def _row(
        self,
        value: dict[str, Any],
        encoder_safe: bool,
        record: TrialRecord,
        judged: tuple[str, Classification, TrajectoryResult | None],
    ) -> dict[str, Any]:
        """The trial table's row: the record's identity, its stored canonical text and
        digests, and what evalops derived (`judged`: eval case, class, trajectory)."""
        case, derived, trajectory = judged
        whole, stored_bytes = _canonical_forms(value, encoder_safe)
        stored_text = stored_bytes.decode("utf-8")
        record_digest = sha256_digest(whole)
        parent = record.rerun.parent_trial_id if record.rerun else None
        return {
            "trial_id": record.trial_id,
            "run_id": record.run_id,
            "attempt_id": record.attempt_id,
            "task_id": record.task_id,
            "task_digest": record.task_digest,
            "execution_digest": record.execution_digest,
            "grader_set_digest": record.grader_set_digest,
            "eval_case_digest": case,
            "trial_index": record.trial_index,
            "started_at": parse_timestamp(record.started_at),
            "completed_at": parse_timestamp(record.completed_at),
            "record_digest": record_digest,
            "record": stored_text,
            "stored_digest": sha256_digest(stored_bytes),
            "classification": derived.primary,
            # Lists of strings and counts: on the encoder's fast path by construction.
            "secondary_labels": encode_trusted(list(derived.secondary_labels)).decode(),
            "score": derived.score,
            "gating_score": derived.gating_score,
            "trajectory": encode_trusted(trajectory.stored()).decode() if trajectory else None,
            "efficiency": encode_trusted(
                {
                    "toolCallCount": len(record.tool_calls),
                    "modelCallCount": record.usage.model_calls if record.usage else 0,
                    "inputTokens": record.usage.input_tokens if record.usage else 0,
                    "outputTokens": record.usage.output_tokens if record.usage else 0,
                    "fixtureMisses": record.fixture_misses,
                }
            ).decode(),
            "parent_trial_id": parent,
            "rerun_reason": record.rerun.reason if record.rerun else None,
            "ingest_batch_id": self.batch_id,
        }

    def flush(self, chunk: list[_Prepared]) -> None:
        """Resolve duplicates, parents and trial indexes against the database (which holds
        this invocation's earlier chunks too), then insert the chunk."""
        if not chunk:
            return
        ids = {p.row["trial_id"] for p in chunk} | {p.parent for p in chunk if p.parent}
        ids |= {alias for p in chunk for alias in p.aliases}
        connection = self.session.connection()
        known: dict[str, tuple[str, str, int]] = {
            trial_id: (record_digest, case, index)
            for trial_id, record_digest, case, index in connection.execute(
                _KNOWN, {"ids": list(ids)}
            )
        }
        taken = self._stored_originals(chunk)
        stored = self._stored_records(chunk, known)
        self.voided_parents = self._voided(ids - set(known))
        rows: list[dict[str, Any]] = []
        for p in chunk:
            row = p.row
            trial_id = row["trial_id"]
            if self._refused_as_voided(p, known):
                continue
            if trial_id in known:
                problem = self._again(p, known[trial_id][0], stored)
                if problem is None:
                    self.result.skipped_identical += 1
                    if self.observe is not None:
                        self.observe(p.row)
                else:
                    self.reject(problem)
                continue
            if any(alias in known for alias in p.aliases):
                # Stored under the id an earlier evalops gave it (an importer's alias).
                self.result.skipped_identical += 1
                if self.observe is not None:
                    self.observe(p.row)
                continue
            problem = self._link_problem(p, known, taken)
            if problem is not None:
                self.reject(problem)
                continue
            self._accept(row, known, taken, stored)
            rows.append(row)
        if rows:
            insert_rows(self.session, TRIAL, rows)
            self.result.ingested += len(rows)

    def _accept(
        self,
        row: dict[str, Any],
        known: dict[str, tuple[str, str, int]],
        taken: dict[tuple[Any, str, int], str],
        stored: dict[str, tuple[str, str | None]],
    ) -> None:
        """A new trial of this chunk: known from now on, numbered, digested."""
        trial_id = row["trial_id"]
        known[trial_id] = (row["record_digest"], row["eval_case_digest"], row["trial_index"])
        if row["parent_trial_id"] is None:
            taken[_original_key(row)] = trial_id
        row["id"] = self.next_id
        row["audit_seq"] = self.seq
        self.next_id += 1
        stored[trial_id] = (row["record"], row["trajectory"])
        self.rows_digest.add(TRIAL, row)
        if self.observe is not None:
            self.observe(row)
        self.hasher.update(f"{trial_id}\n{row['record_digest']}\n{row['stored_digest']}\n".encode())
        self.records_hasher.update(f"{row['record_digest']}\n".encode())
        self.executions.add(row["execution_digest"])

    def _voided(self, ids: set[str]) -> dict[str, list[tuple[str, str, bool, str]]]:
        """trial_id -> (record_digest, void id, appended to, record) of each voided row of
        the ids that have no live row: a voided id may be ingested again, with new content."""
        if not ids:
            return {}
        out: dict[str, list[tuple[str, str, bool, str]]] = {}
        for trial_id, record_digest, void_id, record, appended in self.session.connection().execute(
            _VOIDED, {"ids": list(ids)}
        ):
            out.setdefault(trial_id, []).append(
                (record_digest, void_id, bool(appended), str(record))
            )
        return out

    def _refused_as_voided(
        self,
        p: _Prepared,
        known: dict[str, tuple[str, str, int]],
    ) -> bool:
        """Is this record refused for taking back a voided id the wrong way?"""
        trial_id = p.row["trial_id"]
        if trial_id in known or trial_id not in self.voided_parents:
            return False
        problem = self._voided_again(p, self.voided_parents[trial_id])
        if problem is None:
            return False
        self.reject(problem)
        return True

    def _voided_again(
        self, p: _Prepared, voided: list[tuple[str, str, bool, str]]
    ) -> InputError | None:
        """A record for a voided id: new content replaces it (None); the voided content
        itself, or an id whose voided row carries reconciliations or reviews (they would
        read as the new record's), is refused. For an import, content is the execution (as
        `same_execution` reads it): the same log read from another path or form is the
        voided trial, not new content."""
        row = p.row
        for record_digest, void_id, appended, record in voided:
            same = record_digest == row["record_digest"] or (
                self.same_execution is not None
                and not self.same_execution(
                    json.loads(record), json.loads(row["record"]), p.line.file
                )
            )
            if same:
                return self._fail(
                    p.line,
                    f"trial {row['trial_id']} with this content was voided ({void_id}): a "
                    "voided record is never taken back; ingest the corrected record",
                    "trial_id",
                )
            if appended:
                return self._fail(
                    p.line,
                    f"trial {row['trial_id']} was voided ({void_id}) after reconciliations or "
                    "reviews were appended to it: ingest the corrected record under a new "
                    "trial_id",
                    "trial_id",
                )
        return None

    def _stored_records(
        self, chunk: list[_Prepared], known: dict[str, tuple[str, str, int]]
    ) -> dict[str, tuple[str, str | None]]:
        """trial_id -> (stored record, trajectory) of the chunk's trials already stored
        with other content: only an importer reading a trial again compares them."""
        if self.same_execution is None:
            return {}
        ids = [
            p.row["trial_id"]
            for p in chunk
            if p.row["trial_id"] in known and known[p.row["trial_id"]][0] != p.row["record_digest"]
        ]
        if not ids:
            return {}
        found = self.session.connection().execute(_STORED, {"ids": ids})
        return {trial_id: (record, trajectory) for trial_id, record, trajectory in found}

    def _again(
        self, p: _Prepared, digest: str, stored: dict[str, tuple[str, str | None]]
    ) -> InputError | None:
        """None when a trial read again is the one stored (or earlier in this ingest)."""
        row = p.row
        if digest == row["record_digest"]:
            return None
        trial_id = row["trial_id"]
        if self.same_execution is None or trial_id not in stored:
            self.duplicate_ids += 1
            # An import derives its ids itself: the template's option is no way out there.
            hint = f" ({TRIAL_PREFIX_HINT})" if self.same_execution is None else ""
            return self._fail(
                p.line,
                f"trial_id {trial_id} already has record_digest {digest} (stored, or earlier "
                f"in this ingest); this line has {row['record_digest']}: each record needs "
                f"its own trial_id{hint}",
                "trial_id",
            )
        record, trajectory = stored[trial_id]
        differs = self.same_execution(json.loads(record), json.loads(row["record"]), p.line.file)
        if not _same_trajectory(trajectory, row["trajectory"]) and "tool_calls" not in differs:
            differs.append("tool_calls")
        if not differs:
            return None
        first = json.loads(record)
        if set(differs) <= {"started_at", "completed_at"} and first.get("started_at"):
            # Only the times: a promptfoo .jsonl carries none, they come from --started-at.
            way = (
                f"if this is the .jsonl of a run imported before, give --started-at "
                f"{first['started_at']} (the time stored for it)"
            )
        else:
            way = "a log is imported once, when final; a run done again is a new log"
        return self._fail(
            p.line,
            f"trial {trial_id} was imported before with other content ({', '.join(differs)} "
            f"differ): an edited log, or another map, is a new claim about one execution; {way}",
            "trial_id",
        )

    def _stored_originals(self, chunk: list[_Prepared]) -> dict[tuple[Any, str, int], str]:
        """(run_id, eval_case_digest, trial_index) -> trial_id of stored originals that
        share a key with an original of this chunk (ix_trial_run_case_index)."""
        keys = {_original_key(p.row) for p in chunk if p.parent is None}
        if not keys:
            return {}
        runs = {run for run, _, _ in keys}
        params = {
            "runs": [r for r in runs if r is not None] or [""],
            "cases": list({case for _, case, _ in keys}),
            "indexes": list({index for _, _, index in keys}),
        }
        statement = _ORIGINALS_OR_NO_RUN if None in runs else _ORIGINALS
        found = self.session.connection().execute(statement, params)
        return {
            (run, case, index): trial_id
            for run, case, index, trial_id, parent in found
            if parent is None and (run, case, index) in keys
        }

    def _link_problem(
        self,
        p: _Prepared,
        known: dict[str, tuple[str, str, int]],
        taken: dict[tuple[Any, str, int], str],
    ) -> InputError | None:
        """docs/formats.md: originals unique per run, eval case and trial_index; a rerun's
        parent is a trial of the same eval case and the rerun keeps its trial_index."""
        row = p.row
        if p.parent is None:
            other = taken.get(_original_key(row))
            if other is None:
                return None
            run = "no run_id" if row["run_id"] is None else f"run_id {row['run_id']}"
            return self._fail(
                p.line,
                f"trial_index {row['trial_index']} of this eval case ({run}) is already taken "
                f"by {other}: an original trial is unique per run, eval case and trial_index "
                "(a rerun names its parent in rerun.parent_trial_id)",
                "trial_index",
            )
        parent = known.get(p.parent)
        if parent is None and p.parent in self.voided_parents:
            return self._fail(
                p.line,
                f"rerun.parent_trial_id {p.parent} was voided "
                f"({self.voided_parents[p.parent][-1][1]}): a rerun of a voided trial "
                "counts for nothing; ingest it as an original",
                "rerun.parent_trial_id",
            )
        if parent is None:
            return self._fail(
                p.line,
                f"rerun.parent_trial_id {p.parent} is not ingested (nor earlier in this "
                "invocation)",
                "rerun.parent_trial_id",
            )
        if parent[1] != row["eval_case_digest"]:
            return self._fail(
                p.line,
                f"rerun.parent_trial_id {p.parent} is a trial of another eval case "
                f"({parent[1]}); a rerun re-executes the same task, grader set and build",
                "rerun.parent_trial_id",
            )
        if parent[2] != row["trial_index"]:
            return self._fail(
                p.line,
                f"a rerun keeps its parent's trial_index ({parent[2]}), this record has "
                f"{row['trial_index']}",
                "trial_index",
            )
        return None


TRIAL: Table = Trial.__table__  # type: ignore[attr-defined]


def _same_trajectory(stored: str | None, new: str | None) -> bool:
    """Whether two stored trajectory blocks agree; a block stored before the per-call
    detail was kept is compared by its counts only (the detail derives from the same
    tool calls, so equal counts from an older release are not a new claim)."""
    if stored == new:
        return True
    if stored is None or new is None:
        return False
    old, fresh = json.loads(stored), json.loads(new)
    if "expected" in old:
        return False
    return bool(
        TrajectoryResult.from_block(old).block() == TrajectoryResult.from_block(fresh).block()
    )


VOIDED_TRIAL: Table = VoidedTrial.__table__  # type: ignore[attr-defined]
TRIAL_VOID: Table = TrialVoid.__table__  # type: ignore[attr-defined]
RECONCILIATION: Table = Reconciliation.__table__  # type: ignore[attr-defined]
REVIEW: Table = ReviewResult.__table__  # type: ignore[attr-defined]
# Ingest reads the registry at its head: a row voided at any seq is no longer the id's.
_LIVE = ~sa_select(VOIDED_TRIAL.c.id).where(VOIDED_TRIAL.c.trial_row_id == TRIAL.c.id).exists()
_STORED = sa_select(TRIAL.c.trial_id, TRIAL.c.record, TRIAL.c.trajectory).where(
    TRIAL.c.trial_id.in_(bindparam("ids", expanding=True)), _LIVE
)
# Core statements built once (the ORM's per-query bookkeeping costs more than the lookup).
_KNOWN = sa_select(
    TRIAL.c.trial_id, TRIAL.c.record_digest, TRIAL.c.eval_case_digest, TRIAL.c.trial_index
).where(TRIAL.c.trial_id.in_(bindparam("ids", expanding=True)), _LIVE)
_VOIDED = (
    sa_select(
        TRIAL.c.trial_id,
        TRIAL.c.record_digest,
        TRIAL_VOID.c.void_id,
        TRIAL.c.record,
        (
            sa_select(RECONCILIATION.c.id)
            .where(RECONCILIATION.c.trial_id == TRIAL.c.trial_id)
            .exists()
            | sa_select(REVIEW.c.id).where(REVIEW.c.trial_id == TRIAL.c.trial_id).exists()
        ),
    )
    .join(VOIDED_TRIAL, VOIDED_TRIAL.c.trial_row_id == TRIAL.c.id)
    .join(TRIAL_VOID, TRIAL_VOID.c.id == VOIDED_TRIAL.c.void_row_id)
    .where(TRIAL.c.trial_id.in_(bindparam("ids", expanding=True)))
    .order_by(TRIAL.c.id)
)
# `parent_trial_id IS NULL` is tested in Python, not in SQL: given it, SQLite's planner
# picks ix_trial_parent_trial_id, which matches nearly every row (a scan per batch, so
# ingest grew quadratically); without it, it searches ix_trial_run_case_index.
_ORIGINALS_WHERE = (
    TRIAL.c.eval_case_digest.in_(bindparam("cases", expanding=True)),
    TRIAL.c.trial_index.in_(bindparam("indexes", expanding=True)),
)
_ORIGINAL_COLUMNS = (
    TRIAL.c.run_id,
    TRIAL.c.eval_case_digest,
    TRIAL.c.trial_index,
    TRIAL.c.trial_id,
    TRIAL.c.parent_trial_id,
)
_ORIGINALS = sa_select(*_ORIGINAL_COLUMNS).where(
    TRIAL.c.run_id.in_(bindparam("runs", expanding=True)), *_ORIGINALS_WHERE, _LIVE
)
_ORIGINALS_OR_NO_RUN = sa_select(*_ORIGINAL_COLUMNS).where(
    TRIAL.c.run_id.in_(bindparam("runs", expanding=True)) | TRIAL.c.run_id.is_(None),
    *_ORIGINALS_WHERE,
    _LIVE,
)


_TOOL_CALLS = "tool_calls"
_TOOL_CALLS_KEY = b'"tool_calls":'


# Where a line names its trial: candidates only (one may sit in a nested object); a line
# is taken as stored only when its bytes hash to the stored digest of one of them.
_TRIAL_ID = re.compile(rb'"trial_id"\s*:\s*"([^"\\]*)"')
_Parsed = tuple[dict[str, Any], bool] | InputError
"""A line parsed: (its record, whether the parser vouched it encoder-safe), or why not."""


def parse_line(line: Line) -> tuple[dict[str, Any], bool]:
    """One line's record and whether the C encoder gives its RFC 8785 form."""
    try:
        text = line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", line.file, line.number) from None
    try:
        parsed = parse_record(text, line.file)
    except InputError as exc:
        raise _relocate(exc, line) from None
    value = parsed.document.value
    if not isinstance(value, dict):
        raise InputError("a trial record must be a JSON object", line.file, line.number)
    return value, parsed.encoder_safe


def take_line(line: Line, ids: tuple[str, ...], stored: dict[str, str]) -> _Parsed | None:
    """None when `line` is the record stored under its trial_id (`stored`: trial_id ->
    stored `record_digest`, for the trial_ids `ids` the batch's lines name and more), else
    the line parsed as `parse_line` parses it (its value, or why it is refused).

    A line naming a stored trial_id is hashed as it is (a canonical line is the stored
    record byte for byte when its sha256 is the stored digest), its integral floats written
    as RFC 8785 writes them (`1.0` as `1`, see `_integral_floats_as_integers`); else it is
    parsed by the fast parser and its canonical form hashed; a line the fast parser leaves
    (a duplicate key, an unusual number) is parsed strictly, as every other line is, and
    compared after."""
    candidates = [stored[trial_id] for trial_id in ids if trial_id in stored]
    if candidates:
        if sha256_digest(_integral_floats_as_integers(line.data)) in candidates:
            return None
        regular = _regular_value(line.data)
        if regular is not None:
            # Exactly what parse_line would give (vouched encoder-safe): not parsed again.
            return None if _stored_form(regular, stored, encoder_safe=True) else (regular, True)
    try:
        found = parse_line(line)
    except InputError as exc:
        return exc
    if stored and _stored_form(found[0], stored, encoder_safe=found[1]):
        return None
    return found


# An integral float as json.dumps writes it (`X.0` after `:`, `,` or `[`, X a JSON integer),
# which RFC 8785 writes `X`: a line canonical but for those is its stored record's bytes
# once they are dropped. X is at most 21 digits (RFC 8785 writes 1e21 and beyond with an
# exponent), so the integer is looked for in the 23 bytes before `.0`.
_DOT_ZERO = re.compile(rb"\.0(?=[,}\]])")
_INTEGER_BEFORE = re.compile(rb"[:,\[]-?(?:0|[1-9][0-9]*)\Z")


def _integral_floats_as_integers(data: bytes) -> bytes:
    """`data` with the `.0` of every integral float outside its strings dropped (`1.0` ->
    `1`), when it holds no backslash, so that every `"` opens or closes a string; else (or
    with none) `data` as it is. Only a spelling: the result is compared with a stored
    canonical form, and when they are equal `data` is that form with `.0` after some of its
    integers (outside strings), so it is valid JSON with the same value and no duplicate key
    (RFC 8785: 1.0 and 1 are one number)."""
    if b".0" not in data or b"\\" in data:
        return data
    pieces: list[bytes] = []
    kept = counted = quotes = 0  # bytes kept up to `kept`; quotes counted up to `counted`
    for found in _DOT_ZERO.finditer(data):
        at = found.start()
        quotes += data.count(b'"', counted, at)
        counted = at
        if quotes % 2 == 0 and _INTEGER_BEFORE.search(data, max(0, at - 23), at):
            pieces.append(data[kept:at])
            kept = at + 2
    if not pieces:
        return data
    pieces.append(data[kept:])
    return b"".join(pieces)


def _named_ids(data: bytes) -> tuple[str, ...]:
    """The trial_ids a line may name (candidates, see `_TRIAL_ID`)."""
    return tuple(m.decode("utf-8", "replace") for m in _TRIAL_ID.findall(data))


def _regular_value(data: bytes) -> dict[str, Any] | None:
    """The record a line holds when the fast parser takes it as is (then it is exactly what
    `parse_line` would return, vouched encoder-safe); None for anything else, which
    `parse_line` parses strictly and names."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    value = regular_record_value(text)
    return value if isinstance(value, dict) else None


def _stored_form(value: dict[str, Any], stored: dict[str, str], *, encoder_safe: bool) -> bool:
    """The record is the one stored under its trial_id: its canonical form hashes to that
    row's `record_digest` (so a float spelled `1.0` is the stored `1`, and any other change
    is not the stored record)."""
    trial_id = value.get("trial_id")
    digest = stored.get(trial_id) if isinstance(trial_id, str) else None
    return digest is not None and digest == _record_digest(value, encoder_safe)


def _record_digest(value: dict[str, Any], encoder_safe: bool) -> str | None:
    """The `record_digest` a record would be stored with (None: its canonical form cannot
    be computed, and the whole check will say why)."""
    try:
        if encoder_safe:
            return sha256_digest(encode_trusted(value))
        return sha256_digest(canonical_json(value))
    except (UnicodeEncodeError, ValueError, TypeError):
        return None


def _canonical_forms(value: dict[str, Any], encoder_safe: bool) -> tuple[bytes, bytes]:
    """RFC 8785 bytes of the whole record (its `record_digest`) and of what is stored
    (without `tool_calls`): from the C encoder when the parser vouched for it (see
    `registry.load.parse_record`), else through the reference path.

    Keys are sorted, so the whole record is `{A,"tool_calls":T,S}` with A the keys before
    `tool_calls` and S those after, and the stored form is `{A,S}`: A, T and S are each
    encoded once and both forms assembled from them, instead of encoding the record and
    then most of it again.
    """
    if encoder_safe:
        try:
            if _TOOL_CALLS not in value:
                whole = encode_trusted(value)
                return whole, whole
            before = encode_trusted({k: v for k, v in value.items() if k < _TOOL_CALLS})
            calls = encode_trusted(value[_TOOL_CALLS])
            after = encode_trusted({k: v for k, v in value.items() if k > _TOOL_CALLS})
        except UnicodeEncodeError:
            pass  # a lone surrogate: the reference path raises its own error
        else:
            a, t, s = before[1:-1], _TOOL_CALLS_KEY + calls, after[1:-1]  # A, T, S
            return (
                b"{" + b",".join(part for part in (a, t, s) if part) + b"}",
                b"{" + b",".join(part for part in (a, s) if part) + b"}",
            )
    stored_value = {k: v for k, v in value.items() if k != _TOOL_CALLS}
    return canonical_json(value), canonical_json(stored_value)


def _original_key(row: dict[str, Any]) -> tuple[Any, str, int]:
    return (row["run_id"], row["eval_case_digest"], row["trial_index"])


def trials_digest(rows: list[tuple[str, str, str]]) -> str:
    """What an ingest's audit event commits to: each trial's id and digests, in order."""
    h = hashlib.sha256()
    for trial_id, record_digest, stored in rows:
        h.update(f"{trial_id}\n{record_digest}\n{stored}\n".encode())
    return "sha256:" + h.hexdigest()


def ingest_files(
    engine: Engine,
    files: list[Path],
    *,
    actor: str,
    now: datetime,
    max_bad_records: int = 0,
    on_bytes: Callable[[int], None] | None = None,
    signing: Signing = UNSIGNED,
) -> IngestResult:
    """Ingest every line of `files` in one transaction (see the module docstring).

    A file may be `-` (standard input) or `/dev/stdin`, and gzip or zstd compressed.
    `on_bytes` hears how many bytes of each file were consumed (compressed bytes for a
    compressed file), for a progress display.
    """
    names = [str(f) for f in files]
    for f, name in zip(files, names, strict=True):
        if name == STDIN:
            continue
        if f.is_dir():
            raise InputError("is a directory, not a trial file", name)
        if not f.exists():
            raise InputError("trial file not found", name)
    try:
        return _ingest_files(engine, names, actor, now, max_bad_records, on_bytes, signing)
    except ActRefused as refused:
        raise record_refusal_apart(
            engine, refused, subject="ingest", actor=actor, now=now
        ) from None


def _ingest_files(
    engine: Engine,
    names: list[str],
    actor: str,
    now: datetime,
    max_bad_records: int,
    on_bytes: Callable[[int], None] | None,
    signing: Signing,
) -> IngestResult:
    with write_session(engine) as session:
        batch_id = (session.exec(select(func.max(IngestBatch.id))).one() or 0) + 1
        ingester = _Ingester(session, batch_id)
        for name in names:
            with open_source(name) as source:
                if ingester.refused(max_bad_records):
                    ingester.unchecked += count_lines(source)
                    continue
                chunk: list[_Prepared] | None = []
                pending: list[Line | InputError] = []
                lines = read_lines(
                    source.stream,
                    source.name,
                    _counter(source, on_bytes),
                    compressed=source.compressed,
                )
                for item in lines:
                    pending.append(item)
                    if len(pending) < BATCH_SIZE:
                        continue
                    chunk = _checked(ingester, pending, chunk or [], max_bad_records)
                    pending = []
                    if chunk is None:
                        # Linear in the input, however many bad lines a small compressed
                        # file expands to: the rest is counted, not checked.
                        ingester.unchecked += count_lines(source)
                        break
                else:
                    chunk = _checked(ingester, pending, chunk or [], max_bad_records)
                if chunk is not None:
                    ingester.flush(chunk)
        return _record_batch(
            session,
            ingester,
            names,
            actor=actor,
            now=now,
            max_bad_records=max_bad_records,
            signing=signing,
        )


def _checked(
    ingester: _Ingester,
    pending: list[Line | InputError],
    chunk: list[_Prepared],
    max_bad_records: int,
) -> list[_Prepared] | None:
    """Check one batch of lines in order into `chunk` (flushed whenever full); None once
    the refusal is certain, the lines left in the batch counted as unchecked."""
    for done, taken in enumerate(ingester.take(pending)):
        if ingester.refused(max_bad_records):
            ingester.unchecked += len(pending) - done
            return None
        if taken is None:
            ingester.result.skipped_identical += 1
            continue
        line, found = taken
        if isinstance(found, InputError):
            ingester.reject(found)
            continue
        try:
            chunk.append(ingester.prepare_value(line, found[0], encoder_safe=found[1]))
        except InputError as exc:
            ingester.reject(exc)
            continue
        if len(chunk) >= BATCH_SIZE:
            ingester.flush(chunk)
            chunk = []
    return chunk


def _counter(
    source: Source, on_bytes: Callable[[int], None] | None
) -> Callable[[int], None] | None:
    """Line lengths for a plain file; the compressed file's own position otherwise."""
    if on_bytes is None or source.compressed is None:
        return on_bytes
    last = 0

    def advance(_decompressed: int) -> None:
        nonlocal last
        position = source.consumed()
        if position is not None and position > last:
            on_bytes(position - last)
            last = position

    return advance


def _record_batch(
    session: Session,
    ingester: _Ingester,
    names: list[str],
    *,
    actor: str,
    now: datetime,
    max_bad_records: int,
    audit_extra: dict[str, Any] | None = None,
    signing: Signing = UNSIGNED,
    act_kind: str = "trials.ingest",
) -> IngestResult:
    """Abort on too many bad records, else record the batch and its audit event.

    With an authority in force the batch is an ingester's signed act naming the number of
    stored records and the sha256 of their record digests in order; a refusal rolls the
    whole batch back (ActRefused) and is audited apart.
    """
    result = ingester.result
    _refuse_if_rejected(ingester, max_bad_records)
    if result.ingested == 0:
        if signing.print_act:
            raise InputError("no act to sign: every record is already stored", field="--print-act")
        result.batch_id = None
        return result
    batch_id = ingester.batch_id
    builds = session.exec(
        select(ExecutionProfileRow.system_build)
        .where(col(ExecutionProfileRow.execution_digest).in_(sorted(ingester.executions)))
        .distinct()
    ).all()
    authorized = authorize(
        session,
        kind=act_kind,
        body={
            "records": result.ingested,
            "records_digest": "sha256:" + ingester.records_hasher.hexdigest(),
        },
        scope=Scope(builds=tuple(sorted(builds))),
        signing=signing,
        now=now,
    )
    acts.ingest_separation_refusal(session, authorized, tuple(sorted(builds)), now)
    if authorized.refused:
        raise ActRefused(authorized)
    payload = {
        **(audit_extra or {}),
        "batch": batch_id,
        "files": names,
        "ingested": result.ingested,
        "skipped_identical": result.skipped_identical,
        "rejected": [
            {"file": e.file, "line": e.line, "field": e.field, "error": e.message}
            for e in result.rejected
        ],
        "trials_digest": "sha256:" + ingester.hasher.hexdigest(),
        # What each grader set's calibrations were when these trials were classified: the
        # gate re-derives a trial only when that changed (or evidence was appended).
        "validity": {
            gs: validity_digest(ingester.defs.validity(gs)) for gs in sorted(ingester.grader_sets)
        },
    }
    batch = IngestBatch(
        id=batch_id,
        files=canonical_text(names),
        ingested=result.ingested,
        skipped_identical=result.skipped_identical,
        rejected=len(result.rejected),
        at=now,
        actor=actor,
        audit_seq=ingester.seq,
    )
    session.add(batch)
    act_row = authorized.add_row(session, f"ingest:{batch_id}", ingester.seq)
    append_event(
        session,
        at=now,
        actor=actor,
        kind=audit_kinds.TRIALS_INGEST,
        subject=f"ingest:{batch_id}",
        payload={**payload, **authorized.payload()},
        rows=[batch] if act_row is None else [batch, act_row],
        rows_digest=ingester.rows_digest,
    )
    return result


def _refuse_if_rejected(ingester: _Ingester, max_bad_records: int) -> None:
    """Too many bad records: raise, which rolls the whole transaction back."""
    if ingester.rejected_count > max_bad_records:
        result = ingester.result
        remedy = None if ingester.same_execution is None else "fix them"
        only_duplicates = ingester.duplicate_ids == ingester.rejected_count
        if remedy is None and only_duplicates and not ingester.unchecked:
            # Skipping them would drop those records, not store them: new ids are the fix.
            remedy = (
                "give each record its own trial_id, e.g. `evalops trials template "
                "--trial-prefix P` for each batch; or allow some with --max-bad-records N"
            )
        raise RejectedRecords.of_records(
            result.rejected,
            total=ingester.rejected_count,
            cap=MAX_REPORTED,
            skipped_identical=result.skipped_identical,
            remedy=remedy,
            unchecked=ingester.unchecked,
        )


class _DryRun(Exception):
    """Raised inside the write transaction to roll a dry run back."""

    def __init__(self, result: IngestResult) -> None:
        super().__init__("dry run")
        self.result = result


def ingest_records(
    engine: Engine,
    items: Iterable[tuple[str, str, dict[str, Any], tuple[str, ...]]],
    *,
    files: list[str],
    actor: str,
    now: datetime,
    max_bad_records: int = 0,
    audit_extra: dict[str, Any] | None = None,
    dry_run: bool = False,
    observe: Callable[[dict[str, Any]], None] | None = None,
    on_record: Callable[[int], None] | None = None,
    same_execution: SameExecution | None = None,
    signing: Signing = UNSIGNED,
    check: Callable[[Session], None] | None = None,
) -> IngestResult:
    """Ingest records already parsed (an importer's output) exactly as `ingest_files` does.

    Each item is (source file, location such as `A-1/2`, record, ids an earlier evalops
    gave the trial); a trial stored under one of those ids is counted, not stored again;
    `same_execution` judges a trial stored with other content (see `SameExecution`). A dry
    run refuses what the ingest would refuse. Errors read
    `file: location: field: what`. `audit_extra` joins the batch's audit payload (an
    import's `source` and `map_digest`). `dry_run` validates, classifies and resolves
    everything in the same transaction, reports every rejected record and rolls back.
    `observe` sees each accepted or identical row (its classification included);
    `on_record` hears each record as it is read (a progress display). `check` runs in the
    transaction once every item is read, and may refuse the whole import (InputError).
    """
    try:
        with write_session(engine) as session:
            batch_id = (session.exec(select(func.max(IngestBatch.id))).one() or 0) + 1
            ingester = _Ingester(session, batch_id, observe, same_execution)
            chunk: list[_Prepared] = []
            for file, label, value, aliases in items:
                if on_record is not None:
                    on_record(1)
                line = Line(file, 0, b"", label)
                try:
                    prepared = ingester.prepare_value(line, value)
                except InputError as exc:
                    ingester.reject(exc)
                    continue
                prepared.aliases = aliases
                chunk.append(prepared)
                if len(chunk) >= BATCH_SIZE:
                    ingester.flush(chunk)
                    chunk = []
            ingester.flush(chunk)
            # The records' own refusals first: they name each trial.
            if check is not None and ingester.rejected_count <= max_bad_records:
                check(session)
            if dry_run:
                _refuse_if_rejected(ingester, max_bad_records)
                raise _DryRun(ingester.result)
            return _record_batch(
                session,
                ingester,
                files,
                actor=actor,
                now=now,
                max_bad_records=max_bad_records,
                audit_extra=audit_extra,
                signing=signing,
                act_kind="trials.import",
            )
    except ActRefused as refused:
        raise record_refusal_apart(
            engine, refused, subject="import", actor=actor, now=now
        ) from None
    except _DryRun as done:
        done.result.batch_id = None
        return done.result
