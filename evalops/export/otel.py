"""OTLP/JSON Lines log records of a gate decision: one `gen_ai.evaluation.result` event per
trial.

The file is what the OpenTelemetry Collector's `otlpjsonfile` receiver and the OTLP file
exporter format read: one `ExportLogsServiceRequest` in its JSON encoding per line, each
line at most `MAX_LINE_BYTES` (records are split across as many lines as needed, every line
repeating the resource that names the decision).

Attributes follow the GenAI semantic-convention registry: per trial,
`gen_ai.evaluation.name` = `<suite>/<task>`, `gen_ai.evaluation.score.value` (the trial
score), `gen_ai.evaluation.score.label` (its primary class, a pattern-bound label) and
`gen_ai.evaluation.explanation` (the classifier's reasons; ids and classes, not content).
Everything the registry does not define is under `evalops.`: the evaluator type (the type of
the grader whose verdict gave the trial its class: `llm_judge` when a model judge failed
it), whether the trial's task passed by a waiver (`evalops.waived`, `evalops.waiver_id`),
and the ids tying it to its trial and gate. The event name is the record's `eventName`
(the `event.name` attribute is deprecated). Build, suite, gate and digests are resource
attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from evalops.report.text import anchor_token

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument, ReportTrial


EVENT_NAME = "gen_ai.evaluation.result"
# The semantic-conventions release whose registry holds the gen_ai.evaluation.* attributes.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.38.0"
SEVERITY_INFO = 9
SEVERITY_WARN = 13
MAX_LINE_BYTES = 1024 * 1024


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


def _resource(doc: ReportDocument) -> dict[str, Any]:
    digests = doc.get("digests") or {}
    return {
        "attributes": _attributes(
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
                ("evalops.audit_head", anchor_token(doc.get("audit_head"))),
            ]
        )
    }


def _record(
    doc: ReportDocument,
    trial: ReportTrial,
    *,
    observed: str,
    eval_cases: Mapping[str, str | None],
    waivers: Mapping[str, str],
) -> dict[str, Any]:
    label = str(trial["classification"])
    score = trial.get("score")
    waiver_id = waivers.get(trial["task_id"])
    return {
        "timeUnixNano": _nanos(trial.get("completed_at")),
        "observedTimeUnixNano": observed,
        "severityNumber": SEVERITY_INFO if label == "task_pass" else SEVERITY_WARN,
        "severityText": "INFO" if label == "task_pass" else "WARN",
        "eventName": EVENT_NAME,
        "body": {"stringValue": f"{trial['task_id']}: {label}"},
        "attributes": _attributes(
            [
                ("gen_ai.evaluation.name", f"{doc['suite']}/{trial['task_id']}"),
                ("gen_ai.evaluation.score.value", float(score) if score is not None else None),
                ("gen_ai.evaluation.score.label", label),
                ("gen_ai.evaluation.explanation", trial.get("explanation")),
                ("evalops.evaluator.type", trial.get("evaluator_type")),
                ("evalops.waived", waiver_id is not None),
                ("evalops.waiver_id", waiver_id),
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


def log_records(doc: ReportDocument) -> Iterator[dict[str, Any]]:
    """One `gen_ai.evaluation.result` log record per trial of the decision."""
    digests = doc.get("digests") or {}
    observed = _nanos(doc.get("evaluated_at"))
    eval_cases = {e["task_id"]: e["eval_case_digest"] for e in digests.get("eval_cases", [])}
    waivers = {
        t["task_id"]: str(t["waiver_id"]) for t in doc.get("tasks", []) if t.get("waiver_id")
    }
    for trial in doc.get("trials", []):
        yield _record(doc, trial, observed=observed, eval_cases=eval_cases, waivers=waivers)


def _request(resource: Mapping[str, Any], scope: Mapping[str, Any], records: str) -> str:
    """One ExportLogsServiceRequest line around already-encoded records."""
    head = json.dumps(
        {
            "resourceLogs": [
                {
                    "resource": resource,
                    "scopeLogs": [{"scope": scope, "logRecords": [], "schemaUrl": SCHEMA_URL}],
                    "schemaUrl": SCHEMA_URL,
                }
            ]
        },
        separators=(",", ":"),
        ensure_ascii=True,
    )
    # The first `"logRecords":[]` is the scope's: no string value can spell it unescaped.
    return head.replace('"logRecords":[]', f'"logRecords":[{records}]', 1)


def otlp_lines(doc: ReportDocument, max_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The JSON Lines, each an ExportLogsServiceRequest of at most `max_bytes` bytes (a
    single record larger than that, which the field limits rule out, stands alone)."""
    resource = _resource(doc)
    scope = {"name": "evalops", "version": str(doc.get("evalops_version"))}
    overhead = len(_request(resource, scope, ""))
    batch: list[str] = []
    size = overhead
    for record in log_records(doc):
        encoded = json.dumps(record, separators=(",", ":"), ensure_ascii=True)
        if batch and size + len(encoded) + 1 > max_bytes:
            yield _request(resource, scope, ",".join(batch))
            batch, size = [], overhead
        batch.append(encoded)
        size += len(encoded) + 1
    yield _request(resource, scope, ",".join(batch))


def otlp_json(doc: ReportDocument) -> str:
    """The OTLP/JSON Lines text (one request per line, newline-terminated)."""
    return "".join(line + "\n" for line in otlp_lines(doc))
