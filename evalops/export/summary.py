"""The RFC 0244 EvalSummary of a gate decision: ids, enums, counts, scores and digests only.

Content-free (RFC 0244 section H): no tool names, arguments, results, titles, reasons or
any other free text; `eval-summary.schema.json` beside this module says so with
`additionalProperties: false` and a pattern on every string. Keys are camelCase as in the
RFC, except the audit anchors (`audit_head`, `decision_event`), spelled as everywhere else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


SCHEMA_ID = "evalops.eval-summary/v1"
SCHEMA_FILE = Path(__file__).with_name("eval-summary.schema.json")
TRAJECTORY_KEYS = (
    "mode",
    "matched",
    "expectedCount",
    "observedCount",
    "matchedCount",
    "forbiddenCount",
)
EFFICIENCY_KEYS = ("toolCallCount", "modelCallCount", "inputTokens", "outputTokens")
TRIAL_STATS_KEYS = ("k", "passAtK", "passHatK", "scoreStderr", "taskCount")
REGRESSION_KEYS = ("verdict", "method", "alpha", "pairedTaskCount", "pValue")


def _pick(block: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    if not isinstance(block, Mapping):
        return None
    return {k: block[k] for k in keys if k in block}


def _task(task: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "taskId": task["task_id"],
        "evalCaseDigest": task.get("eval_case_digest"),
        "state": task["state"],
        "effect": task["effect"],
        "passed": task["state"] == "task_pass",
        "score": task.get("meanScore"),
        "trials": {
            "n": task["n"],
            "passedCount": task["passedCount"],
            "meanScore": task.get("meanScore"),
            "passAtK": task.get("passAtK"),
            "passHatK": task.get("passHatK"),
        },
        "fixtureMissCount": task.get("fixtureMissCount", 0),
    }
    if task.get("waiver_id"):
        out["waiverId"] = task["waiver_id"]
    trajectory = _pick(task.get("trajectory"), TRAJECTORY_KEYS)
    if trajectory:
        out["trajectory"] = trajectory
    efficiency = _pick(task.get("efficiency"), EFFICIENCY_KEYS)
    if efficiency is not None:
        out["efficiency"] = efficiency
    if out["evalCaseDigest"] is None:
        del out["evalCaseDigest"]
    return out


def eval_summary(doc: ReportDocument) -> dict[str, Any]:
    """The EvalSummary document of a report document."""
    digests: Mapping[str, Any] = doc.get("digests") or {}
    tasks = [_task(t) for t in sorted(doc.get("tasks", []), key=lambda t: t["task_id"])]
    scores = [t["score"] for t in tasks if t["score"] is not None]
    out: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "suiteId": doc["suite"],
        "gateId": doc["gate_id"],
        "decision": doc["decision"],
        "passed": doc["decision"] == "pass",
        "evaluatedAt": doc["evaluated_at"],
        "taskCount": len(tasks),
        "aggregateScore": sum(scores) / len(scores) if scores else None,
        "digests": {
            key: digests[name]
            for key, name in (
                ("suite", "suite_digest"),
                ("policy", "policy_digest"),
                ("execution", "execution_digest"),
                ("inputs", "inputs_digest"),
                ("result", "result_digest"),
            )
            if digests.get(name)
        },
        "tasks": tasks,
        "trialStats": _pick(doc.get("trialStats"), TRIAL_STATS_KEYS) or {},
        "audit_head": doc.get("audit_head"),
        "decision_event": doc.get("decision_event"),
    }
    regression = _pick(doc.get("regression"), REGRESSION_KEYS)
    if regression:
        out["regression"] = regression
    return out


def estimation_block(estimate: Mapping[str, Any]) -> dict[str, Any]:
    """The `estimation` block: a stored estimate's ids and numbers (no claims sentence, no
    reasons: the EvalSummary carries no prose; `unavailableCount` says how many there are)."""
    difference = (estimate.get("difference") or {}).get("pass")
    return {
        "estimateId": estimate["estimate_id"],
        "suiteId": estimate["suite"],
        # A build name is free text (a summary carries none): shown when it is id-shaped.
        "build": _id_or_none(estimate["build"]),
        "baseline": _id_or_none(estimate["baseline"]),
        "confidence": estimate["confidence"],
        "taskCount": estimate["task_count"],
        "trialCount": estimate["trial_count"],
        "rates": {
            key: {"rate": r["rate"], "low": r["low"], "high": r["high"], "nEff": r["n_eff"]}
            for key, r in estimate["rates"].items()
        },
        "passDifference": None
        if difference is None
        else {
            "diff": difference["diff"],
            "low": difference["low"],
            "high": difference["high"],
            "pairedTaskCount": difference["paired_tasks"],
        },
        "unavailableCount": len(estimate["unavailable"]),
    }


_ID = re.compile(r"[a-z0-9][a-z0-9._/-]{0,127}")


def _id_or_none(value: Any) -> str | None:
    """`value` when it has the shape of an id (`build-125`), else None."""
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def summary_json(doc: ReportDocument, estimate: Mapping[str, Any] | None = None) -> str:
    out = eval_summary(doc)
    if estimate is not None:
        out["estimation"] = estimation_block(estimate)
    return json.dumps(out, indent=2, ensure_ascii=True) + "\n"


def schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) an EvalSummary validates against."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded
