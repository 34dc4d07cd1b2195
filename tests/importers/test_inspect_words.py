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
import os
import shutil
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
from evalops.importers.inspect import _finite, _timestamp, _tokens, inspect_api, read_inspect
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
    assert caught.value.file == "refund.eval"
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
    assert caught.value.file == "refund.eval"
    assert (caught.value.field, caught.value.message) == (
        "eval.task_version",
        f"the log's task_version is 2; the map ({resolution.map.path}) requires 3",
    )


def test_a_log_of_an_unmapped_task_is_refused_unless_skipped(tmp_path: Path) -> None:
    text = MAP_TEXT.replace("  refund_agent:", "  other_agent:")
    with pytest.raises(InputError) as caught:
        read(LOGS / "refund.eval", resolved(tmp_path, text))
    assert caught.value.file == "refund.eval"
    assert (caught.value.field, caught.value.message) == (
        "eval.task",
        "Inspect task 'refund_agent' is not in the map (tasks: other_agent); map it, or pass "
        "--skip-unmapped",
    )
    _, items = read(LOGS / "refund.eval", resolved(tmp_path, text), unmapped="skip")
    assert items and all(isinstance(i, Skipped) for i in items)


def _open_on(path: Path) -> int:
    """How many of this process's file descriptors are open on `path` (Linux's /proc)."""
    fds = Path("/proc/self/fd")
    target = str(path.resolve())
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd) == target
        except OSError:
            continue  # the descriptor listing the directory itself, closed meanwhile
    return count


@pytest.mark.parametrize("kind", [".eval", ".json"])
def test_a_log_refused_by_its_header_is_closed(tmp_path: Path, kind: str) -> None:
    """A header the map refuses is refused before any sample is read, and the log's file is
    closed then, not left to the garbage collector (an import of many logs would hold one
    descriptor per refused log)."""
    if kind == ".eval":
        path = tmp_path / "refund.eval"
        shutil.copyfile(LOGS / "refund.eval", path)
    else:
        path = json_log(tmp_path, [sample()])
    wrong_model = resolved(tmp_path, model="openai/gpt")
    with pytest.raises(InputError):
        read_inspect(path, path.name, wrong_model, unmapped="error")
    assert _open_on(path) == 0


def test_an_incomplete_eval_is_refused_unless_allowed(tmp_path: Path) -> None:
    """DESIGN 10.1: a log whose eval status is not `success` is refused unless
    `--allow-incomplete`; then samples the harness cancelled are skipped and counted."""
    once = resolved(tmp_path, MAP_TEXT.replace("  refund_agent:", "  refund_agent_once:"))
    with pytest.raises(InputError) as caught:
        read(LOGS / "cancelled.eval", once)
    assert caught.value.file == "cancelled.eval"
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
    assert caught.value.file == "log.json"  # every error names the file
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
        "junk",
        {"scorer": "refund_check", "reducer": "mean",
         "samples": ["junk", {"sample_id": "A-1", "value": 0.6}, {"sample_id": "Z-9", "value": 1.0},
                     {"sample_id": "A-2", "value": math.nan}]},
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
    # Cut inside the first sample: none complete, none named.
    (tmp_path / "log.json").write_text(text[: text.index('"id": "A-1"')], encoding="utf-8")
    with pytest.raises(InputError) as caught:
        list(read(tmp_path / "log.json", resolved(tmp_path))[1])
    assert caught.value.message.startswith("cannot read the JSON log: ")
    assert caught.value.field is None
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
    assert items[0].aliases == ()  # type: ignore[union-attr]  # that id is its own
    # So with a retry, each attempt by its number; a uuid that is no text is none.
    for uuid in (None, "", 7):
        raw = sample(uuid=uuid, error_retries=[retry("RuntimeError('x')", [])])
        _, items = read_json(tmp_path, [raw])
        assert [i.record["trial_id"] for i in items] == [  # type: ignore[union-attr]
            insp(eval_id, "A-1", 1, 1),
            insp(eval_id, "A-1", 1, 2),
        ], uuid
        assert [i.aliases for i in items] == [(), ()]  # type: ignore[union-attr]


def test_a_map_without_a_task_version_takes_any(tmp_path: Path) -> None:
    text = MAP_TEXT.replace("task_version: 2 ", "")
    assert text != MAP_TEXT
    _, items = read_json(
        tmp_path, [sample()], text=text, header={"eval": {**HEADER["eval"], "task_version": 9}}
    )
    assert only_trial(items)["runtime"] == {"status": "ok"}


def test_tool_calls_and_usage_from_the_events(tmp_path: Path) -> None:
    """Tool calls from the ToolEvents outside the scorers, renamed through `tools`, each
    with the agent of the nearest enclosing agent span (outside any, the target agent),
    arguments with Inspect's attachments put back; usage from the model events outside the
    scorers, input tokens with cache reads and writes (docs/importers.md, "How records are
    built")."""
    events: list[Any] = [
        {"event": "span_begin", "id": "s1", "parent_id": None, "type": "agent",
         "name": "researcher"},
        {"event": "tool", "function": "kb_search", "span_id": "s1",
         "arguments": {"q": "attachment://a1", "more": ["attachment://a1", 3],
                       "gone": "attachment://zz", "n": {"deep": "attachment://a1"}}},
        {"event": "span_begin", "id": "s2", "parent_id": "s1", "type": "solver", "name": "x"},
        {"event": "tool", "function": "not_in_the_map", "arguments": {}, "span_id": "s2"},
        {"event": "tool", "function": "refund", "arguments": {"orderId": "A-1"},
         "span_id": "nowhere"},
        {"event": "model", "span_id": "s2",
         "output": {"usage": {"input_tokens": 10, "input_tokens_cache_read": 3,
                              "input_tokens_cache_write": 2, "output_tokens": 4}}},
        {"event": "span_begin", "id": "sc", "parent_id": None, "type": "scorers",
         "name": "scorers"},
        {"event": "span_begin", "id": "sc2", "parent_id": "sc", "type": "scorer",
         "name": "reply_judge"},
        {"event": "span_begin", "id": "sc3", "parent_id": "sc2", "type": "agent",
         "name": "judge"},
        {"event": "model", "span_id": "sc3",
         "output": {"usage": {"input_tokens": 1000, "output_tokens": 1000}}},
        # The judge checks the ledger by calling the agent's own tool: the grader's step.
        {"event": "tool", "function": "refund", "arguments": {"orderId": "A-1", "amount": 42},
         "span_id": "sc3"},
        {"event": "tool", "function": "refund", "arguments": {"orderId": "A-9"},
         "span_id": "sc2"},
        {"event": "model", "span_id": None, "output": {"usage": {"input_tokens": 5,
                                                                  "output_tokens": 1}}},
        {"event": "model", "output": "no usage"},
        "not an event",
        {"event": "span_begin", "id": "s3", "parent_id": None, "type": "agent", "name": ""},
        {"event": "tool", "function": "reply", "arguments": {}, "span_id": "s3"},
        {"event": "span_begin", "id": "s4", "parent_id": "s1", "type": "agent",
         "name": "writer"},
        {"event": "tool", "function": "reply", "arguments": {"to": "c"}, "span_id": "s4"},
    ]  # fmt: skip
    summary, items = read_json(
        tmp_path, [sample(events=events, attachments={"a1": "the long text"})]
    )
    record = only_trial(items)
    assert record["tool_calls"] == [
        {"tool": "kb:search", "agent_id": "researcher",
         "args": {"q": "the long text", "more": ["the long text", 3], "gone": "attachment://zz",
                  "n": {"deep": "the long text"}}},
        {"tool": "not_in_the_map", "args": {}, "agent_id": "researcher"},
        {"tool": "billing:refund", "args": {"orderId": "A-1"}, "agent_id": "support"},
        {"tool": "helpdesk:reply", "args": {}, "agent_id": "support"},
        {"tool": "helpdesk:reply", "args": {"to": "c"}, "agent_id": "writer"},
    ]  # fmt: skip
    assert record["usage"] == {"model_calls": 3, "input_tokens": 20, "output_tokens": 5}
    assert summary.agents == {"support-refund-in-order": {"researcher", "support", "writer"}}
    # Without a target agent, a call outside any agent span has none, listed as "-".
    text = MAP_TEXT.replace("target_agent_id: support", "")
    summary, items = read_json(tmp_path, [sample(events=events[:5])], text=text)
    record = only_trial(items)
    assert "target_agent_id" not in record
    assert record["tool_calls"][2] == {"tool": "billing:refund", "args": {"orderId": "A-1"}}
    assert summary.agents == {"support-refund-in-order": {"researcher", "-"}}


