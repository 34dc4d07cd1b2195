"""`evalops report site` at scale: 1,000 decisions over 100 tasks and 100,000 trials.

Targets: the first `report site` of that registry in under 60 s of CPU; its peak memory
within 1.5x of the same command on a registry one tenth its size (100 decisions, 10,000
trials, the same 100 tasks); an unchanged re-run rewrites no file and takes under a tenth
of the first run's CPU. Each run is `benchmarks.measure` (a fresh process, start-up
included).

The registry is built fast: the 100 tasks, their grader set and suite are real files synced
by evalops, one build's trials are ingested and gated by evalops (one trial per task, so
each decision names 100 trials); the other builds' trial rows and decisions are copies of
those rows made with plain SQL under new ids and build names, in bulk. That database is for
timing only (its copied rows have no audit events of their own, so it would not verify).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks.suite_fixture import build_suite
from benchmarks.workload import evalops_here

DECISIONS = 1_000
TASKS = 100
CPU_TARGET_S = 60.0
MEMORY_RATIO = 1.5
RERUN_RATIO = 0.1
SUITE = "regression/bench"
_ORIGINAL = re.compile(r'"(t-\d{5}-\d)"')


def _execution(n: int) -> tuple[str, str]:
    """The execution profile id and digest of copy `n`: each build its own, as in a real
    registry. A decision of evaluator 4 stores per-task summaries, and its page lists the
    trials again from the rows of its execution digest: copies sharing the first build's
    digest would each list every copy's trials (1,000 decisions x 100,000 trials)."""
    return f"bench-b1-d{n}", f"sha256:{n:064x}"


def _copy_trials(con: sqlite3.Connection, decisions: int) -> None:
    columns = [r[1] for r in con.execute("PRAGMA table_info(trial)")]
    # From a copy of the originals: selecting them from the growing table would scan it
    # once per build.
    con.execute("CREATE TEMP TABLE original_trial AS SELECT * FROM trial")
    for n in range(1, decisions):
        picked = ", ".join(
            f"trial_id || '-d{n}'"
            if c == "trial_id"
            else "NULL"
            if c == "id"
            else f"'run-d{n}'"
            if c == "run_id"
            else f"'{_execution(n)[1]}'"
            if c == "execution_digest"
            else c
            for c in columns
        )
        con.execute(f"INSERT INTO trial ({', '.join(columns)}) SELECT {picked} FROM original_trial")


def _copy_profiles(con: sqlite3.Connection, decisions: int) -> None:
    """Build n's execution profile: the first build's row under its own id and digest."""
    columns = [r[1] for r in con.execute("PRAGMA table_info(execution_profile)")]
    original = con.execute(
        f"SELECT {', '.join(columns)} FROM execution_profile WHERE system_build = 'build-1'"
    ).fetchone()
    rows = []
    for n in range(1, decisions):
        execution_id, digest = _execution(n)
        row = dict(zip(columns, original, strict=True))
        row.update(
            id=None,
            execution_id=execution_id,
            system_build=f"build-{n + 1}",
            execution_digest=digest,
        )
        rows.append(tuple(row[c] for c in columns))
    con.executemany(
        f"INSERT INTO execution_profile ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})",
        rows,
    )


def _copy_decisions(con: sqlite3.Connection, decisions: int) -> None:
    con.row_factory = sqlite3.Row
    original = dict(con.execute("SELECT * FROM gate_decision WHERE number = 1").fetchone())
    con.row_factory = None
    columns = [c for c in original if c != "id"]
    first_digest = original["execution_digest"]
    rows: list[tuple[Any, ...]] = []
    for n in range(1, decisions):

        def renamed(text: str, n: int = n) -> str:
            execution_id, digest = _execution(n)
            text = _ORIGINAL.sub(lambda m: f'"{m.group(1)}-d{n}"', text)
            text = text.replace(f'"{first_digest}"', f'"{digest}"')
            text = text.replace('"bench-b1"', f'"{execution_id}"')
            return text.replace('"build-1"', f'"build-{n + 1}"').replace(
                '"GATE-1"', f'"GATE-{n + 1}"'
            )

        row = dict(original)
        row.update(
            number=n + 1,
            gate_id=f"GATE-{n + 1}",
            build=f"build-{n + 1}",
            execution_digest=_execution(n)[1],
            inputs=renamed(original["inputs"]),
            result=renamed(original["result"]),
        )
        rows.append(tuple(row[c] for c in columns))
    con.executemany(
        f"INSERT INTO gate_decision ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})",
        rows,
    )


