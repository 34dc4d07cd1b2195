"""Limits that hold alike on both engines (docs/formats.md, "Limits"): identifiers at most
256 characters, free text at most 4,096, trajectories at most 10,000 calls matched without
recursion, anchor files at most 1 MiB, and a file of rejected lines reported in time linear
in its size. Each refusal is exit 2 naming the field, in bounded CPU and memory (measured
in a child process, as in tests/integrity/test_hostile_files.py), with nothing stored.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalops.domain.specs import TrajectoryExpectation
from evalops.domain.trajectory import ObservedCall, grade
from tests.conftest import Cli
from tests.helpers import commit_all, sqlite_fingerprint, store_state
from tests.integrity.test_hostile_files import MAX_CPU_SECONDS, MAX_RSS_MB, measure
from tests.trial_factory import mini_case, record

DB = Path(".evalops") / "registry.db"


# ----------------------------------------------------------------- trajectory matching


def _expectation(n: int, how: str = "ignore", mode: str = "any-order") -> dict[str, Any]:
    return {"match": mode, "calls": [{"tool": "t", "argsMatch": how} for _ in range(n)]}


def _observed(n: int) -> list[ObservedCall]:
    return [ObservedCall("t", {"i": i}) for i in range(n)]


def test_1100_interchangeable_expected_calls_are_matched_without_recursion() -> None:
    """Every expected call can take every observed one: a recursive augmenting-path search
    goes one frame deeper per call and overflows Python's stack near 1,000."""
    exp = TrajectoryExpectation.model_validate(_expectation(1100))
    result = grade(exp, _observed(1100))
    assert (result.matched, result.matched_count) == (True, 1100)
    fewer = grade(exp, _observed(1000))  # the matching is min(expected, observed)
    assert (fewer.matched, fewer.matched_count) == (False, 1000)


def test_a_long_chain_of_distinct_calls_is_matched_iteratively() -> None:
    """Expected call i < n-1 fits observed calls i and i+1; the last expected call fits
    only observed call 0. Taking each first fit leaves the last call nothing: the one
    perfect matching (i -> i+1, last -> 0) is found only through an augmenting path through
    every call, which a recursive search cannot follow n = 2,000 deep."""
    n = 2000
    calls = [{"tool": "t", "args": {f"k{i}": 1}, "argsMatch": "subset"} for i in range(n - 1)]
    calls.append({"tool": "t", "args": {"last": 1}, "argsMatch": "subset"})
    observed = [ObservedCall("t", {"k0": 1, "last": 1})]
    observed += [ObservedCall("t", {f"k{j - 1}": 1, f"k{j}": 1}) for j in range(1, n)]
    exp = TrajectoryExpectation.model_validate({"match": "any-order", "calls": calls})
    result = grade(exp, observed)
    assert (result.matched, result.matched_count) == (True, n)


@pytest.mark.parametrize(("expected", "observed"), [(1100, 1100), (3000, 3000)])
def test_trajectory_grade_of_thousands_of_calls_is_cheap(
    tmp_path: Path, expected: int, observed: int
) -> None:
    (tmp_path / "exp.json").write_text(json.dumps(_expectation(expected)), encoding="utf-8")
    calls = [{"tool": "t", "args": {"i": i}} for i in range(observed)]
    (tmp_path / "calls.json").write_text(json.dumps(calls), encoding="utf-8")

    result = measure("--json", "trajectory", "grade", "--expected", "exp.json", "--calls",
                     "calls.json", cwd=tmp_path)  # fmt: skip

    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["matchedCount"] == min(expected, observed)
    assert result.cpu_seconds < 3 * MAX_CPU_SECONDS, f"{result.cpu_seconds:.2f}s of CPU"
    assert result.max_rss_mb < MAX_RSS_MB, f"{result.max_rss_mb:.0f} MB"


def test_more_than_10000_calls_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "big-exp.json").write_text(json.dumps(_expectation(10_001)), encoding="utf-8")
    (tmp_path / "exp.json").write_text(json.dumps(_expectation(1)), encoding="utf-8")
    calls = [{"tool": "t", "args": {}} for _ in range(10_001)]
    (tmp_path / "calls.json").write_text(json.dumps(calls), encoding="utf-8")
    (tmp_path / "one.json").write_text(json.dumps(calls[:1]), encoding="utf-8")

    for exp, observed, field in (("big-exp.json", "one.json", "calls"),
                                 ("exp.json", "calls.json", "calls")):  # fmt: skip
        result = measure("--json", "trajectory", "grade", "--expected", exp, "--calls",
                         observed, cwd=tmp_path)  # fmt: skip
        assert result.code == 2, result.stdout + result.stderr
        error = json.loads(result.stdout)["error"]
        assert error["field"] == field and "10000" in error["message"].replace(",", "")
        assert result.max_rss_mb < MAX_RSS_MB


def test_a_trial_with_more_than_10000_tool_calls_is_exit_2(synced: Path) -> None:
    before = sqlite_fingerprint(synced / DB)
    calls = [{"tool": "t", "args": {}} for _ in range(10_001)]
    trial = record(mini_case(synced), trial_id="t-many", tool_calls=calls)
    (synced / "many.jsonl").write_text(json.dumps(trial) + "\n", encoding="utf-8")

    result = measure("--json", "trials", "ingest", "many.jsonl", cwd=synced)

    assert result.code == 2, result.stdout + result.stderr
    assert json.loads(result.stdout)["error"]["field"] == "tool_calls"
    assert sqlite_fingerprint(synced / DB) == before


# ------------------------------------------------------------------------ anchor files


