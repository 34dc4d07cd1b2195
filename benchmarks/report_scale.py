"""Report rendering at scale: a synthetic 10,000-task decision, HTML vs JSON.

Target: the HTML audit report renders in under 5x the time of the JSON report
and stays under 5 MB. Both are timed on the same document (median of 5 runs, CPU and wall
time); the JSON report is the document itself, so the ratio is the price of the HTML.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import TYPE_CHECKING, Any

from evalops.domain.canonical import digest
from evalops.domain.gate import evaluate_stored
from evalops.registry.definitions import load_definition
from evalops.resources import example_registry_dir
from evalops.services.reports.audit import assemble

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument

TASKS = 10_000
RUNS = 5
RATIO_TARGET = 5.0
SIZE_TARGET = 5 * 1024 * 1024
CLASSES = ("task_pass",) * 16 + ("task_fail", "infrastructure_invalid", "agent_error")


def _hex(i: int) -> str:
    return "sha256:" + digest(i).removeprefix("sha256:")


def synthetic_inputs(tasks: int, trials: int = 5) -> dict[str, Any]:
    """Gate inputs for `tasks` tasks of `trials` trials each, deterministic: every trial
    listed (the shape of evaluator 3, which replays them), so that the report, which lists
    every trial, needs no database."""
    policy = load_definition(example_registry_dir() / "policies" / "gate-policy.yaml")
    out_tasks = []
    for i in range(tasks):
        task_trials = []
        for j in range(trials):
            cls = CLASSES[(i * 7 + j * 3) % len(CLASSES)] if i % 10 == 3 else "task_pass"
            task_trials.append(
                {
                    "trial_id": f"trial-{i:05d}-{j}",
                    "parent_trial_id": None,
                    "classification": cls,
                    "score": 1.0 if cls == "task_pass" else 0.0,
                    "gating_score": 1.0 if cls == "task_pass" else 0.0,
                    "trajectory": None,
                    "efficiency": {
                        "toolCallCount": 3,
                        "modelCallCount": 4,
                        "inputTokens": 1000 + i % 100,
                        "outputTokens": 200,
                    },
                    "fixture_misses": 0,
                }
            )
        out_tasks.append(
            {
                "task_id": f"task-{i:05d}",
                "risk": "critical" if i % 3 == 0 else "noncritical_regression",
                "protects": [],
                "task_digest": _hex(2 * i),
                "grader_set_digest": _hex(2 * i + 1),
                "plan": {"count": trials, "k": 3, "passRule": "all", "passScore": 1.0},
                "trials": task_trials,
                "ignoredTrials": {},
            }
        )
    return {
        "evaluator": 3,
        "gate_id": "GATE-1",
        "build": "build-synthetic",
        "suite": {"id": "regression/synthetic", "kind": "regression", "suite_digest": _hex(-1)},
        "execution_digest": _hex(-2),
        "policy": policy.value,
        "policy_digest": policy.digest,
        "evaluated_at": "2026-11-30T12:00:00.000000Z",
        "tasks": out_tasks,
        "waivers": [],
        "refused_waivers": [],
        "baseline": None,
    }


def synthetic_document(tasks: int = TASKS) -> ReportDocument:
    """A report document of a synthetic decision (pure: no database)."""
    inputs = synthetic_inputs(tasks)
    result = evaluate_stored(inputs)
    resolved = {
        "tasks": {
            t["task_id"]: {
                "title": f"Synthetic task {t['task_id']}",
                "task_digest": t["task_digest"],
                "grader_set_digest": t["grader_set_digest"],
                "eval_case_digest": digest([t["task_digest"], inputs["execution_digest"]]),
                "incidents": [],
            }
            for t in inputs["tasks"]
        },
        "history": [
            {"gate_id": "GATE-1", "decision": result["decision"], "build": inputs["build"]}
        ],
    }
    return assemble(
        result=result,
        inputs=inputs,
        resolved=resolved,
        decided_at=inputs["evaluated_at"],
        decided_by="bench@example.com",
        inputs_digest=digest(inputs),
        result_digest=digest(result),
        audit_head={"seq": 42, "hash": _hex(42)},
        decision_event={"seq": 42, "hash": _hex(42)},
        rendered_at=inputs["evaluated_at"],
    )


def _time(fn: Any, runs: int) -> tuple[float, float, Any]:
    walls, cpus, out = [], [], None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), out


def main() -> int:
    from evalops.report.audit import html, to_json

    doc = synthetic_document(TASKS)
    html(doc)  # compile the templates once, as a long-running renderer would have
    json_wall, json_cpu, json_text = _time(lambda: to_json(doc), RUNS)
    html_wall, html_cpu, html_text = _time(lambda: html(doc), RUNS)
    size = len(html_text.encode("utf-8"))
    ratio = html_cpu / json_cpu
    ok = ratio < RATIO_TARGET and size < SIZE_TARGET
    print(f"report scale: {TASKS:,} tasks, {len(doc['trials']):,} trials, median of {RUNS} runs")
    print(
        f"  JSON report: {json_wall * 1000:8.1f} ms wall, {json_cpu * 1000:8.1f} ms CPU, "
        f"{len(json_text.encode('utf-8')) / 1e6:6.2f} MB"
    )
    print(
        f"  HTML report: {html_wall * 1000:8.1f} ms wall, {html_cpu * 1000:8.1f} ms CPU, "
        f"{size / 1e6:6.2f} MB (target < {SIZE_TARGET / 1e6:.2f} MB)"
    )
    print(
        f"  HTML / JSON CPU time: {ratio:.2f}x (wall {html_wall / json_wall:.2f}x; target < "
        f"{RATIO_TARGET:.0f}x): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
