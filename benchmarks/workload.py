"""Realistic workloads for the benchmarks: the example registry and its trial records.

Records are the example registry's own (registry/trials/*.jsonl: grader results, artifact
manifests, effects, tool calls, usage), repeated under fresh trial and run ids, so every
benchmark ingests what harnesses really write (about 1.2 KB a record).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "registry"
TEMPLATES = ("baseline-b123.jsonl", "candidate-b124.jsonl", "fix-b125.jsonl")


def evalops(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_ACTOR"] = "bench@evalops.invalid"
    return subprocess.run(
        [sys.executable, "-m", "evalops", *args],
        cwd=cwd,
        env=env,
        check=check,
        capture_output=True,
        text=True,
    )


def evalops_here(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`evalops(...)` run in this process: for building a registry, whose cost no figure
    measures (each command in a new process spent 1.5 to 3 CPU-s starting up: most of a
    small benchmark's setup). The measured commands keep their fresh process. The same
    environment as `evalops`: no EVALOPS_* variable but the actor, and `cwd`."""
    import contextlib
    import io

    from evalops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("EVALOPS_")}
    os.environ["EVALOPS_ACTOR"] = "bench@evalops.invalid"
    try:
        with (
            contextlib.chdir(cwd),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(list(args))
    finally:
        os.environ.pop("EVALOPS_ACTOR", None)
        os.environ.update(saved)
    argv = ["evalops", *args]
    if check and code != 0:
        raise subprocess.CalledProcessError(code, argv, out.getvalue(), err.getvalue())
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def example_workspace(root: Path, db_url: str | None = None) -> Path:
    """A git repository holding the example registry, initialised, synced and calibrated."""
    import git

    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE, root / "registry")
    repo = git.Repo.init(root)
    with repo.config_writer() as config:
        config.set_value("user", "name", "bench")
        config.set_value("user", "email", "bench@evalops.invalid")
    (root / ".gitignore").write_text(".evalops/\n*.jsonl\n*.db\n", encoding="utf-8")
    repo.index.add([".gitignore", "registry"])
    repo.index.commit("example registry")
    repo.close()
    db = ("--db", db_url) if db_url else ()
    evalops(*db, "init", cwd=root)
    evalops(*db, "sync", cwd=root)
    evalops(
        *db, "calibration", "record", "reply-quality",
        "--labels", "registry/calibration/reply-quality.jsonl", cwd=root,
    )  # fmt: skip
    return root


def templates() -> list[dict[str, Any]]:
    """The example's original trial records (no reruns: every copy is an original)."""
    out = []
    for name in TEMPLATES:
        for line in (EXAMPLE / "trials" / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if not (record.get("rerun") or {}).get("parent_trial_id"):
                record.pop("primary_classification", None)
                out.append(record)
    return out


def records(count: int, prefix: str = "b") -> Iterator[dict[str, Any]]:
    """`count` records: the templates again and again, each copy in its own run."""
    base = templates()
    for i in range(count):
        template = base[i % len(base)]
        record = dict(template)
        record["trial_id"] = f"{prefix}-{i:08d}"
        record["run_id"] = f"{prefix}-run-{i // len(base)}"
        record["attempt_id"] = f"{prefix}-attempt-{i}"
        yield record


def write_jsonl(path: Path, count: int, prefix: str = "b") -> int:
    with path.open("w", encoding="utf-8") as out:
        for record in records(count, prefix):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    return path.stat().st_size
