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


# ------------------------------------------------------------------- hand-built .json logs

HEADER = raw_header(LOGS / "refund.eval")
"""The refund log's header (a valid one, the refund task, the mock model) for hand-built
logs, whose samples each test writes for the one rule it checks."""
AT = "2026-12-01T10:00:00+00:00"
AT_END = "2026-12-01T10:00:05+00:00"


def sample(sample_id: Any = "A-1", epoch: Any = 1, **fields: Any) -> dict[str, Any]:
    """A completed sample every scorer passed, no events: `fields` replace or add parts."""
    out: dict[str, Any] = {
        "id": sample_id,
        "epoch": epoch,
        "uuid": f"uuid-{sample_id}-{epoch}",
        "scores": {s: {"value": "C"} for s in SCORERS},
        "events": [],
        "model_usage": {},
        "store": {},
        "attachments": {},
        "started_at": AT,
        "completed_at": AT_END,
        "error": None,
        "error_retries": [],
    }
    out.update(fields)
    return out


def json_log(tmp_path: Path, samples: list[Any], reductions: Any = None, **header: Any) -> Path:
    """An Inspect `.json` log: the header's keys, then `samples`, then `reductions`."""
    doc: dict[str, Any] = {**HEADER, **header, "samples": samples}
    if reductions is not None:
        doc["reductions"] = reductions
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def read_json(
    tmp_path: Path, samples: list[Any], *, text: str = MAP_TEXT, **kw: Any
) -> tuple[Any, list[Item]]:
    reductions = kw.pop("reductions", None)
    header = kw.pop("header", {})
    return read(json_log(tmp_path, samples, reductions, **header), resolved(tmp_path, text), **kw)


def only_trial(items: list[Item]) -> dict[str, Any]:
    trials = [i for i in items if isinstance(i, Translated)]
    assert len(trials) == 1, items
    return trials[0].record


def insp(*ids: Any) -> str:
    """docs/importers.md: `insp-` + 16 hex digits of sha256 of the RFC 8785 JSON of the ids."""
    return "insp-" + hashlib.sha256(rfc8785.dumps(list(ids))).hexdigest()[:16]


