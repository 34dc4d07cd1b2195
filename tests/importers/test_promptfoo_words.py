"""promptfoo results read by evalops/importers/promptfoo.py without a registry: the reader
called on the fixture of tests/fixtures/promptfoo (real promptfoo 0.121.20 output) and on
rows written here, with the map resolved by hand (`Resolved`), so `make mutate` can run
these for each mutant of the module. Each expectation comes from DESIGN 10.1 and
docs/importers.md: a test is its description with the digest of its vars, an assertion
its metric (else type), `key#1`, `key#2` when one row has several, and a row promptfoo
failed is never imported as a pass.
"""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalops.errors import InputError

# Through the module: two of its functions are named `test_...`, which pytest would collect.
from evalops.importers import promptfoo
from evalops.importers.common import (
    Item,
    Resolved,
    ResolvedExecution,
    ResolvedTask,
    Skipped,
    Translated,
)
from evalops.registry.import_maps import load_import_map
from tests.helpers import EXAMPLE_REGISTRY, REPO_ROOT


def digest16(value: Any) -> str:
    """The first 16 hex digits of sha256 over sorted-key, no-space JSON (the recipe)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize(
    ("row", "plain", "variables"),
    [
        (
            {"testCase": {"description": "refund in order", "vars": {"a": 1}}},
            "refund in order",
            {"a": 1},
        ),
        # the test case first, then the row's own fields
        ({"testCase": {"vars": {"b": 2}}, "description": "row level"}, "row level", {"b": 2}),
        ({"description": "row level", "vars": {"c": 3}}, "row level", {"c": 3}),
        # no description: the canonical JSON of the vars
        (
            {"testCase": {"vars": {"t": "T-1", "m": "hi"}}},
            '{"m":"hi","t":"T-1"}',
            {"t": "T-1", "m": "hi"},
        ),
        ({"testCase": {"description": "", "vars": {"x": 1}}}, '{"x":1}', {"x": 1}),
        ({"testCase": "not a case", "vars": {"y": 1}}, '{"y":1}', {"y": 1}),
        ({"testCase": {"description": 7, "vars": ["not", "an", "object"]}}, "{}", {}),
    ],
)
def test_a_test_is_its_description_else_its_vars_with_their_digest(
    row: dict[str, Any], plain: str, variables: dict[str, Any]
) -> None:
    assert promptfoo.test_key(row) == plain
    assert promptfoo.vars_digest(variables) == digest16(variables)
    assert promptfoo.test_identity(row) == (plain, f"{plain}#{digest16(variables)}")


# ---------------------------------------------------------------- the reader, by hand-made map


FIXTURES = REPO_ROOT / "tests" / "fixtures" / "promptfoo"
MAP_TEXT = (EXAMPLE_REGISTRY / "imports" / "promptfoo-support.yaml").read_text(encoding="utf-8")
TEST_TASKS = {
    "refund in order": "support-refund-in-order",
    "refund policy explanation": "support-refund-policy-explanation",
    '{"message":"Where is my order?!","ticket":"T-1090"}': "support-reply-tone",
}
PROVIDERS = {"support-b124": "candidate-b124", "support-b125": "fix-b125"}
SCORERS = {  # the example map's scorers: metric -> (grader, {pass: state})
    "refund_check": ("refund-outcome", 3, {True: "task_pass", False: "task_fail"}),
    "ticket_check": ("ticket-outcome", 1, {True: "task_pass", False: "task_fail"}),
    "reply_quality": ("reply-quality", 2, {True: "task_pass", False: "task_fail"}),
    "effect_guard": ("refund-effect-guard", 2, {True: "pass", False: "hard_constraint_fail"}),
}
TOOLS = {"lookup_order": "crm:lookup-order", "refund": "billing:refund",
         "refund_all": "billing:refund-all", "kb_search": "kb:search"}  # fmt: skip
BLOCKING = ("refund-outcome", "ticket-outcome", "reply-quality", "refund-effect-guard")


def resolved(
    tmp_path: Path, text: str = MAP_TEXT, blocking: tuple[str, ...] = BLOCKING
) -> Resolved:
    """The map resolved as `trials import` resolves it against a registry: here by hand."""
    path = tmp_path / "map.yaml"
    path.write_text(text, encoding="utf-8")
    return Resolved(
        map=load_import_map(path),
        tasks={
            task: ResolvedTask(task, f"sha256:task-{task}", f"sha256:graders-{task}", blocking, 3)
            for task in [*TEST_TASKS.values(), "support-extra"]
        },
        executions={
            e: ResolvedExecution(e, f"sha256:exec-{e}", "example/model") for e in PROVIDERS.values()
        },
    )


def read(path: Path, resolution: Resolved, name: str | None = None, **kw: Any) -> list[Item]:
    from evalops.importers.promptfoo import read_promptfoo

    kw.setdefault("unmapped", "error")
    _, items = read_promptfoo(path, name or path.name, resolution, **kw)
    return list(items)


def fixture() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((FIXTURES / "results.json").read_text(encoding="utf-8"))
    return value


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha16(*ids: object) -> str:
    """A trial id: `pf-` and 16 hex digits of sha256 over the canonical JSON of the ids."""
    text = json.dumps(list(ids), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "pf-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def row_digest(row: dict[str, Any]) -> str:
    text = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def expected_record(row: dict[str, Any], ordinal: int, doc: dict[str, Any]) -> dict[str, Any]:
    """What DESIGN 10.1 and docs/importers.md make of one fixture row."""
    start = datetime.fromisoformat(doc["results"]["timestamp"].replace("Z", "+00:00"))
    task = TEST_TASKS[promptfoo.test_key(row)]
    execution = PROVIDERS[row["provider"]["label"]]
    record: dict[str, Any] = {
        "trial_id": sha16(row["id"]),
        "run_id": doc["evalId"],
        "attempt_id": row["id"],
        "task_id": task,
        "task_digest": f"sha256:task-{task}",
        "execution_digest": f"sha256:exec-{execution}",
        "grader_set_digest": f"sha256:graders-{task}",
        "trial_index": ordinal,
        "started_at": stamp(start),
        "completed_at": stamp(start + timedelta(milliseconds=row["latencyMs"])),
    }
    if row["failureReason"] == 2:  # an error row: a runtime status, no grader results
        record["runtime"] = {
            "status": "infrastructure_error",
            "message": row["error"].splitlines()[0],
        }
        record["grader_results"] = []
    else:
        record["runtime"] = {"status": "ok"}
        record["grader_results"] = [
            {
                "grader_id": SCORERS[c["assertion"]["metric"]][0],
                "grader_version": SCORERS[c["assertion"]["metric"]][1],
                "state": SCORERS[c["assertion"]["metric"]][2][c["pass"]],
                "score": c["score"],
            }
            for c in row["gradingResult"]["componentResults"]
        ]
    metadata = row["response"].get("metadata") or {}
    record["tool_calls"] = [
        {"tool": TOOLS[c["name"]], "args": c["arguments"], "agent_id": "support"}
        for c in metadata.get("toolCalls", [])
    ]
    record["target_agent_id"] = "support"
    tokens = row["tokenUsage"]
    record["usage"] = {
        "model_calls": tokens["numRequests"],
        "input_tokens": tokens["prompt"],
        "output_tokens": tokens["completion"],
    }
    provider = row["provider"]["label"]
    record["artifact_manifest"] = {
        "artifacts": [
            {"kind": "source_log", "digest": row_digest(row), "producer": "promptfoo",
             "location": f"{doc['evalId']}#{row['id']}"},
            {"kind": "source_file", "producer": "promptfoo",
             "location": f"results.json#test={row['testIdx']}&prompt={row['promptIdx']}"
                         f"&provider={provider}"},
        ]
    }  # fmt: skip
    record["secondary_labels"] = ["timestamps_synthesized"]
    return record


def test_each_row_is_one_trial_of_its_test_and_provider(tmp_path: Path) -> None:
    doc = fixture()
    items = read(FIXTURES / "results.json", resolved(tmp_path))
    rows = doc["results"]["results"]
    assert all(isinstance(i, Translated) for i in items)
    assert len(items) == len(rows)
    seen: dict[tuple[str, str], int] = {}
    for item, row in zip(items, rows, strict=True):
        assert isinstance(item, Translated)
        key = (promptfoo.test_key(row), row["provider"]["label"])
        ordinal = seen.get(key, 0)
        seen[key] = ordinal + 1
        want = expected_record(row, ordinal, doc)
        got = {k: v for k, v in item.record.items() if k not in ("schema", "eval_case_digest")}
        assert got == want
        assert item.record["schema"] == "evalops.trial/v1"
        assert (item.file, item.task_id) == ("results.json", want["task_id"])
        plain = promptfoo.test_key(row)
        assert item.sample == f"{plain}#{digest16(row['testCase']['vars'])}"
        assert item.label == f"{plain}/{row['provider']['label']}/{ordinal}"
        assert item.aliases == ()


def test_the_jsonl_output_names_the_same_trials_from_the_start_given(tmp_path: Path) -> None:
    """A `.jsonl` file has no header: `--started-at` gives the run's start, and the run id
    is derived from the file's digest; the trials are the rows' own ids as in `.json`."""
    jsonl = FIXTURES / "results.jsonl"
    with pytest.raises(InputError) as caught:
        read(jsonl, resolved(tmp_path))
    assert (caught.value.file, caught.value.field, caught.value.message) == (
        "results.jsonl",
        "--started-at",
        "promptfoo JSONL rows carry no timestamp: give the run's start with --started-at (or "
        "import the .json output)",
    )
    items = read(jsonl, resolved(tmp_path), started_at="2026-11-30T22:52:49.758+01:00")
    by_id = {i.record["attempt_id"]: i for i in items if isinstance(i, Translated)}
    rows = fixture()["results"]["results"]
    assert set(by_id) == {r["id"] for r in rows}
    run_id = "promptfoo-" + hashlib.sha256(jsonl.read_bytes()).hexdigest()[:16]
    for row in rows:
        record = by_id[row["id"]].record
        assert record["trial_id"] == sha16(row["id"])
        assert (record["run_id"], record["started_at"]) == (run_id, "2026-11-30T21:52:49.758000Z")
    with pytest.raises(InputError) as caught:
        read(jsonl, resolved(tmp_path), started_at="yesterday")
    assert (caught.value.file, caught.value.field) == ("results.jsonl", "--started-at")
    assert caught.value.message.startswith("not an RFC 3339 timestamp: ")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("run.txt", "not promptfoo results: expected a .json or .jsonl file"),
        ("run.eval", "not promptfoo results: expected a .json or .jsonl file (an Inspect AI log: "
         "`evalops trials import inspect`)"),
    ],
)  # fmt: skip
def test_a_file_of_another_kind_is_refused(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        read(FIXTURES / "results.json", resolved(tmp_path), name=name)
    assert (caught.value.file, caught.value.message) == (name, message)


# ------------------------------------------------------------------- rows written by hand


def base_row(**changes: Any) -> dict[str, Any]:
    """A passing row of the fixture's first test on support-b124, changed."""
    row: dict[str, Any] = copy.deepcopy(fixture()["results"]["results"][0])
    row.update(changes)
    return row


