"""`evalops.record.TrialBuilder` and `evalops trials template`: valid records for harnesses."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from evalops.errors import InputError
from evalops.record import TrialBuilder
from tests.conftest import Cli
from tests.helpers import EXAMPLE_REGISTRY
from tests.import_support import copy_workspace, import_base, trials_of

TASK, EXECUTION = "support-refund-in-order", "candidate-b124"
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


@pytest.fixture(scope="module")
def builder() -> TrialBuilder:
    return TrialBuilder.from_registry(EXAMPLE_REGISTRY, task=TASK, execution=EXECUTION)


def test_digests_are_the_ones_evalops_digest_prints(builder: TrialBuilder, cli: Cli) -> None:
    files = [
        EXAMPLE_REGISTRY / "tasks" / f"{TASK}.yaml",
        EXAMPLE_REGISTRY / "executions" / f"{EXECUTION}.yaml",
        EXAMPLE_REGISTRY / "graders" / "support-graders.yaml",
    ]
    printed = cli("digest", *map(str, files), "--json").json()
    assert builder.task_digest == printed[0]["task_digest"]
    assert builder.execution_digest == printed[1]["execution_digest"]
    assert builder.grader_set_digest == printed[2]["grader_set_digest"]
    triple = {
        "task_digest": builder.task_digest,
        "execution_digest": builder.execution_digest,
        "grader_set_digest": builder.grader_set_digest,
    }
    assert builder.eval_case_digest == "sha256:" + hashlib.sha256(rfc8785.dumps(triple)).hexdigest()


def passing_trial(builder: TrialBuilder, trial_id: str, index: int) -> Any:
    trial = builder.trial(
        trial_id,
        run_id="harness-run-1",
        trial_index=index,
        started_at=START,
        completed_at=START + timedelta(seconds=40),
        target_agent_id="support",
    )
    trial.tool_call("crm:lookup-order", {"orderId": "A-1"}, agent_id="support")
    trial.tool_call("billing:refund", {"orderId": "A-1", "amountMinor": 4200}, agent_id="support")
    trial.effect("refund:A-1", "committed", "RF-9001")
    verdicts = {
        "refund-outcome": "task_pass",
        "ticket-outcome": "task_pass",
        "reply-quality": "task_pass",
        "refund-effect-guard": "pass",
    }
    for grader, state in verdicts.items():
        trial.grader(grader, state, score=1.0 if state == "task_pass" else None)
    trial.usage(model_calls=3, input_tokens=1200, output_tokens=340)
    return trial


def test_built_records_ingest_and_pass(builder: TrialBuilder, ws: Path, cli: Cli) -> None:
    lines = [passing_trial(builder, f"harness-{i}", i).to_json() for i in range(5)]
    (ws / "harness.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = cli("trials", "ingest", "harness.jsonl", "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["ingested"] == 5
    stored = [t for t in trials_of(ws, "build-124") if t["trial_id"].startswith("harness-")]
    assert [t["class"] for t in stored] == ["task_pass"] * 5
    assert stored[0]["record"]["grader_results"][0]["grader_version"] == 3  # from the set


@pytest.mark.parametrize(
    ("make", "field", "says"),
    [
        (lambda t: t.grader("no-such-grader", "task_pass"), "grader_results", "not in grader set"),
        (
            lambda t: t.grader("refund-effect-guard", "task_pass"),
            "grader_results",
            "may not produce",
        ),
        (
            lambda t: t.grader("refund-outcome", "task_pass").grader("refund-outcome", "task_fail"),
            "grader_results",
            "already has a result",
        ),
    ],
)
def test_a_wrong_grader_result_is_refused_when_added(
    builder: TrialBuilder, make: Any, field: str, says: str
) -> None:
    trial = builder.trial("t", trial_index=0, started_at=START, completed_at=START)
    with pytest.raises(InputError, match=says) as caught:
        make(trial)
    assert caught.value.field == field


def test_build_validates_the_record(builder: TrialBuilder) -> None:
    trial = builder.trial("t", trial_index=0, started_at=START, completed_at=START)
    with pytest.raises(InputError, match="blocking graders without a result: refund-outcome"):
        trial.build()
    assert trial.build(allow_missing_graders=True)["grader_results"] == []
    naive = builder.trial("t", trial_index=0, started_at="2026-12-01T09:00:00", completed_at=START)
    with pytest.raises(InputError) as caught:
        naive.build(allow_missing_graders=True)
    assert caught.value.field == "started_at"
    late = builder.trial("t", trial_index=0, started_at=START, completed_at=START - timedelta(1))
    with pytest.raises(InputError) as caught:
        late.build(allow_missing_graders=True)
    assert caught.value.field == "completed_at"
    # A failed run needs no grader results: it is classified by its runtime status.
    crashed = builder.trial("t", trial_index=0, started_at=START, completed_at=START)
    assert crashed.runtime("runtime_error", "boom").build()["runtime"]["status"] == "runtime_error"


def test_template_is_a_record_that_ingests(builder: TrialBuilder, ws: Path, cli: Cli) -> None:
    result = cli("trials", "template", "--task", TASK, "--execution", EXECUTION, cwd=ws)
    assert result.code == 0, result.stderr
    record = json.loads(result.stdout)
    # The database's definitions are the registry's files: the same digests.
    expected = builder.template(datetime.fromisoformat(record["started_at"].replace("Z", "+00:00")))
    assert record == expected
    (ws / "template.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    ingested = cli("trials", "ingest", "template.jsonl", "--json", cwd=ws)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    stored = next(t for t in trials_of(ws, "build-124") if t["trial_id"] == "trial-0001")
    assert stored["class"] == "task_pass"
    unknown = cli(
        "trials", "template", "--task", "nope", "--execution", EXECUTION, "--json", cwd=ws
    )
    assert unknown.code == 2 and unknown.json()["error"]["field"] == "--task"
