"""Inspect AI logs read by evalops/importers/inspect.py without a registry: `read_inspect`
called on real logs kept in tests/fixtures/inspect (written by Inspect itself running the
refund task of tests/importer_tasks, see tests/fixtures/README.md), with the map resolved
by hand, so `make mutate` can run these for each mutant of the module.

What each sample becomes is read off the task's script (`PLAN`) with the contract's words
(DESIGN 10.1, docs/importers.md): one trial per attempt, each error retry a rerun of the
attempt before it; `trial_index` = epoch - 1; a score value the map does not list, or NaN,
is `grader_invalid`; "rate limit" matches the map's infrastructure pattern, a segfault does
not (runtime_error); input tokens include cache reads and writes, the scorers' own model
usage is excluded; tool calls renamed through `tools`, outside any agent span the target
agent's.
"""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from evalops.errors import InputError
from evalops.importers.common import (
    Item,
    Resolved,
    ResolvedExecution,
    ResolvedTask,
    Skipped,
    Translated,
)
from evalops.importers.inspect import _finite, _timestamp, _tokens, read_inspect
from evalops.registry.import_maps import load_import_map
from tests.helpers import EXAMPLE_REGISTRY, REPO_ROOT
from tests.importer_tasks.refund_task import AGENT_MODEL_CALLS, EPOCHS, PLAN, RETRIES, USAGE

LOGS = REPO_ROOT / "tests" / "fixtures" / "inspect"
MAP_TEXT = (EXAMPLE_REGISTRY / "imports" / "inspect-support.yaml").read_text(encoding="utf-8")
SAMPLE_TASKS = {
    "A-1": "support-refund-in-order",
    "A-2": "support-refund-policy-explanation",
    "A-3": "support-reply-tone",
}
SCORERS = {  # the example map: scorer -> (grader, version, values)
    "refund_check": ("refund-outcome", 3, {"C": "task_pass", "I": "task_fail"}),
    "ticket_check": ("ticket-outcome", 1, {"C": "task_pass", "I": "task_fail"}),
    "reply_judge": ("reply-quality", 2, {"C": "task_pass", "I": "task_fail"}),
    "effect_guard": ("refund-effect-guard", 2, {"C": "pass", "I": "hard_constraint_fail"}),
}
TOOLS = {"lookup_order": "crm:lookup-order", "refund": "billing:refund", "kb_search": "kb:search",
         "refund_all": "billing:refund-all", "reply": "helpdesk:reply"}  # fmt: skip
BLOCKING = tuple(grader for grader, _, _ in SCORERS.values())
MODEL = "mockllm/model"


def resolved(tmp_path: Path, text: str = MAP_TEXT, model: str = MODEL) -> Resolved:
    """The map resolved as `trials import` resolves it against a registry: here by hand."""
    path = tmp_path / "map.yaml"
    path.write_text(text, encoding="utf-8")
    return Resolved(
        map=load_import_map(path),
        tasks={
            t: ResolvedTask(t, f"sha256:task-{t}", f"sha256:graders-{t}", BLOCKING, 3)
            for t in SAMPLE_TASKS.values()
        },
        executions={"candidate-b124": ResolvedExecution("candidate-b124", "sha256:exec", model)},
    )


def read(path: Path, resolution: Resolved, **kw: Any) -> tuple[Any, list[Item]]:
    kw.setdefault("unmapped", "error")
    summary, items = read_inspect(path, path.name, resolution, **kw)
    return summary, list(items)


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Any, list[Item]]:
    # Read for each test, not once per module: mutmut maps a function to the tests during
    # whose run it was called, and a module-scoped fixture runs during the first test only,
    # so every other test here would never run for a mutant of the functions it checks.
    return read(LOGS / "refund.eval", resolved(tmp_path))


