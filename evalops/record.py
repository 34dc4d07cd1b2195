"""Build valid `evalops.trial/v1` records in your own harness (public API).

    from evalops.record import TrialBuilder

    builder = TrialBuilder.from_registry("registry", task="support-refund-in-order",
                                         execution="candidate-b124")
    trial = builder.trial("run-7-t0", run_id="run-7", trial_index=0,
                          started_at=start, completed_at=end)
    trial.tool_call("crm:lookup-order", {"orderId": "A-1"}, agent_id="support")
    trial.grader("refund-outcome", "task_pass", score=1.0)
    ...
    out.write(trial.to_json() + "\\n")          # one line of a JSONL file for trials ingest

The builder fills in `task_digest`, `execution_digest`, `grader_set_digest` and
`eval_case_digest` from the registry (files, or the registry database) and each grader's
version from the task's grader set. `build()` / `to_json()` validate the record before it
is written: the schema, a grader that is not in the set, a state the grader may not
produce, two results for one grader, and (unless allowed) a blocking grader with no result,
each raise `evalops.errors.InputError` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalops.domain import digests
from evalops.domain.specs import EvalTaskSpec, ExecutionProfile, GraderSet
from evalops.domain.timestamps import format_timestamp
from evalops.domain.trial_record import TrialRecord
from evalops.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["Trial", "TrialBuilder"]

SCHEMA = "evalops.trial/v1"
_PASSING = ("task_pass", "pass")


def _time(value: datetime | str) -> str:
    return format_timestamp(value) if isinstance(value, datetime) else value


@dataclass(frozen=True)
class TrialBuilder:
    """Records of one eval case (task x execution x grader set), digests filled in."""

    task_id: str
    task: EvalTaskSpec
    task_digest: str
    graders: GraderSet
    grader_set_digest: str
    execution_digest: str

    @property
    def eval_case_digest(self) -> str:
        return digests.eval_case_digest(
            self.task_digest, self.execution_digest, self.grader_set_digest
        )

    @classmethod
    def from_registry(cls, registry: str | Path, *, task: str, execution: str) -> TrialBuilder:
        """From the registry's files (a git checkout): the digests `evalops sync` registers."""
        from evalops.registry.snapshot import load_snapshot

        snapshot = load_snapshot(Path(registry))
        task_def = snapshot.find("task", task)
        if task_def is None or not isinstance(task_def.spec, EvalTaskSpec):
            raise InputError(f"task {task!r} is not in the registry", str(registry), field="task")
        profile = snapshot.find("execution_profile", execution)
        if profile is None or not isinstance(profile.spec, ExecutionProfile):
            raise InputError(
                f"execution profile {execution!r} is not in the registry",
                str(registry),
                field="execution",
            )
        grader_def = snapshot.find("grader_set", task_def.spec.grader_set)
        if grader_def is None or not isinstance(grader_def.spec, GraderSet):
            raise InputError(
                f"grader set {task_def.spec.grader_set!r} is not in the registry",
                str(registry),
                field="grader_set",
            )
        return cls(
            task,
            task_def.spec,
            task_def.digest,
            grader_def.spec,
            grader_def.digest,
            profile.digest,
        )

    @classmethod
    def from_database(cls, url: str, *, task: str, execution: str) -> TrialBuilder:
        """From the registry database: the definitions registered by the last sync."""
        from evalops.services.database import open_database

        engine = open_database(url)
        try:
            return cls.from_engine(engine, task=task, execution=execution)
        finally:
            engine.dispose()

    @classmethod
    def from_engine(cls, engine: Engine, *, task: str, execution: str) -> TrialBuilder:
        """From an open registry database: the definitions in force there (a dry run's
        engine may see a commit's in force, as `trials template --definitions REV` does)."""
        from evalops.services.ingest.imports import case_definitions

        spec, task_digest, graders, grader_set_digest, execution_digest = case_definitions(
            engine, task, execution
        )
        return cls(task, spec, task_digest, graders, grader_set_digest, execution_digest)

    def trial(
        self,
        trial_id: str,
        *,
        trial_index: int,
        started_at: datetime | str,
        completed_at: datetime | str,
        run_id: str | None = None,
        attempt_id: str | None = None,
        target_agent_id: str | None = None,
    ) -> Trial:
        """Start one record; datetimes must carry an offset."""
        record: dict[str, Any] = {"schema": SCHEMA, "trial_id": trial_id}
        if run_id is not None:
            record["run_id"] = run_id
        if attempt_id is not None:
            record["attempt_id"] = attempt_id
        record |= {
            "task_id": self.task_id,
            "task_digest": self.task_digest,
            "execution_digest": self.execution_digest,
            "grader_set_digest": self.grader_set_digest,
            "eval_case_digest": self.eval_case_digest,
            "trial_index": trial_index,
            "started_at": _time(started_at),
            "completed_at": _time(completed_at),
            "grader_results": [],
            "runtime": {"status": "ok"},
        }
        if target_agent_id is not None:
            record["target_agent_id"] = target_agent_id
        return Trial(self, record)

    def template(
        self,
        now: datetime,
        *,
        trial_id: str = "trial-0001",
        run_id: str = "run-0001",
        attempt_id: str = "attempt-0001",
        trial_index: int = 0,
        target_agent_id: str | None = None,
    ) -> dict[str, Any]:
        """A valid skeleton: every grader with a passing result, the expected calls, ok.
        With `target_agent_id` every call carries it as its `agent_id`."""
        trial = self.trial(
            trial_id,
            run_id=run_id,
            attempt_id=attempt_id,
            trial_index=trial_index,
            started_at=now,
            completed_at=now,
            target_agent_id=target_agent_id,
        )
        for grader in self.graders.graders:
            state = next((s for s in _PASSING if s in grader.produces), grader.produces[0])
            trial.grader(grader.id, state)
        expected = self.task.contract.expected
        if expected is not None and expected.trajectory is not None:
            for call in expected.trajectory.calls:
                trial.tool_call(call.tool, dict(call.args or {}))
        required = self.task.contract.required_artifacts
        for kind in required.logical if required is not None else []:
            trial.artifact(kind)
        trial.usage()
        return trial.build()