def write_results(tmp_path: Path, rows: list[Any], **header: Any) -> Path:
    results: dict[str, Any] = {
        "version": 3,
        "timestamp": "2026-11-30T21:52:49.758Z",
        "results": rows,
    }
    results.update(header.pop("results", {}))
    doc = {"evalId": "eval-test", "results": results, **header}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def translated(items: list[Item]) -> list[Translated]:
    return [i for i in items if isinstance(i, Translated)]


def error_of(tmp_path: Path, rows: list[Any], text: str = MAP_TEXT, **kw: Any) -> InputError:
    """The refusal of `rows`: it names the results file (exit 2 naming the source file)."""
    with pytest.raises(InputError) as caught:
        read(write_results(tmp_path, rows), resolved(tmp_path, text), **kw)
    assert caught.value.file == "results.json"
    return caught.value


LABEL = "refund in order/support-b124"
STAMP = "2026-11-30T21:52:49Z"


def components(*passes: tuple[str, bool]) -> dict[str, Any]:
    return {
        "pass": all(p for _, p in passes),
        "componentResults": [
            {"pass": p, "score": 1 if p else 0, "assertion": {"type": "javascript", "metric": m}}
            for m, p in passes
        ],
    }


ALL_PASS = components(*((m, True) for m in SCORERS))


