"""Acceptance: `evalops trials ingest` refuses bad input precisely and changes nothing.

Criteria of the trials issue (docs/digests.md, docs/formats.md, docs/cli.md and docs/verify.md):

1. Every bad input below (at least 30 cases) exits 2 with the `--json` error
   `{"error": {"code", "message", "file", "line", "field"}}` naming the file, the line and the
   field (None only for whole-line problems), the stderr line names `file:line`, and every
   table and the audit chain head are unchanged. `--max-bad-records N` commits the good lines
   in one go and lists every bad one (file, line, field, error); one bad line more than N and
   nothing is stored.
2. A record claiming `task_pass` while a blocking grader says `hard_constraint_fail` is
   refused with exit 2, naming the line and both values.
3. Re-ingesting an identical record is a counted no-op (`skipped_identical`) that changes
   nothing in the database; the same `trial_id` with another `record_digest` is an error; a
   rerun whose parent appears earlier in the same invocation is accepted.

Every bad case is a small JSONL file of valid records with exactly one defect on a known
line: line 3 of a 4-line file unless the defect is about the whole file. The base records
are proved valid by `test_base_records_are_valid`, so a refusal is caused by the defect.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from evalops.services.ingest.records import BATCH_SIZE, MAX_LINE_BYTES
from tests.conftest import Cli, evalops_test_env, run_quietly
from tests.helpers import (
    MINI_EXECUTION,
    MINI_GRADERS,
    MINI_TASK,
    CliResult,
    commit_all,
    sqlite_fingerprint,
    write_yaml,
)
from tests.trial_factory import MINI_PASS_RESULTS, eval_case, mini_case, record

# --------------------------------------------------------------------------- digests
# Computed with the docs/digests.md recipes (rfc8785 + hashlib only) from the registry
# the fixtures write; `test_module_digests_are_the_registered_ones` proves they match.


def jcs_digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def task_digest(task: dict[str, Any]) -> str:
    return jcs_digest({k: task[k] for k in ("spec_schema_version", "contract", "fixtures")})


def identity(task: str, execution: str, graders: str) -> dict[str, str]:
    """The digest fields of a record, with a consistent `eval_case_digest`."""
    ids = {"task_digest": task, "execution_digest": execution, "grader_set_digest": graders}
    return {**ids, "eval_case_digest": jcs_digest(ids)}


# A second task with its own grader set, for "a digest of another task".
OTHER_TASK: dict[str, Any] = {
    **copy.deepcopy(MINI_TASK),
    "id": "other-task",
    "grader_set": "other-graders",
}
OTHER_TASK["contract"]["goal"] = "do_another_thing"
OTHER_GRADERS: dict[str, Any] = {**copy.deepcopy(MINI_GRADERS), "id": "other-graders"}

TASK = task_digest(MINI_TASK)
EXECUTION = jcs_digest({k: v for k, v in MINI_EXECUTION.items() if k not in ("id", "meta")})
GRADERS = jcs_digest(MINI_GRADERS)
OTHER_TASK_DIGEST = task_digest(OTHER_TASK)
OTHER_GRADERS_DIGEST = jcs_digest(OTHER_GRADERS)
UNKNOWN = "sha256:" + "0" * 64

CASE = identity(TASK, EXECUTION, GRADERS)
OTHER_CASE = identity(OTHER_TASK_DIGEST, EXECUTION, OTHER_GRADERS_DIGEST)

# --------------------------------------------------------------------------- records

PASS = MINI_PASS_RESULTS
"""outcome says task_pass (score 1.0), no-twice says pass."""
HARD_FAIL_RESULTS: list[dict[str, Any]] = [
    PASS[0],
    {"grader_id": "no-twice", "grader_version": 1, "state": "hard_constraint_fail"},
]
"""The blocking hard-constraint grader no-twice says hard_constraint_fail."""


def good(n: int, **changes: Any) -> dict[str, Any]:
    """Valid passing record `t-<n>` (trial_index n-1) of mini-task, then `changes` set."""
    rec = record(CASE, trial_id=f"t-{n}", trial_index=n - 1)
    rec.update(changes)
    return rec


def without(rec: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k not in keys}


def text(rec: dict[str, Any]) -> str:
    return json.dumps(rec)


def swap(line: str, old: str, new: str) -> str:
    """`line` with its one occurrence of `old` replaced by `new`."""
    assert line.count(old) == 1, f"{old!r} must occur exactly once"
    return line.replace(old, new)


def jsonl(*lines: str | bytes, end: bytes = b"\n") -> bytes:
    """The file: each line (str is UTF-8 encoded) followed by `end`."""
    return b"".join((x.encode("utf-8") if isinstance(x, str) else x) + end for x in lines)


def on_line_3(bad: str | bytes) -> bytes:
    """A 4-line file: valid records t-1, t-2, `bad`, t-4."""
    return jsonl(text(good(1)), text(good(2)), bad, text(good(4)))


def line_of_length(length: int, n: int = 3) -> str:
    """Valid record t-<n>, padded (in a tool call's arguments: free-form JSON, unlike a
    string field, which holds at most 4,096 characters) to exactly `length` bytes."""

    def padded(pad: str) -> dict[str, Any]:
        return good(n, tool_calls=[{"tool": "pad", "args": {"pad": pad}}])

    line = text(padded("x" * (length - len(text(padded(""))))))
    assert len(line.encode("utf-8")) == length
    return line


L3 = text(good(3))
"""The valid line 3 most defects are put into."""


def run_id_bytes(raw: bytes) -> bytes:
    """Line 3 with raw bytes (not valid UTF-8) inside its run_id string."""
    return swap(L3, '"run-1"', '"run-@"').encode().replace(b"@", raw)


# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Bad:
    """One bad JSONL file and where evalops must say the problem is."""

    id: str
    content: bytes
    line: int
    """1-based line the error must name."""
    field: str | None
    """Field path the error must name; None for whole-line problems."""
    says: str
    """What the message must contain (case-insensitive; `|` separates alternatives)."""


CASES: list[Bad] = [
    # ----- whole-file and line-framing problems: no field
    Bad("empty-file", b"", 1, None, "no records|empty"),
    Bad("only-a-newline", b"\n", 1, None, "empty|blank"),
    Bad("bom", b"\xef\xbb\xbf" + on_line_3(L3), 1, None, "byte-order mark|bom"),
    Bad("crlf-file", jsonl(*(text(good(n)) for n in range(1, 5)), end=b"\r\n"), 1, None, "cr"),
    Bad(
        "crlf-one-line",
        jsonl(text(good(1)), text(good(2))) + L3.encode() + b"\r\n" + jsonl(text(good(4))),
        3,
        None,
        "cr",
    ),
    Bad("blank-line", on_line_3(""), 3, None, "empty|blank"),
    Bad("whitespace-line", on_line_3(" \t "), 3, None, "empty|blank"),
    Bad("oversized-line", on_line_3(line_of_length(MAX_LINE_BYTES + 1)), 3, None, "long|bytes"),
    Bad(
        "oversized-last-line-without-newline",
        jsonl(text(good(1)), text(good(2)), L3) + line_of_length(MAX_LINE_BYTES + 1, n=4).encode(),
        4,
        None,
        "long|bytes",
    ),
    # ----- not JSON, or not one JSON object
    Bad("truncated-line", on_line_3(L3[:-25]), 3, None, "json"),
    Bad(
        "truncated-last-line-at-eof",
        jsonl(text(good(1)), text(good(2)), L3) + text(good(4))[:40].encode(),
        4,
        None,
        "json",
    ),
    Bad("trailing-garbage", on_line_3(L3 + " x"), 3, None, "json|extra"),
    Bad("two-objects-on-a-line", on_line_3(L3 + L3), 3, None, "json|extra"),
    Bad("raw-control-character", on_line_3(swap(L3, '"run-1"', '"run-\x001"')), 3, None, "json"),
    Bad("json-array-line", on_line_3("[" + L3 + "]"), 3, None, "object"),
    Bad("bare-string-line", on_line_3('"t-3"'), 3, None, "object"),
    Bad("null-line", on_line_3("null"), 3, None, "object"),
    # ----- encoding
    Bad("invalid-utf8", on_line_3(run_id_bytes(b"\xff")), 3, None, "utf-8"),
    Bad("encoded-surrogate-bytes", on_line_3(run_id_bytes(b"\xed\xa0\x80")), 3, None, "utf-8"),
    Bad(
        "lone-surrogate-escape",
        on_line_3(swap(L3, '"run-1"', '"run-\\ud800"')),
        3,
        "run_id",
        "surrogate",
    ),
    Bad(
        "lone-surrogate-in-a-key",
        on_line_3(swap(L3, '"trial_index": 2', '"trial_index": 2, "\\udc00": 1')),
        3,
        None,
        "surrogate",
    ),
    # ----- JSON values outside the data model
    Bad(
        "nan-score",
        on_line_3(swap(L3, '"score": 1.0', '"score": NaN')),
        3,
        "grader_results[0].score",
        "finite|nan",
    ),
    Bad(
        "infinity-seed",
        on_line_3(swap(L3, '"trial_index": 2', '"trial_index": 2, "effective_seed": Infinity')),
        3,
        "effective_seed",
        "finite|infinity",
    ),
    Bad(
        "overflowing-float-score",
        on_line_3(swap(L3, '"score": 1.0', '"score": 1e400')),
        3,
        "grader_results[0].score",
        "finite|inf",
    ),
    Bad(
        "integer-beyond-2^53-1",
        on_line_3(text(good(3, effective_seed=2**53))),
        3,
        "effective_seed",
        "2^53",
    ),
    Bad(
        "integer-below-minus-2^53-1",
        on_line_3(text(good(3, effective_seed=-(2**53)))),
        3,
        "effective_seed",
        "2^53",
    ),
    Bad(
        "integer-with-5000-digits",
        on_line_3(
            swap(L3, '"trial_index": 2', '"trial_index": 2, "effective_seed": 1' + "0" * 5000)
        ),
        3,
        "effective_seed",
        "2^53|digits",
    ),
    Bad(
        "deeply-nested-value",
        on_line_3(
            text(good(3, tool_calls=[{"tool": "t", "args": {"a": "@"}}])).replace(
                '"@"', "[" * 100_000 + "]" * 100_000
            )
        ),
        3,
        None,
        "deep|nest|json",
    ),
    Bad(
        "duplicate-key",
        on_line_3('{"trial_id": "t-3", ' + L3[1:]),
        3,
        "trial_id",
        "duplicate",
    ),
    Bad(
        "duplicate-nested-key",
        on_line_3(swap(L3, '{"status": "ok"}', '{"status": "ok", "status": "timeout"}')),
        3,
        "runtime.status",
        "duplicate",
    ),
    Bad(
        "duplicate-key-in-a-list-item",
        on_line_3(swap(L3, '"state": "pass"', '"state": "pass", "state": "pass"')),
        3,
        "grader_results[1].state",
        "duplicate",
    ),
    # ----- the record's schema
    Bad("wrong-schema", on_line_3(text(good(3, schema="evalops.trial/v2"))), 3, "schema", "v2"),
    Bad("missing-schema", on_line_3(text(without(good(3), "schema"))), 3, "schema", "missing"),
    Bad(
        "missing-trial-id", on_line_3(text(without(good(3), "trial_id"))), 3, "trial_id", "missing"
    ),
    Bad("missing-runtime", on_line_3(text(without(good(3), "runtime"))), 3, "runtime", "missing"),
    Bad(
        "missing-grader-results",
        on_line_3(text(without(good(3), "grader_results"))),
        3,
        "grader_results",
        "missing",
    ),
    Bad(
        "missing-started-at",
        on_line_3(text(without(good(3), "started_at"))),
        3,
        "started_at",
        "missing",
    ),
    Bad("extra-field", on_line_3(text(good(3, colour="red"))), 3, "colour", "unknown|colour"),
    Bad(
        "extra-nested-field",
        on_line_3(text(good(3, runtime={"status": "ok", "exit_code": 0}))),
        3,
        "runtime.exit_code",
        "unknown|exit_code",
    ),
    Bad(
        "extra-field-in-grader-result",
        on_line_3(text(good(3, grader_results=[{**PASS[0], "verdict": "ok"}, PASS[1]]))),
        3,
        "grader_results[0].verdict",
        "unknown|verdict",
    ),
    Bad("empty-trial-id", on_line_3(text(good(3, trial_id=""))), 3, "trial_id", "trial_id|''"),
    Bad("task-id-pattern", on_line_3(text(good(3, task_id="Mini Task"))), 3, "task_id", "Mini"),
    Bad(
        "task-digest-pattern",
        on_line_3(text(good(3, task_digest="md5:abc"))),
        3,
        "task_digest",
        "md5:abc",
    ),
    Bad(
        "trial-index-negative",
        on_line_3(text(good(3, trial_index=-1))),
        3,
        "trial_index",
        "0|negative",
    ),
    Bad(
        "trial-index-string",
        on_line_3(text(good(3, trial_index="2"))),
        3,
        "trial_index",
        "integer",
    ),
    Bad(
        "trial-index-fraction",
        on_line_3(text(good(3, trial_index=1.5))),
        3,
        "trial_index",
        "integer",
    ),
    Bad(
        "trial-index-boolean",
        on_line_3(text(good(3, trial_index=True))),
        3,
        "trial_index",
        "integer",
    ),
    Bad(
        "runtime-not-an-object",
        on_line_3(text(good(3, runtime="ok"))),
        3,
        "runtime",
        "object|dict",
    ),
    Bad(
        "grader-results-not-a-list",
        on_line_3(text(good(3, grader_results={"outcome": "task_pass"}))),
        3,
        "grader_results",
        "list|array",
    ),
    Bad(
        "naive-timestamp",
        on_line_3(text(good(3, started_at="2026-11-29T10:00:00"))),
        3,
        "started_at",
        "offset",
    ),
    Bad(
        "date-only-timestamp",
        on_line_3(text(good(3, completed_at="2026-11-29"))),
        3,
        "completed_at",
        "timestamp|rfc 3339",
    ),
    Bad(
        "impossible-date",
        on_line_3(text(good(3, started_at="2026-02-30T10:00:00Z"))),
        3,
        "started_at",
        "2026-02-30",
    ),
    Bad(
        "completed-before-started",
        on_line_3(text(good(3, completed_at="2026-11-29T09:59:59Z"))),
        3,
        "completed_at",
        "before",
    ),
    Bad(
        "completed-before-started-across-offsets",
        on_line_3(text(good(3, completed_at="2026-11-29T10:30:00+01:00"))),
        3,
        "completed_at",
        "before",
    ),
    Bad(
        "invalid-runtime-status",
        on_line_3(text(good(3, runtime={"status": "crashed"}))),
        3,
        "runtime.status",
        "crashed",
    ),
    Bad(
        "invalid-effect-status",
        on_line_3(text(good(3, external_effects=[{"effect_key": "publish:1", "status": "maybe"}]))),
        3,
        "external_effects[0].status",
        "maybe",
    ),
    Bad(
        "effect-without-key",
        on_line_3(text(good(3, external_effects=[{"status": "committed"}]))),
        3,
        "external_effects[0].effect_key",
        "missing",
    ),
    Bad(
        "grader-state-outside-grader-states",
        on_line_3(
            text(
                good(
                    3,
                    grader_results=[
                        PASS[0],
                        {"grader_id": "no-twice", "grader_version": 1, "state": "failed"},
                    ],
                )
            )
        ),
        3,
        "grader_results[1].state",
        "failed",
    ),
    Bad(
        "score-above-1",
        on_line_3(swap(L3, '"score": 1.0', '"score": 1.5')),
        3,
        "grader_results[0].score",
        "1",
    ),
    Bad(
        "score-below-0",
        on_line_3(swap(L3, '"score": 1.0', '"score": -0.5')),
        3,
        "grader_results[0].score",
        "0",
    ),
    Bad(
        "score-as-string",
        on_line_3(swap(L3, '"score": 1.0', '"score": "1.0"')),
        3,
        "grader_results[0].score",
        "number",
    ),
    Bad(
        "grader-version-zero",
        on_line_3(text(good(3, grader_results=[{**PASS[0], "grader_version": 0}, PASS[1]]))),
        3,
        "grader_results[0].grader_version",
        "1",
    ),
    Bad(
        "negative-token-usage",
        on_line_3(text(good(3, usage={"model_calls": 1, "input_tokens": -5}))),
        3,
        "usage.input_tokens",
        "0|negative",
    ),
    Bad(
        "tool-call-without-tool",
        on_line_3(text(good(3, tool_calls=[{"args": {}, "agent_id": "support"}]))),
        3,
        "tool_calls[0].tool",
        "missing",
    ),
    # ----- references: digests and eval case
    Bad(
        "unknown-task-digest",
        on_line_3(text(good(3, **identity(UNKNOWN, EXECUTION, GRADERS)))),
        3,
        "task_digest",
        "not registered|unknown",
    ),
    Bad(
        "task-digest-of-another-task",
        on_line_3(text(good(3, **identity(OTHER_TASK_DIGEST, EXECUTION, OTHER_GRADERS_DIGEST)))),
        3,
        "task_digest",
        "other-task|mini-task",
    ),
    Bad(
        "unknown-execution-digest",
        on_line_3(text(good(3, **identity(TASK, UNKNOWN, GRADERS)))),
        3,
        "execution_digest",
        "not registered|unknown",
    ),
    Bad(
        "execution-digest-is-a-task-digest",
        on_line_3(text(good(3, **identity(TASK, TASK, GRADERS)))),
        3,
        "execution_digest",
        "not registered|unknown|not an execution",
    ),
    Bad(
        "unknown-grader-set-digest",
        on_line_3(text(good(3, **identity(TASK, EXECUTION, UNKNOWN)))),
        3,
        "grader_set_digest",
        "not registered|unknown",
    ),
    Bad(
        "grader-set-of-another-task",
        on_line_3(text(good(3, **identity(TASK, EXECUTION, OTHER_GRADERS_DIGEST)))),
        3,
        "grader_set_digest",
        "other-graders|mini-graders",
    ),
    Bad(
        "wrong-eval-case-digest",
        on_line_3(text(good(3, eval_case_digest=OTHER_CASE["eval_case_digest"]))),
        3,
        "eval_case_digest",
        "match|recomputed",
    ),
    # ----- trial identity, reruns and the classification claim
    Bad(
        "duplicate-trial-id-other-content-in-file",
        on_line_3(text(good(1, run_id="run-2"))),
        3,
        "trial_id",
        "t-1",
    ),
    Bad(
        "rerun-of-unknown-parent",
        on_line_3(text(good(3, rerun={"parent_trial_id": "ghost-7", "reason": "flaky"}))),
        3,
        "rerun.parent_trial_id",
        "ghost-7",
    ),
    Bad(
        "rerun-of-itself",
        on_line_3(text(good(3, rerun={"parent_trial_id": "t-3", "reason": "flaky"}))),
        3,
        "rerun.parent_trial_id",
        "t-3",
    ),
    Bad(
        "claims-task-fail-derived-task-pass",
        on_line_3(text(good(3, primary_classification="task_fail"))),
        3,
        "primary_classification",
        "task_fail",
    ),
    Bad(
        "claims-task-pass-derived-hard-constraint-fail",
        on_line_3(
            text(good(3, grader_results=HARD_FAIL_RESULTS, primary_classification="task_pass"))
        ),
        3,
        "primary_classification",
        "hard_constraint_fail",
    ),
    Bad(
        "claims-unknown-class",
        on_line_3(text(good(3, primary_classification="great_success"))),
        3,
        "primary_classification",
        "great_success",
    ),
]

# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="session")
def two_tasks_master(workspace_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mini registry plus other-task (with its own grader set other-graders), committed,
    initialized and synced once per test process."""
    root = tmp_path_factory.mktemp("two-tasks-master") / "ws"
    shutil.copytree(workspace_master, root, symlinks=True)
    write_yaml(root / "registry" / "tasks" / "other-task.yaml", OTHER_TASK)
    write_yaml(root / "registry" / "graders" / "other-graders.yaml", OTHER_GRADERS)
    commit_all(root, "add other-task")
    with evalops_test_env():
        run_quietly(["init"], root)
        run_quietly(["sync"], root)
    return root