@pytest.mark.parametrize(
    "event",
    [
        {"event": "tool", "arguments": {}},
        {"event": "tool", "function": "reply", "arguments": "x"},
        {"event": "tool", "function": 3, "arguments": {}},
    ],
)
def test_a_tool_event_without_a_function_or_arguments_is_refused(
    tmp_path: Path, event: dict[str, Any]
) -> None:
    assert refused(tmp_path, [sample(events=[event])]) == (
        "a tool event has no function name or arguments",
        "A-1/1: events",
    )


def retry(message: str, events: list[Any]) -> dict[str, Any]:
    return {"message": message, "traceback": "tb", "traceback_ansi": "tb", "events": events}


def test_each_error_retry_is_a_failed_attempt_and_its_own_trial(tmp_path: Path) -> None:
    """docs/importers.md: each of `error_retries` is a trial, a rerun (`error_retry`) of the
    attempt before it; a failed attempt is named by the uuid of its first event (else the
    sample's uuid and its attempt), timed by its events (else the sample's start, labelled
    `timestamps_synthesized`), its runtime from its error, its provenance digest of its
    error without the events."""
    first = retry(
        "RuntimeError('rate limit exceeded (429)')\nsecond line",
        [
            {"uuid": "ev-1", "event": "span_begin", "id": "s1", "parent_id": None,
             "type": "agent", "name": "researcher", "timestamp": "2026-12-01T09:00:00+00:00"},
            {"uuid": "ev-2", "event": "tool", "function": "kb_search",
             "arguments": {"q": "attachment://a1"},
             "span_id": "s1", "timestamp": "2026-12-01T09:00:02+01:00"},
            {"uuid": "ev-3", "event": "model", "span_id": "s1", "timestamp": "bad",
             "output": {"usage": {"input_tokens": 7, "output_tokens": 2}}},
            {"uuid": "ev-4", "event": "model", "span_id": "s1",
             "timestamp": "2026-12-01T09:00:03+00:00"},
        ],
    )  # fmt: skip
    first["events_data"] = {"pooled": 1}  # a .eval's pooled transcript: not the execution
    second = retry("RuntimeError('segfault')", [{"event": "model", "uuid": ""}])
    raw = sample(error_retries=[first, second], events_data={"x": 1}, attachments={"a1": "x"})
    _, items = read_json(tmp_path, [raw])
    eval_id = HEADER["eval"]["eval_id"]
    producer = f"inspect-ai {HEADER['eval']['packages']['inspect_ai']}"
    assert [i.label for i in items] == ["A-1/1#1", "A-1/1#2", "A-1/1"]  # type: ignore[union-attr]
    assert [i.sample for i in items] == ["A-1"] * 3  # type: ignore[union-attr]
    one, two, final = (i.record for i in items)  # type: ignore[union-attr]
    ids = [insp("ev-1"), insp("uuid-A-1-1", 2), insp("uuid-A-1-1", 3)]
    assert [one["trial_id"], two["trial_id"], final["trial_id"]] == ids
    assert [i.aliases for i in items] == [  # type: ignore[union-attr]
        (insp(eval_id, "A-1", 1, a),) for a in (1, 2, 3)
    ]
    assert [r["attempt_id"] for r in (one, two, final)] == [
        f"{eval_id}/A-1/1/{a}" for a in (1, 2, 3)
    ]
    assert "rerun" not in one
    assert two["rerun"] == {"parent_trial_id": ids[0], "reason": "error_retry", "ordinal": 1}
    assert final["rerun"] == {"parent_trial_id": ids[1], "reason": "error_retry", "ordinal": 2}
    # The first attempt's events run from 09:00:00 to 09:00:03 (the last stamp read).
    assert (one["started_at"], one["completed_at"]) == (
        "2026-12-01T09:00:00.000000Z",
        "2026-12-01T09:00:03.000000Z",
    )
    assert one["runtime"] == {
        "status": "infrastructure_error",
        "message": "RuntimeError('rate limit exceeded (429)')",
    }
    assert one["grader_results"] == []
    assert one["tool_calls"] == [
        {"tool": "kb:search", "args": {"q": "x"}, "agent_id": "researcher"}
    ]
    assert one["usage"] == {"model_calls": 2, "input_tokens": 7, "output_tokens": 2}
    assert one["secondary_labels"] == []
    lean = {k: v for k, v in first.items() if k not in ("events", "events_data")}
    assert one["artifact_manifest"]["artifacts"] == [
        {"kind": "source_log", "digest": digest_of(lean), "producer": producer,
         "location": f"{eval_id}#A-1/1"},
        {"kind": "source_file", "producer": producer, "location": "log.json#A-1/1"},
    ]  # fmt: skip
    # The second has no time of its own: the sample's start, said so.
    assert (two["started_at"], two["completed_at"]) == ("2026-12-01T10:00:00.000000Z",) * 2
    assert two["secondary_labels"] == ["timestamps_synthesized"]
    assert two["runtime"] == {"status": "runtime_error", "message": "RuntimeError('segfault')"}
    assert two["usage"] == {"model_calls": 1, "input_tokens": 0, "output_tokens": 0}
    # The final attempt completed: named by the sample's uuid, after the retries.
    assert final["runtime"] == {"status": "ok"}
    assert final["secondary_labels"] == ["after_error_retries"]
    assert final["grader_results"] == [expected_state(s, "C") for s in SCORERS]
    # The final attempt's digest: the sample without its transcript's storage, its retries
    # without theirs.
    executed = {k: v for k, v in raw.items() if k not in ("events", "events_data")}
    executed["error_retries"] = [
        {k: v for k, v in r.items() if k not in ("events", "events_data")}
        for r in raw["error_retries"]
    ]
    assert final["artifact_manifest"]["artifacts"][0]["digest"] == digest_of(executed)
    # A retry whose events are not a list has none: named by the sample's uuid.
    for junk in ("junk", {"uuid": "ev-1"}):
        odd = retry("RuntimeError('x')", [])
        odd["events"] = junk
        _, items = read_json(tmp_path, [sample(error_retries=[odd])])
        assert items[0].record["trial_id"] == insp("uuid-A-1-1", 1)  # type: ignore[union-attr]
    # A retry's tool event is checked as the final attempt's are.
    bad = retry("RuntimeError('x')", [{"event": "tool", "arguments": {}}])
    assert refused(tmp_path, [sample(error_retries=[bad])]) == (
        "a tool event has no function name or arguments",
        "A-1/1: events",
    )
    # The labels of the last attempt after retries: `after_error_retries` first.
    scores = {**sample()["scores"], "refund_check": {"value": "X"}}
    _, items = read_json(tmp_path, [sample(scores=scores, error_retries=[second])])
    assert items[-1].record["secondary_labels"] == [  # type: ignore[union-attr]
        "after_error_retries",
        "unmapped_value:refund_check",
    ]