def test_a_row_promptfoo_failed_without_a_blocking_failure_needs_row_verdict(
    tmp_path: Path,
) -> None:
    """DESIGN 10.1: a source's own failure verdict is never overruled into a pass. A row
    with `success: false` whose mapped blocking assertions all passed (a threshold on the
    aggregate) is refused without `row_verdict`, naming the row and promptfoo's reason."""
    row = base_row(
        success=False,
        failureReason=1,
        gradingResult={**ALL_PASS, "reason": "below threshold\nmore"},
    )
    error = error_of(tmp_path, [row])
    assert (error.file, error.field) == ("results.json", f"{LABEL}/0: success")
    assert error.message == (
        "promptfoo failed this row (below threshold) but no mapped blocking assertion did: add "
        "row_verdict: {grader_id, grader_version} to the map so the row's own verdict reaches "
        "the trial"
    )
    no_reason = base_row(success=False, failureReason=1, gradingResult=ALL_PASS)
    assert error_of(tmp_path, [no_reason]).message.startswith(
        "promptfoo failed this row but no mapped blocking assertion did"
    )


def test_a_failed_row_whose_blocking_assertion_failed_imports_that_failure(tmp_path: Path) -> None:
    row = base_row(success=False, failureReason=1, gradingResult=components(
        ("refund_check", False), ("ticket_check", True)))  # fmt: skip
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert [r["state"] for r in item.record["grader_results"]] == ["task_fail", "task_pass"]


def test_a_failed_row_whose_only_failure_is_not_blocking_is_refused(tmp_path: Path) -> None:
    """A non-blocking grader's failure does not carry the row's verdict."""
    row = base_row(success=False, failureReason=1, gradingResult=components(
        ("refund_check", False), ("ticket_check", True)))  # fmt: skip
    path = write_results(tmp_path, [row])
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path, blocking=("ticket-outcome",)))
    assert caught.value.field == f"{LABEL}/0: success"


ROW_VERDICT = MAP_TEXT.replace(
    "target_agent_id: support",
    "target_agent_id: support\nrow_verdict: {grader_id: row-verdict, grader_version: 1}",
)


@pytest.mark.parametrize(("success", "state"), [(False, "task_fail"), (True, "task_pass")])
def test_row_verdict_carries_the_rows_own_verdict(
    tmp_path: Path, success: bool, state: str
) -> None:
    row = base_row(success=success, failureReason=0 if success else 1, gradingResult=ALL_PASS)
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path, ROW_VERDICT)))
    assert item.record["grader_results"][-1] == {
        "grader_id": "row-verdict",
        "grader_version": 1,
        "state": state,
    }
    assert len(item.record["grader_results"]) == len(SCORERS) + 1


@pytest.mark.parametrize(
    ("text", "status"),
    [("upstream connection reset", "infrastructure_error"), ("Boom\nsecond line", "runtime_error"),
     (None, "runtime_error")],
)  # fmt: skip
def test_an_error_row_has_a_runtime_status_and_no_grader_results(
    tmp_path: Path, text: str | None, status: str
) -> None:
    """A row with failureReason 2 gets its runtime status from `runtime.error` /
    `error_patterns` on its error text (the row's, else the response's), no grader results."""
    row = base_row(success=False, failureReason=2, gradingResult=None)
    row.pop("error", None)
    row["response"] = {"error": text} if text else {}
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    message = text.splitlines()[0] if text else "error"
    assert item.record["runtime"] == {"status": status, "message": message}
    assert item.record["grader_results"] == []
    row["error"] = "rate limit hit"
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["runtime"] == {"status": "infrastructure_error", "message": "rate limit hit"}


def test_the_repeat_ordinal_is_repeat_index_else_the_order_of_appearance(tmp_path: Path) -> None:
    rows = [base_row(id=f"r{i}") for i in range(3)]
    rows[1]["response"] = {**rows[1]["response"], "metadata": {"repeatIndex": 7}}
    other = base_row(id="p", provider={"id": "x", "label": "support-b125"}, promptIdx=1)
    items = translated(read(write_results(tmp_path, [*rows, other]), resolved(tmp_path)))
    assert [i.record["trial_index"] for i in items] == [0, 7, 2, 0]
    assert [i.label for i in items] == [f"{LABEL}/0", f"{LABEL}/7", f"{LABEL}/2",
                                        "refund in order/support-b125/0"]  # fmt: skip


@pytest.mark.parametrize("repeat", [-1, 2**31, 1.5, True, "3"])
def test_a_repeat_index_must_be_a_whole_number(tmp_path: Path, repeat: Any) -> None:
    row = base_row()
    row["response"] = {**row["response"], "metadata": {"repeatIndex": repeat}}
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        f"{LABEL}: response.metadata.repeatIndex",
        "must be a whole number from 0 to 2147483647",
    )


