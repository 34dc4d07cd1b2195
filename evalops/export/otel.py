"""OTLP JSON log records of a gate decision: one `gen_ai.evaluation.result` event per trial.

The file is an OTLP `ExportLogsServiceRequest` in its JSON encoding (what an OpenTelemetry
Collector's `otlpjson` receiver or `/v1/logs` accepts). Per trial: `gen_ai.evaluation.name`
= `<suite>/<task>`, `gen_ai.evaluation.score.value` (the trial score),
`gen_ai.evaluation.score.label` (its primary class, a pattern-bound label),
`gen_ai.evaluation.explanation` (the classifier's reasons; ids and classes, not content),
and evalops attributes tying it to its trial and gate. Build, suite, gate and digests are
resource attributes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from evalops.report.text import anchor_token

EVENT_NAME = "gen_ai.evaluation.result"
SEVERITY_INFO = 9
SEVERITY_WARN = 13


def _nanos(timestamp: str | None) -> str:
    """Unix nanoseconds as a decimal string (OTLP JSON encodes 64-bit integers so)."""
    if not timestamp:
        return "0"
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = int(moment.timestamp())
    return str(seconds * 1_000_000_000 + moment.microsecond * 1000)


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in pairs if v is not None]


def otlp_logs(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The OTLP JSON document (a dict) of a report document."""
    digests = doc.get("digests") or {}
    head = doc.get("audit_head")
    resource = _attributes(
        [
            ("service.name", "evalops"),
            ("service.version", doc.get("evalops_version")),
            ("evalops.gate_id", doc["gate_id"]),
            ("evalops.decision", doc["decision"]),
            ("evalops.build", doc["build"]),
            ("evalops.suite", doc["suite"]),
            ("evalops.suite_digest", digests.get("suite_digest")),
            ("evalops.policy_digest", digests.get("policy_digest")),
            ("evalops.execution_digest", digests.get("execution_digest")),
            ("evalops.inputs_digest", digests.get("inputs_digest")),
            ("evalops.result_digest", digests.get("result_digest")),
            ("evalops.audit_head", anchor_token(head)),
        ]
    )
    observed = _nanos(doc.get("evaluated_at"))
    eval_cases = {e["task_id"]: e["eval_case_digest"] for e in digests.get("eval_cases", [])}
    records = []
    for trial in doc.get("trials", []):
        label = str(trial["classification"])
        score = trial.get("score")
        records.append(
            {
                "timeUnixNano": _nanos(trial.get("completed_at")),
                "observedTimeUnixNano": observed,
                "severityNumber": SEVERITY_INFO if label == "task_pass" else SEVERITY_WARN,
                "severityText": "INFO" if label == "task_pass" else "WARN",
                "eventName": EVENT_NAME,
                "body": {"stringValue": f"{trial['task_id']}: {label}"},
                "attributes": _attributes(
                    [
                        ("event.name", EVENT_NAME),
                        ("gen_ai.evaluation.name", f"{doc['suite']}/{trial['task_id']}"),
                        (
                            "gen_ai.evaluation.score.value",
                            float(score) if score is not None else None,
                        ),
                        ("gen_ai.evaluation.score.label", label),
                        ("gen_ai.evaluation.explanation", trial.get("explanation")),
                        ("gen_ai.evaluation.evaluator.type", trial.get("evaluator_type")),
                        ("evalops.trial_id", trial["trial_id"]),
                        ("evalops.trial_index", trial.get("trial_index")),
                        ("evalops.run_id", trial.get("run_id")),
                        ("evalops.rerun_of", trial.get("parent_trial_id")),
                        ("evalops.first_result", bool(trial.get("first_result"))),
                        ("evalops.eval_case_digest", eval_cases.get(trial["task_id"])),
                        ("evalops.record_digest", trial.get("record_digest")),
                    ]
                ),
            }
        )
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": resource},
                "scopeLogs": [
                    {
                        "scope": {"name": "evalops", "version": str(doc.get("evalops_version"))},
                        "logRecords": records,
                    }
                ],
            }
        ]
    }


def otlp_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(otlp_logs(doc), indent=2, ensure_ascii=True) + "\n"
