"""Exports of stored decisions: JUnit (XSD, never green on hold or block), OTLP JSON (the
protobuf parser, one event per trial), EvalSummary (a schema from RFC 0244, content-free),
in-toto attestation (Statement v1, DSSE, tampering refused)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import junitparser
import pytest
import rfc8785
import xmlschema
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY

JUNIT_XSD = Path(__file__).parent / "schemas" / "junit.xsd"
ANCHOR = re.compile(r"(\d+):(sha256:[0-9a-f]{64})")


def stored(demo: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        return list(con.execute(sql, args))
    finally:
        con.close()


def decision(demo: Path, gate_id: str) -> dict[str, Any]:
    return json.loads(
        stored(demo, "SELECT result FROM gate_decision WHERE gate_id = ?", gate_id)[0][0]
    )


def inputs(demo: Path, gate_id: str) -> dict[str, Any]:
    return json.loads(
        stored(demo, "SELECT inputs FROM gate_decision WHERE gate_id = ?", gate_id)[0][0]
    )


def head(demo: Path) -> str:
    seq, hash_ = stored(demo, "SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")[0]
    return f"{seq}:{hash_}"


def export(cli: Cli, demo: Path, kind: str, gate_id: str, *extra: str) -> str:
    result = cli("export", kind, "--gate", gate_id, *extra, cwd=demo)
    assert result.code == 0, result.stderr
    return result.stdout


# --- JUnit ------------------------------------------------------------------------------


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_junit_validates_and_maps_every_task(demo: Path, cli: Cli, gate_id: str) -> None:
    text = export(cli, demo, "junit", gate_id)
    xmlschema.XMLSchema(JUNIT_XSD).validate(text)
    xml = junitparser.JUnitXml.fromstring(text)
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    truth = decision(demo, gate_id)
    props = {p.name: p.value for p in suite.properties()}
    assert props["evalops.gate_id"] == gate_id
    assert props["evalops.decision"] == truth["decision"]
    assert props["evalops.suite_digest"] == truth["suite_digest"]
    assert props["evalops.execution_digest"] == truth["execution_digest"]
    assert props["evalops.audit_head"] == head(demo)
    cases = {case.name: case for case in suite}
    assert set(cases) == {t["task_id"] for t in truth["tasks"]} | {"gate-decision"}
    expected_counts = {"failure": 0, "error": 0, "skipped": 0}
    for task in truth["tasks"]:
        results = cases[task["task_id"]].result
        kinds = [type(r).__name__.lower() for r in results]
        if task["waiver_id"]:
            assert kinds == ["skipped"]
            assert task["waiver_id"] in (results[0].message or "")
            expected_counts["skipped"] += 1
        elif task["effect"] == "block":
            assert kinds == ["failure"]
            expected_counts["failure"] += 1
        elif task["effect"] == "hold":
            assert kinds == ["error"]
            expected_counts["error"] += 1
        else:
            assert kinds == []
    gate_case = [type(r).__name__.lower() for r in cases["gate-decision"].result]
    if truth["decision"] == "pass":
        assert gate_case == []
    else:
        assert gate_case == ["failure"]
        expected_counts["failure"] += 1
    assert suite.tests == len(truth["tasks"]) + 1
    assert (suite.failures, suite.errors, suite.skipped) == (
        expected_counts["failure"],
        expected_counts["error"],
        expected_counts["skipped"],
    )


def test_a_hold_on_an_empty_suite_is_never_green(demo: Path, cli: Cli) -> None:
    """The issue's repro: `tests="0" failures="0"` would be green in every CI UI."""
    empty = next(
        yaml.safe_load(p.read_text(encoding="utf-8"))["id"]
        for p in sorted((EXAMPLE_REGISTRY / "suites").glob("*.yaml"))
        if yaml.safe_load(p.read_text(encoding="utf-8"))["kind"] == "capability"
    )
    checked = cli("--json", "gate", "check", "--build", "build-125", "--suite", empty, cwd=demo)
    assert checked.code == 3, checked.stdout + checked.stderr
    gate_id = checked.json()["gate_id"]
    assert checked.json()["tasks"] == []
    text = export(cli, demo, "junit", gate_id)
    xmlschema.XMLSchema(JUNIT_XSD).validate(text)
    suite = next(iter(junitparser.JUnitXml.fromstring(text)))
    assert suite.tests == 1 and suite.failures == 1
    assert "no members" in next(iter(suite)).result[0].message