@pytest.fixture
def two_tasks(workspace: Path, two_tasks_master: Path) -> Path:
    """`workspace` plus other-task and other-graders (committed), initialized and synced: a
    private copy of `two_tasks_master`."""
    shutil.copytree(two_tasks_master, workspace, symlinks=True, dirs_exist_ok=True)
    return workspace


def db_path(workspace: Path) -> Path:
    return workspace / ".evalops" / "registry.db"


def query(workspace: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db_path(workspace))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def chain_head(workspace: Path) -> tuple[Any, ...]:
    """(seq, hash) of the last audit event."""
    rows = query(workspace, "SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")
    return rows[0]


def write(workspace: Path, name: str, content: bytes) -> Path:
    path = workspace / "trials" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def ingest(cli: Cli, workspace: Path, *files: Path, max_bad: int | None = None) -> CliResult:
    extra = [] if max_bad is None else ["--max-bad-records", str(max_bad)]
    return cli("trials", "ingest", "--json", *(str(f) for f in files), *extra, cwd=workspace)


def stored(cli: Cli, workspace: Path) -> dict[str, dict[str, Any]]:
    """Stored trials by trial_id, from `trials list --json`."""
    result = cli("trials", "list", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return {row["trial_id"]: row for row in result.json()}


def assert_ok(result: CliResult, ingested: int, skipped: int = 0) -> dict[str, Any]:
    """Exit 0 and the `trials ingest --json` counts; returns the document."""
    assert result.code == 0, result.stdout + result.stderr
    doc = result.json()
    assert {"ingested", "skipped_identical", "rejected"} <= set(doc), doc
    assert (doc["ingested"], doc["skipped_identical"]) == (ingested, skipped), doc
    return doc


def says(message: str, alternatives: str) -> bool:
    return any(word.lower() in message.lower() for word in alternatives.split("|"))


def assert_refused(
    result: CliResult, file: Path, line: int, field: str | None, words: str
) -> dict[str, Any]:
    """Exit 2, the `--json` error naming file, line, field and the problem; stderr file:line."""
    context = f"exit {result.code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.code == 2, context
    document = json.loads(result.stdout)
    # A refused ingest's document also lists every rejected line.
    assert set(document) - {"ingested", "skipped_identical", "rejected", "rejected_total",
                            "rejected_cap"} == {"error"}, context  # fmt: skip
    error = document["error"]
    assert set(error) - {"errors"} == {"code", "message", "file", "line", "field"}, context
    got = {
        "code": error["code"],
        "file": error["file"],
        "line": error["line"],
        "field": error["field"],
        "says": says(str(error["message"]), words),
    }
    want = {"code": 2, "file": str(file), "line": line, "field": field, "says": True}
    assert got == want, context
    first = result.stderr.splitlines()[0] if result.stderr else ""
    assert f"{file}:{line}" in first, context
    if field is not None:
        assert field in first, context
    return error


# --------------------------------------------------------------------------- 1. bad input


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_and_nothing_changes(case: Bad, two_tasks: Path, cli: Cli) -> None:
    db = db_path(two_tasks)
    before, head = sqlite_fingerprint(db), chain_head(two_tasks)
    path = write(two_tasks, f"{case.id}.jsonl", case.content)

    result = ingest(cli, two_tasks, path)

    assert_refused(result, path, case.line, case.field, case.says)
    assert chain_head(two_tasks) == head
    assert sqlite_fingerprint(db) == before, "a refused ingest changed the database"


def test_there_are_enough_distinct_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({c.content for c in CASES}) == len(CASES)


def test_module_digests_are_the_registered_ones(two_tasks: Path) -> None:
    reg = two_tasks / "registry"
    assert mini_case(two_tasks) == CASE
    other = eval_case(
        reg / "tasks" / "other-task.yaml",
        reg / "executions" / "mini-b1.json",
        reg / "graders" / "other-graders.yaml",
    )
    assert other == OTHER_CASE


def test_base_records_are_valid(two_tasks: Path, cli: Cli) -> None:
    """The records the cases are built from ingest cleanly (also the other task's)."""
    base = write(two_tasks, "base.jsonl", on_line_3(L3))
    other = write(
        two_tasks, "other.jsonl", jsonl(text(good(9, task_id="other-task", **OTHER_CASE)))
    )
    assert_ok(ingest(cli, two_tasks, base, other), ingested=5)
    trials = stored(cli, two_tasks)
    assert sorted(trials) == ["t-1", "t-2", "t-3", "t-4", "t-9"]
    assert {t["classification"] for t in trials.values()} == {"task_pass"}
    assert cli("verify", cwd=two_tasks).code == 0


def test_line_of_exactly_the_limit_is_accepted(synced: Path, cli: Cli) -> None:
    """The oversized case is one byte over the limit; at the limit the line is fine."""
    path = write(synced, "limit.jsonl", on_line_3(line_of_length(MAX_LINE_BYTES)))
    assert_ok(ingest(cli, synced, path), ingested=4)


def test_last_line_without_newline_is_accepted(synced: Path, cli: Cli) -> None:
    path = write(synced, "no-eol.jsonl", on_line_3(L3)[:-1])
    assert_ok(ingest(cli, synced, path), ingested=4)


def test_good_file_then_bad_file_stores_nothing(synced: Path, cli: Cli) -> None:
    db = db_path(synced)
    before, head = sqlite_fingerprint(db), chain_head(synced)
    good_file = write(synced, "good.jsonl", jsonl(*(text(good(n)) for n in (1, 2, 3))))
    bad_file = write(
        synced, "bad.jsonl", jsonl(text(good(4)), text(good(5, runtime={"status": "crashed"})))
    )

    result = ingest(cli, synced, good_file, bad_file)

    assert_refused(result, bad_file, 2, "runtime.status", "crashed")
    assert chain_head(synced) == head
    assert sqlite_fingerprint(db) == before
    assert stored(cli, synced) == {}


def test_same_trial_id_in_two_files_of_one_invocation(synced: Path, cli: Cli) -> None:
    db = db_path(synced)
    before = sqlite_fingerprint(db)
    first = write(synced, "a.jsonl", jsonl(text(good(1)), text(good(2))))
    second = write(synced, "b.jsonl", jsonl(text(good(3)), text(good(2, run_id="run-9"))))

    result = ingest(cli, synced, first, second)

    assert_refused(result, second, 2, "trial_id", "t-2")
    assert sqlite_fingerprint(db) == before


def test_human_output_names_file_line_and_field(synced: Path, cli: Cli) -> None:
    path = write(synced, "bad.jsonl", on_line_3(text(good(3, runtime={"status": "crashed"}))))
    result = cli("trials", "ingest", str(path), cwd=synced)
    assert result.code == 2
    assert f"{path}:3" in result.stderr
    assert "runtime.status" in result.stderr


def test_missing_file_is_an_input_error_and_stores_nothing(synced: Path, cli: Cli) -> None:
    db = db_path(synced)
    before = sqlite_fingerprint(db)
    good_file = write(synced, "good.jsonl", jsonl(text(good(1))))
    missing = synced / "trials" / "missing.jsonl"

    result = ingest(cli, synced, good_file, missing)

    assert result.code == 2, result.stdout + result.stderr
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["file"]) == (2, str(missing))
    assert sqlite_fingerprint(db) == before