def test_a_sample_that_failed_is_named_and_timed_by_its_own_events(tmp_path: Path) -> None:
    error = {"message": "worker lost", "traceback": "tb", "traceback_ansi": "tb"}
    events = [
        {"uuid": "ev-9", "event": "model", "timestamp": "2026-12-01T11:00:00+00:00"},
        {"uuid": "ev-10", "event": "model", "timestamp": "2026-12-01T11:00:09+00:00"},
    ]
    raw = sample(error=error, events=events, started_at=None)
    record = only_trial(read_json(tmp_path, [raw])[1])
    assert record["trial_id"] == insp("ev-9")
    assert (record["started_at"], record["completed_at"]) == (
        "2026-12-01T11:00:00.000000Z",
        "2026-12-01T11:00:09.000000Z",
    )
    assert record["secondary_labels"] == []  # its events give the time: nothing synthesized
    assert record["runtime"] == {"status": "runtime_error", "message": "worker lost"}
    assert record["artifact_manifest"]["artifacts"][0]["digest"] == digest_of(error)
    # Without events: the sample's uuid and attempt, and the sample's own times.
    record = only_trial(read_json(tmp_path, [sample(error=error)])[1])
    assert record["trial_id"] == insp("uuid-A-1-1", 1)
    assert (record["started_at"], record["completed_at"]) == (
        "2026-12-01T10:00:00.000000Z",
        "2026-12-01T10:00:05.000000Z",
    )
    # Events with one time: it is the start and the end.
    one = [{"uuid": "ev-9", "event": "model", "timestamp": "2026-12-01T11:00:00+00:00"},
           {"uuid": "ev-10", "event": "model", "timestamp": "never"}]  # fmt: skip
    record = only_trial(read_json(tmp_path, [sample(error=error, events=one)])[1])
    assert (record["started_at"], record["completed_at"]) == ("2026-12-01T11:00:00.000000Z",) * 2


