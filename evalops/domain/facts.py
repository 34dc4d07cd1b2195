"""What classification and calibration validity read of a trial record, a task and a grader
set: as protocols, and as read-only views of stored documents.

`classify` (evalops/domain/classify.py) and `calibration_validity`
(evalops/domain/calibration_validity.py) read a handful of attributes of their inputs. The
spec models (evalops/domain/specs.py, evalops/domain/trial_record.py) have them all, and so
do the views below, built straight from the JSON a registry stores: a definition was
validated when `sync` registered it and a record when `ingest` stored it, so reading the
stored document back needs no validation, only the models' defaults for what a document
leaves out. The read commands (`trials list`, `calibration status`) use the views and never
import pydantic; every other caller passes the models. tests/domain/test_facts.py proves
that the views read every example definition and record as the models do, attribute by
attribute, and classify alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

# -- protocols: what the pure rules read ---------------------------------------------------


class RuntimeFacts(Protocol):
    @property
    def status(self) -> str: ...


class ResultFacts(Protocol):
    @property
    def grader_id(self) -> str: ...
    @property
    def grader_version(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def score(self) -> float | None: ...


class EffectFacts(Protocol):
    @property
    def effect_key(self) -> str: ...
    @property
    def status(self) -> str: ...


class ArtifactFacts(Protocol):
    @property
    def kind(self) -> str: ...


class ManifestFacts(Protocol):
    @property
    def artifacts(self) -> Sequence[ArtifactFacts]: ...


class RecordFacts(Protocol):
    """A trial record (`TrialRecord`), as classification reads it."""

    @property
    def runtime(self) -> RuntimeFacts: ...
    @property
    def grader_results(self) -> Sequence[ResultFacts]: ...
    @property
    def external_effects(self) -> Sequence[EffectFacts]: ...
    @property
    def artifact_manifest(self) -> ManifestFacts | None: ...
    @property
    def fixture_misses(self) -> int: ...
    @property
    def secondary_labels(self) -> Sequence[str]: ...


class RequirementFacts(Protocol):
    """A model grader's `calibration_requirements`."""

    @property
    def min_holdout_items(self) -> int: ...
    @property
    def min_precision_lower_bound(self) -> float: ...
    @property
    def min_recall_lower_bound(self) -> float: ...
    @property
    def min_human_agreement(self) -> float: ...