def test_valid_unicode_is_accepted(synced: Path, cli: Cli) -> None:
    """Not over-strict: a surrogate pair escape and raw UTF-8 are valid JSON text."""
    lines = [
        swap(text(good(1)), '"run-1"', '"run-\\ud83d\\ude00"'),
        json.dumps(good(2, run_id="run-\u00e9\U0001f600"), ensure_ascii=False),
    ]
    path = write(synced, "unicode.jsonl", jsonl(*lines))
    assert_ok(ingest(cli, synced, path), ingested=2)


# --------------------------------------------------------------------------- --max-bad-records

# A 7-line file: lines 2, 5 and 7 are bad (one whole-line problem, two field problems).
MIXED_LINES: list[str] = [
    text(good(1)),
    swap(text(good(2)), '"score": 1.0', '"score": NaN'),
    text(good(3)),
    text(good(4)),
    text(good(5))[:-30],
    text(good(6)),
    text(good(7, started_at="2026-11-29T10:00:00")),
]
MIXED_BAD = {2: "grader_results[0].score", 5: None, 7: "started_at"}


def test_max_bad_records_commits_good_lines_and_lists_bad_ones(synced: Path, cli: Cli) -> None:
    path = write(synced, "mixed.jsonl", jsonl(*MIXED_LINES[:6]))  # bad lines 2 and 5
    events = query(synced, "SELECT count(*) FROM audit_event")[0][0]

    doc = assert_ok(ingest(cli, synced, path, max_bad=2), ingested=4)

    rejected = doc["rejected"]
    assert all(set(r) == {"file", "line", "field", "error"} for r in rejected), rejected
    assert [(r["file"], r["line"], r["field"]) for r in rejected] == [
        (str(path), 2, "grader_results[0].score"),
        (str(path), 5, None),
    ]
    assert all(isinstance(r["error"], str) and r["error"] for r in rejected), rejected
    assert sorted(stored(cli, synced)) == ["t-1", "t-3", "t-4", "t-6"]
    # One batch, one audit event: the good lines were committed together.
    assert query(synced, "SELECT count(*) FROM audit_event")[0][0] == events + 1
    assert cli("verify", cwd=synced).code == 0