def test_sample_times_missing_or_reversed_are_synthesized_and_said_so(tmp_path: Path) -> None:
    created = "2026-12-06T09:03:46.000000Z"  # the header's eval.created
    cases = [
        (
            {"started_at": None, "completed_at": "2026-12-07T00:00:00+00:00"},
            (created, "2026-12-07T00:00:00.000000Z"),
        ),
        ({"started_at": None}, (created, created)),  # its end is before the eval's creation
        ({"started_at": None, "completed_at": None}, (created, created)),
        ({"completed_at": "2026-12-01T09:59:59+00:00"}, ("2026-12-01T10:00:00.000000Z",) * 2),
        ({"completed_at": "garbled"}, ("2026-12-01T10:00:00.000000Z",) * 2),
    ]
    record = only_trial(read_json(tmp_path, [sample(completed_at=AT)])[1])
    assert (record["started_at"], record["completed_at"]) == ("2026-12-01T10:00:00.000000Z",) * 2
    assert record["secondary_labels"] == []  # an instant, as recorded: nothing synthesized
    for fields, times in cases:
        record = only_trial(read_json(tmp_path, [sample(**fields)])[1])
        assert (record["started_at"], record["completed_at"]) == times, fields
        assert record["secondary_labels"] == ["timestamps_synthesized"], fields


def test_scores_through_the_map(tmp_path: Path) -> None:
    """An unmapped scorer is an error, or skipped and counted; a value the map does not
    list, or NaN, is grader_invalid for a blocking grader and labelled; an edited score is
    labelled `edited_score`."""
    edit = {"value": "C", "provenance": {"timestamp": AT, "author": "ann", "reason": "x"}}
    scores = {
        "refund_check": {"value": "X"},
        "ticket_check": {"value": math.nan},
        "reply_judge": {"value": "C", "history": [{"value": "I"}, edit]},
        "effect_guard": {"value": "C", "history": [{"value": "C"}]},
    }
    record = only_trial(read_json(tmp_path, [sample(scores=scores)])[1])
    assert record["grader_results"] == [
        expected_state("refund_check", "X"),
        expected_state("ticket_check", None),
        expected_state("reply_judge", "C"),
        expected_state("effect_guard", "C"),
    ]
    assert record["secondary_labels"] == [
        "unmapped_value:refund_check",
        "unscored:ticket_check",
        "edited_score",
    ]
    extra = {"style": {"value": "C"}, **sample()["scores"]}  # the unmapped one first
    assert refused(tmp_path, [sample(scores=extra)]) == (
        "scorer 'style' is not in the map for task refund_agent (map it, or pass --skip-unmapped)",
        "A-1/1: scores.style",
    )
    _, items = read_json(tmp_path, [sample(scores=extra)], unmapped="skip")
    assert items[0] == Skipped("log.json", "A-1/1", "unmapped_scorer", "style")
    assert isinstance(items[1], Translated) and len(items) == 2
    assert items[1].record["grader_results"] == [expected_state(s, "C") for s in SCORERS]
    # A history of edits without provenance (Inspect's own) is no edit; a number in [0, 1]
    # is also the result's score (docs/importers.md).
    scores = {**sample()["scores"], "refund_check": {"value": 0.5, "history": [{"value": 1}]}}
    record = only_trial(read_json(tmp_path, [sample(scores=scores)])[1])
    assert record["grader_results"][0] == {**expected_state("refund_check", 0.5), "score": 0.5}
    assert record["secondary_labels"] == ["unmapped_value:refund_check"]