def test_one_test_with_two_prompts_is_refused(tmp_path: Path) -> None:
    error = error_of(tmp_path, [base_row(id="a"), base_row(id="b", promptIdx=3)])
    assert (error.field, error.message) == (
        f"{LABEL}: promptIdx",
        "test 'refund in order' ran with prompts 0 and 3; one task receives one input per run "
        "(split the prompts into separate tests)",
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"success": "yes"}, "success", "must be true or false"),
        ({"failureReason": 3}, "failureReason", "must be 0, 1 or 2"),
        ({"failureReason": True}, "failureReason", "must be 0, 1 or 2"),
        ({"latencyMs": -1}, "latencyMs", "must be a number of milliseconds from 0 to 31622400000"),
        (
            {"latencyMs": 31622400001},
            "latencyMs",
            "must be a number of milliseconds from 0 to 31622400000",
        ),
        (
            {"latencyMs": False},
            "latencyMs",
            "must be a number of milliseconds from 0 to 31622400000",
        ),
        ({"latencyMs": "4"}, "latencyMs", "must be a number of milliseconds from 0 to 31622400000"),
    ],
)
def test_a_rows_fields_are_checked(
    tmp_path: Path, changes: dict[str, Any], field: str, message: str
) -> None:
    error = error_of(tmp_path, [base_row(**changes)])
    where = f"{LABEL}/0: {field}" if field == "latencyMs" else f"{LABEL}: {field}"
    assert (error.field, error.message) == (where, message)


def test_latency_may_be_absent_or_a_year(tmp_path: Path) -> None:
    row = base_row(latencyMs=31622400000)
    other = base_row(id="b")
    del other["latencyMs"]
    first, second = translated(read(write_results(tmp_path, [row, other]), resolved(tmp_path)))
    assert first.record["completed_at"] == "2027-12-01T21:52:49.758000Z"
    assert second.record["completed_at"] == second.record["started_at"]


def test_a_row_without_an_id_is_named_by_the_run_test_provider_prompt_and_ordinal(
    tmp_path: Path,
) -> None:
    row = base_row()
    del row["id"]
    (item,) = translated(read(write_results(tmp_path, [row, *[]]), resolved(tmp_path)))
    identity = f"refund in order#{digest16(row['testCase']['vars'])}"
    assert item.record["trial_id"] == sha16("eval-test", identity, "support-b124", 0, 0)
    assert item.record["attempt_id"] == f"{LABEL}/0"
    # An earlier evalops keyed the test by its description alone: that id is an alias.
    assert item.aliases == (sha16("eval-test", "refund in order", "support-b124", 0, 0),)
    assert item.record["artifact_manifest"]["artifacts"][0]["location"] == "eval-test#0/0/0"


# ------------------------------------------------------------ the map: tests, providers


def test_an_unmapped_provider_is_refused_unless_skipped(tmp_path: Path) -> None:
    row = base_row(provider={"id": "openai:gpt", "label": "nightly"})
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        "refund in order/nightly: provider",
        "provider 'nightly' is not in the map's providers (map it to an execution profile, or "
        "pass --skip-unmapped)",
    )
    (item,) = read(write_results(tmp_path, [row]), resolved(tmp_path), unmapped="skip")
    assert item == Skipped(
        "results.json", "refund in order/nightly", "unmapped_provider", "nightly"
    )


@pytest.mark.parametrize(
    ("provider", "key"),
    [
        ({"id": "support-b125", "label": "unlisted"}, "support-b125"),  # label, else id
        ("support-b125", "support-b125"),  # a provider given as its id alone
        ({"id": 5, "label": ["x"]}, "?"),
    ],
)
def test_a_provider_is_mapped_by_its_label_else_its_id(
    tmp_path: Path, provider: Any, key: str
) -> None:
    row = base_row(provider=provider)
    items = read(write_results(tmp_path, [row]), resolved(tmp_path), unmapped="skip")
    if key == "?":
        assert items == [Skipped("results.json", "refund in order/?", "unmapped_provider", "?")]
        return
    (item,) = translated(items)
    assert item.record["execution_digest"] == "sha256:exec-fix-b125"
    assert item.label == f"refund in order/{key}/0"


def test_a_map_with_one_execution_maps_every_provider_to_it(tmp_path: Path) -> None:
    text = MAP_TEXT.replace(
        "providers:                           # provider label or id -> execution profile\n"
        "  support-b124: candidate-b124\n  support-b125: fix-b125\n",
        "execution: fix-b125\n",
    )
    assert text != MAP_TEXT
    row = base_row(provider={"id": "anything"})
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path, text)))
    assert (item.record["execution_digest"], item.label) == (
        "sha256:exec-fix-b125",
        "refund in order/anything/0",
    )


def test_an_unmapped_test_is_refused_with_the_closest_key(tmp_path: Path) -> None:
    row = base_row()
    row["testCase"] = {**row["testCase"], "description": "refund in ordr"}
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        "refund in ordr/support-b124: testCase.description",
        "test 'refund in ordr' is not in the map; did you mean 'refund in order'? (tests "
        'mapped: refund in order, refund policy explanation, {"message":"Where is my '
        'order?!","ticket":"T-1090"}) (map it, or pass --skip-unmapped)',
    )
    row["testCase"]["description"] = "something else entirely"
    assert error_of(tmp_path, [row]).message.startswith(
        "test 'something else entirely' is not in the map (tests mapped: "
    )
    (item,) = read(write_results(tmp_path, [row]), resolved(tmp_path), unmapped="skip")
    assert item == Skipped(
        "results.json",
        "something else entirely/support-b124",
        "unmapped_sample",
        "something else entirely",
    )


def test_two_tests_sharing_a_description_are_two_tests(tmp_path: Path) -> None:
    """One description, other vars: mapped by the description alone, the first test seen
    is the task's and the second is refused; `description#vars digest` keys each."""
    first = base_row(id="a")
    second = base_row(id="b")
    second["testCase"] = {**second["testCase"], "vars": {"ticket": "T-2"}}
    a_key = f"refund in order#{digest16(first['testCase']['vars'])}"
    b_key = f"refund in order#{digest16({'ticket': 'T-2'})}"
    error = error_of(tmp_path, [first, second])
    assert (error.field, error.message) == (
        f"{LABEL}: testCase.vars",
        f"tests {a_key!r} and {b_key!r} share the description 'refund in order' with different "
        "vars: two tests, which the map sends to one task (map each by its description#vars "
        "digest)",
    )
    # The same test twice is the same task.
    items = translated(read(write_results(tmp_path, [first, base_row(id="c")]), resolved(tmp_path)))
    assert [i.record["trial_index"] for i in items] == [0, 1]
    items = translated(
        read(write_results(tmp_path, [first, second]), resolved(tmp_path, _qualified_map(b_key)))
    )
    assert [i.sample for i in items] == [a_key, b_key]