def raw_samples(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    with zipfile.ZipFile(path) as archive:
        return {
            (str(raw["id"]), raw["epoch"]): raw
            for raw in (
                json.loads(archive.read(n)) for n in archive.namelist() if n.startswith("samples/")
            )
        }


def raw_header(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as archive:
        value: dict[str, Any] = json.loads(archive.read("header.json"))
        return value


def expected_id(raw: dict[str, Any], attempt: int) -> str:
    """docs/importers.md: a completed execution is [sample uuid, attempt]; a failed attempt
    [uuid of its first event]."""
    retries = raw.get("error_retries") or []
    final = attempt == len(retries) + 1
    if final and not raw.get("error"):
        ids: list[Any] = [raw["uuid"], attempt]
    else:
        events = raw["events"] if final else retries[attempt - 1]["events"]
        ids = [events[0]["uuid"]] if events else [raw["uuid"], attempt]
    return "insp-" + hashlib.sha256(rfc8785.dumps(ids)).hexdigest()[:16]


def attempts(sample: str, epoch: int) -> int:
    """Each failing attempt is retried, up to `retry_on_error` retries."""
    return min(1 + int(PLAN[sample][epoch].get("fail_attempts", 0)), 1 + RETRIES)


def by_attempt(items: list[Item]) -> dict[tuple[str, int, int], Translated]:
    """(sample, epoch, attempt) -> its trial, following the rerun links."""
    trials = [i for i in items if isinstance(i, Translated)]
    sample_of = {task: sample for sample, task in SAMPLE_TASKS.items()}
    out: dict[tuple[str, int, int], Translated] = {}
    for t in trials:
        if "rerun" not in t.record:
            chain = [t]
            while nxt := [
                c
                for c in trials
                if c.record.get("rerun", {}).get("parent_trial_id") == chain[-1].record["trial_id"]
            ]:
                chain.append(nxt[0])
            for n, trial in enumerate(chain, start=1):
                out[(sample_of[t.task_id], t.record["trial_index"] + 1, n)] = trial
    return out


def test_each_attempt_is_one_trial_linked_to_the_attempt_before(imported: Any) -> None:
    _, items = imported
    assert all(isinstance(i, Translated) for i in items)
    found = by_attempt(items)
    assert sorted(found) == sorted(
        (s, e, a) for s in PLAN for e in range(1, EPOCHS + 1) for a in range(1, attempts(s, e) + 1)
    )
    assert len(items) == len(found)
    for (sample, epoch, attempt), trial in found.items():
        assert trial.task_id == SAMPLE_TASKS[sample]
        assert trial.record["trial_index"] == epoch - 1
        if attempt > 1:
            assert trial.record["rerun"] == {
                "parent_trial_id": found[(sample, epoch, attempt - 1)].record["trial_id"],
                "reason": "error_retry",
                "ordinal": attempt - 1,
            }


def test_trial_ids_follow_the_documented_recipe(imported: Any) -> None:
    raws = raw_samples(LOGS / "refund.eval")
    for (sample, epoch, attempt), trial in by_attempt(imported[1]).items():
        assert trial.record["trial_id"] == expected_id(raws[(sample, epoch)], attempt)


def expected_state(scorer: str, value: Any) -> dict[str, Any]:
    grader, version, values = SCORERS[scorer]
    out: dict[str, Any] = {"grader_id": grader, "grader_version": version}
    if value in values:
        out["state"] = values[value]
    else:
        out["state"] = "grader_invalid"
        out["reason"] = "unscored" if value is None else "unmapped_value"
    return out


def test_each_attempt_has_the_runtime_and_grader_results_the_contract_gives(imported: Any) -> None:
    for (sample, epoch, attempt), trial in by_attempt(imported[1]).items():
        plan = PLAN[sample][epoch]
        record = trial.record
        if attempt <= plan.get("fail_attempts", 0):
            status = "infrastructure_error" if "rate limit" in plan["error"] else "runtime_error"
            assert record["runtime"]["status"] == status, (sample, epoch, attempt)
            assert plan["error"] in record["runtime"]["message"]
            assert record["grader_results"] == []
            continue
        assert record["runtime"] == {"status": "ok"}
        assert record["grader_results"] == [expected_state(s, v) for s, v in plan["scores"].items()]
        # docs/tutorial.md: `after_error_retries`, `unmapped_value:<scorer>`, `unscored:<scorer>`
        labels = ["after_error_retries"] if attempt > 1 else []
        labels += [
            f"{r['reason']}:{s}"
            for s, r in zip(plan["scores"], record["grader_results"], strict=True)
            if "reason" in r
        ]
        assert record["secondary_labels"] == labels, (sample, epoch)


def test_tool_calls_usage_and_provenance(imported: Any) -> None:
    summary, items = imported
    header = raw_header(LOGS / "refund.eval")
    version = header["eval"]["packages"]["inspect_ai"]
    assert summary.producer == f"inspect-ai {version}"
    assert summary.run_id == header["eval"]["run_id"]
    # The digest of what was executed (the sample as the reader returns it): one per
    # sample-epoch, all distinct.
    found = by_attempt(items)
    digests = {
        (s, e): t.record["artifact_manifest"]["artifacts"][0]["digest"]
        for (s, e, a), t in found.items()
        if a == attempts(s, e)
    }
    assert len(set(digests.values())) == len(digests) == len(PLAN) * EPOCHS
    for (sample, epoch, attempt), trial in found.items():
        plan = PLAN[sample][epoch]
        record = trial.record
        if attempt > plan.get("fail_attempts", 0):
            assert record["tool_calls"] == [
                {"tool": TOOLS[name], "args": args, "agent_id": agent}
                for agent, name, args in plan["calls"]
            ]
            assert record["usage"] == {
                "model_calls": AGENT_MODEL_CALLS,
                "input_tokens": USAGE["input_tokens"] + USAGE["cache_read"] + USAGE["cache_write"],
                "output_tokens": USAGE["output_tokens"],
            }
            assert record["artifact_manifest"]["artifacts"] == [
                {"kind": "source_log", "digest": digests[(sample, epoch)],
                 "producer": f"inspect-ai {version}",
                 "location": f"{header['eval']['eval_id']}#{sample}/{epoch}"},
                {"kind": "source_file", "producer": f"inspect-ai {version}",
                 "location": f"refund.eval#{sample}/{epoch}"},
            ]  # fmt: skip
        assert record["target_agent_id"] == "support"
        assert record["run_id"] == header["eval"]["run_id"]
    agents = {
        SAMPLE_TASKS[s]: {a for e in PLAN[s].values() for a, _, _ in e["calls"]} for s in PLAN
    }
    assert summary.agents == agents


# ------------------------------------------------------------------------------ the header


def test_a_log_of_another_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read(LOGS / "refund.eval", resolved(tmp_path, model="openai/gpt"))
    assert (caught.value.field, caught.value.message) == (
        "eval.model",
        "the log evaluated model 'mockllm/model'; execution profile candidate-b124 is "
        "'openai/gpt': map the task to a profile of that model (`evalops new execution ID`, "
        "its model set to the log's, commit and `evalops sync`)",
    )


def test_a_log_of_another_task_version_is_refused(tmp_path: Path) -> None:
    text = MAP_TEXT.replace("task_version: 2 ", "task_version: 3 ")
    assert text != MAP_TEXT
    resolution = resolved(tmp_path, text)
    with pytest.raises(InputError) as caught:
        read(LOGS / "refund.eval", resolution)
    assert (caught.value.field, caught.value.message) == (
        "eval.task_version",
        f"the log's task_version is 2; the map ({resolution.map.path}) requires 3",
    )


def test_a_log_of_an_unmapped_task_is_refused_unless_skipped(tmp_path: Path) -> None:
    text = MAP_TEXT.replace("  refund_agent:", "  other_agent:")
    with pytest.raises(InputError) as caught:
        read(LOGS / "refund.eval", resolved(tmp_path, text))
    assert (caught.value.field, caught.value.message) == (
        "eval.task",
        "Inspect task 'refund_agent' is not in the map (tasks: other_agent); map it, or pass "
        "--skip-unmapped",
    )
    _, items = read(LOGS / "refund.eval", resolved(tmp_path, text), unmapped="skip")
    assert items and all(isinstance(i, Skipped) for i in items)


def test_an_incomplete_eval_is_refused_unless_allowed(tmp_path: Path) -> None:
    """DESIGN 10.1: a log whose eval status is not `success` is refused unless
    `--allow-incomplete`; then samples the harness cancelled are skipped and counted."""
    once = resolved(tmp_path, MAP_TEXT.replace("  refund_agent:", "  refund_agent_once:"))
    with pytest.raises(InputError) as caught:
        read(LOGS / "cancelled.eval", once)
    assert (caught.value.field, caught.value.message) == (
        "status",
        "the eval's status is 'cancelled', not 'success': an incomplete run is refused (pass "
        "--allow-incomplete to import its samples; those the harness cancelled are skipped "
        "and counted)",
    )
    _, items = read(LOGS / "cancelled.eval", once, allow_incomplete=True)
    assert Skipped("cancelled.eval", "A-3/1", "cancelled_by_harness", "A-3") in items


def test_a_file_that_is_no_inspect_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.message == "not an Inspect log: expected a .eval or .json file"


# ------------------------------------------------------------------------------ helpers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (math.nan, None),
        ({"a": math.nan, "b": 1.5, "c": {"d": math.nan}}, {"a": None, "b": 1.5, "c": {"d": None}}),
        (0.25, 0.25),
        ("C", "C"),
        ([math.inf], [math.inf]),
    ],
)
def test_a_nan_score_value_reads_as_no_value(value: Any, expected: Any) -> None:
    """DESIGN 10.1: a NaN score value is `grader_invalid` (no value to map)."""
    assert _finite(value) == expected


@pytest.mark.parametrize(
    ("usage", "expected"),
    [({"input_tokens": 12}, 12), ({"input_tokens": 0}, 0), ({"input_tokens": -3}, 0), ({}, 0),
     ({"input_tokens": "12"}, 0), ({"input_tokens": 1.5}, 0)],
)  # fmt: skip
def test_token_counts_are_positive_whole_numbers_or_none(
    usage: dict[str, Any], expected: int
) -> None:
    assert _tokens(usage, "input_tokens") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T12:00:00+01:00", "2026-11-30T11:00:00.000000Z"),
        ("2026-11-30T12:00:00.5Z", "2026-11-30T12:00:00.500000Z"),
        (None, None),
        ("", None),
        ("yesterday", None),
        ("2026-11-30T12:00:00", None),  # no offset: no time
    ],
)
def test_sample_times_are_rfc3339_with_an_offset_or_none(
    text: str | None, expected: str | None
) -> None:
    assert _timestamp(text) == expected