def build_registry(ws: Path, decisions: int, tasks: int = TASKS) -> None:
    """`decisions` decisions of `tasks` tasks, one trial each (decisions x tasks trials)."""
    _first_decision(ws, tasks)
    _more_decisions(ws, decisions)


def _first_decision(ws: Path, tasks: int) -> None:
    """The suite of `tasks` tasks, one build's trials and its decision, made by evalops."""
    build_suite(ws, tasks, trials=1)
    done = evalops_here(
        "gate", "check", "--build", "build-1", "--suite", SUITE, cwd=ws, check=False
    )
    if done.returncode not in (0, 3, 4):
        raise RuntimeError(f"gate check failed: {done.stderr}")


def _more_decisions(ws: Path, decisions: int) -> None:
    """The first decision and its trials copied to `decisions` in all, with plain SQL."""
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    try:
        _copy_trials(con, decisions)
        _copy_profiles(con, decisions)
        _copy_decisions(con, decisions)
        con.commit()
    finally:
        con.close()


def _site(ws: Path) -> dict[str, Any]:
    return measure.run(["evalops", "report", "site", "site", "--progress", "none"], cwd=ws)


def _mtimes(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def run(decisions: int, tasks: int, root: Path) -> dict[str, Any]:
    big, small = root / "big", root / "small"
    # Both registries hold the same tasks and the same first decision: made once by evalops
    # (its commands are most of the setup's cost), then copied and grown apart.
    _first_decision(big, tasks)
    shutil.copytree(big, small, symlinks=True)
    _more_decisions(big, decisions)
    _more_decisions(small, max(decisions // 10, 1))
    first = _site(big)
    before = _mtimes(big / "site")
    again = _site(big)
    rewritten = sum(1 for p, t in _mtimes(big / "site").items() if before.get(p) != t)
    tenth = _site(small)
    return {
        "decisions": decisions,
        "tasks": tasks,
        "pages": sum(1 for _ in (big / "site").rglob("*.html")),
        "first": first,
        "again": again,
        "tenth": tenth,
        "rewritten": rewritten,
        "cpu_ok": first["cpu"] < CPU_TARGET_S,
        "memory_ratio": first["peak_kib"] / tenth["peak_kib"],
        "rerun_ratio": again["cpu"] / first["cpu"],
    }


def report(r: dict[str, Any]) -> bool:
    first, again, tenth = r["first"], r["again"], r["tenth"]
    memory_ok = r["memory_ratio"] <= MEMORY_RATIO
    rerun_ok = r["rerun_ratio"] < RERUN_RATIO and r["rewritten"] == 0
    trials = r["decisions"] * r["tasks"]
    print(
        f"report site: {r['decisions']:,} decisions over {r['tasks']} tasks, {trials:,} "
        f"trials, {r['pages']:,} pages"
    )
    print(
        f"  first run: {first['cpu']:.1f} s CPU, {first['wall']:.1f} s wall, "
        f"{first['peak_kib'] / 1024:.0f} MiB peak (target < {CPU_TARGET_S:.0f} s CPU): "
        f"{'PASS' if r['cpu_ok'] else 'FAIL'}"
    )
    print(
        f"  peak memory vs a registry one tenth its size: {r['memory_ratio']:.2f} "
        f"({first['peak_kib'] / 1024:.0f} vs {tenth['peak_kib'] / 1024:.0f} MiB; target <= "
        f"{MEMORY_RATIO}): {'PASS' if memory_ok else 'FAIL'}"
    )
    print(
        f"  unchanged re-run / first run CPU: {r['rerun_ratio']:.3f} ({again['cpu']:.2f} s vs "
        f"{first['cpu']:.1f} s; {r['rewritten']} files rewritten; target < {RERUN_RATIO} and "
        f"none): {'PASS' if rerun_ok else 'FAIL'}"
    )
    return bool(r["cpu_ok"] and memory_ok and rerun_ok)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=DECISIONS)
    parser.add_argument("--tasks", type=int, default=TASKS)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="evalops-bench-site-") as tmp:
        result = run(args.decisions, args.tasks, Path(tmp))
    return 0 if report(result) else 1


if __name__ == "__main__":
    sys.exit(main())