def digest_of(value: Any) -> str:
    """docs/importers.md: sha256 of the JSON with sorted keys and no whitespace."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def refused(tmp_path: Path, samples: list[Any], **kw: Any) -> tuple[str, str | None]:
    with pytest.raises(InputError) as caught:
        read_json(tmp_path, samples, **kw)
    return caught.value.message, caught.value.field


def test_a_hand_built_sample_is_one_trial_as_the_contract_words_it(tmp_path: Path) -> None:
    raw = sample()
    summary, items = read_json(tmp_path, [raw])
    record = only_trial(items)
    eval_id, run_id = HEADER["eval"]["eval_id"], HEADER["eval"]["run_id"]
    # The id earlier evalops gave it is kept as an alias.
    legacy = insp(eval_id, "A-1", 1, 1)
    assert items == [
        Translated("log.json", "A-1/1", "support-refund-in-order", record, "A-1", (legacy,))
    ]
    producer = f"inspect-ai {HEADER['eval']['packages']['inspect_ai']}"
    lean = {k: v for k, v in raw.items() if k not in ("events", "events_data")}
    assert record["trial_id"] == insp("uuid-A-1-1", 1)
    assert record["run_id"] == run_id
    assert record["attempt_id"] == f"{eval_id}/A-1/1/1"
    assert record["trial_index"] == 0
    assert (record["started_at"], record["completed_at"]) == (
        "2026-12-01T10:00:00.000000Z",
        "2026-12-01T10:00:05.000000Z",
    )
    assert record["target_agent_id"] == "support"
    assert record["grader_results"] == [expected_state(s, "C") for s in SCORERS]
    assert record["runtime"] == {"status": "ok"}
    assert record["tool_calls"] == []
    assert record["usage"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}
    assert record["artifact_manifest"] == {
        "artifacts": [
            {"kind": "source_log", "digest": digest_of(lean), "producer": producer,
             "location": f"{eval_id}#A-1/1"},
            {"kind": "source_file", "producer": producer, "location": "log.json#A-1/1"},
        ]
    }  # fmt: skip
    assert record["secondary_labels"] == []
    assert "rerun" not in record
    assert (summary.producer, summary.run_id) == (producer, run_id)


def test_a_json_log_reads_as_the_eval_log_it_was_converted_from(tmp_path: Path) -> None:
    """One execution has one trial whichever format carries it: the refund log written as
    a `.json` log (its header's keys, its samples, its reductions) gives the same records,
    the same summary, and only the file it was read from differs."""
    with zipfile.ZipFile(LOGS / "refund.eval") as archive:
        members = [n for n in archive.namelist() if n.startswith("samples/")]
        samples = [json.loads(archive.read(n)) for n in members]
        reductions = json.loads(archive.read("reductions.json"))
    path = tmp_path / "refund.json"
    path.write_text(
        json.dumps({**HEADER, "samples": samples, "reductions": reductions}), encoding="utf-8"
    )
    from_eval, eval_items = read(LOGS / "refund.eval", resolved(tmp_path))
    from_json, json_items = read(path, resolved(tmp_path))
    assert len(json_items) == len(eval_items) > 0
    for a, b in zip(eval_items, json_items, strict=True):
        assert isinstance(a, Translated) and isinstance(b, Translated)
        assert b.file == "refund.json"
        assert (b.label, b.task_id, b.sample, b.aliases) == (
            a.label,
            a.task_id,
            a.sample,
            a.aliases,
        )
        artifacts = b.record["artifact_manifest"]["artifacts"]
        assert artifacts[-1]["location"] == artifacts[-1]["location"].replace(
            "refund.json#", "refund.json#"
        )
        assert artifacts[-1]["location"].startswith("refund.json#")
        artifacts[-1]["location"] = artifacts[-1]["location"].replace(
            "refund.json#", "refund.eval#"
        )
        assert b.record == a.record
    assert from_json.reductions == from_eval.reductions != {}
    assert (from_json.agents, from_json.run_id) == (from_eval.agents, from_eval.run_id)


def test_the_source_s_own_reductions_are_kept_by_task_and_scorer(tmp_path: Path) -> None:
    """The reductions Inspect wrote, per evalops task, scorer and reducer (NaN: no value),
    for the dry run's comparison; samples the map does not name are left out."""
    reductions = [
        {"scorer": "refund_check", "reducer": "mean",
         "samples": [{"sample_id": "A-1", "value": 0.6}, {"sample_id": "Z-9", "value": 1.0},
                     {"sample_id": "A-2", "value": math.nan}, "junk"]},
        {"scorer": "refund_check", "reducer": "pass_at_3",
         "samples": [{"sample_id": "A-1", "value": 1.0}]},
        {"scorer": "ticket_check", "samples": [{"sample_id": "A-1", "value": {"x": 0.5}}]},
        {"reducer": "mean", "samples": [{"sample_id": "A-1", "value": 0.1}]},  # no scorer
        "junk",
    ]  # fmt: skip
    summary, _ = read_json(tmp_path, [sample()], reductions=reductions)
    assert summary.reductions == {
        "support-refund-in-order": {
            "refund_check": {"mean": 0.6, "pass_at_3": 1.0},
            "ticket_check": {"mean": {"x": 0.5}},  # no reducer named: Inspect's default, mean
        },
        "support-refund-policy-explanation": {"refund_check": {"mean": None}},
    }


def test_a_truncated_json_log_names_the_last_complete_sample(tmp_path: Path) -> None:
    text = json_log(tmp_path, [sample("A-1"), sample("A-2")]).read_text(encoding="utf-8")
    cut = text.index('"id": "A-2"')
    (tmp_path / "log.json").write_text(text[:cut], encoding="utf-8")
    with pytest.raises(InputError) as caught:
        list(
            read_inspect(tmp_path / "log.json", "log.json", resolved(tmp_path), unmapped="error")[1]
        )
    assert caught.value.message.startswith(
        "cannot read the JSON log after sample A-1/1, the last complete one: "
    )
    assert caught.value.field == "A-1/1"
    # Cut inside the header: nothing was read.
    (tmp_path / "log.json").write_text(text[:20], encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(tmp_path / "log.json", resolved(tmp_path))
    assert caught.value.message.startswith("cannot read the JSON log: ")
    assert caught.value.field is None


def test_a_json_log_s_sample_that_is_no_object_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, [[1]]) == ("a sample is not a JSON object", "samples")


def test_promptfoo_output_and_an_invalid_header_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"evalId": "e", "results": {"results": []}}), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.message == (
        "this is promptfoo output, not an Inspect AI log (`evalops trials import promptfoo`)"
    )
    bad = {**HEADER, "eval": {**HEADER["eval"], "model": 7}}
    path.write_text(json.dumps({**bad, "samples": []}), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.message.startswith("not a valid Inspect log header: ")
    assert caught.value.field == "eval.model"


def test_an_eval_log_whose_header_is_no_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.eval"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("header.json", "[1]")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert (caught.value.message, caught.value.file) == (
        "the log header is not a JSON object",
        "bad.eval",
    )