def test_junit_is_never_all_green_unless_pass() -> None:
    from evalops.export.junit import junit_xml

    for decision_value in ("pass", "hold", "block"):
        doc = {
            "gate_id": "GATE-9",
            "decision": decision_value,
            "build": "b",
            "suite": "s",
            "reasons": [],
            "tasks": [{"task_id": "t", "state": "task_pass", "effect": "pass", "waiver_id": None}],
        }
        suite = next(iter(junitparser.JUnitXml.fromstring(junit_xml(doc))))
        red = suite.failures + suite.errors
        assert (red == 0) == (decision_value == "pass")


# --- OpenTelemetry ------------------------------------------------------------------------


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-3"])
def test_otel_is_otlp_json_with_one_event_per_trial(demo: Path, cli: Cli, gate_id: str) -> None:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    text = export(cli, demo, "otel", gate_id)
    request = json_format.Parse(text, ExportLogsServiceRequest())  # unknown fields refused
    truth = decision(demo, gate_id)
    trials = {
        t["trial_id"]: (task["task_id"], t)
        for task in inputs(demo, gate_id)["tasks"]
        for t in task["trials"]
    }
    (resource_logs,) = request.resource_logs
    resource = {a.key: a.value for a in resource_logs.resource.attributes}
    assert resource["evalops.build"].string_value == truth["build"]
    assert resource["evalops.execution_digest"].string_value == truth["execution_digest"]
    assert resource["evalops.audit_head"].string_value == head(demo)
    records = [r for scope in resource_logs.scope_logs for r in scope.log_records]
    assert len(records) == len(trials)
    seen = set()
    for record in records:
        assert record.event_name == "gen_ai.evaluation.result"
        attrs = {a.key: a.value for a in record.attributes}
        trial_id = attrs["evalops.trial_id"].string_value
        task_id, trial = trials[trial_id]
        seen.add(trial_id)
        assert attrs["gen_ai.evaluation.name"].string_value == f"{truth['suite']}/{task_id}"
        assert attrs["gen_ai.evaluation.score.value"].double_value == pytest.approx(trial["score"])
        label = attrs["gen_ai.evaluation.score.label"].string_value
        assert label == trial["classification"]
        assert re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", label)  # RFC 0244 section E
        assert attrs["gen_ai.evaluation.explanation"].string_value
        assert attrs["gen_ai.evaluation.evaluator.type"].string_value in (
            "deterministic",
            "llm_judge",
            "human",
        )
        assert record.time_unix_nano > 0
    assert seen == set(trials)


def test_otel_explanation_says_why_a_trial_failed(demo: Path, cli: Cli) -> None:
    text = json.loads(export(cli, demo, "otel", "GATE-1"))
    records = text["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    hard = [
        r
        for r in records
        if {
            "key": "gen_ai.evaluation.score.label",
            "value": {"stringValue": "hard_constraint_fail"},
        }
        in r["attributes"]
    ]
    assert hard
    explanation = next(
        a["value"]["stringValue"]
        for a in hard[0]["attributes"]
        if a["key"] == "gen_ai.evaluation.explanation"
    )
    assert explanation.startswith("hard_constraint_fail")


# --- EvalSummary --------------------------------------------------------------------------


def summary_schema() -> dict[str, Any]:
    from evalops.export.summary import schema

    value = schema()
    jsonschema.Draft202012Validator.check_schema(value)
    return value


