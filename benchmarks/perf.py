"""The performance targets P1-P7, measured side by side in one run: `make bench`.

    python -m benchmarks.perf [--records 200000] [--runs 5] [--big 1000000] [--only P1,P4]

Every figure prints one line: the measured ratio, its target, PASS/FAIL, and the CPU and
wall seconds (medians of `--runs` runs) behind it. Floors are plain-driver scripts in this
directory (floor_sqlite.py, floor_postgres.py, floor_gate_read.py); evalops and each floor
run in their own fresh processes (benchmarks/measure.py), on copies of the same database.
Databases are built once under build/bench/ and reused by later runs.

- P1 ingest, SQLite: N records, evalops CPU / floor CPU <= 2.0.
- P2 ingest, PostgreSQL: N records, evalops CPU / COPY floor CPU <= 3.0 (a third as fast).
- P3 memory: peak RSS of ingest, gate check, verify, trials list, review list, report audit
  at the big database within 1.5x of the peak at a tenth of it. The big database is the
  small one plus nine earlier builds' trials (`with_history`): stored trials grow 10x, the
  gated build and its stored decision stay the same size.
- P4 gate check of 10,000 tasks x 5 trials: within 5x of a plain read of the same trial
  rows (per-task summaries, the only evaluator of new decisions); with 2,000,000 trials of
  other builds in the database, within 1.2x.
- P5 scaling: gate check, verify, report audit from 1,000 to 10,000 tasks grow at most 12x;
  `trials list --limit 50` at the big database within 1.5x of a small one.
- P6 start-up: `evalops --help` and `evalops gate check --help` within 1.6x of `python -c
  "import typer"`, `evalops validate` of the example registry within 2.0x, CPU and wall
  (cli_start.py).
- P7 verify of the big database: under 60 s CPU (flat memory is P3).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.measure import medians, run
from benchmarks.workload import REPO, example_workspace, records, write_jsonl

WORK = REPO / "build" / "bench"
PG_ADMIN = os.environ.get("EVALOPS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
RESULTS: list[dict[str, Any]] = []


def figure(
    name: str, ratio: float, target: float, detail: str, *, lower_is_better: bool = True
) -> bool:
    ok = ratio <= target if lower_is_better else ratio >= target
    sign = "<=" if lower_is_better else ">="
    line = f"{name}: {ratio:.2f} (target {sign} {target}) {'PASS' if ok else 'FAIL'}  [{detail}]"
    print(line, flush=True)
    RESULTS.append(
        {"figure": name, "ratio": round(ratio, 3), "target": target, "ok": ok, "detail": detail}
    )
    return ok


def _fmt(m: dict[str, float]) -> str:
    return f"cpu {m['cpu']:.2f}s wall {m['wall']:.2f}s peak {m['peak_kib'] / 1024:.0f} MiB"


def copy_db(source: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("reports", "*.jsonl"))
    # Flush the copy now: else the first fsync of the measured process writes the whole
    # copied database back, and the bigger database's copy costs it more system time.
    os.sync()
    return dest


# ------------------------------------------------------------------------- fixtures


def example_base() -> Path:
    """The example registry, synced and calibrated, with no trials (cached)."""
    base = WORK / "example-empty"
    if not (base / ".evalops" / "registry.db").exists():
        if base.exists():
            shutil.rmtree(base)
        example_workspace(base)
    return base


def records_file(count: int, prefix: str = "b") -> Path:
    path = WORK / f"records-{prefix}-{count}.jsonl"
    if not path.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, count, prefix)
    return path


def populated(count: int) -> Path:
    """The example with `count` trials ingested and two critical tasks promoted (cached)."""
    ws = WORK / f"example-{count}"
    if (ws / ".evalops" / "registry.db").exists():
        return ws
    copy_db(example_base(), ws)
    for path in _chunks(count):
        done = run(["evalops", "trials", "ingest", str(path)], cwd=ws)
        assert done["code"] == 0, done
    for task in ("article-publish-approved-revision", "support-refund-in-order"):
        done = run(["evalops", "promote", task, "--to", "regression/core"], cwd=ws)
        assert done["code"] == 0, (task, done)
    return ws


def _chunks(count: int, size: int = 200_000) -> list[Path]:
    """`count` records as files of at most `size`, with ids that never collide."""
    out = []
    for start in range(0, count, size):
        n = min(size, count - start)
        path = WORK / f"records-c{start}-{n}.jsonl"
        if not path.exists():
            WORK.mkdir(parents=True, exist_ok=True)
            write_jsonl(path, n, prefix=f"c{start}")
        out.append(path)
    return out


HISTORY_BUILDS = 9
"""The big database is the small one plus this many earlier builds' trials (P3, P5, P7)."""