class GraderFacts(Protocol):
    """One grader of a grader set (`Grader`)."""

    @property
    def id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def layer(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def produces(self) -> Sequence[str]: ...
    @property
    def blocking(self) -> bool: ...
    @property
    def calibration_requirements(self) -> RequirementFacts | None: ...


class GraderSetFacts(Protocol):
    """A grader set (`GraderSet`)."""

    @property
    def graders(self) -> Sequence[GraderFacts]: ...
    def grader(self, grader_id: str) -> GraderFacts | None: ...


class RequiredArtifactsFacts(Protocol):
    @property
    def logical(self) -> Sequence[str]: ...


class ExpectedFacts(Protocol):
    @property
    def kind(self) -> str: ...


class ContractFacts(Protocol):
    @property
    def required_artifacts(self) -> RequiredArtifactsFacts | None: ...
    @property
    def expected(self) -> ExpectedFacts | None: ...
    @property
    def score_from(self) -> str | None: ...


class FixturesFacts(Protocol):
    @property
    def onMiss(self) -> str | None: ...


class TaskFacts(Protocol):
    """A task spec (`EvalTaskSpec`), as classification reads it."""

    @property
    def contract(self) -> ContractFacts: ...
    @property
    def fixtures(self) -> FixturesFacts | None: ...


class MetaFacts(Protocol):
    @property
    def risk(self) -> str: ...
    @property
    def protects(self) -> Sequence[str]: ...


class PlanFacts(Protocol):
    @property
    def count(self) -> int: ...
    @property
    def k(self) -> int | None: ...
    @property
    def passRule(self) -> str: ...
    @property
    def passScore(self) -> float: ...


class PlanContractFacts(Protocol):
    @property
    def trials(self) -> PlanFacts | None: ...


class TaskHeadFacts(Protocol):
    """What a gate reads of a task besides its trials: the labels the risk ratchet folds
    over its revisions, and its trial plan."""

    @property
    def meta(self) -> MetaFacts: ...
    @property
    def contract(self) -> PlanContractFacts: ...


# -- views of stored documents -------------------------------------------------------------
# Each default below is the spec model's default for a field the document may leave out, and
# a float field is a float as the model makes it: canonical JSON stores `1.0` as `1`.


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


class StoredRuntime(NamedTuple):
    status: str


class StoredResult(NamedTuple):
    grader_id: str
    grader_version: int
    state: str
    score: float | None = None


class StoredEffect(NamedTuple):
    effect_key: str
    status: str


class StoredArtifact(NamedTuple):
    kind: str


class StoredManifest(NamedTuple):
    artifacts: tuple[StoredArtifact, ...]


class StoredRecord(NamedTuple):
    runtime: StoredRuntime
    grader_results: tuple[StoredResult, ...]
    external_effects: tuple[StoredEffect, ...]
    artifact_manifest: StoredManifest | None
    fixture_misses: int
    secondary_labels: tuple[str, ...]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredRecord:
        """A stored trial record (the `trial.record` column, parsed)."""
        manifest = document.get("artifact_manifest")
        return cls(
            runtime=StoredRuntime(document["runtime"]["status"]),
            grader_results=tuple(
                StoredResult(
                    r["grader_id"], r["grader_version"], r["state"], _float(r.get("score"))
                )
                for r in document["grader_results"]
            ),
            external_effects=tuple(
                StoredEffect(e["effect_key"], e["status"])
                for e in document.get("external_effects", ())
            ),
            artifact_manifest=(
                None
                if manifest is None
                else StoredManifest(
                    tuple(StoredArtifact(a["kind"]) for a in manifest.get("artifacts", ()))
                )
            ),
            fixture_misses=document.get("fixture_misses", 0),
            secondary_labels=tuple(document.get("secondary_labels", ())),
        )


class StoredRequirements(NamedTuple):
    min_holdout_items: int
    min_precision_lower_bound: float
    min_recall_lower_bound: float
    min_human_agreement: float


class StoredGrader(NamedTuple):
    id: str
    version: int
    layer: str
    type: str
    produces: tuple[str, ...]
    blocking: bool
    calibration_requirements: StoredRequirements | None

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredGrader:
        """One grader object of a registered grader set's `graders`."""
        req = document.get("calibration_requirements")
        return cls(
            id=document["id"],
            version=document["version"],
            layer=document["layer"],
            type=document["type"],
            produces=tuple(document["produces"]),
            blocking=document["blocking"],
            calibration_requirements=(
                None
                if req is None
                else StoredRequirements(
                    req["min_holdout_items"],
                    float(req["min_precision_lower_bound"]),
                    float(req["min_recall_lower_bound"]),
                    float(req["min_human_agreement"]),
                )
            ),
        )


class StoredGraderSet(NamedTuple):
    graders: tuple[StoredGrader, ...]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredGraderSet:
        """A registered grader set's document."""
        return cls(tuple(StoredGrader.of(g) for g in document["graders"]))

    def grader(self, grader_id: str) -> StoredGrader | None:
        return next((g for g in self.graders if g.id == grader_id), None)


class StoredRequiredArtifacts(NamedTuple):
    logical: tuple[str, ...]


class StoredExpected(NamedTuple):
    kind: str


class StoredContract(NamedTuple):
    required_artifacts: StoredRequiredArtifacts | None
    expected: StoredExpected | None
    score_from: str | None


class StoredFixtures(NamedTuple):
    onMiss: str | None


class StoredTask(NamedTuple):
    contract: StoredContract
    fixtures: StoredFixtures | None

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredTask:
        """A registered task revision's document."""
        contract = document["contract"]
        required = contract.get("required_artifacts")
        expected = contract.get("expected")
        fixtures = document.get("fixtures")
        return cls(
            contract=StoredContract(
                required_artifacts=(
                    None
                    if required is None
                    else StoredRequiredArtifacts(tuple(required.get("logical", ())))
                ),
                expected=None if expected is None else StoredExpected(expected["kind"]),
                score_from=contract.get("score_from"),
            ),
            fixtures=None if fixtures is None else StoredFixtures(fixtures.get("onMiss")),
        )


class StoredMeta(NamedTuple):
    risk: str
    protects: tuple[str, ...]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredMeta:
        """A task document's risk labels, as the gate reads them."""
        meta = document["meta"]
        return cls(meta["risk"], tuple(meta.get("protects", ())))


@dataclass(frozen=True, slots=True)
class StoredPlan:
    # Not a NamedTuple: `count` would shadow tuple.count.
    count: int
    k: int | None
    passRule: str
    passScore: float


class StoredPlanContract(NamedTuple):
    trials: StoredPlan | None


class StoredTaskHead(NamedTuple):
    meta: StoredMeta
    contract: StoredPlanContract

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> StoredTaskHead:
        """A registered task revision's labels and trial plan (the gate's `member_heads`:
        a suite of 10,000 tasks would otherwise validate 10,000 specs for four fields)."""
        plan = document["contract"].get("trials")
        return cls(
            meta=StoredMeta.of(document),
            contract=StoredPlanContract(
                None
                if plan is None
                else StoredPlan(
                    count=plan.get("count", 1),
                    k=plan.get("k"),
                    passRule=plan.get("passRule", "all"),
                    passScore=float(plan.get("passScore", 1.0)),
                )
            ),
        )


def rerun_limits(gate_policy: Mapping[str, Any]) -> dict[str, int]:
    """A registered gate policy's `reruns.max_attempts_by_class`, as the gate reads it."""
    rule = gate_policy["reruns"].get("max_attempts_by_class", {})
    return {str(k): v for k, v in rule.items()}