def test_one_bad_record_too_many_stores_nothing(synced: Path, cli: Cli) -> None:
    path = write(synced, "mixed.jsonl", jsonl(*MIXED_LINES))  # bad lines 2, 5 and 7
    db = db_path(synced)
    before, head = sqlite_fingerprint(db), chain_head(synced)

    result = ingest(cli, synced, path, max_bad=2)

    assert_refused(result, path, 2, MIXED_BAD[2], "finite|nan")
    for line in MIXED_BAD:
        assert f"{path}:{line}" in result.stderr, result.stderr
    assert chain_head(synced) == head
    assert sqlite_fingerprint(db) == before
    assert stored(cli, synced) == {}


def test_rerun_of_a_rejected_parent_is_rejected_too(synced: Path, cli: Cli) -> None:
    """With --max-bad-records a rejected line is not stored, so nothing can rerun it."""
    lines = [
        text(good(1)),
        text(good(2, runtime={"status": "crashed"})),
        text(good(3, runtime={"status": "ok"}, rerun={"parent_trial_id": "t-2"})),
    ]
    path = write(synced, "rerun.jsonl", jsonl(*lines))

    doc = assert_ok(ingest(cli, synced, path, max_bad=2), ingested=1)

    assert [(r["line"], r["field"]) for r in doc["rejected"]] == [
        (2, "runtime.status"),
        (3, "rerun.parent_trial_id"),
    ]
    assert sorted(stored(cli, synced)) == ["t-1"]