def test_a_non_blocking_grader_s_unmapped_value_only_adds_a_label(tmp_path: Path) -> None:
    resolution = resolved(tmp_path)
    tasks = {
        t: ResolvedTask(t, f"sha256:task-{t}", f"sha256:graders-{t}", BLOCKING[:3], 3)
        for t in SAMPLE_TASKS.values()
    }
    resolution = Resolved(resolution.map, tasks, resolution.executions)
    scores = {**sample()["scores"], "effect_guard": {"value": "X"}}
    path = json_log(tmp_path, [sample(scores=scores)])
    record = only_trial(read(path, resolution)[1])
    assert [r["grader_id"] for r in record["grader_results"]] == [
        "refund-outcome", "ticket-outcome", "reply-quality"
    ]  # fmt: skip
    assert record["secondary_labels"] == ["diagnostic:refund-effect-guard:unmapped"]


def test_a_stopped_sample_gets_its_limit_s_status_and_an_unmapped_limit_is_refused(
    tmp_path: Path,
) -> None:
    limit = {"type": "time", "limit": 60}
    record = only_trial(read_json(tmp_path, [sample(limit=limit)])[1])
    assert record["runtime"] == {"status": "timeout", "message": "time limit reached"}
    text = MAP_TEXT.replace("    time: timeout\n", "")
    assert text != MAP_TEXT
    assert refused(tmp_path, [sample(limit=limit)], text=text) == (
        "sample A-1 was stopped by the time limit, which the map's runtime.limits does not "
        "list (every stop is mapped: add time: <status>)",
        "A-1/1: limit.type",
    )
    # An error wins over a limit: the sample ended by its error.
    error = {"message": "Connection reset", "traceback": "", "traceback_ansi": ""}
    record = only_trial(read_json(tmp_path, [sample(limit=limit, error=error)])[1])
    assert record["runtime"] == {"status": "infrastructure_error", "message": "Connection reset"}


def test_without_model_events_usage_is_the_sample_s_totals_and_says_so(tmp_path: Path) -> None:
    usage = {
        "mockllm/model": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
                          "input_tokens_cache_read": 30, "input_tokens_cache_write": 5},
        "judge/model": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10},
    }  # fmt: skip
    record = only_trial(read_json(tmp_path, [sample(model_usage=usage)])[1])
    assert record["usage"] == {"model_calls": 0, "input_tokens": 142, "output_tokens": 23}
    assert record["secondary_labels"] == ["usage_includes_scorers"]
    # With model events, they are the usage, the totals unread.
    events = [{"event": "model", "output": {"usage": {"input_tokens": 1, "output_tokens": 1}}}]
    record = only_trial(read_json(tmp_path, [sample(model_usage=usage, events=events)])[1])
    assert record["usage"] == {"model_calls": 1, "input_tokens": 1, "output_tokens": 1}
    assert record["secondary_labels"] == []


def test_the_store_s_effects_misses_and_artifacts(tmp_path: Path) -> None:
    artifact = {"kind": "screenshot", "digest": "sha256:" + "0" * 64}
    store = {
        "evalops:external_effects": [{"effect": "refund"}],
        "evalops:fixture_misses": 2,
        "evalops:artifacts": [artifact],
        "other": 1,
    }
    record = only_trial(read_json(tmp_path, [sample(store=store)])[1])
    assert record["external_effects"] == [{"effect": "refund"}]
    assert record["fixture_misses"] == 2
    assert record["artifact_manifest"]["artifacts"][0] == artifact
    assert len(record["artifact_manifest"]["artifacts"]) == 3
    record = only_trial(read_json(tmp_path, [sample()])[1])
    assert "external_effects" not in record and "fixture_misses" not in record
    bad = {"evalops:artifacts": {"kind": "x"}}
    assert refused(tmp_path, [sample(store=bad)]) == (
        "must be a list of artifacts",
        "A-1/1: store.evalops:artifacts",
    )


def test_a_sample_is_validated_by_the_parts_an_import_reads(tmp_path: Path) -> None:
    message, field = refused(tmp_path, [sample(model_usage={"m": "x"})])
    assert message.startswith("not a valid Inspect sample: ")
    assert field == "A-1/1: model_usage.m"
    message, field = refused(tmp_path, [sample(error_retries=[{"message": 3, "events": []}])])
    assert message.startswith("not a valid Inspect sample: ")
    assert field == "A-1/1: error_retries.0.message"
    # What an import never reads is not validated: messages, output, events.
    raw = sample(messages="junk", output=3, events=[1, "x"], events_data=7)
    assert only_trial(read_json(tmp_path, [raw])[1])["runtime"] == {"status": "ok"}


