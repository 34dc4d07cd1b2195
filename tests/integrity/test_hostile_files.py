"""Hostile files (docs/formats.md, "Limits"): each is exit 2 naming
file:line:field, within 2 seconds of CPU and under 200 MB of memory, and nothing is stored.

Each case runs `python -m evalops` in a child process so that its peak memory
(`os.wait4` rusage of exactly that child) and CPU time can be measured; the child also gets
an address-space cap well above the budget, so a regression fails the test instead of
exhausting the machine.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cli
from tests.helpers import MINI_TASK, commit_all, sqlite_fingerprint
from tests.trial_factory import mini_case, record

MAX_CPU_SECONDS = 2.0
MAX_EXTRA_CPU_SECONDS = 0.5
MAX_RSS_MB = 200
ADDRESS_SPACE_CAP = 2 * 1024**3
HANG_SECONDS = 300
DB = Path(".evalops") / "registry.db"


@dataclass
class Measured:
    code: int
    stdout: str
    stderr: str
    cpu_seconds: float
    max_rss_mb: float
    wall_seconds: float


# The child is started from a small Python process rather than from the test process: a
# forked child's peak RSS starts at its parent's resident size, and a pytest worker that ran
# big tests before this one can hold hundreds of MB (pytest-xdist runs tests in any order).
_PROBE = """
import json, os, resource, subprocess, sys
cap, result, *argv = sys.argv[1:]
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (int(cap), int(cap)))
proc = subprocess.Popen(argv, preexec_fn=limit)
_, status, usage = os.wait4(proc.pid, 0)
with open(result, "w") as out:
    json.dump({"code": os.waitstatus_to_exitcode(status),
               "cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss}, out)
"""


def measure(*args: str, cwd: Path) -> Measured:
    """Run `evalops ARGS` in a child process; its exit code, output, CPU time and peak RSS.

    A run over the CPU budget is repeated, up to three runs in all, and the cheapest is
    kept: on a shared two-CPU machine a process's CPU time swells by half or more while the
    other CPU is busy (the cores share caches), as benchmarks take the best of several
    runs. Work that grows with a hostile input is over the budget in every run; the
    commands measured refuse their input (or only read), so repeating one changes nothing.
    """
    runs = [_run_once(args, cwd)]
    while runs[-1].cpu_seconds >= MAX_CPU_SECONDS and len(runs) < 3:
        runs.append(_run_once(args, cwd))
    return min(runs, key=lambda run: run.cpu_seconds)


def _run_once(args: tuple[str, ...], cwd: Path) -> Measured:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_ACTOR"] = "hostile@example.com"
    result = cwd / ".measured.json"
    started = time.monotonic()
    with (
        open(cwd / ".out", "w+b") as out,
        open(cwd / ".err", "w+b") as err,
    ):
        subprocess.run(
            [
                sys.executable,
                "-c",
                _PROBE,
                str(ADDRESS_SPACE_CAP),
                str(result),
                sys.executable,
                "-m",
                "evalops",
                *args,
            ],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            check=True,
            # A command that waits (on a FIFO, a lock, stdin) rather than works: its CPU
            # stays small, so only a clock catches it. Generous, as the machine may be
            # loaded; a wall-clock assertion of 30 s failed at random under load 9-16.
            timeout=HANG_SECONDS,
        )
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    child = json.loads(result.read_text(encoding="utf-8"))
    result.unlink()
    return Measured(
        child["code"],
        stdout,
        stderr,
        child["cpu"],
        child["rss_kib"] / 1024,  # kilobytes on Linux
        time.monotonic() - started,
    )


def assert_cheap_beside(clean: Path, args: tuple[str, ...]) -> Callable[[Measured], None]:
    """The CPU check of a refusal: within MAX_CPU_SECONDS, or, when a loaded machine swells
    every process's CPU time past it, within MAX_EXTRA_CPU_SECONDS of the same command run
    now on `clean` (the registry without the hostile file). A refusal whose work grows with
    the hostile input fails both; start-up, which dominates, no longer decides."""

    def check(result: Measured) -> None:
        if result.cpu_seconds < MAX_CPU_SECONDS:
            return
        base = min((_run_once(args, clean) for _ in range(2)), key=lambda r: r.cpu_seconds)
        extra = result.cpu_seconds - base.cpu_seconds
        assert extra < MAX_EXTRA_CPU_SECONDS, (
            f"{result.cpu_seconds:.2f}s of CPU, {extra:.2f}s more than on a clean registry"
        )

    return check


def assert_refused(
    result: Measured,
    file: str,
    line: int | None,
    field: str | None,
    cheap: Callable[[Measured], None] | None = None,
) -> None:
    context = f"{result.stdout}\n{result.stderr}"
    assert result.code == 2, context
    assert "Traceback" not in result.stderr and "internal error" not in context
    error = json.loads(result.stdout)["error"]
    assert error["code"] == 2
    assert error["file"] is not None and error["file"].endswith(file), error
    if line is not None:
        assert error["line"] == line, error
    assert isinstance(error["line"], int) and error["line"] >= 1, error
    if field is not None:
        assert error["field"] is not None and field in error["field"], error
    if cheap is None:
        assert result.cpu_seconds < MAX_CPU_SECONDS, f"{result.cpu_seconds:.2f}s of CPU"
    else:
        cheap(result)
    assert result.max_rss_mb < MAX_RSS_MB, f"{result.max_rss_mb:.0f} MB"


# ------------------------------------------------------------------------ spec files

BILLION_LAUGHS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
)


def _task_yaml(**meta: Any) -> str:
    task = copy.deepcopy(MINI_TASK)
    task["id"] = "hostile"
    task["meta"].update(meta)
    return yaml.safe_dump(task, sort_keys=False)


def _nested_yaml(depth: int) -> str:
    return _task_yaml() + "extra: " + "[" * depth + "]" * depth + "\n"


@dataclass
class SpecCase:
    id: str
    name: str
    content: bytes
    line: int | None
    field: str | None


SPEC_CASES = [
    SpecCase("billion-laughs", "hostile.yaml",
             (_task_yaml() + BILLION_LAUGHS).encode(), None, None),
    SpecCase("billion-laughs-small-file", "laughs.yaml", BILLION_LAUGHS.encode(), None, None),
    SpecCase("yaml-flow-nesting-10000", "hostile.yaml", _nested_yaml(10_000).encode(), None,
             None),
    SpecCase("yaml-block-nesting-65", "hostile.yaml",
             (_task_yaml() + "".join(f"{'  ' * i}k{i}:\n" for i in range(65))
              + "  " * 65 + "leaf: 1\n").encode(), None, None),
    SpecCase("json-nesting-10000", "hostile.json",
             ('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}").encode(), 1, None),
    SpecCase("raw-nul-byte", "hostile.yaml",
             _task_yaml().replace("A minimal task", "A minimal\x00task").encode(), None, None),
    SpecCase("two-mib-spec", "hostile.yaml",
             (_task_yaml() + "# " + "x" * (2 * 1024 * 1024) + "\n").encode(), 1, None),
    SpecCase("nul-escape-in-a-string", "hostile.yaml",
             _task_yaml(title="a\0b").replace("a\\0b", "a\\x00b").encode(), None, "title"),
]  # fmt: skip


@pytest.mark.parametrize("case", SPEC_CASES, ids=[c.id for c in SPEC_CASES])
def test_a_hostile_spec_file_is_exit_2_cheaply_and_stores_nothing(
    synced: Path, case: SpecCase, tmp_path: Path
) -> None:
    before = sqlite_fingerprint(synced / DB)
    clean = Path(shutil.copytree(synced, tmp_path / "clean", symlinks=True))
    (synced / "registry" / "tasks" / case.name).write_bytes(case.content)
    commit_all(synced, case.id)
    for command in (("--json", "validate"), ("--json", "sync")):
        result = measure(*command, cwd=synced)
        assert_refused(
            result, case.name, case.line, case.field, assert_cheap_beside(clean, command)
        )
    assert sqlite_fingerprint(synced / DB) == before


# ----------------------------------------------------------------- symlinks out of git


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_symlink_out_of_the_work_tree_is_refused(
    synced: Path, tmp_path_factory: pytest.TempPathFactory, kind: str
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    task = copy.deepcopy(MINI_TASK)
    task["id"] = "outside-task"
    (outside / "outside-task.yaml").write_text(yaml.safe_dump(task), encoding="utf-8")
    before = sqlite_fingerprint(synced / DB)
    if kind == "file":
        (synced / "registry" / "tasks" / "outside-task.yaml").symlink_to(
            outside / "outside-task.yaml"
        )
        name = "outside-task.yaml"
    else:
        (synced / "registry" / "tasks" / "linked").symlink_to(outside, target_is_directory=True)
        name = "linked"
    commit_all(synced, f"symlink ({kind}) out of the work tree")
    for command in (("--json", "validate"), ("--json", "sync")):
        result = measure(*command, cwd=synced)
        assert result.code == 2, result.stdout + result.stderr
        error = json.loads(result.stdout)["error"]
        assert name in str(error["file"]) + error["message"]
        assert "outside the registry's git work tree" in error["message"]
    assert sqlite_fingerprint(synced / DB) == before


# ---------------------------------------------------------------------- trial records


def _record(workspace: Path, **changes: Any) -> dict[str, Any]:
    out = record(mini_case(workspace), trial_id="t-1")
    out.update(changes)
    return out


def _string_paths(value: Any, path: str = "") -> list[str]:
    """Every path (pydantic style, `a.b[0].c`) of a string in a JSON value."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _string_paths(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _string_paths(v, f"{path}[{i}]")]
    return []


def _set(value: Any, path: str, new: Callable[[str], str]) -> Any:
    out = copy.deepcopy(value)
    parts = path.replace("[", ".[").split(".")
    target = out
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    last = parts[-1]
    key: Any = int(last[1:-1]) if last.startswith("[") else last
    target[key] = new(target[key])
    return out


TRIAL_CASES: list[tuple[str, Callable[[Path], str], str | None]] = [
    ("started-at-year-1",
     lambda ws: json.dumps(_record(ws, started_at="0001-01-01T00:00:00Z")), "started_at"),
    ("completed-at-year-9999",
     lambda ws: json.dumps(_record(ws, completed_at="9999-12-31T23:59:59Z")), "completed_at"),
    ("tool-call-args-nested-500",
     lambda ws: json.dumps(_record(ws, tool_calls=[{"tool": "t", "args": {"a": "@"}}]))
     .replace('"@"', "[" * 500 + "]" * 500), None),
    ("raw-nul-byte-in-a-line",
     lambda ws: json.dumps(_record(ws)).replace('"run-1"', '"run\x00-1"'), None),
    ("trial-index-2^53",
     lambda ws: json.dumps(_record(ws, trial_index=2**53)), "trial_index"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "make", "field"), TRIAL_CASES, ids=[c[0] for c in TRIAL_CASES])
def test_a_hostile_trial_file_is_exit_2_cheaply_and_stores_nothing(
    synced: Path, case: str, make: Callable[[Path], str], field: str | None
) -> None:
    good = json.dumps(_record(synced, trial_id="t-0"))
    (synced / "trials.jsonl").write_text(f"{good}\n{make(synced)}\n", encoding="utf-8")
    before = sqlite_fingerprint(synced / DB)
    result = measure("--json", "trials", "ingest", "trials.jsonl", cwd=synced)
    assert_refused(result, "trials.jsonl", 2, field)
    assert sqlite_fingerprint(synced / DB) == before  # all or nothing: line 1 not stored


def test_nul_in_every_string_field_of_a_trial_record_is_exit_2_naming_the_field(
    synced: Path, cli: Cli
) -> None:
    base = _record(synced)
    base["tool_calls"] = [{"tool": "t", "args": {"q": "x"}, "result": {"r": "y"}}]
    paths = _string_paths(base)
    assert len(paths) >= 10
    before = sqlite_fingerprint(synced / DB)
    for path in paths:
        hostile = _set(base, path, lambda s: s + "\x00")
        (synced / "nul.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
        result = cli("--json", "trials", "ingest", "nul.jsonl", cwd=synced)
        assert result.code == 2, (path, result.stdout, result.stderr)
        error = result.json()["error"]
        assert error["line"] == 1 and error["file"].endswith("nul.jsonl"), (path, error)
        assert error["field"] == path, (path, error)  # the poisoned field, not just any
    assert sqlite_fingerprint(synced / DB) == before


@pytest.mark.parametrize(
    "args",
    [
        ["gate", "check", "--build", "build-1", "--suite", "s", "--at", "0001-01-01T00:00:00Z"],
        ["gate", "check", "--build", "build-1", "--suite", "s", "--at", "9999-12-31T00:00:00Z"],
        ["waiver", "grant", "--task", "mini-task", "--suite", "s", "--states", "task_fail",
         "--build", "build-1", "--owner", "o", "--reason", "r",
         "--expires", "9999-12-31T00:00:00Z"],
        ["waiver", "grant", "--task", "mini-task", "--suite", "s", "--states", "task_fail",
         "--build", "build-1", "--owner", "o", "--reason", "r", "--expires", "tomorrow"],
        ["waiver", "grant", "--task", "mini-task", "--suite", "s", "--states", "task_fail",
         "--build", "build-1", "--owner", "o", "--reason", "r", "--expires", "+24:00"],
    ],
    ids=["at-year-1", "at-year-9999", "expires-year-9999", "expires-tomorrow",
         "expires-plus-24h"],
)  # fmt: skip
def test_out_of_range_timestamps_on_the_command_line_are_exit_2(
    synced: Path, cli: Cli, args: list[str]
) -> None:
    before = sqlite_fingerprint(synced / DB)
    result = cli("--json", *args, cwd=synced)
    assert result.code == 2, result.stdout + result.stderr
    assert result.json()["error"]["code"] == 2
    assert sqlite_fingerprint(synced / DB) == before


@pytest.mark.postgres
def test_trial_index_at_2_53_minus_1_is_stored_on_postgresql_and_2_53_is_refused(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    """docs/formats.md allows integers up to 2^53-1: PostgreSQL must hold them (it once
    overflowed an int4 column, exit 1); one more is exit 2 naming line and field."""
    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    top = json.dumps(_record(workspace, trial_id="t-top", trial_index=2**53 - 1))
    too_big = json.dumps(_record(workspace, trial_id="t-over", trial_index=2**53))
    (workspace / "over.jsonl").write_text(f"{top}\n{too_big}\n", encoding="utf-8")
    refused = cli("--db", pg_url, "--json", "trials", "ingest", "over.jsonl", cwd=workspace)
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert (error["line"], error["field"]) == (2, "trial_index")
    (workspace / "top.jsonl").write_text(f"{top}\n", encoding="utf-8")
    stored = cli("--db", pg_url, "--json", "trials", "ingest", "top.jsonl", cwd=workspace)
    assert stored.code == 0, stored.stdout + stored.stderr
    shown = cli("--db", pg_url, "--json", "trials", "show", "t-top", cwd=workspace)
    assert str(2**53 - 1) in shown.stdout
    assert cli("--db", pg_url, "verify", cwd=workspace).code == 0


def test_nul_in_every_string_field_of_a_spec_is_exit_2_naming_file_line_and_field(
    workspace: Path, cli: Cli
) -> None:
    task = copy.deepcopy(MINI_TASK)
    paths = _string_paths(task)
    assert len(paths) >= 8
    target = workspace / "registry" / "tasks" / "mini-task.yaml"
    for path in paths:
        hostile = _set(task, path, lambda s: s + "\x00")
        dumped = yaml.safe_dump(hostile, sort_keys=False)
        target.write_text(dumped, encoding="utf-8")
        line = next(n for n, text in enumerate(dumped.splitlines(), 1) if "\\0" in text)
        result = cli("--json", "validate", cwd=workspace)
        assert result.code == 2, (path, result.stdout, result.stderr)
        error = result.json()["error"]
        assert error["file"].endswith("mini-task.yaml"), (path, error)
        assert error["line"] == line, (path, error)
        assert error["field"] == path, (path, error)  # the poisoned field, not just any


def test_deep_flow_nesting_is_refused_before_parsing_but_quoted_brackets_are_text() -> None:
    """The pre-check refuses flow collections nested far past the limit without running the
    recursive composer, and never counts brackets inside quotes or comments."""
    from evalops.registry.load import FLOW_DEPTH_PRECHECK, _flow_depth_exceeds

    deep = "x: " + "[" * (FLOW_DEPTH_PRECHECK + 1) + "]" * (FLOW_DEPTH_PRECHECK + 1)
    assert _flow_depth_exceeds(deep, FLOW_DEPTH_PRECHECK)
    brackets = "[" * (2 * FLOW_DEPTH_PRECHECK)
    for text in (
        f'a: "{brackets}"',
        f"a: '{brackets}'",
        f"a: 1  # {brackets}",
        f'a: "\\" {brackets}"',
        "[" * FLOW_DEPTH_PRECHECK + "]" * FLOW_DEPTH_PRECHECK,
    ):
        assert not _flow_depth_exceeds(text, FLOW_DEPTH_PRECHECK), text[:40]


@pytest.mark.parametrize("control", ["\x1b", "\x85", "\r", "\x7f"], ids=repr)
def test_a_control_character_in_any_string_of_a_trial_record_is_exit_2_naming_the_field(
    synced: Path, cli: Cli, control: str
) -> None:
    """docs/formats.md: strings hold no control character but tab and newline, trial
    records too (an escape sequence in a message would move a terminal's cursor or colours
    wherever it is shown). The fast path sends such lines to the strict walk, which names
    the field."""
    base = _record(synced)
    base["tool_calls"] = [{"tool": "t", "args": {"q": "x"}, "result": {"r": "y"}}]
    before = sqlite_fingerprint(synced / DB)
    for path in _string_paths(base):
        hostile = _set(base, path, lambda s: s + control)
        (synced / "ctl.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
        result = cli("--json", "trials", "ingest", "ctl.jsonl", cwd=synced)
        assert result.code == 2, (path, result.stdout, result.stderr)
        error = result.json()["error"]
        assert error["field"] == path and error["line"] == 1, (path, error)
        assert f"U+{ord(control):04X}" in error["message"], (path, error)
    assert sqlite_fingerprint(synced / DB) == before


def test_tab_and_newline_in_a_trial_record_s_text_are_stored(synced: Path, cli: Cli) -> None:
    record_ = _record(synced, trial_id="t-tab")
    record_["tool_calls"] = [{"tool": "t", "args": {"q": "line one\n\tline two"}}]
    (synced / "tab.jsonl").write_text(json.dumps(record_) + "\n", encoding="utf-8")
    result = cli("trials", "ingest", "tab.jsonl", cwd=synced)
    assert result.code == 0, result.stdout + result.stderr