def _qualified_map(key: str) -> str:
    """The example map with one more test keyed by `description#vars digest`, sent to a
    task of its own."""
    return MAP_TEXT.replace(
        "  refund policy explanation:\n",
        f"  {json.dumps(key)}:\n    task: support-extra\n"
        "    scorers: *support-scorers\n  refund policy explanation:\n",
    )


def test_a_test_keyed_by_description_and_vars_is_that_tests(tmp_path: Path) -> None:
    second = base_row(id="b")
    second["testCase"] = {**second["testCase"], "vars": {"ticket": "T-2"}}
    key = f"refund in order#{digest16({'ticket': 'T-2'})}"
    (item,) = translated(
        read(write_results(tmp_path, [second]), resolved(tmp_path, _qualified_map(key)))
    )
    assert item.task_id == "support-extra"


def test_vars_that_cannot_be_keyed_are_refused(tmp_path: Path) -> None:
    """A test without a description is keyed by the canonical JSON of its vars, which has
    no form for NaN."""
    row = base_row()
    row["testCase"] = {"vars": {"n": "NAN"}}
    path = tmp_path / "results.json"
    text = json.dumps(json.loads(write_results(tmp_path, [row]).read_text(encoding="utf-8")))
    path.write_text(text.replace('"NAN"', "NaN", 1), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert (caught.value.file, caught.value.field) == ("results.json", "row 0: vars")
    assert caught.value.message.startswith("the test's vars cannot be keyed: ")


def test_a_row_that_is_no_object_is_refused(tmp_path: Path) -> None:
    error = error_of(tmp_path, [base_row(), ["not", "a", "row"]])
    assert (error.field, error.message) == ("row 1", "a result row must be a JSON object")


# ------------------------------------------------------------------------- assertions


def test_assertions_are_keyed_by_metric_else_type_numbered_when_repeated() -> None:
    from evalops.importers.promptfoo import _assertion_keys

    parts = [
        {"assertion": {"type": "contains", "metric": "m"}},
        {"assertion": {"type": "contains"}},
        {"assertion": {"type": "contains", "metric": ""}},
        {"assertion": {"type": "equals", "metric": "m"}},
        {"assertion": {}},
        "not an object",
        {"assertion": "neither"},
    ]
    assert _assertion_keys(parts) == [
        "m#1", "contains#1", "contains#2", "m#2", "(no assertion)#1", "(no assertion)#2",
        "(no assertion)#3",
    ]  # fmt: skip


def test_an_unmapped_assertion_is_refused_or_skipped_before_the_rest(tmp_path: Path) -> None:
    row = base_row(gradingResult=components(("refund_check", True), ("tone", True)))
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        f"{LABEL}/0: gradingResult.componentResults[1]",
        "assertion 'tone' is not in the map's scorers for test 'refund in order' (map its "
        "metric or type, `key#1`, `key#2` when one row has several, or pass --skip-unmapped)",
    )
    items = read(write_results(tmp_path, [row]), resolved(tmp_path), unmapped="skip")
    assert items[0] == Skipped("results.json", f"{LABEL}/0", "unmapped_scorer", "tone")
    (item,) = translated(items)
    assert [r["grader_id"] for r in item.record["grader_results"]] == ["refund-outcome"]


@pytest.mark.parametrize(
    ("component", "field", "message"),
    [
        ("x", "", "must be an object"),
        ({"pass": 1, "assertion": {"metric": "refund_check"}}, ".pass",
         "an assertion's pass must be true or false"),
        ({"pass": True, "score": "1", "assertion": {"metric": "refund_check"}}, ".score",
         "an assertion's score must be a finite number"),
        ({"pass": True, "score": True, "assertion": {"metric": "refund_check"}}, ".score",
         "an assertion's score must be a finite number"),
    ],
)  # fmt: skip
def test_an_assertion_is_checked(tmp_path: Path, component: Any, field: str, message: str) -> None:
    row = base_row(gradingResult={"pass": True, "componentResults": [component]})
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        f"{LABEL}/0: gradingResult.componentResults[0]{field}",
        message,
    )


def test_an_assertion_without_a_score_has_none_and_an_infinite_one_is_refused(
    tmp_path: Path,
) -> None:
    row = base_row(gradingResult={"pass": True, "componentResults": [
        {"pass": True, "assertion": {"metric": "refund_check"}}]})  # fmt: skip
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["grader_results"] == [
        {"grader_id": "refund-outcome", "grader_version": 3, "state": "task_pass"}
    ]
    path = tmp_path / "inf.json"
    text = write_results(tmp_path, [row]).read_text(encoding="utf-8")
    infinite = text.replace(
        '"pass": true, "assertion"', '"pass": true, "score": Infinity, "assertion"'
    )
    assert infinite != text
    path.write_text(infinite, encoding="utf-8")
    with pytest.raises(InputError):
        read(path, resolved(tmp_path))


def test_a_non_blocking_assertion_with_an_unmapped_value_only_adds_a_label(tmp_path: Path) -> None:
    text = MAP_TEXT.replace(
        'reply-quality, grader_version: 2, values: {"true": task_pass, "false": task_fail}}',
        'reply-quality, grader_version: 2, values: {"true": task_pass}}',
    )
    assert text != MAP_TEXT
    row = base_row(success=False, failureReason=1, gradingResult=components(
        ("refund_check", False), ("reply_quality", False)))  # fmt: skip
    blocking = ("refund-outcome",)
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path, text, blocking)))
    assert [r["grader_id"] for r in item.record["grader_results"]] == ["refund-outcome"]
    assert item.record["secondary_labels"] == [
        "timestamps_synthesized",
        "diagnostic:reply-quality:unmapped",
    ]
    # Blocking, the same value is grader_invalid, labelled with the assertion it came from.
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path, text)))
    assert item.record["grader_results"][1]["state"] == "grader_invalid"
    assert item.record["secondary_labels"] == [
        "timestamps_synthesized",
        "unmapped_value:reply_quality",
    ]


