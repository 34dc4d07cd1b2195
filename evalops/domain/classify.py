"""Primary classification of a trial (docs/classification.md), as a pure function.

Every rule that applies adds a candidate class; the trial gets the highest by canonical
precedence and every other candidate becomes a secondary label. So a hard failure can
never hide behind a pass, and evalops, not the harness, decides what a trial is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalops.domain.classes import CANONICAL_PRECEDENCE, EVIDENCE_BLOCKED, TrialClass

if TYPE_CHECKING:  # a read command re-derives classes without importing pydantic
    from evalops.domain.calibration_validity import Validity
    from evalops.domain.facts import (
        GraderFacts,
        GraderSetFacts,
        RecordFacts,
        ResultFacts,
        TaskFacts,
    )
    from evalops.domain.trajectory import TrajectoryResult

RANK: dict[str, int] = {c: i for i, c in enumerate(CANONICAL_PRECEDENCE)}
FAILING_STATES = frozenset(CANONICAL_PRECEDENCE) - {"task_pass"}
# A grader's own failing verdicts (its layer's), the ones a calibration may or may not let a
# model block; the evidence states hold on their own.
VERDICTS = frozenset({"task_fail", "hard_constraint_fail"})


@dataclass(frozen=True)
class Classification:
    primary: TrialClass
    secondary_labels: tuple[str, ...]
    score: float
    gating_score: float
    reasons: tuple[str, ...]
    """Why each candidate class applied, highest first."""
    review: tuple[tuple[str, str], ...] = ()
    """(grader id, why) pairs that belong in the human review queue."""
    scored: bool = True
    """Whether the score has a source (a grader's score, the trajectory, a fail-closed
    fixture miss); False: it is the 1-or-0 stand-in for the class, which people see as `-`."""
    deciders: tuple[tuple[str, str | None], ...] = ()
    """(class, who) for each reason, in `reasons`' order: a grader's type (`deterministic`,
    `model`) or `human` (a review) when a verdict gave it, None for a check no grader
    makes (an effect, the runtime, the trajectory, a fixture miss, missing evidence)."""

    @property
    def passed(self) -> bool:
        return self.primary == "task_pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "primary_classification": self.primary,
            "secondary_labels": list(self.secondary_labels),
            "score": self.score,
            "gating_score": self.gating_score,
            "reasons": list(self.reasons),
        }


@dataclass
class _Candidates:
    found: dict[str, list[str]] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    review: list[tuple[str, str]] = field(default_factory=list)
    by: dict[str, list[str | None]] = field(default_factory=dict)

    def add(self, cls: str, why: str, by: str | None = None) -> None:
        """A reason for `cls`; `by` the type of the grader whose verdict it is, if any."""
        self.found.setdefault(cls, []).append(why)
        self.by.setdefault(cls, []).append(by)

    def label(self, text: str) -> None:
        if text not in self.labels:
            self.labels.append(text)


AMBIGUOUS_EFFECT_STATUSES = ("requested", "unknown")


def effective_effect_statuses(
    record: RecordFacts, reconciliations: Mapping[int, str]
) -> list[tuple[str, str]]:
    """(effect_key, status) after reconciliation, by effect position.

    A reconciliation settles one `requested` or `unknown` effect (docs/classification.md);
    an effect recorded `committed` or `not_committed` is a fact of the run and keeps its
    status whatever a reconciliation row says.
    """
    out: list[tuple[str, str]] = []
    for index, effect in enumerate(record.external_effects):
        status: str = effect.status
        if status in AMBIGUOUS_EFFECT_STATUSES and index in reconciliations:
            status = reconciliations[index]
        out.append((effect.effect_key, status))
    return out


def _effects(record: RecordFacts, reconciliations: Mapping[int, str], c: _Candidates) -> None:
    committed: dict[str, int] = {}
    for key, status in effective_effect_statuses(record, reconciliations):
        if status == "committed":
            committed[key] = committed.get(key, 0) + 1
        elif status in AMBIGUOUS_EFFECT_STATUSES:
            c.add("ambiguous_external_effect", f"effect {key} is {status} and not reconciled")
    for key, count in committed.items():
        if count > 1:
            c.add("hard_constraint_fail", f"effect {key} was committed {count} times")


def _runtime(record: RecordFacts, c: _Candidates) -> None:
    status = record.runtime.status
    if status in ("infrastructure_error", "timeout"):
        c.add("infrastructure_invalid", f"runtime status {status}")
    elif status in ("agent_error", "runtime_error"):
        c.add(status, f"runtime status {status}")


def _check_results(record: RecordFacts, graders: GraderSetFacts, c: _Candidates) -> None:
    """Results that cannot be trusted make the trial grader_invalid."""
    seen: set[str] = set()
    by_id = {g.id: g for g in graders.graders}
    for raw in record.grader_results:
        grader = by_id.get(raw.grader_id)
        if raw.grader_id in seen:
            # Ingest refuses such records; a pure caller still never gets a pass out of it.
            c.add("grader_invalid", f"{raw.grader_id} gave more than one result")
        seen.add(raw.grader_id)
        if grader is None:
            c.add("grader_invalid", f"result from unknown grader {raw.grader_id}")
        elif grader.version != raw.grader_version:
            c.add(
                "grader_invalid",
                f"result from {grader.id} version {raw.grader_version}, the set has "
                f"version {grader.version}",
            )
        elif raw.state not in grader.produces:
            c.add(
                "grader_invalid",
                f"{grader.id} said {raw.state}, outside its produces {list(grader.produces)}",
            )


def failing_verdict_class(grader: GraderFacts) -> str | None:
    """The trial class a blocking grader's own failing verdict becomes (None: it has none).

    `suite coverage` shows the gate effect of exactly this, so coverage and the gate agree.
    """
    if not grader.blocking:
        return None
    for state in ("hard_constraint_fail", "task_fail"):
        if state in grader.produces:
            return _verdict_class(grader, state)
    return None


def _verdict_class(grader: GraderFacts, state: str) -> str | None:
    """The trial class a blocking grader's verdict stands for (None: not a failure)."""
    if state not in FAILING_STATES:
        return None
    if grader.layer == "trajectory_diagnosis" and state == "task_fail":
        # A blocking_constraint trajectory guard acts as a hard constraint (section 5.3).
        return "hard_constraint_fail"
    return state