def validate(summary: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(summary_schema()).validate(summary)


def tool_names() -> set[str]:
    """Every tool name the example registry's tasks mention (expectations and fixtures)."""
    names: set[str] = set()
    for path in (EXAMPLE_REGISTRY / "tasks").glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        names.update(re.findall(r"tool: \"?([a-z]+:[a-z-]+)", text))
        names.update(re.findall(r"- \"?([a-z]+:[a-z-]+)\"?$", text, flags=re.MULTILINE))
    return names


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_summary_validates_and_is_content_free(demo: Path, cli: Cli, gate_id: str) -> None:
    summary = json.loads(export(cli, demo, "summary", gate_id))
    validate(summary)
    truth = decision(demo, gate_id)
    assert summary["decision"] == truth["decision"]
    assert summary["taskCount"] == len(truth["tasks"])
    by_id = {t["taskId"]: t for t in summary["tasks"]}
    for task in truth["tasks"]:
        entry = by_id[task["task_id"]]["trials"]
        assert entry == {
            "n": task["n"],
            "passedCount": task["passedCount"],
            "meanScore": task["meanScore"],
            "passAtK": task["passAtK"],
            "passHatK": task["passHatK"],
        }
    assert summary["audit_head"]["seq"] == int(head(demo).split(":")[0])
    tools = tool_names()
    assert "billing:refund" in tools  # the example really has tools to leak
    text = json.dumps(summary)
    assert not [name for name in tools if name in text]


def test_summary_schema_refuses_content() -> None:
    summary = {
        "schema": "evalops.eval-summary/v1",
        "suiteId": "regression/core",
        "gateId": "GATE-1",
        "decision": "pass",
        "passed": True,
        "evaluatedAt": "2026-11-30T12:00:00.000000Z",
        "taskCount": 1,
        "aggregateScore": 1.0,
        "digests": {},
        "tasks": [
            {
                "taskId": "support-refund-in-order",
                "state": "task_pass",
                "effect": "pass",
                "passed": True,
                "score": 1.0,
                "trials": {"n": 1, "passedCount": 1, "meanScore": 1, "passAtK": 1, "passHatK": 1},
                "fixtureMissCount": 0,
                "trajectory": {
                    "mode": "in-order",
                    "matched": True,
                    "expectedCount": 2,
                    "observedCount": 2,
                    "matchedCount": 2,
                    "forbiddenCount": 0,
                },
            }
        ],
        "trialStats": {"k": 1},
        "audit_head": {"seq": 3, "hash": "sha256:" + "a" * 64},
        "decision_event": None,
    }
    validate(summary)  # the baseline is valid

    def refused(mutate: Any) -> None:
        bad = copy.deepcopy(summary)
        mutate(bad)
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)

    trajectory = lambda s: s["tasks"][0]["trajectory"]  # noqa: E731
    refused(lambda s: trajectory(s).update(tools=["billing:refund"]))  # RFC 0244 negative
    refused(lambda s: s["tasks"][0].update(toolCalls=[{"tool": "billing:refund"}]))
    refused(lambda s: s["tasks"][0].update(taskId="billing:refund"))
    refused(lambda s: s["tasks"][0].update(state="Looks good to me"))
    refused(lambda s: s.update(reasons=["billing:refund was called twice"]))
    refused(lambda s: trajectory(s).update(mode="superset"))
    refused(lambda s: s["tasks"][0]["trials"].update(args={"amountMinor": 4200}))
    refused(lambda s: s.update(audit_head={"seq": 3, "hash": "refund approved"}))


# --- in-toto attestation ---------------------------------------------------------------


def keypair(tmp_path: Path, name: str = "release") -> tuple[Path, Path, Ed25519PrivateKey]:
    key = Ed25519PrivateKey.generate()
    private = tmp_path / f"{name}.pem"
    public = tmp_path / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public, key


