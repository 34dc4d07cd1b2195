"""Build valid evalops.trial/v1 records for tests, with the real digests of a registry."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalops.domain import digests
from evalops.registry.definitions import load_definition


def eval_case(task_file: Path, execution_file: Path, grader_file: Path) -> dict[str, str]:
    """The three identity digests (and the eval case digest) of registry files."""
    task = load_definition(task_file).digest
    execution = load_definition(execution_file).digest
    graders = load_definition(grader_file).digest
    return {
        "task_digest": task,
        "execution_digest": execution,
        "grader_set_digest": graders,
        "eval_case_digest": digests.eval_case_digest(task, execution, graders),
    }


def mini_case(workspace: Path) -> dict[str, str]:
    """The eval case of the `workspace` fixture's mini registry."""
    reg = workspace / "registry"
    return eval_case(
        reg / "tasks" / "mini-task.yaml",
        reg / "executions" / "mini-b1.json",
        reg / "graders" / "mini-graders.yaml",
    )


MINI_PASS_RESULTS: list[dict[str, Any]] = [
    {"grader_id": "outcome", "grader_version": 1, "state": "task_pass", "score": 1.0},
    {"grader_id": "no-twice", "grader_version": 1, "state": "pass"},
]


def record(
    case: dict[str, str],
    *,
    trial_id: str,
    task_id: str = "mini-task",
    trial_index: int = 0,
    grader_results: list[dict[str, Any]] | None = None,
    runtime: str = "ok",
    **extra: Any,
) -> dict[str, Any]:
    """A valid record (passing on the mini registry unless told otherwise)."""
    out: dict[str, Any] = {
        "schema": "evalops.trial/v1",
        "trial_id": trial_id,
        "run_id": "run-1",
        "attempt_id": f"attempt-{trial_id}",
        "task_id": task_id,
        **case,
        "trial_index": trial_index,
        "started_at": "2026-11-29T10:00:00Z",
        "completed_at": "2026-11-29T10:03:12Z",
        "grader_results": grader_results if grader_results is not None else MINI_PASS_RESULTS,
        "runtime": {"status": runtime},
    }
    out.update(extra)
    return out


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
