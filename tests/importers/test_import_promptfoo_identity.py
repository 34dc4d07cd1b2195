"""promptfoo imports, part 2: a row promptfoo failed is never a pass; a test is its
description and vars; assertions sharing a key; the run's `.json` and `.jsonl` are one run.

Each fixture is the real promptfoo 0.121.20 output (tests/fixtures/promptfoo) changed the way
promptfoo itself writes such rows (its documented results format: `success`, `score`,
`failureReason`, `gradingResult.reason` such as "Aggregate score 0.90 < 0.95 threshold" for a
test `threshold`, `componentResults[*].assertion.metric`, `testCase.vars`). Expectations
come from docs/importers.md and the fixture's README table.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.import_support import (
    PF_BUILDS,
    PROMPTFOO_FIXTURES,
    copy_workspace,
    counts,
    import_base,
    promptfoo_map_text,
    trials_of,
)

MAP = "maps/promptfoo.yaml"
RESULTS = PROMPTFOO_FIXTURES / "results.json"
RESULTS_JSONL = PROMPTFOO_FIXTURES / "results.jsonl"
THRESHOLD_REASON = "Aggregate score 0.90 < 0.95 threshold"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return data


def rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = doc["results"]["results"]
    return found


def write(ws: Path, doc: dict[str, Any], name: str = "results.json") -> str:
    (ws / name).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return name


def write_map(ws: Path, text: str, name: str = "map.yaml") -> str:
    (ws / name).write_text(text, encoding="utf-8")
    return name


def run_import(cli: Cli, ws: Path, *args: str) -> Any:
    result = cli("trials", "import", "promptfoo", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def refused(cli: Cli, ws: Path, *args: str) -> dict[str, Any]:
    before = counts(ws)
    result = cli("trials", "import", "promptfoo", *args, "--json", cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    assert counts(ws) == before
    error: dict[str, Any] = result.json()["error"]
    return error


def provider(row: dict[str, Any]) -> str:
    return str(row["provider"]["label"])


def vars_digest(variables: dict[str, Any]) -> str:
    text = json.dumps(variables, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----------------------------------------------------------------- row verdict


def threshold_failed(doc: dict[str, Any]) -> dict[str, Any]:
    """The first passing row of `refund in order` on support-b125, failed as promptfoo
    fails a row whose aggregate score misses the test's threshold (every assertion passed)."""
    row = next(
        r
        for r in rows(doc)
        if r["success"]
        and provider(r) == "support-b125"
        and r["testCase"].get("description") == "refund in order"
    )
    assert all(c["pass"] for c in row["gradingResult"]["componentResults"])
    row["testCase"]["threshold"] = 0.95
    row.update(success=False, score=0.9, failureReason=1)
    row["gradingResult"].update({"pass": False, "score": 0.9, "reason": THRESHOLD_REASON})
    return row


def test_a_row_promptfoo_failed_on_its_threshold_is_never_a_pass(ws: Path, cli: Cli) -> None:
    doc = document()
    failed = threshold_failed(doc)
    results = write(ws, doc)
    # Without row_verdict the map cannot carry the row's verdict: refused, naming the row.
    error = refused(cli, ws, results, "--map", MAP)
    assert error["file"] == results
    assert error["field"].startswith("refund in order/support-b125/")
    assert error["field"].endswith(": success")
    assert THRESHOLD_REASON in error["message"] and "row_verdict" in error["message"]
    assert refused(cli, ws, results, "--map", MAP, "--dry-run") == error
    # With row_verdict (here: the reply-quality grader, its assertion left unmapped).
    text = promptfoo_map_text()
    line = next(x for x in text.splitlines(keepends=True) if "reply_quality:" in x)
    text = text.replace(line, "") + "row_verdict: {grader_id: reply-quality, grader_version: 2}\n"
    data = run_import(cli, ws, results, "--map", write_map(ws, text), "--skip-unmapped")
    assert data["ingested"] == len(rows(doc))
    by_attempt = {
        t["record"]["attempt_id"]: t for b in PF_BUILDS.values() for t in trials_of(ws, b)
    }
    assert by_attempt[failed["id"]]["class"] == "task_fail"
    verdicts = {
        r["state"]
        for r in by_attempt[failed["id"]]["record"]["grader_results"]
        if r["grader_id"] == "reply-quality"
    }
    assert verdicts == {"task_fail"}
    # Every other row keeps promptfoo's verdict too (the fixture's README table).
    for row in rows(doc):
        if row["id"] != failed["id"] and row["success"]:
            assert by_attempt[row["id"]]["class"] == "task_pass"


def test_the_row_verdict_grader_must_be_able_to_fail_a_row(ws: Path, cli: Cli) -> None:
    text = (
        promptfoo_map_text() + "row_verdict: {grader_id: refund-effect-guard, grader_version: 2}\n"
    )
    line = next(x for x in text.splitlines(keepends=True) if "effect_guard:" in x)
    error = refused(cli, ws, str(RESULTS), "--map", write_map(ws, text.replace(line, "")))
    assert error["field"] == "row_verdict.grader_id" and "task_fail" in error["message"]