def test_attestation_is_an_in_toto_statement_v1(demo: Path, cli: Cli) -> None:
    statement = json.loads(export(cli, demo, "attestation", "GATE-3"))
    truth = decision(demo, "GATE-3")
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert set(statement) == {"_type", "subject", "predicateType", "predicate"}
    (subject,) = statement["subject"]
    assert subject["digest"] == {"sha256": truth["execution_digest"].removeprefix("sha256:")}
    assert statement["predicateType"] == "urn:evalops:predicate:gate-decision:v1"
    predicate = statement["predicate"]
    assert predicate["decision"] == "pass"
    assert predicate["decision_document"] == truth
    result_digest = stored(demo, "SELECT result_digest FROM gate_decision WHERE gate_id='GATE-3'")
    assert (
        "sha256:" + hashlib.sha256(rfc8785.dumps(predicate["decision_document"])).hexdigest()
        == predicate["digests"]["result_digest"]
        == result_digest[0][0]
    )
    for key in ("suite_digest", "policy_digest", "execution_digest", "inputs_digest"):
        assert predicate["digests"][key].startswith("sha256:")
    assert len(predicate["digests"]["eval_cases"]) == len(truth["tasks"])
    assert f"{predicate['audit_head']['seq']}:{predicate['audit_head']['hash']}" == head(demo)
    assert set(predicate["decision_event"]) == {"seq", "hash"}


def test_signed_attestation_verifies_and_tampering_fails(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    private, public, key = keypair(tmp_path)
    out = tmp_path / "gate.intoto.json"
    written = cli(
        "export",
        "attestation",
        "--gate",
        "GATE-3",
        "--sign-key",
        str(private),
        "-o",
        str(out),
        cwd=demo,
    )
    assert written.code == 0, written.stderr
    envelope = json.loads(out.read_text(encoding="utf-8"))
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    payload = base64.b64decode(envelope["payload"])
    # DSSE: the signature is over PAE(type, payload), checked here from the spec's words.
    pae = b"DSSEv1 %d %s %d %s" % (
        len(envelope["payloadType"]),
        envelope["payloadType"].encode(),
        len(payload),
        payload,
    )
    key.public_key().verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae)
    assert json.loads(payload)["_type"] == "https://in-toto.io/Statement/v1"

    ok = cli("--json", "verify-attestation", str(out), "--key", str(public))
    assert ok.code == 0, ok.stderr
    assert ok.json()["verified"] is True and ok.json()["decision"] == "pass"

    def tampered(name: str, change: Any) -> Path:
        bad = copy.deepcopy(envelope)
        change(bad)
        path = tmp_path / name
        path.write_text(json.dumps(bad), encoding="utf-8")
        return path

    def flip_decision(e: dict[str, Any]) -> None:
        statement = json.loads(base64.b64decode(e["payload"]))
        statement["predicate"]["decision_document"]["tasks"][0]["state"] = "task_pass"
        statement["predicate"]["decision"] = "pass"
        statement["subject"][0]["digest"]["sha256"] = "0" * 64
        e["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()

    def flip_signature(e: dict[str, Any]) -> None:
        sig = bytearray(base64.b64decode(e["signatures"][0]["sig"]))
        sig[0] ^= 1
        e["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()

    cases = [
        tampered("payload.json", flip_decision),
        tampered("signature.json", flip_signature),
        tampered("type.json", lambda e: e.update(payloadType="application/json")),
        tampered("unsigned.json", lambda e: e.update(signatures=[])),
    ]
    for path in cases:
        result = cli("verify-attestation", str(path), "--key", str(public))
        assert result.code == 6, (path.name, result.stdout, result.stderr)
    _, other_public, _ = keypair(tmp_path, "other")
    assert cli("verify-attestation", str(out), "--key", str(other_public)).code == 6
    plain = tmp_path / "statement.json"
    plain.write_text(export(cli, demo, "attestation", "GATE-3"), encoding="utf-8")
    assert cli("verify-attestation", str(plain), "--key", str(public)).code == 6
    assert cli("verify-attestation", str(out), "--key", str(private)).code == 2


def test_exports_carry_the_anchor_the_verifier_reads(demo: Path, cli: Cli) -> None:
    token = head(demo)
    junit = export(cli, demo, "junit", "GATE-2")
    assert f'name="evalops.audit_head" value="{token}"' in junit
    for kind in ("summary", "attestation"):
        value = json.loads(export(cli, demo, kind, "GATE-2"))
        anchor = value.get("audit_head") or value["predicate"]["audit_head"]
        assert ANCHOR.fullmatch(f"{anchor['seq']}:{anchor['hash']}").group(0) == token