def _history_profiles(ws: Path) -> list[str]:
    """Execution profiles of the history builds, committed and synced; their digests."""
    import git

    from evalops.registry.definitions import load_definition

    source = (ws / "registry" / "executions" / "candidate-b124.yaml").read_text(encoding="utf-8")
    paths = []
    for n in range(HISTORY_BUILDS):
        path = ws / "registry" / "executions" / f"history-b{n}.yaml"
        text = source.replace("id: candidate-b124", f"id: history-b{n}")
        path.write_text(text.replace("build-124", f"build-h{n}"), encoding="utf-8")
        paths.append(path)
    repo = git.Repo(ws)
    repo.git.add(A=True)  # the copy left out the example's *.jsonl files
    repo.index.commit("history builds")
    repo.close()
    done = run(["evalops", "sync"], cwd=ws)
    assert done["code"] == 0, done
    return [load_definition(p).digest for p in paths]


def _history_records(path: Path, count: int, digest: str, prefix: str) -> None:
    from evalops.domain.digests import eval_case_digest

    with path.open("w", encoding="utf-8") as out:
        for n, record in enumerate(records(count, prefix)):
            # The three example builds' templates share one execution here: one run each.
            record["run_id"] = f"{prefix}-run-{n}"
            record["execution_digest"] = digest
            record["eval_case_digest"] = eval_case_digest(
                record["task_digest"], digest, record["grader_set_digest"]
            )
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def with_history(count: int, small: int) -> Path:
    """The example with `small` trials (as `populated`, a gate decision stored), history
    builds' profiles synced, and `count - small` trials of those builds: what a year of
    nightly runs leaves. Every size built this way differs only in history (cached)."""
    ws = WORK / f"history-{small}-{count}"
    if (ws / ".evalops" / "history-done").exists():
        return ws
    copy_db(populated(small), ws)
    _gate_once(ws)
    digests = _history_profiles(ws)
    per_build = (count - small) // HISTORY_BUILDS
    for n, digest in enumerate(digests):
        for start in range(0, per_build, 200_000):
            size = min(200_000, per_build - start)
            path = WORK / f"history-records-{n}-{start}-{size}.jsonl"
            if not path.exists():
                _history_records(path, size, digest, prefix=f"h{n}-{start}")
            done = run(["evalops", "trials", "ingest", str(path)], cwd=ws)
            assert done["code"] == 0, done
    (ws / ".evalops" / "history-done").write_text("", encoding="utf-8")
    return ws


# -------------------------------------------------------------------------- P1 / P2


def p1_ingest_sqlite(records: int, runs: int) -> bool:
    data = records_file(records)
    ours, floor = [], []
    for i in range(runs):
        ws = copy_db(example_base(), WORK / "p1-run")
        ours.append(run(["evalops", "trials", "ingest", str(data)], cwd=ws))
        assert ours[-1]["code"] == 0, ours[-1]
        fl = copy_db(example_base(), WORK / "p1-floor")
        floor.append(
            run(["script", "benchmarks.floor_sqlite", str(data), ".evalops/registry.db"], cwd=fl)
        )
        print(
            f"  P1 run {i + 1}/{runs}: evalops {_fmt(ours[-1])}; floor {_fmt(floor[-1])}",
            flush=True,
        )
    a, b = medians(ours), medians(floor)
    return figure(
        f"P1 ingest SQLite {records:,} records, evalops/floor CPU",
        a["cpu"] / b["cpu"],
        2.0,
        f"evalops {_fmt(a)}; sqlite3 floor {_fmt(b)}; {records / a['wall']:,.0f} records/s",
    )


def _pg(sql: str, db: str = "test") -> None:
    import psycopg

    base = PG_ADMIN.rsplit("/", 1)[0]
    with psycopg.connect(f"{base}/{db}", autocommit=True) as conn:
        conn.execute(sql)


