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
from tests.decide import listed_tasks
from tests.helpers import EXAMPLE_REGISTRY

JUNIT_XSD = Path(__file__).parents[1] / "schemas" / "junit.xsd"
CONSUMER_XSDS = Path(__file__).parents[1] / "fixtures" / "junit-xsd"
JENKINS_XSD = CONSUMER_XSDS / "jenkins-xunit-junit-10.xsd"
WINDYROAD_XSD = CONSUMER_XSDS / "windyroad-JUnit.xsd"
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


def schema_errors(xsd: Path, text: str) -> list[str]:
    return [str(error.reason) for error in xmlschema.XMLSchema(xsd).iter_errors(text)]


@pytest.fixture(scope="module")
def pytest_junit(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pytest's own JUnit XML for a comparable run: a pass, a failure, an error, a skip."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("pytest-junit")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "test_comparable.py").write_text(
        "import pytest\n"
        "@pytest.fixture\n"
        "def broken():\n    raise RuntimeError('fixture')\n"
        "def test_pass():\n    pass\n"
        "def test_fail():\n    assert False\n"
        "def test_error(broken):\n    pass\n"
        "def test_skip():\n    pytest.skip('waived')\n",
        encoding="utf-8",
    )
    out = root / "pytest.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"--junitxml={out}", "test_comparable.py"],
        cwd=root, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_junit_is_accepted_by_jenkins_and_the_ant_schema(
    demo: Path, cli: Cli, gate_id: str, pytest_junit: str
) -> None:
    """Jenkins' xUnit plugin validates with its junit-10.xsd and rejects what fails it; the
    Ant (windyroad) schema is the strict reference: ours must do no worse than pytest."""
    text = export(cli, demo, "junit", gate_id)
    assert schema_errors(JENKINS_XSD, pytest_junit) == []  # the schema really accepts JUnit
    assert schema_errors(JENKINS_XSD, text) == []
    ours = schema_errors(WINDYROAD_XSD, text)
    theirs = schema_errors(WINDYROAD_XSD, pytest_junit)
    assert len(ours) <= len(theirs) and set(ours) <= set(theirs), (ours, theirs)


def gitlab_keys(text: str) -> dict[str, str]:
    """GitLab's test identity, from its JUnit parser: sha256 of
    `<enclosing testsuite name>_<classname>_<name>`, per test case (by name)."""
    import xml.etree.ElementTree as ET

    keys = {}
    for suite in ET.fromstring(text).iter("testsuite"):
        for case in suite.findall("testcase"):
            key = f"{suite.get('name')}_{case.get('classname')}_{case.get('name')}"
            keys[str(case.get("name"))] = hashlib.sha256(key.encode()).hexdigest()
    return keys


def test_a_task_keeps_its_test_identity_across_decisions(demo: Path, cli: Cli) -> None:
    """Two decisions of one suite (two builds, a block then a pass): GitLab must see the
    same tests, so a failure can be "resolved" and history builds."""
    first, second = decision(demo, "GATE-1"), decision(demo, "GATE-3")
    assert first["suite"] == second["suite"] and first["build"] != second["build"]
    block = gitlab_keys(export(cli, demo, "junit", "GATE-1"))
    passing = gitlab_keys(export(cli, demo, "junit", "GATE-3"))
    assert set(block) == {t["task_id"] for t in first["tasks"]} | {"gate-decision"}
    assert block == passing
    suite = next(iter(junitparser.JUnitXml.fromstring(export(cli, demo, "junit", "GATE-3"))))
    props = {p.name: p.value for p in suite.properties()}
    assert (props["evalops.gate_id"], props["evalops.build"]) == ("GATE-3", second["build"])


def test_a_pass_by_waiver_names_its_waiver_owner_and_expiry(demo: Path, cli: Cli) -> None:
    from evalops.domain.vocabulary import parse_timestamp

    ((waiver_id, task_id, owner, expires),) = stored(
        demo, "SELECT waiver_id, task_id, owner, expires_at FROM waiver"
    )
    expires_at = parse_timestamp(expires.replace(" ", "T") + "Z")
    text = export(cli, demo, "junit", "GATE-3")
    suite = next(iter(junitparser.JUnitXml.fromstring(text)))
    (case,) = [c for c in suite if c.name == task_id]
    (skipped,) = case.result
    assert isinstance(skipped, junitparser.Skipped)
    message = skipped.message or ""
    assert waiver_id in message and owner in message
    assert re.search(r"expires (\S+)\)", message)
    assert parse_timestamp(re.search(r"expires (\S+)\)", message).group(1)) == expires_at
    props = {p.name: p.value for p in suite.properties()}
    prefix = f"evalops.waiver.{task_id}"
    assert props[f"{prefix}.id"] == waiver_id
    assert props[f"{prefix}.owner"] == owner
    assert parse_timestamp(props[f"{prefix}.expires_at"]) == expires_at


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