class Trial:
    """One record under construction; every method returns the trial, for chaining."""

    def __init__(self, builder: TrialBuilder, record: dict[str, Any]) -> None:
        self._builder = builder
        self._record = record

    def grader(
        self,
        grader_id: str,
        state: str,
        *,
        score: float | None = None,
        evidence: list[str] | None = None,
        reason: str | None = None,
    ) -> Trial:
        """A grader's verdict; its version comes from the task's grader set."""
        graders = self._builder.graders
        grader = graders.grader(grader_id)
        if grader is None:
            raise InputError(
                f"grader {grader_id!r} is not in grader set {graders.id}", field="grader_results"
            )
        if state not in grader.produces:
            raise InputError(
                f"grader {grader_id} may not produce {state!r} (produces: "
                f"{', '.join(grader.produces)}); the trial would be grader_invalid",
                field="grader_results",
            )
        if any(r["grader_id"] == grader_id for r in self._record["grader_results"]):
            raise InputError(
                f"grader {grader_id} already has a result (one result per grader)",
                field="grader_results",
            )
        result: dict[str, Any] = {
            "grader_id": grader_id,
            "grader_version": grader.version,
            "state": state,
        }
        if score is not None:
            result["score"] = score
        if evidence:
            result["evidence"] = list(evidence)
        if reason is not None:
            result["reason"] = reason
        self._record["grader_results"].append(result)
        return self

    def runtime(self, status: str, message: str | None = None) -> Trial:
        """How the run ended: ok, agent_error, runtime_error, infrastructure_error, timeout."""
        self._record["runtime"] = {"status": status, **({"message": message} if message else {})}
        return self

    def tool_call(
        self, tool: str, args: Mapping[str, Any] | None = None, *, agent_id: str | None = None
    ) -> Trial:
        call: dict[str, Any] = {"tool": tool, "args": dict(args or {})}
        # A record naming its target agent observes only that agent's calls: a call with
        # no agent_id would silently not count. Unsaid, the target made it.
        agent_id = agent_id if agent_id is not None else self._record.get("target_agent_id")
        if agent_id is not None:
            call["agent_id"] = agent_id
        self._record.setdefault("tool_calls", []).append(call)
        return self

    def effect(self, effect_key: str, status: str, external_ref: str | None = None) -> Trial:
        effect = {"effect_key": effect_key, "status": status}
        if external_ref is not None:
            effect["external_ref"] = external_ref
        self._record.setdefault("external_effects", []).append(effect)
        return self

    def artifact(self, kind: str, **fields: Any) -> Trial:
        """An artifact of the manifest (`artifact_id`, `digest`, `producer`, `location`...)."""
        manifest = self._record.setdefault("artifact_manifest", {"artifacts": []})
        manifest["artifacts"].append({"kind": kind, **fields})
        return self

    def usage(self, model_calls: int = 0, input_tokens: int = 0, output_tokens: int = 0) -> Trial:
        self._record["usage"] = {
            "model_calls": model_calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }
        return self

    def fixture_misses(self, count: int) -> Trial:
        self._record["fixture_misses"] = count
        return self

    def rerun_of(self, parent_trial_id: str, reason: str) -> Trial:
        """This trial re-executes `parent_trial_id` (keep the parent's trial_index)."""
        self._record["rerun"] = {"parent_trial_id": parent_trial_id, "reason": reason}
        return self

    def label(self, label: str) -> Trial:
        self._record.setdefault("secondary_labels", []).append(label)
        return self

    def build(self, *, allow_missing_graders: bool = False) -> dict[str, Any]:
        """The validated record (a copy); raises InputError naming what is wrong."""
        record: dict[str, Any] = json.loads(json.dumps(self._record))
        try:
            TrialRecord.model_validate(record)
        except ValidationError as exc:
            from evalops.registry.definitions import pydantic_error
            from evalops.registry.load import Document

            err = pydantic_error(Document("trial record", record, {}), exc)
            raise InputError(err.message, field=err.field) from None
        if record["runtime"]["status"] == "ok" and not allow_missing_graders:
            present = {r["grader_id"] for r in record["grader_results"]}
            missing = [
                g.id for g in self._builder.graders.graders if g.blocking and g.id not in present
            ]
            if missing:
                raise InputError(
                    f"blocking graders without a result: {', '.join(missing)} (the trial would "
                    "be missing_required_evidence; build(allow_missing_graders=True) to keep it)",
                    field="grader_results",
                )
        return record

    def to_json(self, *, allow_missing_graders: bool = False) -> str:
        """One JSONL line (no newline), validated."""
        record = self.build(allow_missing_graders=allow_missing_graders)
        return json.dumps(record, sort_keys=True, ensure_ascii=False)
