"""An estimate's inputs: each member's trials as the gate reads them, and its stratum.

The trials of a build are selected and their reruns resolved by the gate's own loader
(evalops/services/gate/inputs.py `build_inputs`, evaluator 4's per-task summaries) and the
gate's own rerun rule (`gate_compact.trial_counts`, under the suite's gate policy), so an
estimate and a gate decision at the same cutoff count the same trials. What an estimate
adds is read from the registry as it stood at that cutoff: the suite's weights and frame,
each member's stratum and `sampled_at` from the task revision it was promoted at (a risk
owner's signed act under an authority), the labels in force where they have changed since,
and the suite policy's `claims_limited_to`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from evalops.domain.estimate_documents import ESTIMATOR
from evalops.domain.estimation import DEFAULT_CONFIDENCE, check_confidence
from evalops.domain.gate_compact import EVALUATOR_COMPACT, trial_counts
from evalops.domain.policy_rules import PolicyRules, read_policy
from evalops.domain.specs import SuiteDeclaration
from evalops.domain.voids import VOIDED
from evalops.errors import InputError
from evalops.services.gate.inputs import build_inputs, request_for
from evalops.services.gate.policies import governing_policy
from evalops.store import queries
from evalops.store.tables import SuiteRow, TaskRevision

# Task revisions read per query (SQLite's bound-parameter limit is far above it).
_CHUNK = 500


def not_an_estimation_suite(suite_id: str, kind: str) -> str:
    return (
        f"suite {suite_id} is a {kind} suite, not an estimation suite: {kind} suites are not "
        "representative cohorts, so their pass rates are not rates of any population. "
        "Declare a suite with kind: estimation (a frozen sampling_frame, population, weights "
        "and update_policy) and promote sampled tasks into it"
    )


def estimation_suite(session: Session, suite_id: str, cutoff: int) -> tuple[SuiteRow, Any]:
    """The suite row and declaration in force at `cutoff`; exit 2 unless an estimation suite."""
    row = queries.suite_row(session, suite_id, cutoff)
    if row is None:
        from evalops.services.registry.unknown_ids import not_registered

        raise InputError(
            not_registered(session, "suite", suite_id, cutoff, status="in force"), field="--suite"
        )
    if row.kind != "estimation":
        raise InputError(not_an_estimation_suite(suite_id, row.kind), field="--suite")
    return row, queries.suite_spec(row)


def _strata(
    session: Session, revision_ids: list[int], by: str
) -> dict[int, tuple[str | None, str | None]]:
    """Task revision id -> its (`meta.stratum[by]`, `meta.sampled_at`), None where it names
    none."""
    out: dict[int, tuple[str | None, str | None]] = {}
    for start in range(0, len(revision_ids), _CHUNK):
        chunk = revision_ids[start : start + _CHUNK]
        rows = session.exec(
            select(TaskRevision.id, TaskRevision.document).where(col(TaskRevision.id).in_(chunk))
        ).all()
        for row_id, document in rows:
            meta = json.loads(document).get("meta") or {}
            stratum = (meta.get("stratum") or {}).get(by)
            sampled = meta.get("sampled_at")
            out[int(row_id or 0)] = (
                stratum if isinstance(stratum, str) else None,
                sampled if isinstance(sampled, str) else None,
            )
    return out


def _in_force_revisions(
    session: Session, members: list[queries.Member], cutoff: int
) -> dict[str, int]:
    """Each member's task revision in force at the cutoff, when it has the digest the
    member is pinned at (labels such as `meta.stratum` are not part of the digest: a file
    relabelled since the promotion is another revision of the same digest)."""
    forced = queries.in_force_rows(session, "task", cutoff)
    out: dict[str, int] = {}
    for m in members:
        row = forced.get(m.task_id)
        if row is not None and row.task_digest == m.task_digest and row.id is not None:
            out[m.task_id] = int(row.id)
    return out


def _claims_limited_to(session: Session, suite: SuiteRow, cutoff: int) -> str | None:
    try:
        policy = governing_policy(session, "suite_policy", suite, cutoff)
    except InputError:
        return None  # no suite policy to read it from: the sentence says the rest
    entry = policy.document.get("estimation_entry") or {}
    limited = entry.get("claims_limited_to")
    return str(limited) if limited else None


def suite_block(
    session: Session, row: SuiteRow, declaration: SuiteDeclaration, cutoff: int, digest: str
) -> dict[str, Any]:
    frame = declaration.sampling_frame
    weights = declaration.weights
    if frame is None or weights is None or declaration.population is None:
        # sync refuses an estimation suite without them; a database edited by hand may not.
        raise InputError(
            f"suite {declaration.id} declares no sampling_frame, population or weights: "
            "an estimate needs all three (docs/estimation.md)",
            field="--suite",
        )
    return {
        "id": declaration.id,
        "suite_digest": digest,
        "population": declaration.population,
        "frame": frame.model_dump(mode="json", exclude_none=True),
        "weights": weights.model_dump(mode="json"),
        "claims_limited_to": _claims_limited_to(session, row, cutoff),
    }


def _task_entries(
    tasks: list[Any],
    policy: PolicyRules,
    heads: dict[str, tuple[str | None, str | None]],
    relabelled: dict[str, tuple[str | None, str | None]],
) -> list[dict[str, Any]]:
    """Each member's counts as the gate reads them, its stratum and when it was sampled
    (from the revision it was promoted at: a risk owner's act under an authority), the
    labels of the file in force when they differ, and how many of its trials are voided."""
    out = []
    for task in tasks:
        counts = trial_counts(task, policy)
        stratum, sampled_at = heads.get(task["task_id"], (None, None))
        changed = relabelled.get(task["task_id"])
        out.append(
            {
                "task_id": task["task_id"],
                "stratum": stratum,
                "sampled_at": sampled_at,
                "effective": counts.effective,
                "first": counts.first,
                "reruns": counts.rerun_count,
                "voided": int(task.get("ignoredTrials", {}).get(VOIDED, 0)),
                # The build's other trials that are not evidence for the member's pins.
                "ignored": {
                    reason: int(n)
                    for reason, n in sorted(task.get("ignoredTrials", {}).items())
                    if reason != VOIDED and n
                },
                "in_force_labels": (
                    None if changed is None else {"stratum": changed[0], "sampled_at": changed[1]}
                ),
            }
        )
    return out


@dataclass(frozen=True)
class EstimateAsk:
    """What `evalops estimate` was asked: a suite, a build, optionally a baseline build."""

    suite_id: str
    build: str
    baseline: str | None = None
    at: datetime | None = None
    """Estimate the registry as it stood then (None: now)."""
    confidence: float = DEFAULT_CONFIDENCE


def estimate_inputs(session: Session, ask: EstimateAsk, now: datetime) -> dict[str, Any]:
    """The plain-JSON inputs of one estimate (its `estimate_id` is set by the caller)."""
    suite_id, build, baseline, confidence = ask.suite_id, ask.build, ask.baseline, ask.confidence
    try:
        check_confidence(confidence)
    except ValueError as exc:
        raise InputError(str(exc), field="--confidence") from None
    if baseline is not None and baseline == build:
        raise InputError("the baseline and the build are the same build", field="--baseline")
    request = request_for(
        session, build=build, suite_id=suite_id, at=ask.at, now=now, baseline=baseline
    )
    row, declaration = estimation_suite(session, suite_id, request.cutoff)
    gate = build_inputs(session, request, evaluator=EVALUATOR_COMPACT)
    policy = read_policy(gate["policy"])
    weights = declaration.weights
    assert weights is not None  # estimation suites declare weights (checked in suite_block)
    suite = suite_block(session, row, declaration, request.cutoff, gate["suite"]["suite_digest"])
    members = queries.members(session, suite_id, cutoff=request.cutoff)
    promoted = {
        m.task_id: m.added.task_revision_id for m in members if m.added.task_revision_id is not None
    }
    in_force = _in_force_revisions(session, members, request.cutoff)
    by_revision = _strata(session, sorted({*promoted.values(), *in_force.values()}), weights.by)
    strata = {
        m.task_id: by_revision.get(promoted[m.task_id], (None, None))
        if m.task_id in promoted
        else (None, None)
        for m in members
    }
    # Labels the file in force has changed since the promotion that counted them.
    relabelled = {
        task_id: by_revision.get(row, (None, None))
        for task_id, row in in_force.items()
        if by_revision.get(row, (None, None)) != strata.get(task_id)
    }
    block = gate["baseline"]
    baseline_tasks = None
    baseline_build = None
    baseline_digest = None
    if baseline is not None and block is not None:
        baseline_build = block["build"]
        if baseline_build is None:
            raise InputError(block.get("note") or "no baseline build", field="--baseline")
        baseline_digest = block["execution_digest"]
        baseline_tasks = _task_entries(list(block["tasks"]), policy, strata, relabelled)
    return {
        "estimator": ESTIMATOR,
        "estimate_id": None,
        "request": {
            "suite": suite_id,
            "build": build,
            "baseline": baseline_build,
            "at": request.at,
            "cutoff": request.cutoff,
            "confidence": confidence,
        },
        "suite": suite,
        "execution_digest": gate["execution_digest"],
        "baseline_execution_digest": baseline_digest,
        "policy_digest": gate["policy_digest"],
        "tasks": _task_entries(list(gate["tasks"]), policy, strata, relabelled),
        "baseline_tasks": baseline_tasks,
    }