# ---------------------------------------------------------------- test identity


def test_two_tests_with_one_description_are_two_tests(ws: Path, cli: Cli) -> None:
    doc = document()
    moved = [
        r for r in rows(doc) if r["testCase"].get("description") == "refund policy explanation"
    ]
    for row in moved:
        row["testCase"]["description"] = "refund in order"
    kept = next(r for r in rows(doc) if r["testCase"].get("description") == "refund in order")
    digests = {vars_digest(kept["testCase"]["vars"]), vars_digest(moved[0]["testCase"]["vars"])}
    assert len(digests) == 2
    results = write(ws, doc)
    # The example map sends both tests to one task by their shared description: refused.
    error = refused(cli, ws, results, "--map", MAP)
    assert error["field"].endswith(": testCase.vars")
    assert all(f"refund in order#{d}" in error["message"] for d in digests)
    # Keyed by description and vars digest, each test is its own task.
    text = promptfoo_map_text()
    text = text.replace(
        "  refund in order:", f'  "refund in order#{vars_digest(kept["testCase"]["vars"])}":'
    ).replace(
        "  refund policy explanation:",
        f'  "refund in order#{vars_digest(moved[0]["testCase"]["vars"])}":',
    )
    data = run_import(cli, ws, results, "--map", write_map(ws, text))
    assert data["ingested"] == len(rows(doc))
    for build in PF_BUILDS.values():
        indexes: dict[str, list[int]] = {}
        for t in trials_of(ws, build):
            indexes.setdefault(t["task_id"], []).append(t["trial_index"])
        # Five repeats each (the README table), never one task with ten.
        assert {task: sorted(i) for task, i in indexes.items()} == {
            "support-refund-in-order": [0, 1, 2, 3, 4],
            "support-refund-policy-explanation": [0, 1, 2, 3, 4],
            "support-reply-tone": [0, 1, 2, 3, 4],
        }


def test_two_assertions_sharing_a_metric_are_key_1_and_key_2(ws: Path, cli: Cli) -> None:
    doc = document()
    for row in rows(doc):
        for component in (row.get("gradingResult") or {}).get("componentResults", []):
            if component["assertion"]["metric"] == "ticket_check":
                component["assertion"]["metric"] = "refund_check"
    first = rows(doc)[0]["gradingResult"]["componentResults"]
    order = [c["assertion"]["metric"] for c in first]
    assert order.count("refund_check") == 2
    # In file order: the former ticket_check assertion comes first in these rows.
    assert order.index("refund_check") == 0 and order[-1] == "refund_check"
    text = promptfoo_map_text().replace("      refund_check:", "      refund_check#2:")
    text = text.replace("      ticket_check:", "      refund_check#1:")
    original = copy_workspace(ws, ws.parent / "original")
    data = run_import(cli, ws, write(ws, doc), "--map", write_map(ws, text))
    assert data["ingested"] == len(rows(doc))
    # Same classes as the original file under the original map.
    run_import(cli, original, str(RESULTS), "--map", MAP)
    for build in PF_BUILDS.values():
        got = {t["trial_id"]: t["class"] for t in trials_of(ws, build)}
        want = {t["trial_id"]: t["class"] for t in trials_of(original, build)}
        assert got == want


# ------------------------------------------------------------------- one run, two files


def test_the_jsonl_of_a_run_already_imported_as_json_is_a_counted_noop(ws: Path, cli: Cli) -> None:
    first = run_import(cli, ws, str(RESULTS), "--map", MAP)
    before = counts(ws)
    timestamp = document()["results"]["timestamp"]
    again = run_import(cli, ws, str(RESULTS_JSONL), "--map", MAP, "--started-at", timestamp)
    assert (again["ingested"], again["skipped_identical"]) == (0, first["ingested"])
    assert counts(ws) == before
    # Another start time is another claim about the same executions: refused, naming them.
    error = refused(
        cli, ws, str(RESULTS_JSONL), "--map", MAP, "--started-at", "2026-11-30T00:00:00Z"
    )
    assert "started_at" in error["message"] and error["message"].startswith("trial pf-")
    # The refusal names the time stored for the run: given as --started-at, it is the run.
    import re

    hinted = re.search(r"give --started-at (\S+) \(the time stored", error["message"])
    assert hinted is not None, error["message"]
    pasted = run_import(cli, ws, str(RESULTS_JSONL), "--map", MAP, "--started-at", hinted[1])
    assert (pasted["ingested"], pasted["skipped_identical"]) == (0, first["ingested"])


