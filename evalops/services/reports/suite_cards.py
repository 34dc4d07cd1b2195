"""The suite card document: members and pins, coverage, calibration, recent decisions, and
pass^k per task across the last builds, with flaky tasks called out (read-only)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from evalops import __version__
from evalops.domain.timestamps import format_timestamp
from evalops.services.registry.definitions import Definitions
from evalops.services.registry.suites import show_suite, suite_coverage
from evalops.services.reports.audit import (
    SUITE_CARD_SCHEMA,
    anchor,
    calibration_facts,
    decision_history,
)
from evalops.store import queries
from evalops.store.audit import chain_head
from evalops.store.engine import read_session
from evalops.store.tables import GateDecision, TaskRevision

# A task is flaky when it can pass (pass@k at least this) but not reliably (pass^k at most
# this) in one build: the agent gets it right sometimes, which a single trial would hide.
FLAKY_PASS_AT_K = 0.8
FLAKY_PASS_HAT_K = 0.5
DEFAULT_BUILDS = 10


def _flaky_point(point: dict[str, Any]) -> bool:
    at_k, hat_k = point["passAtK"], point["passHatK"]
    return (
        at_k is not None
        and hat_k is not None
        and at_k >= FLAKY_PASS_AT_K
        and hat_k <= (FLAKY_PASS_HAT_K)
    )


def flaky_tasks(
    series: dict[str, list[dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(flaky, failed a hard constraint): the tasks that passed sometimes but not reliably
    in a build. A build whose misses include a hard-constraint failure (the task's state)
    is not noise: a refund committed twice is a failure however often the task passes, so
    such a task is listed apart, never as flaky for that build."""
    flaky: list[dict[str, Any]] = []
    hard: list[dict[str, Any]] = []
    for task_id, points in series.items():
        hits = [p for p in points if _flaky_point(p)]
        for out, chosen in (
            (flaky, [p for p in hits if p["state"] != "hard_constraint_fail"]),
            (hard, [p for p in hits if p["state"] == "hard_constraint_fail"]),
        ):
            if chosen:
                out.append(
                    {
                        "task_id": task_id,
                        "builds": [p["build"] for p in chosen],
                        "passAtK": chosen[-1]["passAtK"],
                        "passHatK": chosen[-1]["passHatK"],
                    }
                )
    return flaky, hard


def suite_card_document(
    engine: Engine, suite_id: str, *, builds: int = DEFAULT_BUILDS, now: datetime
) -> dict[str, Any]:
    suite = show_suite(engine, suite_id)
    coverage = suite_coverage(engine, suite_id)
    with read_session(engine) as session:
        members = []
        for m in suite["members"]:
            revision = session.exec(
                select(TaskRevision)
                .where(
                    TaskRevision.task_id == m["task_id"],
                    TaskRevision.task_digest == m["task_digest"],
                )
                .order_by(col(TaskRevision.id).desc())
            ).first()
            meta = queries.task_spec(revision).meta if revision else None
            members.append(
                {
                    **m,
                    "title": meta.title if meta else None,
                    "risk": meta.risk if meta else None,
                    "owner": meta.owner if meta else None,
                }
            )
        calibration = calibration_facts(session, Definitions(session), suite["members"], None)
        rows = session.exec(
            select(GateDecision)
            .where(GateDecision.suite_id == suite_id)
            .order_by(col(GateDecision.number))
        ).all()
        latest_by_build: dict[str, GateDecision] = {}
        for row in rows:
            # Builds in the order of their first decision (a later decision of a build
            # keeps its place), each shown by its latest decision.
            latest_by_build[row.build] = row
        shown = list(latest_by_build.values())[-builds:] if builds > 0 else []
        head = anchor(chain_head(session))
        recent = decision_history(session, suite_id, limit=max(builds, 1))
    member_ids = [m["task_id"] for m in members]
    series: dict[str, list[dict[str, Any]]] = {t: [] for t in member_ids}
    for row in shown:
        result = json.loads(row.result)
        by_task = {t["task_id"]: t for t in result.get("tasks", [])}
        for task_id, points in series.items():
            t = by_task.get(task_id)
            points.append(
                {
                    "build": row.build,
                    "gate_id": row.gate_id,
                    "passAtK": t.get("passAtK") if t else None,
                    "passHatK": t.get("passHatK") if t else None,
                    "n": t.get("n") if t else None,
                    "state": t.get("state") if t else None,
                }
            )
    flaky, hard_failed = flaky_tasks(series)
    return {
        "report": SUITE_CARD_SCHEMA,
        "evalops_version": __version__,
        "rendered_at": format_timestamp(now),
        "suite": suite_id,
        "kind": suite["kind"],
        "owner": suite["owner"],
        "description": suite["description"],
        "suite_digest": suite["suite_digest"],
        "members": members,
        "coverage": coverage["rows"],
        "coverage_gaps": coverage["gaps"],
        "calibration": calibration,
        "recent_decisions": recent,
        "builds": [{"build": r.build, "gate_id": r.gate_id, "decision": r.decision} for r in shown],
        "pass_hat_k": [{"task_id": t, "points": series[t]} for t in member_ids],
        "flaky": flaky,
        "failed_hard_constraint": hard_failed,
        "flaky_rule": {"passAtK_at_least": FLAKY_PASS_AT_K, "passHatK_at_most": FLAKY_PASS_HAT_K},
        "audit_head": head,
    }
