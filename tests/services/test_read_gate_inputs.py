"""`verify` rebuilds each stored decision's inputs through plain SQL, byte for byte as
`gate check` built them through the ORM.

`gate check` loads a decision's inputs with evalops/services/gate/inputs.py (SQLAlchemy's
ORM); `verify`, `export attestation` and the tests' replay of every stored decision rebuild
them with evalops/services/verify/gate_inputs.py over a `Reader` (on SQLite `sqlite3` itself).
Every decision the test suite stores is rebuilt that way after its test (tests/conftest.py
`_replay_all`); here the rebuild is held to the stored bytes on registries built to cover
what the inputs hold (baselines asked and `auto`, `--at`, `--policy`, evaluator 4, waivers
applied, refused and revoked, reruns, reviews, reconciliations, calibrations, several
suites and builds), through `sqlite3` and through a SQLAlchemy connection, and each source
of the inputs edited behind evalops's back is noticed by both loaders.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.canonical import canonical_json_document
from evalops.services.gate.input_parts import GateRequest
from evalops.services.verify.decision_checks import rebuilt_inputs_problem, stored_decisions
from evalops.services.verify.gate_inputs import rebuilt_inputs
from evalops.store.reader import Reader
from tests.conftest import Cli
from tests.helpers import commit_all, run_quiet, sqlite3_reader, write_yaml
from tests.services.test_gate import (
    BUILD_OF_CLASS,
    CRIT,
    MIXED,
    MODEL,
    NONCRIT,
    TASK_SPECS,
    base_workspace,
    copy_workspace,
    trial_records,
)
from tests.trial_factory import write_jsonl

DB = Path(".evalops") / "registry.db"


@contextmanager
def orm_session(root: Path) -> Iterator[Any]:
    from evalops.store.engine import make_engine, read_session

    engine = make_engine(f"sqlite:///{root / DB}")
    try:
        with read_session(engine) as session:
            yield session
    finally:
        engine.dispose()


def orm_rebuilt(root: Path, *, listed: bool = False) -> dict[str, bytes]:
    """Every stored decision's inputs rebuilt by the ORM loader `gate check` uses (`listed`:
    every trial listed, as evaluator 3's stored decisions hold them, for the same requests)."""
    from evalops.services.gate.inputs import build_inputs

    out = {}
    with sqlite3_reader(root / DB) as reader:
        decisions = list(stored_decisions(reader))
    with orm_session(root) as session:
        for row in decisions:
            inputs = json.loads(row.inputs)
            built = build_inputs(
                session,
                GateRequest.from_dict(inputs["request"]),
                rebuild=True,
                evaluator=3 if listed else int(inputs["evaluator"]),
            )
            built["gate_id"] = row.gate_id
            out[row.gate_id] = canonical_json_document(built)
    return out


def plain_rebuilt(reader: Reader, *, listed: bool = False) -> dict[str, bytes]:
    out = {}
    for row in stored_decisions(reader):
        inputs = json.loads(row.inputs)
        built = rebuilt_inputs(
            reader,
            GateRequest.from_dict(inputs["request"]),
            3 if listed else int(inputs["evaluator"]),
        )
        built["gate_id"] = row.gate_id
        out[row.gate_id] = canonical_json_document(built)
    return out


def stored_inputs(root: Path) -> dict[str, bytes]:
    with closing(sqlite3.connect(root / DB)) as conn:
        return {
            gate_id: inputs.encode("utf-8")
            for gate_id, inputs in conn.execute("SELECT gate_id, inputs FROM gate_decision")
        }


def ok(cli: Cli, root: Path, *args: str) -> dict[str, Any]:
    result = cli(*args, "--json", cwd=root)
    assert result.code in (0, 3, 4), result.stdout + result.stderr
    data: dict[str, Any] = result.json()
    return data


def run(root: Path, *args: str) -> tuple[int, str]:
    return run_quiet(*args, cwd=root, actor="rebuild@example.com")