def test_verify_anchors_reads_at_most_one_mib(synced: Path) -> None:
    result = measure("--json", "verify", "--anchors", "/dev/zero", cwd=synced)
    assert result.code == 2, result.stdout + result.stderr
    error = json.loads(result.stdout)["error"]
    assert (error["file"], error["field"]) == ("/dev/zero", "--anchors")
    assert result.cpu_seconds < MAX_CPU_SECONDS and result.max_rss_mb < MAX_RSS_MB

    head = json.loads(measure("--json", "verify", cwd=synced).stdout)["audit_head"]
    line = f"{head['seq']}:{head['hash']}\n".encode()
    (synced / "anchors.txt").write_bytes(line + b" " * (1024 * 1024 - len(line)))
    assert measure("verify", "--anchors", "anchors.txt", cwd=synced).code == 0
    (synced / "anchors.txt").write_bytes(line + b" " * (1024 * 1024 - len(line) + 1))
    assert measure("verify", "--anchors", "anchors.txt", cwd=synced).code == 2


# --------------------------------------------------- identifiers and free text, both engines


def _state(workspace: Path, args: list[str]) -> object:
    return store_state(workspace, args, ("audit_event", "execution_profile", "trial", "waiver"))


def _profile_with_build(workspace: Path, build: str) -> None:
    path = workspace / "registry" / "executions" / "mini-b1.json"
    profile = json.loads(path.read_text(encoding="utf-8"))
    profile = copy.deepcopy(profile)
    profile["id"] = "long-build"
    profile["system_build"] = build
    (path.parent / "long-build.yaml").write_text(yaml.safe_dump(profile), encoding="utf-8")
    commit_all(workspace, f"a build name of {len(build)} characters")


def test_a_4kb_build_name_is_exit_2_naming_the_field_on_both_engines(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    _profile_with_build(workspace, "b" * 4000)
    before = _state(workspace, synced_store)

    refused = cli(*synced_store, "--json", "sync", cwd=workspace)

    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert error["file"] == "registry/executions/long-build.yaml"
    assert error["field"] == "system_build" and "256" in error["message"]
    assert _state(workspace, synced_store) == before


def test_a_256_character_build_name_is_stored_on_both_engines(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    _profile_with_build(workspace, "b" * 256)
    synced = cli(*synced_store, "--json", "sync", cwd=workspace)
    assert synced.code == 0, synced.stderr
    assert [e["system_build"] for e in synced.json()["registered"]] == ["b" * 256]


def test_long_identifiers_and_free_text_on_the_command_line_are_exit_2(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    before = _state(workspace, synced_store)
    cases = [
        (("gate", "check", "--build", "b" * 257, "--suite", "s"), "--build"),
        (("--actor", "a" * 257, "sync"), "--actor"),
        (("waiver", "grant", "--task", "mini-task", "--suite", "s", "--states", "task_fail",
          "--build", "b1", "--owner", "o", "--reason", "r" * 4097, "--expires", "7d"),
         "--reason"),
        (("incident", "open", "--title=" + "t" * 4097, "--severity", "low"), "--title"),
    ]  # fmt: skip
    for args, field in cases:
        result = cli(*synced_store, "--json", *args, cwd=workspace)
        assert result.code == 2, (field, result.stdout, result.stderr)
        assert result.json()["error"]["field"] == field
    assert _state(workspace, synced_store) == before


def test_a_4kb_run_id_in_a_trial_is_exit_2_on_both_engines(
    workspace: Path, cli: Cli, synced_store: list[str]
) -> None:
    before = _state(workspace, synced_store)
    trial = record(mini_case(workspace), trial_id="t-1", run_id="r" * 4000)
    (workspace / "long.jsonl").write_text(json.dumps(trial) + "\n", encoding="utf-8")

    result = cli(*synced_store, "--json", "trials", "ingest", "long.jsonl", cwd=workspace)

    assert result.code == 2, result.stdout + result.stderr
    assert result.json()["error"]["field"] == "run_id"
    assert (result.json()["error"]["file"], result.json()["error"]["line"]) == ("long.jsonl", 1)
    assert _state(workspace, synced_store) == before


# ---------------------------------------------------------------- rejected lines, linear


def test_a_small_gzip_of_millions_of_bad_lines_is_reported_cheaply(synced: Path) -> None:
    """30 KB of gzip expanding to 15 million bad lines: the first 1,000 rejections are
    listed, the rest counted, in time linear in the bytes (not a parse per line)."""
    lines = 15_000_000
    (synced / "bad.jsonl.gz").write_bytes(gzip.compress(b"x\n" * lines, 9))
    assert (synced / "bad.jsonl.gz").stat().st_size < 40_000
    before = sqlite_fingerprint(synced / DB)

    result = measure("--json", "trials", "ingest", "--progress", "none", "bad.jsonl.gz",
                     cwd=synced)  # fmt: skip

    assert result.code == 2, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert len(report["rejected"]) == 1000
    assert [r["line"] for r in report["rejected"]] == list(range(1, 1001))
    # Counted exactly until the refusal is certain and 10,000 are bad; the rest as lines.
    assert report["rejected_total"] == 10_000
    assert report["rejected_total"] + report["unchecked_lines"] == lines
    assert report["ingested"] == 0
    assert result.cpu_seconds < 3 * MAX_CPU_SECONDS, f"{result.cpu_seconds:.2f}s of CPU"
    assert result.max_rss_mb < MAX_RSS_MB, f"{result.max_rss_mb:.0f} MB"
    assert sqlite_fingerprint(synced / DB) == before