def test_line_numbers_stay_right_after_an_oversized_line(synced: Path, cli: Cli) -> None:
    """An oversized line (here three times the limit) is skipped as one line."""
    lines = [
        text(good(1)),
        line_of_length(3 * MAX_LINE_BYTES, n=2),
        text(good(3)),
        text(good(4, runtime={"status": "crashed"})),
        text(good(5)),
    ]
    path = write(synced, "oversized.jsonl", jsonl(*lines))

    doc = assert_ok(ingest(cli, synced, path, max_bad=2), ingested=3)

    assert [(r["line"], r["field"]) for r in doc["rejected"]] == [
        (2, None),
        (4, "runtime.status"),
    ]
    assert sorted(stored(cli, synced)) == ["t-1", "t-3", "t-5"]


def test_only_bad_lines_within_the_limit_store_nothing(synced: Path, cli: Cli) -> None:
    path = write(synced, "bad.jsonl", jsonl(MIXED_LINES[1], MIXED_LINES[4]))
    db = db_path(synced)
    before = sqlite_fingerprint(db)

    doc = assert_ok(ingest(cli, synced, path, max_bad=5), ingested=0)

    assert [(r["line"], r["field"]) for r in doc["rejected"]] == [
        (1, "grader_results[0].score"),
        (2, None),
    ]
    assert sqlite_fingerprint(db) == before


