"""The trials of a stored decision of evaluator 4, listed again from the registry.

Evaluator 4 stores per-task summaries, not trials (docs/gate.md, "Evaluator 4"), so a
report reads each task's trials again: the rows `task_inputs` keeps for the task (its pinned
revision and grader set, the decision's execution digest, up to the cutoff, not voided), in
the same order (by row id), each with the trial input evaluator 3 would have listed.

A decision's pages ask for its tasks one after another. One query per task is what made the
registry site of a thousand decisions cost minutes: the statements alone, twice per task,
were a quarter of it. So the build's rows are walked once, in a stream of their ids and pins
ordered by task (no record read), beside the tasks as they are asked for; the whole rows of
the decision's own trials are read by id, a batch at a time across tasks. Other suites'
tasks and other revisions of the build cost a few bytes each, never their records. A task
asked for out of that order is read on its own, and lists the same rows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import CursorResult
from sqlmodel import Session, col, select

from evalops.domain.gate_documents import TrialInput
from evalops.services.gate.input_parts import GateRequest
from evalops.services.gate.inputs import self_reviews, trial_input
from evalops.services.registry.definitions import Definitions, StaleClassifications
from evalops.store.queries import upto, voided
from evalops.store.tables import Trial

ListedTrial = tuple[TrialInput, Trial]
"""A trial's input as evaluator 3 lists it, and its stored row (the record included)."""

_Pin = tuple[str, str, str]
"""(task id, task digest, grader set digest): a task as a decision pins it."""


class ListedTrials:
    """`listed(task)`: the task's trials, each yielded as it is read, so a report lists a
    decision of any size without holding its trials: at most `batch` whole rows are held,
    and the stream of ids fetches `batch` at a time (on PostgreSQL, a server-side cursor's).
    `close()` ends the stream."""

    def __init__(self, session: Session, inputs: Mapping[str, Any], batch: int) -> None:
        self.session = session
        self.batch = batch
        self.cutoff = GateRequest.from_dict(inputs["request"]).cutoff
        self.execution_digest = str(inputs["execution_digest"])
        self.pinned: set[_Pin] = {_pin(t) for t in inputs.get("tasks", [])}
        # Listed as evaluator 3 lists them: the pass class is never exempt from calibration.
        self.defs = Definitions(session, self.cutoff, pass_class_exempt=False)
        self.defs.refused_reviews = self_reviews(session, self.cutoff)
        self.rederive = StaleClassifications(session, self.defs)
        self.rank: dict[str, int] | None = None
        self.ids: CursorResult[Any] | None = None
        self.ready: deque[Trial] = deque()
        self.done = -1
        """The rank of the last task the stream has been asked for (or gone past)."""

    def __call__(self, task: Mapping[str, Any]) -> Iterator[ListedTrial]:
        rank = self._ranks().get(str(task["task_id"]))
        if rank is None:
            return  # no row of the build names the task
        if rank <= self.done or _pin(task) not in self.pinned:
            yield from self._listed(self._alone(task))
            return
        # Past it from here on: asked for again (or left half read), the task is read alone.
        self.done = rank
        yield from self._listed(self._walk_to(rank))

    def close(self) -> None:
        if self.ids is not None:
            self.ids.close()
        self.ids = None
        self.ready.clear()

    def _listed(self, trials: Iterator[Trial]) -> Iterator[ListedTrial]:
        for trial in trials:
            yield trial_input(self.session, self.defs, self.rederive, trial, trial), trial

    def _where(self) -> list[Any]:
        return [
            Trial.execution_digest == self.execution_digest,
            upto(Trial.audit_seq, self.cutoff),
            ~voided(self.cutoff),
        ]

    def _ranks(self) -> dict[str, int]:
        """Each task id's place in the stream, as the database orders them: compared by
        place, never as Python compares strings (a PostgreSQL collation need not agree)."""
        if self.rank is None:
            # The index on (execution digest, task id) alone: a task without a live row
            # keeps its place, and its walk finds nothing.
            ids = self.session.exec(
                select(Trial.task_id)
                .where(Trial.execution_digest == self.execution_digest)
                .distinct()
                .order_by(col(Trial.task_id))
            )
            self.rank = {str(task_id): n for n, task_id in enumerate(ids)}
        return self.rank

    def _walk_to(self, rank: int) -> Iterator[Trial]:
        """The decision's rows of the task at `rank` (the stream holds only rows the
        decision pins, one pin a task), every row of an earlier place let go."""
        ranks = self._ranks()
        while True:
            if not self.ready and not self._read_ahead(rank):
                self.done = len(ranks)
                return
            trial = self.ready[0]
            at = ranks[trial.task_id]
            if at > rank:
                return
            self.ready.popleft()
            if at == rank:
                yield trial

    def _read_ahead(self, rank: int) -> bool:
        """The next `batch` of the decision's rows from the task at `rank` on, in the
        stream's order (False: none left); rows of earlier places are passed by their ids."""
        ranks = self._ranks()
        if self.ids is None:
            self.ids = self.session.connection().execute(
                select(Trial.id, Trial.task_id, Trial.task_digest, Trial.grader_set_digest)
                .where(*self._where())
                .order_by(col(Trial.task_id), col(Trial.id))
                .execution_options(yield_per=self.batch)
            )
        wanted: list[int] = []
        rows: Iterator[Any] = iter(self.ids)  # (id, task id, task digest, grader set digest)
        for row_id, task_id, task_digest, grader_set_digest in rows:
            pinned = (task_id, task_digest, grader_set_digest) in self.pinned
            if pinned and ranks[task_id] >= rank:
                wanted.append(int(row_id))
                if len(wanted) >= self.batch:
                    break
        self.ready.extend(self._rows(wanted))
        return bool(wanted)

    def _alone(self, task: Mapping[str, Any]) -> Iterator[Trial]:
        """The task's rows read on their own: ids streamed, whole rows a batch at a time."""
        ids = self.session.connection().execute(
            select(Trial.id)
            .where(
                *self._where(),
                Trial.task_id == task["task_id"],
                Trial.task_digest == task["task_digest"],
                Trial.grader_set_digest == task["grader_set_digest"],
            )
            .order_by(col(Trial.id))
            .execution_options(yield_per=self.batch)
        )
        try:
            for part in ids.partitions():
                yield from self._rows([int(row_id) for (row_id,) in part])
        finally:
            ids.close()

    def _rows(self, ids: Sequence[int]) -> list[Trial]:
        """The whole rows of `ids`, in that order, let go by the session (the caller holds
        them as long as it needs them; the session would keep every row it ever read)."""
        if not ids:
            return []
        found = {t.id: t for t in self.session.exec(select(Trial).where(col(Trial.id).in_(ids)))}
        for trial in found.values():
            if trial in self.session:
                self.session.expunge(trial)
        return [found[i] for i in ids]


def _pin(task: Mapping[str, Any]) -> _Pin:
    return (str(task["task_id"]), str(task["task_digest"]), str(task["grader_set_digest"]))