def _pg_url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def p2_ingest_postgres(records: int, runs: int) -> bool:
    data = records_file(records)
    template = "evalops_bench_template"
    _pg(f"DROP DATABASE IF EXISTS {template}")
    _pg(f"CREATE DATABASE {template}")
    ws = WORK / "p2-ws"
    if ws.exists():
        shutil.rmtree(ws)
    example_workspace(ws, db_url=_pg_url(template))
    ours, floor = [], []
    for i in range(runs):
        for name in ("evalops_bench_run", "evalops_bench_floor"):
            _pg(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            _pg(f"CREATE DATABASE {name} TEMPLATE {template}")
        ours.append(
            run(
                ["evalops", "--db", _pg_url("evalops_bench_run"), "trials", "ingest", str(data)],
                cwd=ws,
            )
        )
        assert ours[-1]["code"] == 0, ours[-1]
        floor.append(
            run(
                ["script", "benchmarks.floor_postgres", str(data), _pg_url("evalops_bench_floor")],
                cwd=ws,
            )
        )
        print(
            f"  P2 run {i + 1}/{runs}: evalops {_fmt(ours[-1])}; floor {_fmt(floor[-1])}",
            flush=True,
        )
    for name in ("evalops_bench_run", "evalops_bench_floor", template):
        _pg(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    a, b = medians(ours), medians(floor)
    return figure(
        f"P2 ingest PostgreSQL {records:,} records, evalops/COPY floor CPU",
        a["cpu"] / b["cpu"],
        3.0,
        f"evalops {_fmt(a)}; psycopg COPY floor {_fmt(b)}; wall ratio {a['wall'] / b['wall']:.2f}",
    )


# ---------------------------------------------------------------------- P3 / P5 / P7


def _report_audit(out: str) -> list[str]:
    """The HTML audit report of the first stored decision, written to `out`."""
    return ["evalops", "report", "audit", "--gate", "GATE-1", "--format", "html", "-o", out]


def _read_commands(ws: Path) -> dict[str, list[str]]:
    report = str(WORK / "p3-report.html")
    return {
        "gate check": [
            "evalops",
            "gate",
            "check",
            "--build",
            "build-124",
            "--suite",
            "regression/core",
            "--dry-run",
        ],
        "verify": ["evalops", "verify"],
        "trials list": ["evalops", "trials", "list", "--limit", "50"],
        "review list": ["evalops", "review", "list", "--limit", "50"],
        "report audit": _report_audit(report),
    }


def _gate_once(ws: Path) -> None:
    if not list((ws / ".evalops").glob("gated")):
        done = run(
            ["evalops", "gate", "check", "--build", "build-124", "--suite", "regression/core"],
            cwd=ws,
        )
        assert done["code"] in (0, 3, 4), done
        (ws / ".evalops" / "gated").write_text("", encoding="utf-8")


def p3_p5_p7(big: int, runs: int) -> bool:
    small = big // 10
    ok = True
    peaks: dict[str, dict[int, dict[str, float]]] = {}
    for size in (small, big):
        ws = with_history(size, small)
        extra = records_file(10_000, prefix=f"x{size}")
        copy = copy_db(ws, WORK / f"p3-ingest-{size}")
        peaks.setdefault("ingest 10,000 more", {})[size] = medians(
            [run(["evalops", "trials", "ingest", str(extra)], cwd=copy)]
        )
        for name, argv in _read_commands(ws).items():
            samples = [run(argv, cwd=ws) for _ in range(max(1, runs // 2))]
            for s in samples:
                assert s["code"] in (0, 3, 4), (name, s)
            peaks.setdefault(name, {})[size] = medians(samples)
    for name, by_size in peaks.items():
        a, b = by_size[big], by_size[small]
        ok &= figure(
            f"P3 peak memory of {name} at {big:,} vs {small:,} trials",
            a["peak_kib"] / b["peak_kib"],
            1.5,
            f"{big:,}: {_fmt(a)}; {small:,}: {_fmt(b)}",
        )
    listed = peaks["trials list"]
    ok &= figure(
        f"P5 trials list --limit 50 at {big:,} vs {small:,} trials (time)",
        listed[big]["cpu"] / listed[small]["cpu"],
        1.5,
        f"{big:,}: {_fmt(listed[big])}; {small:,}: {_fmt(listed[small])}",
    )
    verified = peaks["verify"][big]
    ok &= figure(
        f"P7 verify of {big:,} trials, CPU seconds",
        verified["cpu"],
        60.0,
        _fmt(verified),
    )
    return ok


def grown_build(big: int, runs: int) -> bool:
    """Not a target: peak memory when the gated build itself grows 10x (every record of the
    big database is one of the example's three builds). A stored decision holds every trial
    it read (docs/gate.md), so its size, and what reads it, follows that build."""
    small = big // 10
    peaks: dict[str, dict[int, dict[str, float]]] = {}
    for size in (small, big):
        ws = populated(size)
        _gate_once(ws)
        commands = _read_commands(ws)
        for name in ("gate check", "verify", "report audit"):
            samples = [run(commands[name], cwd=ws) for _ in range(max(1, runs // 2))]
            peaks.setdefault(name, {})[size] = medians(samples)
    for name, by_size in peaks.items():
        a, b = by_size[big], by_size[small]
        print(
            f"grown build (no target): peak memory of {name} at {big:,} vs {small:,} trials "
            f"of the example's builds: {a['peak_kib'] / b['peak_kib']:.2f}  "
            f"[{big:,}: {_fmt(a)}; {small:,}: {_fmt(b)}]",
            flush=True,
        )
    return True


# ---------------------------------------------------------------------------- P4 / P5


def big_suite(tasks: int, other_builds: int = 0) -> Path:
    """A registry of `tasks` tasks in one regression suite, 5 trials each (cached)."""
    from benchmarks.suite_fixture import add_other_builds, build_suite

    ws = WORK / f"suite-{tasks}"
    if not (ws / ".evalops" / "registry.db").exists():
        build_suite(ws, tasks)
    if not other_builds:
        return ws
    wide = WORK / f"suite-{tasks}-other-{other_builds}"
    if not (wide / ".evalops" / "registry.db").exists():
        copy_db(ws, wide)
        add_other_builds(wide, other_builds)
    return wide


def _gate(ws: Path, runs: int, *extra: str) -> dict[str, float]:
    argv = ["evalops", "gate", "check", "--build", "build-1", "--suite", "regression/bench"]
    argv += extra
    samples = []
    for _ in range(runs):
        copy = copy_db(ws, WORK / "p4-run")
        samples.append(run(argv, cwd=copy))
        assert samples[-1]["code"] in (0, 3, 4), samples[-1]
    return medians(samples)


def p4_p5(runs: int) -> bool:
    ok = True
    ten = big_suite(10_000)
    ours = _gate(ten, runs)
    floor = medians(
        [
            run(
                ["script", "benchmarks.floor_gate_read", ".evalops/registry.db", "build-1"], cwd=ten
            )
            for _ in range(runs)
        ]
    )
    ok &= figure(
        "P4 gate check 10,000 tasks x 5 trials (per-task summaries), evalops/plain read CPU",
        ours["cpu"] / floor["cpu"],
        5.0,
        f"evalops {_fmt(ours)}; sqlite3 read {_fmt(floor)}",
    )
    wide = _gate(big_suite(10_000, other_builds=2_000_000), runs)
    ok &= figure(
        "P4 gate check with 2,000,000 trials of other builds / without (CPU)",
        wide["cpu"] / ours["cpu"],
        1.2,
        f"with {_fmt(wide)}; without {_fmt(ours)}",
    )
    one = big_suite(1_000)
    scaling: dict[str, tuple[dict[str, float], dict[str, float]]] = {
        "gate check": (_gate(one, runs), ours)
    }
    for name, argv in {
        "verify": ["evalops", "verify"],
        "report audit": _report_audit(str(WORK / "p5-report.html")),
    }.items():
        pair = []
        for ws in (one, ten):
            _gate_stored(ws)
            pair.append(medians([run(argv, cwd=ws) for _ in range(max(1, runs // 2))]))
        scaling[name] = (pair[0], pair[1])
    for name, (small, large) in scaling.items():
        ok &= figure(
            f"P5 {name} from 1,000 to 10,000 tasks (CPU growth)",
            large["cpu"] / small["cpu"],
            12.0,
            f"10,000: {_fmt(large)}; 1,000: {_fmt(small)}",
        )
    return ok


def _gate_stored(ws: Path) -> None:
    if not (ws / ".evalops" / "gated").exists():
        done = run(
            ["evalops", "gate", "check", "--build", "build-1", "--suite", "regression/bench"],
            cwd=ws,
        )
        assert done["code"] in (0, 3, 4), done
        (ws / ".evalops" / "gated").write_text("", encoding="utf-8")


# ------------------------------------------------------------------------------ main


def _p6(runs: int) -> bool:
    from benchmarks.cli_start import p6_cli_start

    return p6_cli_start(max(runs, 5))


STEPS: dict[str, Callable[[argparse.Namespace], bool]] = {
    "P1": lambda a: p1_ingest_sqlite(a.records, a.runs),
    "P2": lambda a: p2_ingest_postgres(a.records, a.runs),
    "P3": lambda a: p3_p5_p7(a.big, a.runs),
    "P4": lambda a: p4_p5(a.runs),
    "P6": lambda a: _p6(a.runs),
    "grown": lambda a: grown_build(a.big, a.runs),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--only", default="P1,P2,P3,P4,P6", help="also: grown")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    print(
        f"performance targets P1-P7 ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    ok = True
    for key in args.only.split(","):
        ok &= STEPS[key.strip()](args)
    (WORK / "perf-results.json").write_text(json.dumps(RESULTS, indent=2), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