def eval_log(tmp_path: Path, members: dict[str, Any], drop: tuple[str, ...] = ()) -> Path:
    """The refund log with members replaced (bytes, or JSON values) or dropped."""
    path = tmp_path / "changed.eval"
    with zipfile.ZipFile(LOGS / "refund.eval") as source, zipfile.ZipFile(path, "w") as out:
        for name in source.namelist():
            if name in drop or name in members:
                continue
            out.writestr(name, source.read(name))
        for name, value in members.items():
            out.writestr(name, value if isinstance(value, bytes) else json.dumps(value))
    return path


def eval_refused(tmp_path: Path, path: Path, **kw: Any) -> tuple[str, str | None, str]:
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path), **kw)
    return caught.value.message, caught.value.field, caught.value.file


def test_a_damaged_eval_log_is_refused_naming_the_member(tmp_path: Path) -> None:
    path = tmp_path / "not.eval"
    path.write_bytes(b"not a zip archive")
    message, field, file = eval_refused(tmp_path, path)
    assert message.startswith("cannot open the .eval log (a zip archive): ")
    assert (field, file) == (None, "not.eval")
    name = "samples/A-1_epoch_1.json"
    path = eval_log(tmp_path, {name: b'{"id": "A-1", '})
    message, field, file = eval_refused(tmp_path, path)
    assert message.startswith(f"{name} in the .eval log is not valid JSON: ")
    assert (field, file) == (name, "changed.eval")
    path = eval_log(tmp_path, {name: [1, 2]})
    assert eval_refused(tmp_path, path) == (f"{name} is not a JSON object", name, "changed.eval")
    path = eval_log(tmp_path, {"header.json": b'{"a": 1, "a": 2}'})
    message, field, _ = eval_refused(tmp_path, path)
    assert message.startswith("header.json in the .eval log is not valid JSON: ")
    assert field == "header.json"


def test_an_eval_log_member_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    name = "samples/A-1_epoch_1.json"
    path = eval_log(tmp_path, {})
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    data = bytearray(path.read_bytes())
    name_len = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_len = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_len + extra_len + 3] ^= 0x5A
    path.write_bytes(bytes(data))
    message, field, _ = eval_refused(tmp_path, path)
    assert message.startswith(f"cannot read {name} from the .eval log: ")
    assert field == name


def test_an_eval_log_s_reductions_and_sample_members(tmp_path: Path) -> None:
    """Only `samples/*.json` members are samples; reductions that are not a list are none."""
    path = eval_log(tmp_path, {"reductions.json": 5, "samples/notes.txt": b"x"})
    summary, items = read(path, resolved(tmp_path))
    assert summary.reductions == {}
    _, expected = read(LOGS / "refund.eval", resolved(tmp_path))
    assert len(items) == len(expected)
    summary, _ = read(eval_log(tmp_path, {}, drop=("reductions.json",)), resolved(tmp_path))
    assert summary.reductions == {}


def test_an_eval_log_still_being_written_reads_its_header_from_the_journal(
    tmp_path: Path,
) -> None:
    """Without header.json (a log Inspect is still writing) the header is Inspect's journal:
    an eval that has only started, refused as incomplete unless allowed."""
    path = eval_log(tmp_path, {}, drop=("header.json",))
    message, field, _ = eval_refused(tmp_path, path)
    assert message.startswith("the eval's status is 'started', not 'success'")
    assert field == "status"
    summary, items = read(path, resolved(tmp_path), allow_incomplete=True)
    assert summary.run_id == HEADER["eval"]["run_id"]
    assert items and all(isinstance(i, Translated) for i in items)


def test_without_inspect_ai_a_log_is_refused_with_the_way_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(InputError) as caught:
        inspect_api()
    assert caught.value.field == "inspect"
    assert caught.value.message == (
        "reading Inspect AI logs needs inspect-ai, the optional extra: pip install "
        "'.[inspect]' in the evalops checkout, or pip install 'inspect-ai>=0.3.285,<0.4'"
    )
    with pytest.raises(InputError):
        read(LOGS / "refund.eval", resolved(tmp_path))


