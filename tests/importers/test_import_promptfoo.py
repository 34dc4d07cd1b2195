"""`evalops trials import promptfoo` on results written by promptfoo 0.121.20 itself.

The fixture (tests/fixtures/promptfoo, with the command that made it) is read here with the
standard library to derive what evalops must store: one trial per row, the repeat ordinal as
trial_index, times from the run's timestamp and each row's latency, and pass@k / pass^k by
brute force over each (test, provider)'s `success` flags.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.import_support import (
    PF_BUILDS,
    PROMPTFOO_FIXTURES,
    SUPPORT_SUITE,
    copy_workspace,
    counts,
    import_base,
    trials_of,
)

MAP = "maps/promptfoo.yaml"
RESULTS = PROMPTFOO_FIXTURES / "results.json"
RESULTS_JSONL = PROMPTFOO_FIXTURES / "results.jsonl"
TEST_TASKS = {
    "refund in order": "support-refund-in-order",
    "refund policy explanation": "support-refund-policy-explanation",
    '{"message":"Where is my order?!","ticket":"T-1090"}': "support-reply-tone",
}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_base(tmp_path_factory)


@pytest.fixture
def ws(base: Path, tmp_path: Path) -> Path:
    return copy_workspace(base, tmp_path / "ws")


def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return data


def key_of(row: dict[str, Any]) -> str:
    description = row["testCase"].get("description")
    if description:
        return str(description)
    return json.dumps(row["vars"], sort_keys=True, separators=(",", ":"))


def expected_rows() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(task, build) -> its rows in file order (the repeat ordinal is the position)."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in document()["results"]["results"]:
        key = (TEST_TASKS[key_of(row)], PF_BUILDS[row["provider"]["label"]])
        out.setdefault(key, []).append(row)
    return out


def run_import(cli: Cli, ws: Path, *args: str) -> Any:
    result = cli("trials", "import", "promptfoo", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def test_rows_become_trials_by_test_provider_and_repeat(ws: Path, cli: Cli) -> None:
    data = run_import(cli, ws, str(RESULTS), "--map", MAP)
    rows = document()["results"]["results"]
    assert (data["ingested"], data["rejected"], data["skipped"]) == (len(rows), [], {})
    start = datetime.fromisoformat(document()["results"]["timestamp"].replace("Z", "+00:00"))
    for (task, build), expected in expected_rows().items():
        trials = sorted(
            (t for t in trials_of(ws, build) if t["task_id"] == task),
            key=lambda t: t["trial_index"],
        )
        assert [t["trial_index"] for t in trials] == list(range(len(expected)))
        for trial, row in zip(trials, expected, strict=True):
            record = trial["record"]
            assert record["run_id"] == document()["evalId"]
            assert record["attempt_id"] == row["id"]
            done = start + timedelta(milliseconds=row["latencyMs"])
            assert record["started_at"] == start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            assert record["completed_at"] == done.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            assert "timestamps_synthesized" in trial["labels"]
            # A row whose provider failed (failureReason 2) has a runtime status and no
            # grader results; the map reads "connection" as an infrastructure error.
            if row["failureReason"] == 2:
                assert record["runtime"]["status"] == "infrastructure_error"
                assert record["grader_results"] == []
                assert trial["class"] == "infrastructure_invalid"
            elif row["success"]:
                assert trial["class"] == "task_pass"
            else:
                # effect_guard failed: the refund was made twice -> a hard failure.
                assert trial["class"] == "hard_constraint_fail"


def test_tool_calls_come_from_response_metadata_renamed(ws: Path, cli: Cli) -> None:
    out = ws / "out.jsonl"
    run_import(cli, ws, str(RESULTS), "--map", MAP, "-o", str(out))
    records = {r["attempt_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    names = {"lookup_order": "crm:lookup-order", "refund": "billing:refund",
             "refund_all": "billing:refund-all"}  # fmt: skip
    for row in document()["results"]["results"]:
        metadata = row["response"].get("metadata") or {}
        assert records[row["id"]]["tool_calls"] == [
            {"tool": names[c["name"]], "args": c["arguments"], "agent_id": "support"}
            for c in metadata.get("toolCalls", [])
        ]
        tokens = row["tokenUsage"]
        assert records[row["id"]]["usage"] == {
            "model_calls": tokens["numRequests"],
            "input_tokens": tokens["prompt"],
            "output_tokens": tokens["completion"],
        }


def brute_force(passed: list[bool], k: int) -> tuple[float, float]:
    subsets = list(itertools.combinations(passed, k))
    return (
        float(Fraction(sum(any(s) for s in subsets), len(subsets))),
        float(Fraction(sum(all(s) for s in subsets), len(subsets))),
    )


def test_dry_run_stats_match_a_brute_force_over_the_rows(ws: Path, cli: Cli) -> None:
    before = counts(ws)
    data = run_import(cli, ws, str(RESULTS), "--map", MAP, "--dry-run")
    assert counts(ws) == before
    execution_of = {"build-pf-124": "pf-b124", "build-pf-125": "pf-b125"}
    got = {(t["task_id"], t["execution"]): t for t in data["tasks"]}
    assert len(got) == len(expected_rows()) == 6
    for (task, build), rows in expected_rows().items():
        entry = got[(task, execution_of[build])]
        # Every support task has k 3; promptfoo has no retries, and in this run a row passes
        # in evalops exactly when promptfoo says success.
        pass_at, pass_hat = brute_force([bool(r["success"]) for r in rows], 3)
        assert (entry["trials"], entry["n"]) == (len(rows), len(rows))
        assert entry["passAtK"] == pytest.approx(pass_at, rel=1e-9)
        assert entry["passHatK"] == pytest.approx(pass_hat, rel=1e-9)
        assert entry["source_reduction"] is None  # promptfoo reduces nothing per test


def test_reimport_is_a_counted_noop(ws: Path, cli: Cli) -> None:
    first = run_import(cli, ws, str(RESULTS), "--map", MAP)
    before = counts(ws)
    again = run_import(cli, ws, str(RESULTS), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, first["ingested"])
    assert counts(ws) == before


def test_gate_decides_on_each_provider(ws: Path, cli: Cli) -> None:
    run_import(cli, ws, str(RESULTS), "--map", MAP)
    passing = cli(
        "gate", "check", "--build", "build-pf-125", "--suite", SUPPORT_SUITE, "--json", cwd=ws
    )
    assert (passing.code, passing.json()["decision"]) == (0, "pass")
    blocked = cli(
        "gate", "check", "--build", "build-pf-124", "--suite", SUPPORT_SUITE, "--json", cwd=ws
    )
    data = blocked.json()
    assert (blocked.code, data["decision"]) == (4, "block")
    states = {t["task_id"]: (t["state"], t["effect"]) for t in data["tasks"]}
    assert states == {
        "support-refund-in-order": ("hard_constraint_fail", "block"),
        "support-refund-policy-explanation": ("task_pass", "pass"),
        "support-reply-tone": ("infrastructure_invalid", "hold"),
    }


def test_jsonl_needs_a_start_time_and_then_names_the_same_trials(ws: Path, cli: Cli) -> None:
    before = counts(ws)
    result = cli(
        "trials", "import", "promptfoo", str(RESULTS_JSONL), "--map", MAP, "--json", cwd=ws
    )
    assert result.code == 2 and counts(ws) == before
    assert result.json()["error"]["field"] == "--started-at"
    timestamp = document()["results"]["timestamp"]
    data = run_import(cli, ws, str(RESULTS_JSONL), "--map", MAP, "--started-at", timestamp)
    assert data["ingested"] == 30
    # The .json output of the same run names the same executions (row ids): importing it
    # as well stores nothing and counts each row (docs/importers.md, identity).
    before = counts(ws)
    again = run_import(cli, ws, str(RESULTS), "--map", MAP)
    assert (again["ingested"], again["skipped_identical"]) == (0, 30)
    assert counts(ws) == before


def test_json_and_jsonl_outputs_classify_alike(base: Path, tmp_path: Path, cli: Cli) -> None:
    a = copy_workspace(base, tmp_path / "a")
    b = copy_workspace(base, tmp_path / "b")
    run_import(cli, a, str(RESULTS), "--map", MAP)
    timestamp = document()["results"]["timestamp"]
    run_import(cli, b, str(RESULTS_JSONL), "--map", MAP, "--started-at", timestamp)
    classes_a = {t["trial_id"]: t["class"] for bld in PF_BUILDS.values() for t in trials_of(a, bld)}
    classes_b = {t["trial_id"]: t["class"] for bld in PF_BUILDS.values() for t in trials_of(b, bld)}
    assert classes_a == classes_b and len(classes_a) == 30


# ------------------------------------------------------------------------- bad inputs


def refused(cli: Cli, ws: Path, *args: str) -> dict[str, Any]:
    before = counts(ws)
    result = cli("trials", "import", "promptfoo", *args, "--json", cwd=ws)
    assert result.code == 2, result.stdout + result.stderr
    assert counts(ws) == before
    error: dict[str, Any] = result.json()["error"]
    return error


def test_an_unmapped_provider_is_refused_unless_skipped(ws: Path, cli: Cli) -> None:
    text = (ws / MAP).read_text(encoding="utf-8").replace("  support-b124: pf-b124\n", "")
    (ws / "bad.yaml").write_text(text, encoding="utf-8")
    error = refused(cli, ws, str(RESULTS), "--map", "bad.yaml")
    assert error["file"] == str(RESULTS)
    assert error["field"] == "refund in order/support-b124: provider"
    data = run_import(cli, ws, str(RESULTS), "--map", "bad.yaml", "--skip-unmapped")
    assert (data["ingested"], data["skipped"]) == (15, {"unmapped_provider": 15})


def test_an_unmapped_test_and_assertion_are_refused(ws: Path, cli: Cli) -> None:
    text = (ws / MAP).read_text(encoding="utf-8")
    (ws / "bad.yaml").write_text(
        text.replace("  refund policy explanation:", "  policy:"), encoding="utf-8"
    )
    error = refused(cli, ws, str(RESULTS), "--map", "bad.yaml")
    assert error["field"].startswith("refund policy explanation/support-b12")
    # The map's keys are listed: a key mistyped there is otherwise hard to spot.
    assert "tests mapped: " in error["message"] and "policy" in error["message"]
    typo = text.replace("  refund policy explanation:", "  refund policy explanaton:")
    (ws / "typo.yaml").write_text(typo, encoding="utf-8")
    error = refused(cli, ws, str(RESULTS), "--map", "typo.yaml")
    assert "did you mean 'refund policy explanaton'?" in error["message"], error["message"]
    no_metric = text.replace(
        "      reply_quality: {grader_id: reply-quality", "      judge: {grader_id: reply-quality"
    )
    (ws / "bad2.yaml").write_text(no_metric, encoding="utf-8")
    error = refused(cli, ws, str(RESULTS), "--map", "bad2.yaml")
    assert "reply_quality" in error["message"]
    assert "gradingResult.componentResults[" in error["field"]


def test_truncated_results_are_refused(ws: Path, cli: Cli) -> None:
    cut = ws / "cut.json"
    data = RESULTS.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert refused(cli, ws, str(cut), "--map", MAP)["file"] == str(cut)
    cut_lines = ws / "cut.jsonl"
    lines = RESULTS_JSONL.read_bytes()
    cut_lines.write_bytes(lines[: len(lines) // 2])
    error = refused(cli, ws, str(cut_lines), "--map", MAP, "--started-at", "2026-11-30T21:44:43Z")
    assert error["file"] == str(cut_lines) and error["line"] is not None


def test_two_results_documents_in_one_file_are_refused_not_half_imported(
    ws: Path, cli: Cli
) -> None:
    """`cat a.json b.json > two.json`: the first document alone was imported, the second
    dropped without a word. Refused (exit 2, the file named), nothing stored."""
    two = ws / "two.json"
    two.write_bytes(RESULTS.read_bytes() + RESULTS.read_bytes())
    error = refused(cli, ws, str(two), "--map", MAP)
    assert error["file"] == str(two)
    assert "content follows the end of the JSON document" in error["message"]


def test_an_unsupported_results_version_is_refused(ws: Path, cli: Cli) -> None:
    doc = document()
    doc["results"]["version"] = 2
    old = ws / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    assert refused(cli, ws, str(old), "--map", MAP)["field"] == "results.version"
