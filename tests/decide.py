"""The gate's rules, decided twice for the tests written over listed trials.

Many rule tests build evaluator-3 inputs (every trial listed: `tests/domain/
test_gate_evaluate.py` `make_inputs`). New decisions are made by the flat evaluator 4
(`domain.gate_compact`, per-task summaries); evaluator 3 is frozen (`domain.legacy.gate_v3`)
and replays its stored decisions. `evaluate` here decides the listed inputs with the frozen
evaluator 3 AND their summaries (`compact_inputs`) with evaluator 4, fails unless both say
the same (the only difference allowed: `firstResults` counted by class), and returns
evaluator 3's document, so each rule test checks both evaluators and that they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalops.domain.canonical import canonical_json
from evalops.domain.gate_compact import compact_inputs, same_decision_as_evaluator_3
from evalops.domain.gate_compact import evaluate as evaluate_compact
from evalops.domain.legacy.gate_v3 import evaluate as evaluate_v3


def evaluate(inputs: Mapping[str, Any]) -> Any:
    """Evaluator 3's decision over listed inputs, after checking evaluator 4 agrees."""
    listed = evaluate_v3(inputs)
    flat = evaluate_compact(compact_inputs(inputs))  # type: ignore[arg-type]
    assert canonical_json(flat) == canonical_json(
        same_decision_as_evaluator_3(listed)  # type: ignore[arg-type]
    ), "the flat evaluator decides otherwise than evaluator 3"
    return listed


def summarize_task(task: Mapping[str, Any], policy: Any) -> Any:
    """Evaluator 3's summary of one listed task (the frozen rules)."""
    from evalops.domain.legacy.gate_v3 import summarize_task as summarize_v3

    return summarize_v3(task, policy)


def listed_tasks(database: Any, gate_id: str) -> list[dict[str, Any]]:
    """The task inputs of a stored decision with every trial listed, as evaluator 3 listed
    them: its stored inputs for a decision of evaluator 3 or earlier; for one of evaluator 4
    (summaries), the trials loaded again from the registry at the decision's cutoff (what
    `verify` holds the summaries to). `database`: a SQLite file or a database URL."""
    import json
    from pathlib import Path

    from sqlmodel import select

    from evalops.services.gate.input_parts import GateRequest
    from evalops.services.gate.inputs import listed_inputs
    from evalops.store.engine import make_engine, read_session
    from evalops.store.tables import GateDecision

    url = f"sqlite:///{database}" if isinstance(database, Path) else str(database)
    engine = make_engine(url)
    try:
        with read_session(engine) as session:
            row = session.exec(select(GateDecision).where(GateDecision.gate_id == gate_id)).one()
            inputs = json.loads(row.inputs)
            if int(inputs.get("evaluator", 1)) < 4:
                return list(inputs["tasks"])
            listed = listed_inputs(
                session, GateRequest.from_dict(inputs["request"]), rebuild=True, evaluator=3
            )
            return [dict(t) for t in listed["tasks"]]
    finally:
        engine.dispose()