def _queued(
    grader: GraderFacts,
    own: list[ResultFacts],
    validity: Mapping[str, Validity],
) -> str | None:
    """Why this (trial, grader) pair waits for a person, or None (docs/promotion.md)."""
    if grader.type == "human":
        return None if own else "blocking human grader has no result"
    if grader.type != "model" or not own:
        return None
    v = validity.get(grader.id)
    if v is None or v.state != "valid":
        return None
    for result in own:
        if result.state not in grader.produces:
            continue  # grader_invalid already; nothing for a person to settle
        if result.state == "abstain":
            return "abstained"
        if result.state in VERDICTS and result.state not in v.blockable_classes:
            return f"{result.state} is not blockable by the model"
    return None


def _graders(
    record: RecordFacts,
    graders: GraderSetFacts,
    validity: Mapping[str, Validity],
    reviews: Mapping[str, ResultFacts],
    c: _Candidates,
) -> dict[str, ResultFacts]:
    """Add every blocking grader's candidate; returns the result each grader's verdict used."""
    _check_results(record, graders, c)
    own: dict[str, list[ResultFacts]] = {}
    for result in record.grader_results:
        own.setdefault(result.grader_id, []).append(result)
    used: dict[str, ResultFacts] = {}
    runtime_ok = record.runtime.status == "ok"
    for grader in graders.graders:
        results = own.get(grader.id, [])
        if not grader.blocking:
            for result in results:
                c.label(f"diagnostic:{grader.id}:{result.state}")
            continue
        if grader.type == "model":
            v = validity.get(grader.id)
            if v is None or v.state != "valid":
                state = v.state if v else "missing"
                c.add("grader_invalid", f"blocking model grader {grader.id} calibration {state}")
                c.label("uncalibrated_model_grader")
                continue
        why = _queued(grader, results, validity)
        if why is not None:
            review = reviews.get(grader.id)
            if review is None:
                c.review.append((grader.id, why))
                c.label("awaiting_review")
                if grader.type == "model" and results[0].state != "abstain":
                    c.label(f"unblockable_model_verdict:{grader.id}:{results[0].state}")
                if runtime_ok:
                    c.add(
                        "missing_required_evidence",
                        f"blocking grader {grader.id}: {why}; awaiting human review",
                    )
                continue
            # The review queue is the only door for a human verdict; it speaks in place of
            # a model's abstention or unblockable verdict, or for a missing human result.
            results = [review]
            source = "human review"
        else:
            source = grader.id
        if not results:
            if runtime_ok:
                c.add("missing_required_evidence", f"blocking grader {grader.id} has no result")
            continue
        used[grader.id] = results[0]
        for result in results:
            if result.state == "abstain":
                if runtime_ok:
                    c.add("missing_required_evidence", f"blocking grader {grader.id} abstained")
                continue
            if result.state not in grader.produces:
                continue  # already grader_invalid
            cls = _verdict_class(grader, result.state)
            if cls is not None:
                who = grader.id if source == grader.id else f"{source} ({grader.id})"
                by = "human" if source != grader.id else grader.type
                c.add(cls, f"{who} said {result.state}", by)
    return used


def _evidence(record: RecordFacts, task: TaskFacts, c: _Candidates) -> None:
    if record.runtime.status != "ok" or task.contract.required_artifacts is None:
        return
    present = {
        a.kind for a in (record.artifact_manifest.artifacts if record.artifact_manifest else [])
    }
    for kind in task.contract.required_artifacts.logical:
        if kind not in present:
            c.add("missing_required_evidence", f"required artifact {kind} is not in the manifest")