@pytest.fixture(scope="module")
def gate_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gate tests' registry (every class, reruns, several suites and builds) with
    decisions of each kind the inputs distinguish, and rows each of them must not see:
    everything recorded after a decision's cutoff (a repin, waivers granted and refused,
    more trials) is recorded between two rounds of decisions."""
    root = copy_workspace(base_workspace(tmp_path_factory), tmp_path_factory.mktemp("rb") / "ws")
    builds = sorted({"build-0", "build-pass", "build-fail", "build-mixed", "build-empty",
                     *BUILD_OF_CLASS.values()})  # fmt: skip
    suites = [CRIT, MIXED, NONCRIT, MODEL]

    def decide_all() -> None:
        at = None
        for suite in suites:
            for build in builds:
                code, output = run(root, "gate", "check", "--build", build, "--suite", suite,
                                   "--json")  # fmt: skip
                if code in (0, 3, 4) and at is None:
                    at = json.loads(output)["evaluated_at"]
        assert at is not None, "no build could be gated"
        for suite in suites:
            for extra in (
                ("--baseline", "build-0"),
                ("--baseline", "auto"),
                ("--at", at),
                ("--policy", "release-gate"),
            ):
                run(root, "gate", "check", "--build", "build-mixed", "--suite", suite, *extra)

    decide_all()
    # A second revision of a pinned task, tried by one build: its trials are ignored and
    # counted, its labels join the ratchet, and then it is pinned.
    spec = copy.deepcopy(TASK_SPECS["crit-task"])
    spec["revision"] = 2
    spec["contract"]["goal"] = "goal_crit_task_v2"
    spec["meta"]["protects"] = [*spec["meta"].get("protects", []), "secrets"]
    write_yaml(root / "registry" / "tasks" / "crit-task.yaml", spec)
    commit_all(root, "crit-task revision 2")
    assert run(root, "sync")[0] == 0
    records = trial_records(root, {"build-empty": {"crit-task": ["pass", "pass"]}})
    path = write_jsonl(root / ".evalops" / "revision-2.jsonl", records)
    assert run(root, "trials", "ingest", str(path))[0] == 0
    assert run(root, "gate", "check", "--build", "build-empty", "--suite", CRIT)[0] in (0, 3, 4)
    assert run(root, "promote", "crit-task", "--to", CRIT)[0] == 0
    build = BUILD_OF_CLASS["task_fail"]
    granted = run(
        root, "waiver", "grant", "--task", "noncrit-task", "--suite", NONCRIT, "--states",
        "task_fail", "--build", build, "--owner", "o@example.com", "--reason", "accepted",
        "--expires", "14d",
    )  # fmt: skip
    assert granted[0] == 0, granted
    refused = run(
        root, "waiver", "grant", "--task", "crit-plain", "--suite", MIXED, "--states",
        "task_fail", "--build", "build-fail", "--owner", "o@example.com", "--reason", "r",
        "--expires", "1d",
    )  # fmt: skip
    assert refused[0] == 5, refused
    builds.append(build)
    decide_all()
    return root


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_the_gate_registry_holds_decisions_of_each_kind(gate_registry: Path) -> None:
    with closing(sqlite3.connect(gate_registry / DB)) as conn:
        requests = [json.loads(i) for (i,) in conn.execute("SELECT inputs FROM gate_decision")]
    assert len(requests) >= 20
    assert {r["evaluator"] for r in requests} == {4}  # the only evaluator of new decisions
    assert any(r["baseline"] and r["baseline"].get("tasks") for r in requests)
    assert any(r["request"]["baseline"] == "auto" for r in requests)
    assert any(r["request"]["policy"] == "release-gate" for r in requests)
    assert any(any(t["ignoredTrials"] for t in r["tasks"]) for r in requests)
    assert any(any("secrets" in t["protects"] for t in r["tasks"]) for r in requests)
    assert any(r["waivers"] for r in requests) and any(r["refused_waivers"] for r in requests)


@pytest.mark.slow  # several CPU seconds: `make test` runs it, `make test-fast` not
def test_both_loaders_rebuild_every_stored_decision_of_the_gate_registry(
    gate_registry: Path,
) -> None:
    stored = stored_inputs(gate_registry)
    with sqlite3_reader(gate_registry / DB) as reader:
        assert plain_rebuilt(reader) == stored
        # The same requests with every trial listed, as stored decisions of evaluator 3
        # hold them: `verify` rebuilds those with the plain loader too.
        listed = plain_rebuilt(reader, listed=True)
    assert orm_rebuilt(gate_registry) == stored
    assert orm_rebuilt(gate_registry, listed=True) == listed
    assert all(b'"trials":[' in v for v in listed.values())


def test_the_demo_s_decisions_rebuild_through_sqlite3_and_a_sqlalchemy_connection(
    demo: Path, cli: Cli
) -> None:
    from evalops.store.engine import make_engine
    from evalops.store.reader import engine_reader

    # A waiver request refused by the policy's rules: a later decision lists it.
    refused = cli(
        "waiver", "grant", "--task", "support-refund-policy-explanation", "--suite",
        "regression/core", "--states", "task_fail", "--build", "build-125", "--owner",
        "a@example.com", "--reason", "too long", "--expires", "400d", cwd=demo,
    )  # fmt: skip
    assert refused.code == 5, refused.stdout + refused.stderr
    for extra in (("--baseline", "auto"), ("--at", "2026-11-30T12:00:00Z"), ()):
        ok(cli, demo, "gate", "check", "--build", "build-125", "--suite", "regression/core", *extra)
    stored = stored_inputs(demo)
    assert any(json.loads(i)["refused_waivers"] for i in stored.values())
    assert any(json.loads(i)["waivers"] for i in stored.values())
    with sqlite3_reader(demo / DB) as reader:
        assert plain_rebuilt(reader) == stored
    engine = make_engine(f"sqlite:///{demo / DB}")
    try:
        with engine_reader(engine) as reader:
            assert plain_rebuilt(reader) == stored
    finally:
        engine.dispose()


# Each source of a decision's inputs, changed directly in the database: both loaders see it.
EDITS = {
    "a trial's class": (
        "UPDATE trial SET classification = 'task_fail' WHERE id = (SELECT MIN(id) FROM trial "
        "WHERE classification = 'task_pass' AND execution_digest = :execution AND task_id IN "
        "(SELECT task_id FROM suite_membership WHERE suite_id = :suite))",
        "single",
    ),
    "a member's pin retired": (
        "INSERT INTO suite_membership (suite_id, task_id, action, task_digest, "
        "grader_set_digest, task_revision_id, promotion_id, reason, actor, at, audit_seq) "
        "SELECT suite_id, task_id, 'retired', task_digest, grader_set_digest, task_revision_id, "
        "promotion_id, 'x', actor, at, audit_seq FROM suite_membership WHERE suite_id = :suite "
        "ORDER BY id LIMIT 1",
        "tasks",
    ),
    "a task's risk label": (
        "UPDATE task_revision SET document = replace(document, "
        '\'"risk":"noncritical_regression"\', \'"risk":"critical"\')',
        "risk",
    ),
    "a waiver revoked": (
        "INSERT INTO waiver_revocation (waiver_row_id, revoked_at, reason, actor, audit_seq) "
        "SELECT id, granted_at, 'x', 'x', audit_seq FROM waiver",
        "waivers",
    ),
}


@pytest.mark.tampers
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_source_of_the_inputs_is_noticed_by_both_loaders(demo: Path, edit: str) -> None:
    sql, where = EDITS[edit]
    with sqlite3_reader(demo / DB) as reader:
        decision = next(r for r in stored_decisions(reader) if r.gate_id == "GATE-3")
    inputs = json.loads(decision.inputs)
    with closing(sqlite3.connect(demo / DB)) as conn:
        changed = conn.execute(
            sql, {"execution": inputs["execution_digest"], "suite": inputs["suite"]["id"]}
        ).rowcount
        conn.commit()
    assert changed > 0, edit
    with sqlite3_reader(demo / DB) as reader:
        plain = rebuilt_inputs_problem(reader, decision)
    assert plain is not None and where in plain, plain
    assert plain.startswith("stored inputs no longer match the registry rows"), plain
    assert orm_rebuilt(demo)["GATE-3"] != decision.inputs.encode("utf-8")


def test_verify_s_decision_stage_on_sqlite3_imports_no_sqlalchemy(demo: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from evalops.store.reader import open_sqlite\n"
        "from evalops.services.verify.decision_checks import verify_decisions\n"
        f"reader = open_sqlite({f'sqlite:///{demo / DB}'!r}, lock_timeout=5)\n"
        "print(verify_decisions(reader))\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'sqlmodel', 'alembic') or m == 'evalops.store.tables')\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    count, loaded = done.stdout.splitlines()
    assert int(count) == 3
    assert loaded == "[]"