# ------------------------------------------------------------ tool calls and token usage


def test_tool_calls_are_renamed_and_their_arguments_read(tmp_path: Path) -> None:
    calls = [
        {"name": "refund", "arguments": '{"amountMinor": 4200}'},
        {"name": "unknown_tool", "arguments": "  "},
        {"name": "lookup_order"},
    ]
    row = base_row(response={"output": "ok", "metadata": {"toolCalls": calls}})
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["tool_calls"] == [
        {"tool": "billing:refund", "args": {"amountMinor": 4200}, "agent_id": "support"},
        {"tool": "unknown_tool", "args": {}, "agent_id": "support"},
        {"tool": "crm:lookup-order", "args": {}, "agent_id": "support"},
    ]
    no_agent = MAP_TEXT.replace("target_agent_id: support\n", "")
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path, no_agent)))
    assert item.record["tool_calls"][0] == {"tool": "billing:refund", "args": {"amountMinor": 4200}}
    assert "target_agent_id" not in item.record


@pytest.mark.parametrize(
    ("calls", "field", "message"),
    [
        ({"name": "refund"}, "response.metadata.toolCalls", "must be a list of {name, arguments}"),
        ([{"arguments": {}}], "response.metadata.toolCalls[0]", "a tool call has no name"),
        (["refund"], "response.metadata.toolCalls[0]", "a tool call has no name"),
        ([{"name": "a"}, {"name": ""}], "response.metadata.toolCalls[1]",
         "a tool call has no name"),
        ([{"name": "refund", "arguments": "{"}], "response.metadata.toolCalls[0].arguments",
         "arguments are not JSON"),
        ([{"name": "refund", "arguments": "[1]"}], "response.metadata.toolCalls[0].arguments",
         "arguments must be an object"),
        ([{"name": "refund", "arguments": 3}], "response.metadata.toolCalls[0].arguments",
         "arguments must be an object"),
    ],
)  # fmt: skip
def test_tool_calls_are_checked(tmp_path: Path, calls: Any, field: str, message: str) -> None:
    row = base_row(response={"output": "ok", "metadata": {"toolCalls": calls}})
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (f"{LABEL}/0: {field}", message)


@pytest.mark.parametrize(
    ("row_usage", "response_usage", "expected"),
    [
        ({"numRequests": 2, "prompt": 10, "completion": 5,
          "completionDetails": {"cacheReadInputTokens": 3, "cacheCreationInputTokens": 4}},
         None, (2, 17, 5)),
        (None, {"numRequests": 1, "prompt": 7, "completion": 2}, (1, 7, 2)),
        ({"numRequests": -1, "prompt": True, "completion": 2.5, "completionDetails": "x"},
         None, (0, 0, 0)),
        (None, None, (0, 0, 0)),
    ],
)  # fmt: skip
def test_token_usage_counts_cache_reads_and_writes_as_input(
    tmp_path: Path, row_usage: Any, response_usage: Any, expected: tuple[int, int, int]
) -> None:
    row = base_row(tokenUsage=row_usage, response={"output": "ok", "tokenUsage": response_usage})
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["usage"] == dict(
        zip(("model_calls", "input_tokens", "output_tokens"), expected, strict=True)
    )


# -------------------------------------------------------------------------- the header


@pytest.mark.parametrize(
    ("doc", "field", "message"),
    [
        ({"evalId": "e", "results": {"version": 2, "timestamp": STAMP, "results": []}},
         "results.version", "promptfoo results version 2 is not supported (version 3 is)"),
        ({"evalId": "e", "results": {"timestamp": STAMP, "results": []}},
         "results.version", "promptfoo results version None is not supported (version 3 is)"),
        ({"evalId": "", "results": {"version": 3, "timestamp": STAMP, "results": []}},
         "evalId", "the results have no evalId"),
        ({"results": {"version": 3, "timestamp": STAMP, "results": []}},
         "evalId", "the results have no evalId"),
        ({"evalId": "e", "results": {"version": 3, "results": []}},
         "results.timestamp", "not an RFC 3339 timestamp: missing"),
        ({"evalId": "e", "results": {"version": 3, "timestamp": "2026-11-30T21:52:49Z"}},
         "results", "not promptfoo results: no results.results list"),
        ({"evalId": "e", "results": {"version": 3, "timestamp": STAMP, "results": {}}},
         "results", "not promptfoo results: no results.results list"),
        # `results` itself no object: nothing in it is read
        ({"evalId": "e", "results": "ab"}, "results",
         "not promptfoo results: no results.results list"),
        ({"evalId": "e", "results": 3}, "results",
         "not promptfoo results: no results.results list"),
        ({"evalId": "e", "results": [["version", 3], ["timestamp", STAMP], ["results", []]]},
         "results", "not promptfoo results: no results.results list"),
        ({"eval": {"task": "x"}}, None,
         "this is an Inspect AI log, not promptfoo results (`evalops trials import inspect`)"),
    ],
)  # fmt: skip
def test_the_header_is_checked(tmp_path: Path, doc: Any, field: str | None, message: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert (caught.value.file, caught.value.field, caught.value.message) == (
        "results.json",
        field,
        message,
    )


def test_the_header_may_follow_the_rows(tmp_path: Path) -> None:
    row = base_row()
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps(
            {
                "results": {"results": [row], "timestamp": "2026-11-30T21:52:49Z", "version": 3},
                "evalId": "late",
            }
        )
    )
    (item,) = translated(read(path, resolved(tmp_path)))
    assert (item.record["run_id"], item.record["started_at"]) == (
        "late",
        "2026-11-30T21:52:49.000000Z",
    )