def _fixtures(record: RecordFacts, task: TaskFacts, c: _Candidates) -> bool:
    """True when the trial failed closed on a fixture miss."""
    if record.fixture_misses <= 0:
        return False
    on_miss = task.fixtures.onMiss if task.fixtures else None
    if on_miss == "live":
        c.label("fixture_miss_live")
        return False
    c.add("task_fail", f"{record.fixture_misses} fixture misses with onMiss fail")
    return True


def _score(
    record: RecordFacts,
    task: TaskFacts,
    graders: GraderSetFacts,
    used: Mapping[str, ResultFacts],
    primary: str,
    trajectory: TrajectoryResult | None,
    failed_closed: bool,
) -> tuple[float, float, bool]:
    """Trial score, gating score, and whether the score has a source (docs/classification.md)."""
    contract = task.contract
    if failed_closed:
        return 0.0, 0.0, True
    if contract.expected is not None and contract.expected.kind == "trajectory":
        path_score = 1.0 if trajectory is not None and trajectory.matched else 0.0
        return path_score, path_score, True
    first_outcome = next(
        (g.id for g in graders.graders if g.blocking and g.layer == "outcome"), None
    )
    score: float | None = None
    # The score_from grader's score; when it has none (or there is no score_from), the first
    # blocking outcome grader's; else 1 for a pass and 0 otherwise.
    for source in (contract.score_from, first_outcome):
        result = used.get(source) if source else None
        if result is None and source:
            result = next((r for r in record.grader_results if r.grader_id == source), None)
        if result is not None and result.score is not None:
            score = float(result.score)
            break
    scored = score is not None
    if score is None:
        score = 1.0 if primary == "task_pass" else 0.0
    unmatched = trajectory is not None and not trajectory.matched
    return score, 0.0 if unmatched else score, scored


def classify(
    record: RecordFacts,
    task: TaskFacts,
    graders: GraderSetFacts,
    *,
    validity: Mapping[str, Validity],
    trajectory: TrajectoryResult | None,
    reconciliations: Mapping[int, str] | None = None,
    reviews: Mapping[str, ResultFacts] | None = None,
) -> Classification:
    """Derive a trial's one primary class, its secondary labels, score and gating score.

    `trajectory` is the graded expectation (None when the task has none); `reconciliations`
    maps an effect's position in `external_effects` to its reconciled status (only a
    `requested` or `unknown` effect can be settled); `reviews` maps grader ids to appended
    human results, read only for a (trial, grader) pair the review queue holds: a review
    never replaces a deterministic grader's result, so nothing a person says lifts a
    hard_constraint_fail.
    """
    reconciliations = reconciliations or {}
    reviews = reviews or {}
    c = _Candidates()
    _effects(record, reconciliations, c)
    _runtime(record, c)
    used = _graders(record, graders, validity, reviews, c)
    _evidence(record, task, c)
    if trajectory is not None and not trajectory.matched:
        c.add("task_fail", "trajectory expectation unmatched")
    failed_closed = _fixtures(record, task, c)
    ordered = sorted(c.found, key=RANK.__getitem__)
    primary: TrialClass = ordered[0] if ordered else "task_pass"  # type: ignore[assignment]
    labels = list(ordered[1:])
    labels += [label for label in c.labels if label not in labels]
    labels += [label for label in record.secondary_labels if label not in labels]
    score, gating, scored = _score(record, task, graders, used, primary, trajectory, failed_closed)
    reasons = tuple(f"{cls}: {why}" for cls in ordered for why in c.found[cls])
    deciders = tuple((cls, by) for cls in ordered for by in c.by[cls])
    return Classification(
        primary,
        tuple(labels),
        score,
        gating,
        reasons,
        tuple(c.review),
        scored=scored,
        deciders=deciders,
    )


# A trial in one of these classes never lifts a task's score or `passRule: mean`: it crashed,
# hard-failed or lacks the evidence to be judged, whatever its graders scored.
ZERO_GATING_CLASSES = frozenset(
    {"hard_constraint_fail", *EVIDENCE_BLOCKED, "agent_error", "runtime_error"}
)


def counted_gating_score(primary: str, gating_score: float) -> float:
    """The gating score the gate counts and people see as a trial's score: the stored one,
    or 0 for a crashed, hard-failed or evidence-blocked trial."""
    return 0.0 if primary in ZERO_GATING_CLASSES else gating_score


def shown_score(primary: str, gating_score: float, *, scored: bool) -> float | None:
    """A trial's score as people see it: its counted gating score, or None (shown `-`)
    when nothing scored it (never a 0 or 1 that only restates its class)."""
    return counted_gating_score(primary, gating_score) if scored else None