def test_a_run_imported_by_an_earlier_evalops_is_not_counted_twice(ws: Path, cli: Cli) -> None:
    out = ws / "new.jsonl"
    run_import(cli, ws, str(RESULTS), "--map", MAP, "-o", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # evalops 0.x's provenance: the file's sha256, "promptfoo <version>", "<file>#<row id>".
    digest = "sha256:" + hashlib.sha256(RESULTS.read_bytes()).hexdigest()
    producer = f"promptfoo {document()['metadata']['promptfooVersion']}"
    for record in records:
        source = record["artifact_manifest"]["artifacts"][-1]
        row_id = source["location"].split("#", 1)[1]
        source.update(digest=digest, producer=producer, location=f"{RESULTS.name}#{row_id}")
    old = ws / "old.jsonl"
    old.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert cli("trials", "ingest", str(old), cwd=ws).code == 0
    before = counts(ws)
    again = run_import(cli, ws, str(RESULTS), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, len(records))
    assert counts(ws) == before


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        (("latencyMs",), 1e300, "latencyMs"),
        (
            ("gradingResult", "componentResults", 0, "pass"),
            2**64,
            "gradingResult.componentResults[0].pass",
        ),
        (("response", "metadata", "repeatIndex"), 2**63, "response.metadata.repeatIndex"),
        (("success",), "yes", "success"),
    ],
)
def test_out_of_range_values_are_exit_2_naming_row_and_field(
    where: tuple[Any, ...], value: Any, field: str, ws: Path, cli: Cli
) -> None:
    doc = document()
    target: Any = rows(doc)[0]
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    results = write(ws, doc)
    error = refused(cli, ws, results, "--map", MAP)
    assert error["file"] == results
    assert error["field"].startswith("refund in order/support-b124")
    assert error["field"].endswith(f": {field}")


def test_a_key_named_twice_is_refused(ws: Path, cli: Cli) -> None:
    text = json.dumps(document(), indent=2)
    needle = '"success": true'
    assert needle in text
    (ws / "twice.json").write_text(
        text.replace(needle, '"success": true,\n      "success": false', 1), encoding="utf-8"
    )
    error = refused(cli, ws, "twice.json", "--map", MAP)
    assert "duplicate key 'success'" in error["message"]
    lines = RESULTS_JSONL.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[3] = lines[3].replace('"success":', '"success": true, "success":', 1)
    (ws / "twice.jsonl").write_text("".join(lines), encoding="utf-8")
    error = refused(cli, ws, "twice.jsonl", "--map", MAP, "--started-at", "2026-11-30T21:44:43Z")
    assert (error["line"], "duplicate key 'success'" in error["message"]) == (4, True)


def test_an_inspect_log_given_to_the_promptfoo_importer_says_so(ws: Path, cli: Cli) -> None:
    # The shape of an Inspect `.json` log (NaN included, as Inspect writes it).
    (ws / "inspect.json").write_text(
        '{"version": 2, "status": "success", "eval": {"task": "refund_agent"}, '
        '"results": {"scores": [{"metrics": {"accuracy": {"value": NaN}}}]}, "samples": []}',
        encoding="utf-8",
    )
    error = refused(cli, ws, "inspect.json", "--map", MAP)
    assert "Inspect AI log" in error["message"] and "trials import inspect" in error["message"]


def test_an_eval_archive_given_to_the_promptfoo_importer_names_the_inspect_one(
    ws: Path, cli: Cli
) -> None:
    (ws / "run.eval").write_bytes(b"PK\x03\x04")
    error = refused(cli, ws, "run.eval", "--map", MAP)
    assert "trials import inspect" in error["message"], error["message"]


def test_a_truncated_results_file_names_the_last_complete_row(ws: Path, cli: Cli) -> None:
    text = json.dumps(document(), indent=2)
    second = text.index('"id": "' + rows(document())[2]["id"])
    (ws / "cut.json").write_text(text[:second], encoding="utf-8")
    error = refused(cli, ws, "cut.json", "--map", MAP)
    # Rows 0 and 1 were read whole; the cut falls inside row 2.
    assert "after row 1 (" in error["message"] and "the last complete one" in error["message"]


def test_a_results_file_with_its_header_after_the_rows_imports(ws: Path, cli: Cli) -> None:
    """The rows are streamed; a file whose `evalId`, `version` and `timestamp` come after
    them (promptfoo writes them first) is read past the rows for its header, then again."""
    doc = document()
    reordered = {k: doc[k] for k in doc if k != "evalId"}
    reordered["results"] = {k: v for k, v in doc["results"].items() if k != "results"} | {
        "results": copy.deepcopy(rows(doc))
    }
    reordered["results"] = {"results": reordered["results"].pop("results")} | reordered["results"]
    reordered["evalId"] = doc["evalId"]
    data = run_import(cli, ws, write(ws, reordered), "--map", MAP)
    assert data["ingested"] == len(rows(doc))
