"""JUnit XML of a gate decision, for the test tab of every CI system.

Valid against the schemas consumers validate with (Jenkins xUnit's `junit-10.xsd` and the
Ant/windyroad JUnit schema): a `testsuites` root without attributes, one `testsuite` with
`properties`, its test cases, `system-out` and `system-err`, a timezone-less UTC timestamp.

A test's identity, (testsuite name, classname, name), is the same for a task in every
decision of its suite: (suite id, suite id, task id). CI systems key their history on it
(GitLab hashes exactly those three), so the gate id, the build and the digests go in
`properties`, never in a name. One `testcase` per member task (`failure` for block, `error`
for hold, `skipped` for a pass by waiver, its id, owner and expiry in the message and in
properties), and one `testcase` named `gate-decision` that fails unless the decision is
pass, so a hold or a block is never green, not even on an empty suite. Written by
`xml.etree`, with every string made XML 1.0-safe first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalops.report.text import anchor_token, visible

if TYPE_CHECKING:
    from evalops.report.document import ReportDocument


GATE_CASE = "gate-decision"
HOSTNAME = "localhost"  # the schema's word for "not recorded": a decision has no host


def _s(value: Any) -> str:
    """An attribute value XML 1.0 can carry: control characters made visible."""
    return visible("" if value is None else value)


def _text(value: str) -> str:
    """Element text: lines kept, every other control character made visible."""
    return "\n".join(visible(line) for line in value.split("\n"))


def _timestamp(value: Any) -> str:
    """`YYYY-MM-DDTHH:MM:SS`, UTC: the schema's timestamp has no zone and no fraction (the
    exact instant is the `evalops.evaluated_at` property)."""
    text = str(value or "")
    return text[:19] if len(text) >= 19 else "1970-01-01T00:00:00"


def _waiver_fields(task: Mapping[str, Any]) -> tuple[str, str, str]:
    waiver = task.get("waiver") or {}
    return (
        str(task["waiver_id"]),
        str(waiver.get("owner", "?")),
        str(waiver.get("expires_at", "?")),
    )


def _properties(suite: ET.Element, doc: ReportDocument) -> None:
    props = ET.SubElement(suite, "properties")
    digests = doc.get("digests") or {}
    values: list[tuple[str, Any]] = [
        ("evalops.gate_id", doc["gate_id"]),
        ("evalops.decision", doc["decision"]),
        ("evalops.build", doc["build"]),
        ("evalops.suite", doc["suite"]),
        ("evalops.evaluated_at", doc.get("evaluated_at")),
        ("evalops.suite_digest", digests.get("suite_digest")),
        ("evalops.policy_digest", digests.get("policy_digest")),
        ("evalops.execution_digest", digests.get("execution_digest")),
        ("evalops.inputs_digest", digests.get("inputs_digest")),
        ("evalops.result_digest", digests.get("result_digest")),
    ]
    values.append(("evalops.audit_head", anchor_token(doc.get("audit_head"))))
    values.append(("evalops.decision_event", anchor_token(doc.get("decision_event"))))
    for task in doc.get("tasks", []):
        if task.get("waiver_id"):
            waiver_id, owner, expires_at = _waiver_fields(task)
            prefix = f"evalops.waiver.{task['task_id']}"
            values += [
                (f"{prefix}.id", waiver_id),
                (f"{prefix}.owner", owner),
                (f"{prefix}.expires_at", expires_at),
            ]
    for name, value in values:
        if value is not None:
            ET.SubElement(props, "property", name=_s(name), value=_s(value))


def _task_case(suite: ET.Element, doc: ReportDocument, task: Mapping[str, Any]) -> str | None:
    case = ET.SubElement(
        suite, "testcase", classname=_s(doc["suite"]), name=_s(task["task_id"]), time="0"
    )
    effect = task.get("effect")
    detail = (
        f"{task.get('state')} -> {effect}; {task.get('reason', '')}; n={task.get('n')}, "
        f"passed={task.get('passedCount')}, pass^k={task.get('passHatK')}"
    )
    if task.get("waiver_id"):
        waiver_id, owner, expires_at = _waiver_fields(task)
        message = (
            f"waived by {waiver_id} (owner {owner}, expires {expires_at}): "
            f"{task.get('state')} accepted"
        )
        reason = (task.get("waiver") or {}).get("reason", "?")
        ET.SubElement(case, "skipped", message=_s(message), type="waived").text = _text(
            f"{message}\n{detail}\nreason: {reason}"
        )
        return "skipped"
    if effect == "block":
        ET.SubElement(case, "failure", message=_s(detail), type=_s(task.get("state"))).text = _text(
            detail
        )
        return "failure"
    if effect == "hold":
        ET.SubElement(case, "error", message=_s(detail), type=_s(task.get("state"))).text = _text(
            detail
        )
        return "error"
    return None


def _gate_case(suite: ET.Element, doc: ReportDocument) -> bool:
    """The `gate-decision` case; True when it fails (the decision is not pass)."""
    gate = ET.SubElement(suite, "testcase", classname=_s(doc["suite"]), name=GATE_CASE, time="0")
    if doc["decision"] == "pass":
        return False
    reasons = doc.get("reasons") or []
    message = f"{str(doc['decision']).upper()}: " + (
        reasons[0] if reasons else "the decision is not pass"
    )
    ET.SubElement(gate, "failure", message=_s(message), type=_s(doc["decision"])).text = _text(
        "\n".join(str(r) for r in reasons) or message
    )
    return True


def junit_xml(doc: ReportDocument) -> str:
    """The JUnit XML text of a report document."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_s(doc["suite"]),
        package="evalops",
        id="0",
        timestamp=_timestamp(doc.get("evaluated_at")),
        hostname=HOSTNAME,
        time="0",
    )
    _properties(suite, doc)
    counts = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}
    for task in doc.get("tasks", []):
        counts["tests"] += 1
        outcome = _task_case(suite, doc, task)
        if outcome:
            counts[outcome] += 1
    counts["tests"] += 1
    if _gate_case(suite, doc):
        counts["failure"] += 1
    reasons = "\n".join(str(r) for r in doc.get("reasons") or [])
    ET.SubElement(suite, "system-out").text = _text(
        f"evalops gate {doc['gate_id']}: {str(doc['decision']).upper()} for {doc['suite']} "
        f"@ {doc['build']}" + (f"\n{reasons}" if reasons else "")
    )
    ET.SubElement(suite, "system-err")
    suite.set("tests", str(counts["tests"]))
    suite.set("failures", str(counts["failure"]))
    suite.set("errors", str(counts["error"]))
    suite.set("skipped", str(counts["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
