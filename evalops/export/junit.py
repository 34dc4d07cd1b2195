"""JUnit XML of a gate decision, for the test tab of every CI system.

One `testsuite` per gate, its id, decision, digests and audit head as `properties`; one
`testcase` per member task (`failure` for block, `error` for hold, `skipped` naming the
waiver for a waived failure); and one `testcase` named `gate-decision` that fails unless
the decision is pass, so a hold or a block is never green, not even on an empty suite.
Written by `xml.etree`, with every string made XML 1.0-safe first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from evalops.report.text import anchor_token, visible

GATE_CASE = "gate-decision"


def _s(value: Any) -> str:
    """An attribute value XML 1.0 can carry: control characters made visible."""
    return visible("" if value is None else value)


def _text(value: str) -> str:
    """Element text: lines kept, every other control character made visible."""
    return "\n".join(visible(line) for line in value.split("\n"))


def _properties(suite: ET.Element, doc: Mapping[str, Any]) -> None:
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
    for name, value in values:
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_s(value))


def _task_case(suite: ET.Element, doc: Mapping[str, Any], task: Mapping[str, Any]) -> str | None:
    case = ET.SubElement(
        suite, "testcase", classname=_s(doc["suite"]), name=_s(task["task_id"]), time="0"
    )
    effect = task.get("effect")
    detail = (
        f"{task.get('state')} -> {effect}; {task.get('reason', '')}; n={task.get('n')}, "
        f"passed={task.get('passedCount')}, pass^k={task.get('passHatK')}"
    )
    if task.get("waiver_id"):
        waiver = task.get("waiver") or {}
        message = (
            f"waived by {task['waiver_id']}: {task.get('state')} accepted by "
            f"{waiver.get('owner', '?')} until {waiver.get('expires_at', '?')}"
        )
        ET.SubElement(case, "skipped", message=_s(message)).text = _text(
            f"{detail}\nreason: {waiver.get('reason', '?')}"
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


def junit_xml(doc: Mapping[str, Any]) -> str:
    """The JUnit XML text of a report document."""
    root = ET.Element("testsuites", name="evalops gate")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_s(f"evalops gate {doc['gate_id']}: {doc['suite']} @ {doc['build']}"),
        id=_s(doc["gate_id"]),
        timestamp=_s(doc.get("evaluated_at")),
        time="0",
    )
    _properties(suite, doc)
    counts = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}
    for task in doc.get("tasks", []):
        counts["tests"] += 1
        outcome = _task_case(suite, doc, task)
        if outcome:
            counts[outcome] += 1
    gate = ET.SubElement(suite, "testcase", classname=_s(doc["suite"]), name=GATE_CASE, time="0")
    counts["tests"] += 1
    if doc["decision"] != "pass":
        reasons = doc.get("reasons") or []
        message = f"{str(doc['decision']).upper()}: " + (
            reasons[0] if reasons else "the decision is not pass"
        )
        ET.SubElement(gate, "failure", message=_s(message), type=_s(doc["decision"])).text = _text(
            "\n".join(str(r) for r in reasons) or message
        )
        counts["failure"] += 1
    for element in (suite, root):
        element.set("tests", str(counts["tests"]))
        element.set("failures", str(counts["failure"]))
        element.set("errors", str(counts["error"]))
        element.set("skipped", str(counts["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