@pytest.mark.parametrize(
    ("fields", "message", "field"),
    [
        ({"id": None}, "a sample has no id", "None/1: id"),
        ({"id": True}, "a sample has no id", "True/1: id"),
        ({"epoch": None}, "a sample has no epoch (a whole number from 1)", "A-1/None: epoch"),
        ({"epoch": 0}, "a sample has no epoch (a whole number from 1)", "A-1/0: epoch"),
        ({"epoch": True}, "a sample has no epoch (a whole number from 1)", "A-1/True: epoch"),
        ({"epoch": "1"}, "a sample has no epoch (a whole number from 1)", "A-1/1: epoch"),
    ],
)
def test_a_sample_without_an_id_or_an_epoch_is_refused(
    tmp_path: Path, fields: dict[str, Any], message: str, field: str
) -> None:
    assert refused(tmp_path, [sample(**fields)]) == (message, field)


def test_invalidated_and_unmapped_samples_are_skipped_or_refused(tmp_path: Path) -> None:
    _, items = read_json(
        tmp_path,
        [sample(invalidation={"author": "x"}), sample("Z-9"), sample("A-2")],
        unmapped="skip",
    )
    assert items[:2] == [
        Skipped("log.json", "A-1/1", "invalidated", "A-1"),
        Skipped("log.json", "Z-9/1", "unmapped_sample", "Z-9"),
    ]
    assert (
        isinstance(items[2], Translated) and items[2].task_id == "support-refund-policy-explanation"
    )
    assert refused(tmp_path, [sample("Z-9")]) == (
        "sample Z-9 of task refund_agent is not in the map (map it, or pass --skip-unmapped)",
        "Z-9/1: id",
    )
    other = MAP_TEXT.replace("  refund_agent:", "  other_agent:")
    _, items = read_json(tmp_path, [sample()], text=other, unmapped="skip")
    assert items == [Skipped("log.json", "A-1/1", "unmapped_task", "refund_agent")]


def test_one_task_receives_one_sample_of_a_log_in_every_epoch(tmp_path: Path) -> None:
    """Map keys are text: the sample ids 1 and "1" are one key but two samples, and a task
    receives at most one sample per log (each of its epochs)."""
    text = MAP_TEXT.replace("A-1: support-refund-in-order", '"1": support-refund-in-order')
    _, items = read_json(tmp_path, [sample(1, 1), sample(1, 2)], text=text)
    assert [i.label for i in items] == ["1/1", "1/2"]
    assert refused(tmp_path, [sample(1, 1), sample("1", 2)], text=text) == (
        "samples 1 and '1' both map to task support-refund-in-order (one task receives at "
        "most one sample per log)",
        "1/2: id",
    )


def test_a_log_without_a_run_id_is_its_eval_and_without_a_version_its_producer_plain(
    tmp_path: Path,
) -> None:
    eval_id = HEADER["eval"]["eval_id"]
    header = {"eval": {**HEADER["eval"], "run_id": "", "packages": {}}}
    summary, items = read_json(tmp_path, [sample()], header=header)
    record = only_trial(items)
    assert (summary.run_id, record["run_id"]) == (eval_id, eval_id)
    assert summary.producer == "inspect-ai"
    assert record["artifact_manifest"]["artifacts"][0]["producer"] == "inspect-ai"
    # A sample without a uuid: [eval_id, sample id, epoch, attempt], as before uuids.
    _, items = read_json(tmp_path, [sample(uuid=None)])
    assert only_trial(items)["trial_id"] == insp(eval_id, "A-1", 1, 1)


def test_a_map_without_a_task_version_takes_any(tmp_path: Path) -> None:
    text = MAP_TEXT.replace("task_version: 2 ", "")
    assert text != MAP_TEXT
    _, items = read_json(
        tmp_path, [sample()], text=text, header={"eval": {**HEADER["eval"], "task_version": 9}}
    )
    assert only_trial(items)["runtime"] == {"status": "ok"}