def test_negative_max_bad_records_is_a_usage_error(synced: Path, cli: Cli) -> None:
    path = write(synced, "good.jsonl", jsonl(text(good(1))))
    db = db_path(synced)
    before = sqlite_fingerprint(db)

    result = ingest(cli, synced, path, max_bad=-1)

    assert result.code == 2, result.stdout + result.stderr
    assert "max-bad-records" in result.stdout + result.stderr
    assert sqlite_fingerprint(db) == before


# --------------------------------------------------------------------------- 2. claims


def test_claimed_task_pass_under_hard_constraint_fail_is_refused(synced: Path, cli: Cli) -> None:
    claim = good(2, grader_results=HARD_FAIL_RESULTS, primary_classification="task_pass")
    path = write(synced, "claim.jsonl", jsonl(text(good(1)), text(claim), text(good(3))))
    db = db_path(synced)
    before = sqlite_fingerprint(db)

    result = ingest(cli, synced, path)

    error = assert_refused(result, path, 2, "primary_classification", "task_pass")
    assert "task_pass" in error["message"] and "hard_constraint_fail" in error["message"]
    assert "task_pass" in result.stderr and "hard_constraint_fail" in result.stderr
    assert sqlite_fingerprint(db) == before

    # The honest claim is accepted, and evalops' own classification agrees with it.
    honest = {**claim, "primary_classification": "hard_constraint_fail"}
    path = write(synced, "honest.jsonl", jsonl(text(good(1)), text(honest), text(good(3))))
    assert_ok(ingest(cli, synced, path), ingested=3)
    assert stored(cli, synced)["t-2"]["classification"] == "hard_constraint_fail"


# --------------------------------------------------------------------------- 3. idempotence, reruns


def test_reingesting_identical_records_is_a_counted_noop(synced: Path, cli: Cli) -> None:
    records = [good(n) for n in (1, 2, 3)]
    path = write(synced, "trials.jsonl", jsonl(*(text(r) for r in records)))
    assert_ok(ingest(cli, synced, path), ingested=3)
    db = db_path(synced)
    before, head = sqlite_fingerprint(db), chain_head(synced)

    assert_ok(ingest(cli, synced, path), ingested=0, skipped=3)
    # Identity is the record_digest (canonical JSON): key order, spacing and the spelling
    # of a number (1.0 or 1) do not matter.
    respelled = write(
        synced,
        "respelled.jsonl",
        jsonl(
            *(
                swap(
                    json.dumps(r, sort_keys=True, separators=(",", ":")), '"score":1.0', '"score":1'
                )
                for r in records
            )
        ),
    )
    assert_ok(ingest(cli, synced, respelled), ingested=0, skipped=3)

    assert chain_head(synced) == head
    assert sqlite_fingerprint(db) == before, "a no-op re-ingest changed the database"
    assert cli("verify", cwd=synced).code == 0