def test_a_sample_of_the_legacy_shape_goes_through_inspect_s_migrations(tmp_path: Path) -> None:
    """A sample written by an old Inspect (`score`, one unnamed scorer, no `input` read) is
    validated by Inspect's whole sample model, whose migrations turn `score` into `scores`
    under a scorer name Inspect makes up: not in the map, so skipped (or an error)."""
    raw = sample(target="", messages="junk", events=[1, "x"], error_retries=[])
    del raw["scores"]
    raw["score"] = {"value": "C"}
    _, items = read_json(tmp_path, [raw], unmapped="skip")
    assert len(items) == 2
    assert isinstance(items[0], Skipped) and items[0].reason == "unmapped_scorer"
    assert only_trial(items)["grader_results"] == []
    message, _ = refused(tmp_path, [raw])
    assert message.startswith("scorer '") and message.endswith(
        "' is not in the map for task refund_agent (map it, or pass --skip-unmapped)"
    )


def test_what_a_json_log_holds_besides_its_samples(tmp_path: Path) -> None:
    # No samples at all: nothing to import.
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(HEADER), encoding="utf-8")
    summary, items = read(path, resolved(tmp_path))
    assert items == [] and summary.file == "empty.json"
    # Reductions before the samples are not part of the header (whatever their shape).
    doc = {**HEADER, "reductions": "not Inspect's shape", "samples": [sample()]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert only_trial(read(path, resolved(tmp_path))[1])["runtime"] == {"status": "ok"}
    # A log that cannot be opened.
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(InputError) as caught:
        read(tmp_path / "dir.json", resolved(tmp_path))
    assert caught.value.message == "cannot read the log: Is a directory"


def test_a_retry_that_is_no_object_is_an_invalid_sample(tmp_path: Path) -> None:
    message, field = refused(tmp_path, [sample(error_retries=[5])])
    assert message.startswith("not a valid Inspect sample: ")
    assert field == "A-1/1: error_retries.0"


def test_a_sample_cancelled_in_an_eval_that_succeeded_is_imported(tmp_path: Path) -> None:
    """Only an incomplete eval's samples the harness cancelled are skipped: in an eval that
    succeeded, a sample that ended in a CancelledError is a trial like any failed one."""
    error = {"message": "CancelledError(None)", "traceback": "", "traceback_ansi": ""}
    record = only_trial(read_json(tmp_path, [sample(error=error)])[1])
    assert record["runtime"] == {"status": "runtime_error", "message": "CancelledError(None)"}


def test_an_unmapped_task_names_every_task_of_the_map(tmp_path: Path) -> None:
    two = MAP_TEXT.replace("  refund_agent:", "  other_agent:").replace(
        "tools:", "  third_agent:\n    samples: {}\n    scorers: {}\ntools:", 1
    )
    none = MAP_TEXT.split("tasks:")[0] + "tasks: {}\ntools:" + MAP_TEXT.split("tools:")[1]
    for text, tasks in ((two, "other_agent, third_agent"), (none, "none")):
        with pytest.raises(InputError) as caught:
            read(LOGS / "refund.eval", resolved(tmp_path, text))
        assert (caught.value.message, caught.value.field) == (
            f"Inspect task 'refund_agent' is not in the map (tasks: {tasks}); map it, or pass "
            "--skip-unmapped",
            "eval.task",
        )


def test_a_sample_with_a_transcript_is_validated_by_inspect_s_whole_sample_model(
    tmp_path: Path,
) -> None:
    """A sample of the old shape with a `transcript` goes through Inspect's `EvalSample`
    (its migrations): so it needs what that model needs, a `target`, which the parts of a
    current sample an import reads do not."""
    raw = sample(transcript={"events": []}, target="")
    assert only_trial(read_json(tmp_path, [raw])[1])["runtime"] == {"status": "ok"}
    del raw["target"]
    message, field = refused(tmp_path, [raw])
    assert message == "not a valid Inspect sample: Field required"
    assert field == "A-1/1: target"
    assert only_trial(read_json(tmp_path, [sample()])[1])["runtime"] == {"status": "ok"}