# The GenAI semantic-convention registry's attributes of a `gen_ai.evaluation.result` event
# (its own four, and the two it refers to), as the registry lists them.
GENAI_EVALUATION_ATTRIBUTES = {
    "gen_ai.evaluation.name",
    "gen_ai.evaluation.score.value",
    "gen_ai.evaluation.score.label",
    "gen_ai.evaluation.explanation",
    "gen_ai.response.id",
    "error.type",
}


def otlp_requests(text: str) -> list[Any]:
    """Each line of an OTLP/JSON Lines file through the official protobuf parser (unknown
    fields refused), as the Collector's `otlpjsonfile` receiver reads it."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    assert text.endswith("\n")
    lines = text.split("\n")[:-1]
    assert lines and all(lines)
    for line in lines:
        assert len(line.encode("utf-8")) <= 1024 * 1024
    return [json_format.Parse(line, ExportLogsServiceRequest()) for line in lines]


def otlp_records(text: str) -> list[Any]:
    return [
        record
        for request in otlp_requests(text)
        for resource_logs in request.resource_logs
        for scope in resource_logs.scope_logs
        for record in scope.log_records
    ]


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-3"])
def test_otel_is_otlp_json_lines_with_one_event_per_trial(
    demo: Path, cli: Cli, gate_id: str
) -> None:
    text = export(cli, demo, "otel", gate_id)
    requests = otlp_requests(text)
    truth = decision(demo, gate_id)
    trials = {
        t["trial_id"]: (task["task_id"], t)
        for task in listed_tasks(demo / ".evalops" / "registry.db", gate_id)
        for t in task["trials"]
    }
    for request in requests:
        (resource_logs,) = request.resource_logs
        resource = {a.key: a.value for a in resource_logs.resource.attributes}
        assert resource["evalops.build"].string_value == truth["build"]
        assert resource["evalops.execution_digest"].string_value == truth["execution_digest"]
        assert resource["evalops.audit_head"].string_value == head(demo)
    records = otlp_records(text)
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
        assert attrs["evalops.evaluator.type"].string_value in (
            "deterministic",
            "llm_judge",
            "human",
        )
        assert record.time_unix_nano > 0
    assert seen == set(trials)


def test_otel_explanation_says_why_a_trial_failed(demo: Path, cli: Cli) -> None:
    hard = [
        r
        for r in otlp_records(export(cli, demo, "otel", "GATE-1"))
        if {a.key: a.value.string_value for a in r.attributes}["gen_ai.evaluation.score.label"]
        == "hard_constraint_fail"
    ]
    assert hard
    explanation = {a.key: a.value.string_value for a in hard[0].attributes}
    assert explanation["gen_ai.evaluation.explanation"].startswith("hard_constraint_fail")


def grader_types() -> dict[str, str]:
    """Every grader's type, read from the example registry's grader sets."""
    out = {}
    for path in (EXAMPLE_REGISTRY / "graders").glob("*.yaml"):
        for grader in yaml.safe_load(path.read_text(encoding="utf-8"))["graders"]:
            out[grader["id"]] = grader["type"]
    return out


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-3"])
def test_otel_follows_the_genai_semantic_convention_registry(
    demo: Path, cli: Cli, gate_id: str
) -> None:
    text = export(cli, demo, "otel", gate_id)
    for line in text.splitlines():
        value = json.loads(line)
        for resource_logs in value["resourceLogs"]:
            assert re.fullmatch(r"https://opentelemetry\.io/schemas/\d+\.\d+\.\d+",
                                resource_logs["schemaUrl"])  # fmt: skip
            for scope in resource_logs["scopeLogs"]:
                assert scope["schemaUrl"] == resource_logs["schemaUrl"]
    types = grader_types()
    waived_tasks = {t["task_id"]: t["waiver_id"] for t in decision(demo, gate_id)["tasks"]
                    if t["waiver_id"]}  # fmt: skip
    records = {t[0]: t[1:] for t in stored(
        demo, "SELECT trial_id, task_id, record FROM trial")}  # fmt: skip
    for record in otlp_records(text):
        attrs = {a.key: a.value for a in record.attributes}
        keys = set(attrs)
        assert "event.name" not in keys  # deprecated: the record's eventName says it
        assert {k for k in keys if k.startswith("gen_ai.")} <= GENAI_EVALUATION_ATTRIBUTES
        assert all(k.startswith(("gen_ai.", "evalops.")) for k in keys), keys
        trial_id = attrs["evalops.trial_id"].string_value
        task_id, raw = records[trial_id]
        label = attrs["gen_ai.evaluation.score.label"].string_value
        failing = [r["grader_id"] for r in json.loads(raw)["grader_results"] if r["state"] == label]
        # A check no grader makes failed it too (the classifier's reasons, as explained).
        explained = attrs["gen_ai.evaluation.explanation"].string_value
        checked = "trajectory expectation unmatched" in explained or "onMiss fail" in explained
        if failing and all(types[g] == "model" for g in failing) and not checked:
            # only the judge failed it (a later test builds such a trial)
            assert attrs["evalops.evaluator.type"].string_value == "llm_judge", trial_id
        elif failing and (checked or any(types[g] == "deterministic" for g in failing)):
            assert attrs["evalops.evaluator.type"].string_value == "deterministic", trial_id
        assert attrs["evalops.waived"].bool_value == (task_id in waived_tasks)
        if task_id in waived_tasks:
            assert attrs["evalops.waiver_id"].string_value == waived_tasks[task_id]
    if gate_id == "GATE-3":
        assert waived_tasks


def test_a_trial_only_the_model_judge_failed_reads_llm_judge(demo: Path, cli: Cli) -> None:
    """docs/exports.md: `llm_judge` when only a model judge failed the trial. A copy of a
    passing build-125 trial whose model judge (reply-quality) says task_fail, nothing else
    failing: the export says llm_judge; the demo trial the judge and the trajectory and a
    fixture miss failed says deterministic."""
    source = demo / "registry" / "trials" / "fix-b125.jsonl"
    record = next(
        json.loads(line)
        for line in source.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["trial_id"] == "trial-b125-support-refund-in-order-0"
    )
    assert grader_types()["reply-quality"] == "model"
    for result in record["grader_results"]:
        if result["grader_id"] == "reply-quality":
            result["state"], result["score"] = "task_fail", 0.2
    record |= {"trial_id": "judge-only-1", "attempt_id": "judge-only-1", "run_id": "judged"}
    # A rubric task's trial the judge failed and whose stored trajectory did not match, with
    # no fixture miss: the trajectory fails it too (any kind of task, as the classifier reads).
    rubric = next(
        json.loads(line)
        for line in source.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["trial_id"] == "trial-b125-support-refund-policy-explanation-2"
    )
    rubric |= {"trial_id": "judge-and-path-1", "attempt_id": "judge-and-path-1",
               "run_id": "judged", "fixture_misses": 0}  # fmt: skip
    (demo / "judged.jsonl").write_text(
        json.dumps(record) + "\n" + json.dumps(rubric) + "\n", encoding="utf-8"
    )
    assert cli("trials", "ingest", "judged.jsonl", cwd=demo).code == 0
    gate = cli("gate", "check", "--build", "build-125", "--suite", "regression/core", "--json",
               cwd=demo)  # fmt: skip
    assert gate.code in (0, 3, 4), gate.stdout + gate.stderr
    types = {}
    for row in otlp_records(export(cli, demo, "otel", gate.json()["gate_id"])):
        attrs = {a.key: a.value.string_value for a in row.attributes}
        types[attrs["evalops.trial_id"]] = (
            attrs["evalops.evaluator.type"],
            attrs["gen_ai.evaluation.explanation"],
        )
    assert types["judge-only-1"] == ("llm_judge", "task_fail: reply-quality said task_fail")
    kind, why = types["judge-and-path-1"]
    assert "trajectory expectation unmatched" in why and "onMiss" not in why, why
    assert kind == "deterministic"
    # GATE-1 (build-124) holds a trial the judge failed and a fail-closed fixture miss too.
    both = []
    for row in otlp_records(export(cli, demo, "otel", "GATE-1")):
        attrs = {a.key: a.value.string_value for a in row.attributes}
        why = attrs["gen_ai.evaluation.explanation"]
        if "reply-quality said task_fail" in why and "onMiss fail" in why:
            both.append(attrs["evalops.evaluator.type"])
    assert both and set(both) == {"deterministic"}


def test_otel_lines_stay_under_1_mib_at_scale(demo: Path) -> None:
    """Thousands of trials: several requests, each line at most 1 MiB, nothing lost."""
    from evalops.export.otel import otlp_json
    from evalops.services.reports.audit import audit_document
    from evalops.store.engine import make_engine

    engine = make_engine(f"sqlite:///{demo / '.evalops' / 'registry.db'}")
    try:
        from datetime import UTC, datetime

        doc = audit_document(engine, "GATE-1", now=datetime(2026, 11, 30, tzinfo=UTC))
    finally:
        engine.dispose()
    trials = doc["trials"]
    doc["trials"] = [
        {**trial, "trial_id": f"{trial['trial_id']}-copy-{n}"}
        for n in range(3000 // len(trials) + 1)
        for trial in trials
    ]
    text = otlp_json(doc)
    assert len(text.encode("utf-8")) > 2 * 1024 * 1024  # needs at least three lines
    requests = otlp_requests(text)
    assert len(requests) >= 3
    ids = [
        {a.key: a.value.string_value for a in r.attributes}["evalops.trial_id"]
        for r in otlp_records(text)
    ]
    assert ids == [t["trial_id"] for t in doc["trials"]]


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


# --- JSON Schemas of the machine-readable outputs ------------------------------------------


def test_every_json_output_validates_against_its_shipped_schema(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    written = cli("--json", "schema", "export", str(tmp_path / "schemas"))
    assert written.code == 0, written.stderr

    def validator(name: str) -> jsonschema.Draft202012Validator:
        schema = json.loads((tmp_path / "schemas" / name).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        return jsonschema.Draft202012Validator(schema)

    gate_check = validator("gate-check.schema.json")
    stored_check = cli("--json", "gate", "check", "--build", "build-125", "--suite",
                       "regression/core", cwd=demo)  # fmt: skip
    assert stored_check.code == 0, stored_check.stdout
    dry_run = cli("--json", "gate", "check", "--build", "build-124", "--suite",
                  "regression/core", "--dry-run", cwd=demo)  # fmt: skip
    assert dry_run.code == 4, dry_run.stdout
    assert dry_run.json()["gate_id"] == "dry-run" and dry_run.json()["stored"] is False
    shown = cli("--json", "gate", "show", "GATE-2", cwd=demo)
    for output in (stored_check.json(), dry_run.json(), shown.json()):
        gate_check.validate(output)
    pretending = dict(dry_run.json(), decision_event=stored_check.json()["decision_event"])
    assert not gate_check.is_valid(pretending)  # a dry run never claims a stored event
    assert not gate_check.is_valid(dict(stored_check.json(), decision="maybe"))

    audit = validator("audit-report.schema.json")
    report = tmp_path / "audit.json"
    assert cli("report", "audit", "--gate", "GATE-1", "--format", "json", "-o", str(report),
               cwd=demo).code == 0  # fmt: skip
    audit.validate(json.loads(report.read_text(encoding="utf-8")))

    private, public, _ = keypair(tmp_path)
    envelope = tmp_path / "gate.intoto.json"
    assert cli("export", "attestation", "--gate", "GATE-3", "--sign-key", str(private), "-o",
               str(envelope), cwd=demo).code == 0  # fmt: skip
    verified = cli("--json", "verify-attestation", str(envelope), "--key", str(public))
    validator("verify-attestation.schema.json").validate(verified.json())

    summary = json.loads(export(cli, demo, "summary", "GATE-3"))
    validator("eval-summary.schema.json").validate(summary)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_reports_and_exports_follow_the_umask(
    demo: Path, cli: Cli, tmp_path: Path, mask: int
) -> None:
    import os
    import stat

    previous = os.umask(mask)
    try:
        with (tmp_path / "plain").open("w"):  # what any program's new file gets
            pass
        outputs = {
            "audit.html": ("report", "audit", "--gate", "GATE-3", "--format", "html"),
            "gate.xml": ("export", "junit", "--gate", "GATE-3"),
            "gate-otlp.jsonl": ("export", "otel", "--gate", "GATE-3"),
            "summary.json": ("export", "summary", "--gate", "GATE-3"),
        }
        for name, args in outputs.items():
            assert cli(*args, "-o", str(tmp_path / name), cwd=demo).code == 0
    finally:
        os.umask(previous)
    expected = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
    assert expected == 0o666 & ~mask
    for name in outputs:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == expected, name


def test_an_estimation_block_carries_no_free_text_build_name() -> None:
    """A build name may be any text ("Release 126 (RC1)"): the content-free summary shows
    an id-shaped one and null for the rest, and validates against its shipped schema."""
    import jsonschema

    from evalops.export.summary import estimation_block, schema

    estimate = {
        "estimate_id": "EST-4", "suite": "estimation/eu", "build": "Release 126 (RC1)",
        "baseline": "build-124", "confidence": 0.95, "task_count": 3, "trial_count": 9,
        "rates": {"pass": {"rate": 0.5, "low": 0.2, "high": 0.8, "n_eff": 6.0}},
        "difference": None, "unavailable": [],
    }  # fmt: skip
    block = estimation_block(estimate)
    assert (block["build"], block["baseline"]) == (None, "build-124")
    definition = schema()["properties"]["estimation"]
    jsonschema.validate(block, {**definition, "$defs": schema()["$defs"]})
    assert "Release" not in json.dumps(block)