def test_a_truncated_file_names_the_last_complete_row(tmp_path: Path) -> None:
    rows = [base_row(id="a"), base_row(id="b")]
    text = write_results(tmp_path, rows).read_text(encoding="utf-8")
    cut = text[: text.index('"id": "b"') + 4]
    path = tmp_path / "cut.json"
    path.write_text(cut, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.file == "cut.json"
    assert caught.value.message.startswith(
        f"cannot read the results after row 0 ({LABEL}/0), the last complete one: "
    )
    path.write_text(text[:20], encoding="utf-8")  # inside the header
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.file == "cut.json"
    assert caught.value.message.startswith("cannot read the results: ")


def test_a_missing_file_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read(tmp_path / "gone.json", resolved(tmp_path))
    assert (caught.value.file, caught.value.message) == (
        "gone.json",
        "cannot read the results: No such file or directory",
    )


def test_a_jsonl_line_that_is_not_json_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(base_row()) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path), started_at="2026-11-30T21:52:49Z")
    assert (caught.value.line, caught.value.message.startswith("not valid JSON: ")) == (2, True)
    path.write_text(json.dumps(base_row()).replace('"cost": 0', '"cost": NaN'), encoding="utf-8")
    with pytest.raises(InputError):
        read(path, resolved(tmp_path), started_at="2026-11-30T21:52:49Z")


# ------------------------------------------------------------- strict JSON, odd shapes


def jsonl_error(tmp_path: Path, text: str) -> InputError:
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path), started_at=STAMP)
    return caught.value


def test_a_jsonl_row_with_nan_or_a_key_twice_is_refused(tmp_path: Path) -> None:
    """DESIGN 10.1: duplicate JSON keys anywhere in a source file are exit 2; NaN is not
    JSON."""
    row = json.dumps(base_row())
    nan = jsonl_error(tmp_path, row.replace('"cost": 0', '"cost": NaN') + "\n")
    assert (nan.file, nan.line, nan.message) == (
        "rows.jsonl",
        1,
        "not valid JSON: NaN is not valid JSON",
    )
    twice = jsonl_error(tmp_path, row.replace('"cost": 0', '"cost": 0, "cost": 1') + "\n")
    assert (twice.file, twice.line) == ("rows.jsonl", 1)
    assert twice.message.startswith("not valid JSON: ")
    assert "cost" in twice.message


def test_a_jsonl_file_problem_names_the_file_and_line(tmp_path: Path) -> None:
    error = jsonl_error(tmp_path, json.dumps(base_row()) + "\n\n")
    assert (error.file, error.line) == ("rows.jsonl", 2)
    assert error.message.startswith("empty line")


def test_a_jsonl_row_that_is_no_object_is_refused_by_its_index(tmp_path: Path) -> None:
    error = jsonl_error(tmp_path, json.dumps(base_row()) + "\n[1]\n")
    assert (error.field, error.message) == ("row 1", "a result row must be a JSON object")


def test_tool_call_arguments_naming_a_key_twice_are_refused(tmp_path: Path) -> None:
    calls = [{"name": "refund", "arguments": '{"amountMinor": 1, "amountMinor": 2}'}]
    row = base_row(response={"output": "ok", "metadata": {"toolCalls": calls}})
    error = error_of(tmp_path, [row])
    assert (error.field, error.message) == (
        f"{LABEL}/0: response.metadata.toolCalls[0].arguments",
        "arguments are not JSON",
    )


@pytest.mark.parametrize("response", ["plain text", None, ["x"]])
def test_a_response_that_is_no_object_has_no_tool_calls_or_usage(
    tmp_path: Path, response: Any
) -> None:
    row = base_row(response=response)
    del row["tokenUsage"]
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["tool_calls"] == []
    assert item.record["usage"] == {"model_calls": 0, "input_tokens": 0, "output_tokens": 0}


@pytest.mark.parametrize("grading", [None, "failed", {"reason": ""}, {"reason": 3}])
def test_a_failed_row_without_a_reason_says_so_plainly(tmp_path: Path, grading: Any) -> None:
    error = error_of(tmp_path, [base_row(success=False, failureReason=1, gradingResult=grading)])
    assert error.message.startswith("promptfoo failed this row but no mapped blocking assertion")


def test_errors_in_a_rows_tool_calls_name_the_file(tmp_path: Path) -> None:
    shapes: list[Any] = [{"name": "refund"}, [{"arguments": {}}]]
    for calls in shapes:
        row = base_row(response={"output": "ok", "metadata": {"toolCalls": calls}})
        assert error_of(tmp_path, [row]).file == "results.json"


def test_an_assertion_with_an_empty_metric_and_type_is_no_assertion() -> None:
    from evalops.importers.promptfoo import _assertion_keys

    assert _assertion_keys([{"assertion": {"type": "", "metric": ""}}]) == ["(no assertion)"]


def test_a_skipped_assertion_does_not_hide_the_ones_after_it(tmp_path: Path) -> None:
    row = base_row(gradingResult=components(("tone", True), ("refund_check", True)))
    items = read(write_results(tmp_path, [row]), resolved(tmp_path), unmapped="skip")
    assert items[0] == Skipped("results.json", f"{LABEL}/0", "unmapped_scorer", "tone")
    (item,) = translated(items)
    assert [r["grader_id"] for r in item.record["grader_results"]] == ["refund-outcome"]


def test_a_repeat_index_of_zero_is_the_first_repeat(tmp_path: Path) -> None:
    row = base_row()
    row["response"] = {**row["response"], "metadata": {"repeatIndex": 0}}
    (item,) = translated(read(write_results(tmp_path, [row, *[]]), resolved(tmp_path)))
    assert item.record["trial_index"] == 0


@pytest.mark.parametrize("response", ["plain text", None])
def test_an_error_row_without_error_text_is_a_runtime_error(tmp_path: Path, response: Any) -> None:
    row = base_row(success=False, failureReason=2, gradingResult=None, response=response)
    row.pop("error", None)
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["runtime"] == {"status": "runtime_error", "message": "error"}


