"""A gate decision's changes since its baseline (or the suite's previous decision), as the
audit report and the terminal show them, and the reads they need: apart from the report's
assembly, so that `gate check` prints them without importing the report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalops.domain.changes import (
    TaskSide,
    alpha_note,
    flip_counts,
    sides_from_inputs,
    task_changes,
)
from evalops.domain.gate_documents import AnyGateInputs, DecisionDocument
from evalops.errors import InputError
from evalops.report.document import Changes
from evalops.services.registry.definitions import SHARED_KEY
from evalops.services.registry.unknown_ids import unknown_decision
from evalops.store.engine import read_session
from evalops.store.tables import GateDecision

SIDES_KEY = "evalops.decision_sides"
PAIRED_KEYS = ("verdict", "method", "alpha", "pairedTaskCount", "pValue", "discordant", "signs")


def decision_row(session: Session, gate_id: str) -> GateDecision:
    row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).first()
    if row is None:
        raise InputError(unknown_decision(session, gate_id), field="--gate")
    return row


def decision_cutoff(inputs: Mapping[str, Any], decision_seq: int | None) -> int | None:
    """The audit seq whose rows the decision read (its `--at` cutoff); a decision stored
    before requests were recorded read everything up to its own event."""
    request = inputs.get("request") or {}
    return int(request["cutoff"]) if "cutoff" in request else decision_seq


def shared_sides(session: Session) -> dict[str, dict[str, TaskSide]] | None:
    """Decisions summarized earlier in a shared read (by gate id), or None when the read
    shares nothing."""
    if SHARED_KEY not in session.info:
        return None
    found: dict[str, dict[str, TaskSide]] = session.info.setdefault(SIDES_KEY, {})
    return found


def previous_decision(
    session: Session, inputs: Mapping[str, Any], *, before: int | None, build: str
) -> dict[str, Any] | None:
    """When the decision compared no baseline build: the suite's latest stored decision
    before it (`before` is its number; None for a dry run) on another build, with its stored
    inputs, so the report can still say what changed since then (or, in a shared read that
    summarized it already, its summarized `sides` instead of its inputs)."""
    if (inputs.get("baseline") or {}).get("build"):
        return None
    stmt = select(GateDecision.id, GateDecision.gate_id, GateDecision.build).where(
        GateDecision.suite_id == inputs["suite"]["id"], GateDecision.build != build
    )
    if before is not None:
        stmt = stmt.where(GateDecision.number < before)
    found = session.exec(stmt.order_by(col(GateDecision.number).desc()).limit(1)).first()
    if found is None:
        return None
    row_id, gate_id, other = found
    known = (shared_sides(session) or {}).get(gate_id)
    if known is not None:
        return {"gate_id": gate_id, "build": other, "sides": known}
    text = session.exec(select(GateDecision.inputs).where(GateDecision.id == row_id)).one()
    return {"gate_id": gate_id, "build": other, "inputs": json.loads(text)}


def decision_changes(
    engine: Engine,
    *,
    gate_id: str | None = None,
    unstored: tuple[DecisionDocument, AnyGateInputs] | None = None,
    before: int | None = None,
) -> Changes:
    """The changes since the baseline of a stored decision (`gate_id`, its stored text read
    again) or of a decision in memory (`unstored`: its (result, inputs), a dry run's, or
    those of a decision just stored, whose number is `before`), as the audit report shows
    them: for the terminal."""
    result: DecisionDocument
    inputs: Mapping[str, Any]
    with read_session(engine) as session:
        if unstored is not None:
            result, inputs = unstored
            previous = previous_decision(session, inputs, before=before, build=inputs["build"])
        else:
            row = decision_row(session, str(gate_id))
            result = cast("DecisionDocument", json.loads(row.result))
            inputs = json.loads(row.inputs)
            previous = previous_decision(session, inputs, before=row.number, build=row.build)
    return changes_since_baseline(result, inputs, previous)


def changes_since_baseline(
    result: DecisionDocument,
    inputs: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    current: Mapping[str, TaskSide] | None = None,
) -> Changes:
    """Per-task flips against the decision's baseline build, or else against the suite's
    previous decision on another build (`source` says which), with the paired verdict's
    discordant counts and, when its method cannot reach alpha with this many pairs, why."""
    baseline = inputs.get("baseline") or {}
    paired: Mapping[str, Any] | None = None
    if baseline.get("build"):
        source, build, gate_id = "baseline", baseline["build"], None
        base = sides_from_inputs(inputs, baseline.get("tasks", []))
        paired = result.get("regression")
    elif previous is not None:
        source, build, gate_id = "previous_decision", previous["build"], previous["gate_id"]
        base = (
            dict(previous["sides"])
            if "sides" in previous
            else sides_from_inputs(previous["inputs"], previous["inputs"].get("tasks", []))
        )
    else:
        source, build, gate_id, base = None, None, None, {}
    if current is None and build:
        current = sides_from_inputs(inputs, inputs.get("tasks", []))
    rows = task_changes(base, dict(current or {})) if build else []
    note = None
    if paired and paired.get("method") is not None:
        note = alpha_note(
            str(paired["method"]), float(paired["alpha"]), int(paired.get("pairedTaskCount", 0))
        )
    return {
        "baseline_build": build,
        "source": source,
        "baseline_gate_id": gate_id,
        "tasks": rows,
        "counts": flip_counts(rows),
        "paired": ({key: paired[key] for key in PAIRED_KEYS if key in paired} if paired else None),
        "alpha_note": note,
    }
