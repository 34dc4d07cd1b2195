"""The trials of a stored decision of evaluator 4, listed again from the registry.

Evaluator 4 stores per-task summaries, not trials (docs/gate.md, "Evaluator 4"), so a
report reads each task's trials again: the rows `task_inputs` keeps for the task (its pinned
revision and grader set, the decision's execution digest, up to the cutoff, not voided), in
the same order (by row id), each with the trial input evaluator 3 would have listed.

A decision's pages ask for its tasks one after another. One query per task is what made the
registry site of a thousand decisions cost minutes: the statements alone, twice per task,
were a quarter of it. So the build's rows are read once, as one stream ordered by task,
and walked beside the tasks as they are asked for; a task asked for out of that order is read
on its own, and lists the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import ScalarResult
from sqlmodel import Session, col, select

from evalops.domain.gate_documents import TrialInput
from evalops.services.gate.input_parts import GateRequest
from evalops.services.gate.inputs import self_reviews, trial_input
from evalops.services.registry.definitions import Definitions, StaleClassifications
from evalops.store.queries import upto, voided
from evalops.store.tables import Trial

ListedTrial = tuple[TrialInput, Trial]
"""A trial's input as evaluator 3 lists it, and its stored row (the record included)."""


class ListedTrials:
    """`listed(task)`: the task's trials, each yielded as it is read, so a report lists a
    decision of any size without holding its trials: the stream fetches `batch` rows at a
    time (on PostgreSQL, a server-side cursor's). `close()` ends the stream."""

    def __init__(self, session: Session, inputs: Mapping[str, Any], batch: int) -> None:
        self.session = session
        self.batch = batch
        self.cutoff = GateRequest.from_dict(inputs["request"]).cutoff
        self.execution_digest = str(inputs["execution_digest"])
        # Listed as evaluator 3 lists them: the pass class is never exempt from calibration.
        self.defs = Definitions(session, self.cutoff, pass_class_exempt=False)
        self.defs.refused_reviews = self_reviews(session, self.cutoff)
        self.rederive = StaleClassifications(session, self.defs)
        self.rank: dict[str, int] | None = None
        self.result: ScalarResult[Trial] | None = None
        self.stream: Iterator[Trial] | None = None
        self.ahead: Trial | None = None
        self.done = -1
        """The rank of the last task the stream has gone past (every row of it read)."""

    def __call__(self, task: Mapping[str, Any]) -> Iterator[ListedTrial]:
        rank = self._ranks().get(str(task["task_id"]))
        if rank is None:
            return  # no row of the build names the task
        if rank <= self.done:
            yield from self._alone(task)
            return
        # Past it from here on: asked for again (or left half read), the task is read alone.
        self.done = rank
        for trial in self._walk_to(rank):
            if self._listed(task, trial):
                yield trial_input(self.session, self.defs, self.rederive, trial, trial), trial

    def close(self) -> None:
        if self.result is not None:
            self.result.close()
        self.result, self.stream, self.ahead = None, None, None

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
        """The stream's rows of the task at `rank`, every row before them skipped."""
        ranks = self._ranks()
        if self.stream is None:
            self.result = self.session.exec(
                select(Trial)
                .where(*self._where())
                .order_by(col(Trial.task_id), col(Trial.id))
                .execution_options(yield_per=self.batch)
            )
            self.stream = iter(self.result)
        while True:
            trial = self.ahead if self.ahead is not None else next(self.stream, None)
            self.ahead = None
            if trial is None:
                self.done = len(ranks)
                return
            at = ranks[trial.task_id]
            if at > rank:
                self.ahead = trial
                return
            self.session.expunge(trial)
            if at == rank:
                yield trial

    def _alone(self, task: Mapping[str, Any]) -> Iterator[ListedTrial]:
        rows = self.session.exec(
            select(Trial)
            .where(*self._where(), Trial.task_id == task["task_id"])
            .order_by(col(Trial.id))
        )
        for trial in rows:
            self.session.expunge(trial)
            if self._listed(task, trial):
                yield trial_input(self.session, self.defs, self.rederive, trial, trial), trial

    @staticmethod
    def _listed(task: Mapping[str, Any], trial: Trial) -> bool:
        """Of the task's pinned revision and grader set (others are ignored trials)."""
        return bool(
            trial.task_digest == task["task_digest"]
            and trial.grader_set_digest == task["grader_set_digest"]
        )