def test_records_stored_already_are_not_validated_or_classified_again(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record stored byte for byte under its trial_id (same record_digest) is counted
    identical from a parse, a hash and one lookup per batch: re-ingesting a file whose
    records are all stored does none of the first ingest's validation and classification
    (the P10 no-op), across batches; a new record beside them is checked in full, and one
    stored under another digest is still refused."""
    import evalops.services.ingest.records as records_module

    calls = {"validate": 0, "classify": 0}
    real_validate = records_module.TrialRecord.model_validate
    real_classify = records_module.classify

    def validate(value: Any, *args: Any, **kwargs: Any) -> Any:
        calls["validate"] += 1
        return real_validate(value, *args, **kwargs)

    def classify(*args: Any, **kwargs: Any) -> Any:
        calls["classify"] += 1
        return real_classify(*args, **kwargs)

    monkeypatch.setattr(records_module.TrialRecord, "model_validate", validate)
    monkeypatch.setattr(records_module, "classify", classify)
    n = BATCH_SIZE + 7  # two batches
    path = write(synced, "trials.jsonl", jsonl(*(text(good(i)) for i in range(1, n + 1))))
    assert_ok(ingest(cli, synced, path), ingested=n)
    assert calls == {"validate": n, "classify": n}
    before, head = sqlite_fingerprint(db_path(synced)), chain_head(synced)

    calls.update(validate=0, classify=0)
    assert_ok(ingest(cli, synced, path), ingested=0, skipped=n)
    assert calls == {"validate": 0, "classify": 0}
    assert chain_head(synced) == head
    assert sqlite_fingerprint(db_path(synced)) == before

    # Respelled (key order, spacing): the same record_digest, still a no-op.
    respelled = write(
        synced,
        "respelled.jsonl",
        jsonl(*(json.dumps(good(i), sort_keys=True, indent=1).replace("\n", "") for i in (1, 2))),
    )
    assert_ok(ingest(cli, synced, respelled), ingested=0, skipped=2)
    assert calls == {"validate": 0, "classify": 0}

    # A new record between stored ones is checked and stored; only it is classified.
    mixed = write(synced, "mixed.jsonl", jsonl(text(good(1)), text(good(n + 1)), text(good(2))))
    assert_ok(ingest(cli, synced, mixed), ingested=1, skipped=2)
    assert calls == {"validate": 1, "classify": 1}

    # The same trial_id with other content is refused, naming its line, as before.
    other = write(
        synced,
        "other.jsonl",
        jsonl(text(good(1)), text(good(2, completed_at="2026-11-29T10:04:00Z"))),
    )
    refused = ingest(cli, synced, other)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert refused.json()["error"]["line"] == 2
    assert refused.json()["error"]["field"] == "trial_id"
    assert cli("verify", cwd=synced).code == 0


def test_canonical_lines_stored_already_are_recognized_from_their_bytes(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line in canonical form (RFC 8785, the bytes `record_digest` hashes) whose digest is
    the stored one of the trial it names is counted identical without being parsed; a line
    that only names a stored trial (in a nested field) is not; a duplicate key is refused
    even when the record it parses to is stored."""
    import evalops.services.ingest.records as records_module

    parsed = {"n": 0}

    def counted(real: Any) -> Any:
        def parse(*args: Any, **kwargs: Any) -> Any:
            parsed["n"] += 1
            return real(*args, **kwargs)

        return parse

    # Both parsers a line can meet: the strict one, and the fast one of a stored trial_id.
    monkeypatch.setattr(records_module, "parse_record", counted(records_module.parse_record))
    monkeypatch.setattr(
        records_module, "regular_record_value", counted(records_module.regular_record_value)
    )
    canonical = [rfc8785.dumps(good(i)) for i in (1, 2, 3)]
    path = write(synced, "canonical.jsonl", jsonl(*canonical))
    assert_ok(ingest(cli, synced, path), ingested=3)
    assert parsed["n"] == 3
    parsed["n"] = 0
    assert_ok(ingest(cli, synced, path), ingested=0, skipped=3)
    assert parsed["n"] == 0  # recognized from the bytes alone
    # The same records in another spelling are parsed, then found identical.
    assert_ok(ingest(cli, synced, write(synced, "plain.jsonl", jsonl(text(good(1))))), 0, 1)
    assert parsed["n"] == 1
    # A new record that names a stored trial in a nested field is checked and stored.
    named = good(4, tool_calls=[{"tool": "crm:lookup-order", "args": {"trial_id": "t-1"}}])
    named_line = rfc8785.dumps(named)
    assert b'"trial_id":"t-1"' in named_line
    assert_ok(ingest(cli, synced, write(synced, "named.jsonl", jsonl(named_line))), 1, 0)
    # A duplicate key whose last value makes the stored record: invalid JSON, as ever.
    line = canonical[0].decode("utf-8")
    duplicated = line.replace('{"', '{"trial_id":"other","', 1)
    refused = ingest(cli, synced, write(synced, "dup.jsonl", jsonl(duplicated)))
    assert refused.code == 2, refused.stdout
    assert "duplicate" in refused.json()["error"]["message"].lower()


def with_amount(n: int, amount: str) -> str:
    """Record t-<n> with one number, spelled `amount` as it is, in a tool call's arguments
    (free-form JSON: part of the record_digest, never validated against a range)."""
    line = json.dumps(good(n, tool_calls=[{"tool": "crm:lookup-order", "args": {"x": 0}}]))
    return swap(line, '{"x": 0}', '{"x": ' + amount + "}")


# (stored, spellings of the same number): each equal to the stored one in RFC 8785's form
# (docs/digests.md: numbers as ECMAScript writes them, so an integral float is an integer).
SAME_NUMBER = [
    ("1", ["1.0", "1.00", "1E0", "0.1e1", "100e-2"]),
    ("0.00001", ["1e-05", "1.0E-5", "0.000010"]),  # beyond the fast parser: the strict path
    ("12.5", ["125e-1", "12.50"]),
    ("1e+21", ["1000000000000000000000.0", "1E21"]),
    ("0", ["-0", "-0.0", "0.0"]),
]


@pytest.mark.parametrize(("number", "spellings"), SAME_NUMBER)
def test_a_number_spelled_otherwise_is_the_stored_record(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, number: str, spellings: list[str]
) -> None:
    """Stored from canonical lines, the same records with their number spelled another way
    (and the rest as json.dumps writes it) are each the stored record: counted identical,
    not validated again, nothing stored."""
    import evalops.services.ingest.records as records_module

    canonical = [rfc8785.dumps(json.loads(with_amount(n, number))) for n in (1, 2)]
    assert_ok(ingest(cli, synced, write(synced, "canonical.jsonl", jsonl(*canonical))), 2)
    before, head = sqlite_fingerprint(db_path(synced)), chain_head(synced)
    validated = {"n": 0}
    real_validate = records_module.TrialRecord.model_validate

    def validate(value: Any, *args: Any, **kwargs: Any) -> Any:
        validated["n"] += 1
        return real_validate(value, *args, **kwargs)

    monkeypatch.setattr(records_module.TrialRecord, "model_validate", validate)
    lines = [with_amount(n, spelled) for spelled in spellings for n in (1, 2)]
    assert not {line.encode() for line in lines} & set(canonical)  # none is the stored bytes
    respelled = write(synced, "respelled.jsonl", jsonl(*lines))
    assert_ok(ingest(cli, synced, respelled), ingested=0, skipped=len(lines))
    assert validated["n"] == 0
    assert chain_head(synced) == head
    assert sqlite_fingerprint(db_path(synced)) == before


@pytest.mark.parametrize(
    ("change", "old", "new"),
    [
        ("another number", '{"x": 1.0}', '{"x": 1.5}'),
        ("the nearest other float", '{"x": 1.0}', '{"x": 1.0000000000000002}'),
        ("a string for the number", '{"x": 1.0}', '{"x": "1.0"}'),
        ("another key", '{"x": 1.0}', '{"x": 1.0, "y": 1.0}'),
        ("another time", '"2026-11-29T10:03:12Z"', '"2026-11-29T10:03:13Z"'),
        ("a duplicate key", '{"x": 1.0}', '{"x": 2.0, "x": 1.0}'),
    ],
)
def test_a_changed_record_among_stored_ones_is_not_skipped(
    synced: Path, cli: Cli, change: str, old: str, new: str
) -> None:
    """A file whose every other record is stored, as json.dumps wrote it (`1.0`), with one
    record changed in its second batch: that record is not counted identical; the ingest is
    refused on its line (another record under a stored trial_id, or invalid JSON) and
    nothing is stored."""
    n = BATCH_SIZE + 10
    lines = [with_amount(i, "1.0") for i in range(1, n + 1)]
    assert_ok(ingest(cli, synced, write(synced, "first.jsonl", jsonl(*lines))), ingested=n)
    before = sqlite_fingerprint(db_path(synced))
    changed = BATCH_SIZE + 4
    lines[changed - 1] = swap(lines[changed - 1], old, new)
    refused = ingest(cli, synced, write(synced, "changed.jsonl", jsonl(*lines)))
    assert refused.code == 2, (change, refused.stdout)
    error = refused.json()["error"]
    assert error["line"] == changed, (change, error)
    if change == "a duplicate key":
        assert "duplicate" in error["message"].lower()
    else:
        assert error["field"] == "trial_id", (change, error)
    assert sqlite_fingerprint(db_path(synced)) == before


def test_a_trial_id_that_is_not_a_string_is_refused_beside_a_stored_one(
    synced: Path, cli: Cli
) -> None:
    """A record whose trial_id is a list, naming a stored trial in a nested field (so the
    batch's lookup finds a stored trial), is refused naming its trial_id: the no-op check
    does not look a list up as an id."""
    assert_ok(ingest(cli, synced, write(synced, "first.jsonl", jsonl(text(good(1))))), 1)
    named = good(2, tool_calls=[{"tool": "crm:lookup-order", "args": {"trial_id": "t-1"}}])
    line = text({**named, "trial_id": ["t-2"]})
    refused = ingest(cli, synced, write(synced, "list.jsonl", jsonl(text(good(1)), line)))
    assert refused.code == 2, refused.stdout + refused.stderr
    error = refused.json()["error"]
    assert (error["line"], error["field"]) == (2, "trial_id"), error


def test_reingest_with_new_records_stores_only_the_new_ones(synced: Path, cli: Cli) -> None:
    first = write(synced, "first.jsonl", jsonl(text(good(1)), text(good(2))))
    assert_ok(ingest(cli, synced, first), ingested=2)
    second = write(synced, "second.jsonl", jsonl(text(good(1)), text(good(3)), text(good(2))))
    assert_ok(ingest(cli, synced, second), ingested=1, skipped=2)
    assert sorted(stored(cli, synced)) == ["t-1", "t-2", "t-3"]
    assert cli("verify", cwd=synced).code == 0


def test_identical_record_twice_in_one_file_is_counted_once(synced: Path, cli: Cli) -> None:
    path = write(synced, "twice.jsonl", jsonl(text(good(1)), text(good(2)), text(good(1))))
    assert_ok(ingest(cli, synced, path), ingested=2, skipped=1)


def test_same_file_twice_in_one_invocation(synced: Path, cli: Cli) -> None:
    path = write(synced, "trials.jsonl", jsonl(text(good(1)), text(good(2))))
    assert_ok(ingest(cli, synced, path, path), ingested=2, skipped=2)


@pytest.mark.parametrize(
    "change",
    [
        {"completed_at": "2026-11-29T10:04:00Z"},
        # Tool calls are not stored, but they are part of the record and its record_digest.
        {"tool_calls": [{"tool": "crm:lookup-order", "args": {"orderId": "A-1"}}]},
    ],
    ids=["completed_at", "tool_calls-only"],
)
def test_same_trial_id_with_another_record_digest_is_an_error(
    change: dict[str, Any], synced: Path, cli: Cli
) -> None:
    first = write(synced, "first.jsonl", jsonl(text(good(1)), text(good(2))))
    assert_ok(ingest(cli, synced, first), ingested=2)
    db = db_path(synced)
    before, head = sqlite_fingerprint(db), chain_head(synced)
    changed = good(2, **change)
    second = write(synced, "second.jsonl", jsonl(text(good(3)), text(changed), text(good(4))))

    result = ingest(cli, synced, second)

    assert_refused(result, second, 2, "trial_id", "t-2")
    assert chain_head(synced) == head
    assert sqlite_fingerprint(db) == before
    assert sorted(stored(cli, synced)) == ["t-1", "t-2"]


def rerun_of(n: int, parent: str, parent_index: int = 0) -> dict[str, Any]:
    """A rerun keeps its parent's trial_index (docs/formats.md)."""
    return good(
        n,
        trial_index=parent_index,
        rerun={"parent_trial_id": parent, "reason": "infrastructure"},
    )


def test_rerun_whose_parent_is_earlier_in_the_same_file(synced: Path, cli: Cli) -> None:
    parent = good(1, runtime={"status": "infrastructure_error"}, grader_results=[])
    path = write(synced, "rerun.jsonl", jsonl(text(parent), text(rerun_of(2, "t-1"))))
    assert_ok(ingest(cli, synced, path), ingested=2)
    trials = stored(cli, synced)
    assert trials["t-2"]["parent_trial_id"] == "t-1"
    assert trials["t-1"]["classification"] == "infrastructure_invalid"
    assert cli("verify", cwd=synced).code == 0


def test_rerun_whose_parent_is_in_an_earlier_file(synced: Path, cli: Cli) -> None:
    parent = good(1, runtime={"status": "infrastructure_error"}, grader_results=[])
    first = write(synced, "a.jsonl", jsonl(text(parent)))
    second = write(synced, "b.jsonl", jsonl(text(rerun_of(2, "t-1"))))
    assert_ok(ingest(cli, synced, first, second), ingested=2)
    assert stored(cli, synced)["t-2"]["parent_trial_id"] == "t-1"


def test_rerun_whose_parent_is_in_an_earlier_batch(synced: Path, cli: Cli) -> None:
    """Streaming writes in batches; a parent written in an earlier batch still counts."""
    n = BATCH_SIZE + 2
    lines = [text(good(i)) for i in range(1, n)] + [text(rerun_of(n, "t-1"))]
    path = write(synced, "big.jsonl", jsonl(*lines))
    assert_ok(ingest(cli, synced, path), ingested=n)


def test_rerun_whose_parent_was_ingested_before(synced: Path, cli: Cli) -> None:
    first = write(
        synced, "a.jsonl", jsonl(text(good(1, runtime={"status": "timeout"}, grader_results=[])))
    )
    assert_ok(ingest(cli, synced, first), ingested=1)
    second = write(synced, "b.jsonl", jsonl(text(rerun_of(2, "t-1"))))
    assert_ok(ingest(cli, synced, second), ingested=1)
    assert stored(cli, synced)["t-2"]["parent_trial_id"] == "t-1"
    assert cli("verify", cwd=synced).code == 0