# ------------------------------------------------- what names the file, the run, the row


def test_the_summary_names_the_file_the_producer_and_the_run(tmp_path: Path) -> None:
    """A dry run shows each source file with its producer and run id: `evalId` for `.json`,
    `promptfoo-` and 16 hex digits of the file's sha256 for `.jsonl` (docs/importers.md)."""
    from evalops.importers.promptfoo import read_promptfoo

    json_path = write_results(tmp_path, [base_row()])
    summary, _ = read_promptfoo(json_path, "run.json", resolved(tmp_path), unmapped="error")
    assert (summary.file, summary.producer, summary.run_id) == (
        "run.json",
        "promptfoo",
        "eval-test",
    )
    jsonl = FIXTURES / "results.jsonl"
    summary, _ = read_promptfoo(
        jsonl, "rows.jsonl", resolved(tmp_path), unmapped="error", started_at=STAMP
    )
    digest = hashlib.sha256(jsonl.read_bytes()).hexdigest()[:16]
    assert (summary.file, summary.producer, summary.run_id) == (
        "rows.jsonl",
        "promptfoo",
        f"promptfoo-{digest}",
    )


def test_an_unmapped_provider_in_a_jsonl_file_is_refused_unless_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    row = base_row(provider={"id": "openai:gpt", "label": "nightly"})
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path), started_at=STAMP)
    assert (caught.value.file, caught.value.field) == (
        "rows.jsonl",
        "refund in order/nightly: provider",
    )
    assert read(path, resolved(tmp_path), started_at=STAMP, unmapped="skip") == [
        Skipped("rows.jsonl", "refund in order/nightly", "unmapped_provider", "nightly")
    ]


def test_a_file_gone_before_its_rows_are_read_is_named(tmp_path: Path) -> None:
    """The rows are read lazily, after the header: a file that can no longer be opened then
    is refused naming it."""
    from evalops.importers.promptfoo import read_promptfoo

    path = write_results(tmp_path, [base_row()])
    _, items = read_promptfoo(path, "results.json", resolved(tmp_path), unmapped="error")
    path.unlink()
    with pytest.raises(InputError) as caught:
        list(items)
    assert (caught.value.file, caught.value.message) == (
        "results.json",
        "cannot read the results: No such file or directory",
    )


def test_an_inspect_log_member_after_the_rows_is_refused_naming_the_file(tmp_path: Path) -> None:
    """The header is complete before the rows, so the header read stops there; the `eval`
    member of an Inspect log after them is refused when the rows are read."""
    doc = {
        "evalId": "eval-test",
        "results": {"version": 3, "timestamp": STAMP, "results": [base_row()]},
        "eval": {"task": "x"},
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert (caught.value.file, caught.value.message) == (
        "results.json",
        "this is an Inspect AI log, not promptfoo results (`evalops trials import inspect`)",
    )


def test_a_file_cut_inside_its_first_row_names_no_row(tmp_path: Path) -> None:
    """A truncated `.json` names the last complete row (DESIGN 10.1); cut inside the first
    row, after a complete header, there is none to name."""
    text = write_results(tmp_path, [base_row(id="a")]).read_text(encoding="utf-8")
    path = tmp_path / "cut.json"
    path.write_text(text[: text.index('"id": "a"') + 4], encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read(path, resolved(tmp_path))
    assert caught.value.file == "cut.json"
    assert caught.value.message.startswith("cannot read the results: ")


@pytest.mark.parametrize("changes", [{"failureReason": 0}, {}])
def test_a_row_without_a_failure_reason_is_no_error_row(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    """Only `failureReason` 2 makes an error row (DESIGN 10.1); without the field (promptfoo's
    ResultFailureReason.NONE is 0) the row's assertions are imported."""
    row = base_row(gradingResult=components(("refund_check", True)))
    row.pop("failureReason", None)
    row.update(changes)
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["runtime"] == {"status": "ok"}
    assert [r["grader_id"] for r in item.record["grader_results"]] == ["refund-outcome"]


@pytest.mark.parametrize("prompt", ["absent", None, True, "2", 1.0])
def test_a_prompt_index_that_is_no_integer_is_the_first_prompt(tmp_path: Path, prompt: Any) -> None:
    """promptIdx is an index into the run's prompts; a row that gives none (or no integer)
    is of the first, prompt 0: with a row of prompt 0 it is the same test and prompt (no
    refusal, the next ordinal), and its source file location says `prompt=0`."""
    first = base_row(id="a", promptIdx=0)
    second = base_row(id="b", promptIdx=prompt)
    if prompt == "absent":
        del second["promptIdx"]
    items = translated(read(write_results(tmp_path, [first, second]), resolved(tmp_path)))
    assert [i.record["trial_index"] for i in items] == [0, 1]
    location = items[1].record["artifact_manifest"]["artifacts"][1]["location"]
    assert location == f"results.json#test={first['testIdx']}&prompt=0&provider=support-b124"


@pytest.mark.parametrize("row_id", ["", 42])
def test_a_row_whose_id_is_no_text_is_named_as_one_without_an_id(
    tmp_path: Path, row_id: Any
) -> None:
    """The trial id is the row's id only when that is a non-empty string; otherwise the
    run, test, provider, prompt and ordinal name it."""
    row = base_row(id=row_id)
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    identity = f"refund in order#{digest16(row['testCase']['vars'])}"
    assert item.record["trial_id"] == sha16("eval-test", identity, "support-b124", 0, 0)
    assert item.record["attempt_id"] == f"{LABEL}/0"


def test_the_largest_repeat_index_is_accepted(tmp_path: Path) -> None:
    """`must be a whole number from 0 to 2147483647`: both ends are allowed."""
    row = base_row()
    row["response"] = {**row["response"], "metadata": {"repeatIndex": 2**31 - 1}}
    (item,) = translated(read(write_results(tmp_path, [row]), resolved(tmp_path)))
    assert item.record["trial_index"] == 2**31 - 1
