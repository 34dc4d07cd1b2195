"""Shared setup of the importer tests: real Inspect logs, the example registry after the demo.

`import_base` is `evalops demo` (the example registry, calibrated, with its three builds'
trials), plus what the imports need and a real team would add: an execution profile for the
Inspect run (Inspect's mock model), two for the promptfoo providers (builds of their own, so
the gate sees only imported trials), and a capability suite holding the three support tasks.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    EXAMPLE_REGISTRY,
    REPO_ROOT,
    built_once,
    commit_all,
    run_quiet,
    write_yaml,
)

ACTOR = "importer-tests@example.com"
DB = Path(".evalops") / "registry.db"
INSPECT_BUILD = "build-inspect-1"
PF_BUILDS = {"support-b124": "build-pf-124", "support-b125": "build-pf-125"}
SUPPORT_SUITE = "capability/support"
SUPPORT_TASKS = [
    "support-refund-in-order",
    "support-refund-policy-explanation",
    "support-reply-tone",
]
PROMPTFOO_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "promptfoo"
SAMPLE_TASKS = {
    "A-1": "support-refund-in-order",
    "A-2": "support-refund-policy-explanation",
    "A-3": "support-reply-tone",
}


def _generate_logs(out: Path) -> None:
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INSPECT_", "EVALOPS_"))}
    env["INSPECT_LOG_DIR"] = str(out / "unused")
    done = subprocess.run(
        [sys.executable, "-m", "tests.importer_tasks.generate", str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def inspect_logs(factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run the refund task (tests/importer_tasks) with mockllm, once per session."""
    out = built_once(factory, "inspect-logs", _generate_logs)
    return {
        "eval": out / "refund.eval",
        "json": out / "refund.json",
        "edited": out / "edited.json",
        "retry-first": out / "retry-first.eval",
        "retry-second": out / "retry-second.eval",
        "cancelled": out / "cancelled.eval",
        "turn": out / "turn.json",
        "converted": out / "converted.json",
    }


def _profile(base: str, execution_id: str, build: str, model: dict[str, str] | None) -> Any:
    import yaml

    value = yaml.safe_load((EXAMPLE_REGISTRY / "executions" / f"{base}.yaml").read_text())
    value["id"] = execution_id
    value["system_build"] = build
    value["meta"] = {"title": f"{execution_id} (importer tests)"}
    if model is not None:
        value["model"] = model
    return value


def inspect_map_text(execution: str = "inspect-mock") -> str:
    """The example map (registry/imports/inspect-support.yaml), pointed at `execution`."""
    text = (EXAMPLE_REGISTRY / "imports" / "inspect-support.yaml").read_text(encoding="utf-8")
    swapped = text.replace("execution: candidate-b124 ", f"execution: {execution} ", 1)
    assert swapped != text or execution == "candidate-b124"
    return swapped


def promptfoo_map_text() -> str:
    """The example map (registry/imports/promptfoo-support.yaml), pointed at the test builds."""
    text = (EXAMPLE_REGISTRY / "imports" / "promptfoo-support.yaml").read_text(encoding="utf-8")
    swapped = text.replace("support-b124: candidate-b124", "support-b124: pf-b124").replace(
        "support-b125: fix-b125", "support-b125: pf-b125"
    )
    assert swapped.count("pf-b12") == 2
    return swapped


def import_base(factory: pytest.TempPathFactory) -> Path:
    return built_once(factory, "ws", _build_import_base)


def _build_import_base(ws: Path) -> None:
    root = ws.parent
    code, output = run_quiet("demo", "--dir", str(ws), cwd=root, actor=ACTOR)
    assert code == 0, output
    executions = ws / "registry" / "executions"
    write_yaml(
        executions / "inspect-mock.yaml",
        _profile(
            "candidate-b124",
            "inspect-mock",
            INSPECT_BUILD,
            {"provider": "mockllm", "name": "model"},
        ),
    )
    write_yaml(
        executions / "pf-b124.yaml",
        _profile("candidate-b124", "pf-b124", PF_BUILDS["support-b124"], None),
    )
    write_yaml(
        executions / "pf-b125.yaml",
        _profile("fix-b125", "pf-b125", PF_BUILDS["support-b125"], None),
    )
    write_yaml(
        ws / "registry" / "suites" / "capability-support.yaml",
        {
            "spec_schema_version": "suite/v1",
            "id": SUPPORT_SUITE,
            "kind": "capability",
            "owner": "support-quality@example.com",
            "description": "The support agent's tasks, gated on imported runs.",
        },
    )
    (ws / "maps").mkdir()
    (ws / "maps" / "inspect.yaml").write_text(inspect_map_text(), encoding="utf-8")
    (ws / "maps" / "promptfoo.yaml").write_text(promptfoo_map_text(), encoding="utf-8")
    commit_all(ws, "import test definitions")
    for args in (("sync",), *(("promote", t, "--to", SUPPORT_SUITE) for t in SUPPORT_TASKS)):
        code, output = run_quiet(*args, cwd=ws, actor=ACTOR)
        assert code == 0, output


def copy_workspace(base: Path, dest: Path) -> Path:
    return Path(shutil.copytree(base, dest, symlinks=True))


def sql(ws: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(ws / DB)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def counts(ws: Path) -> tuple[int, int, int]:
    """(trials, ingest batches, audit events): unchanged means nothing was stored."""
    return (
        sql(ws, "select count(*) from trial")[0][0],
        sql(ws, "select count(*) from ingest_batch")[0][0],
        sql(ws, "select count(*) from audit_event")[0][0],
    )


def trials_of(ws: Path, build: str) -> list[dict[str, Any]]:
    """Imported trials of a build, straight from the database (not through the CLI)."""
    rows = sql(
        ws,
        "select t.trial_id, t.task_id, t.trial_index, t.parent_trial_id, t.classification, "
        "t.secondary_labels, t.record, t.efficiency from trial t join execution_profile e "
        "on e.execution_digest = t.execution_digest where e.system_build = ?",
        (build,),
    )
    return [
        {
            "trial_id": r[0],
            "task_id": r[1],
            "trial_index": r[2],
            "parent": r[3],
            "class": r[4],
            "labels": json.loads(r[5]),
            "record": json.loads(r[6]),
            "efficiency": json.loads(r[7]),
        }
        for r in rows
    ]
