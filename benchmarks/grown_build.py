"""P9: a decision of any size in flat memory (the default and only evaluator of new
decisions, 4: per-task summaries; docs/gate.md).

    python -m benchmarks.grown_build [--small 10000] [--huge 1000000] [--runs 5] [--quick]

The gated build itself grows tenfold: every record is one of the example's build-124
records (its six tasks and the ten sampled EU sessions of `estimation/eu-sessions`),
`--small` of them, then ten times as many, each in a workspace of its own with one decision
stored by `gate check`. Peak memory (RSS) of each read command at the big build must stay
within 1.5x of the small one's:

- `gate check --dry-run` (the loader streams the trials into task summaries);
- `verify` (re-hashes every trial, replays the decision, rebuilds its summaries);
- `report audit --gate GATE-1 --format html`;
- `gate replay GATE-1` (exit 0: byte for byte);
- `estimate --dry-run` of `estimation/eu-sessions` (the gate's loader, per-stratum sums).

Then `gate check` of a build of `--huge` trials (the issue's 1,000,000) must peak under
150 MB: the dry run, and the stored check that made the workspace's decision.
`--quick` is a smaller run (2,000 -> 20,000, 100,000, 3 runs), not the issue's sizes.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from benchmarks.measure import medians, run
from benchmarks.perf import WORK, _fmt, copy_db, example_base, figure
from benchmarks.workload import EXAMPLE, templates

GATED_TEMPLATES = ("candidate-b124.jsonl", "eu-sessions/candidate-b124.jsonl")
CHECK = ["evalops", "gate", "check", "--build", "build-124", "--suite", "regression/core"]
ESTIMATE = ["evalops", "estimate", "--suite", "estimation/eu-sessions", "--build", "build-124"]
EU_SESSIONS = sorted(
    p.stem for p in (EXAMPLE / "tasks" / "eu-sessions").glob("*.yaml")
)  # the estimation suite's sampled sessions (as `evalops demo` promotes them)
HUGE_LIMIT_MIB = 150
CHUNK = 200_000


def _base() -> list[dict[str, Any]]:
    """Build-124's original records: the regression tasks' and the EU sessions'."""
    wanted = {
        json.loads(line)["trial_id"]
        for name in GATED_TEMPLATES
        for line in (EXAMPLE / "trials" / name).read_text(encoding="utf-8").splitlines()
    }
    eu = [
        json.loads(line)
        for line in (EXAMPLE / "trials" / GATED_TEMPLATES[1]).read_text("utf-8").splitlines()
    ]
    return [t for t in [*templates(), *eu] if t["trial_id"] in wanted]


def _gated_records(path: Path, start: int, count: int) -> None:
    """Records `start` to `start + count` of build-124 alone: its templates again, each
    copy in its own run."""
    base = _base()
    with path.open("w", encoding="utf-8") as out:
        for i in range(start, start + count):
            record = dict(base[i % len(base)])
            record["trial_id"] = f"g-{i:08d}"
            record["run_id"] = f"g-run-{i // len(base)}"
            record["attempt_id"] = f"g-attempt-{i}"
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def workspace(count: int, ingest: int | None = None) -> Path:
    """The example with `count` build-124 trials and one evaluator-4 decision (cached).

    Every trial is ingested by `evalops trials ingest`, unless `ingest` says fewer: then the
    rest are copies of the ingested rows made with plain SQL under new trial and run ids
    (`_copy_rows`), a database for the gate's memory only (it would not verify). Chunks
    already in the database (an interrupted build) are not ingested again."""
    ws = WORK / f"p9-{count}"
    marker = ws / ".evalops" / "p9-ready"
    if marker.exists():
        return ws
    ingest = count if ingest is None else ingest
    have = _trial_count(ws) if (ws / ".evalops" / "registry.db").exists() else None
    if have is None:
        copy_db(example_base(), ws)
        have = 0
    for start in range(have - have % CHUNK, ingest, CHUNK):
        records = WORK / f"p9-records-{count}-{start}.jsonl"
        _gated_records(records, start, min(CHUNK, ingest - start))
        done = run(["evalops", "trials", "ingest", str(records)], cwd=ws)
        assert done["code"] == 0, (records, done)
        records.unlink()
    if count > ingest:
        _copy_rows(ws, count - _trial_count(ws))
    steps = [
        *(
            ["evalops", "promote", task, "--to", "regression/core"]
            for task in ("article-publish-approved-revision", "support-refund-in-order")
        ),
        *(["evalops", "promote", task, "--to", "estimation/eu-sessions"] for task in EU_SESSIONS),
    ]
    for argv in steps:
        done = run(argv, cwd=ws)
        assert done["code"] in (0, 3, 4), (argv, done)
    stored = run(CHECK, cwd=ws)
    assert stored["code"] in (0, 3, 4), stored
    (ws / ".evalops" / "p9-stored-check.json").write_text(json.dumps(stored), encoding="utf-8")
    marker.write_text("", encoding="utf-8")
    return ws


def _trial_count(ws: Path) -> int:
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    try:
        return int(con.execute("SELECT count(*) FROM trial").fetchone()[0])
    finally:
        con.close()


def _copy_rows(ws: Path, more: int) -> None:
    """`more` trial rows more, copied from the stored ones under new trial and run ids (the
    same build, tasks, classes and scores: the gate reads them as it reads ingested rows)."""
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    columns = [r[1] for r in con.execute("PRAGMA table_info(trial)")]
    have = int(con.execute("SELECT count(*) FROM trial").fetchone()[0])
    copy = 0
    while more > 0:
        n = min(have, more)
        picked = ", ".join(
            "NULL"
            if c == "id"
            else f"trial_id || '-copy{copy}'"
            if c == "trial_id"
            else f"run_id || '-copy{copy}'"
            if c == "run_id"
            else c
            for c in columns
        )
        con.execute(
            f"INSERT INTO trial ({', '.join(columns)}) SELECT {picked} FROM trial"
            f" WHERE trial_id NOT LIKE '%-copy%' ORDER BY id LIMIT {n}"
        )
        con.commit()
        more -= n
        copy += 1
    con.close()


def commands(ws: Path) -> dict[str, list[str]]:
    report = str(ws / "p9-report.html")
    return {
        "gate check --dry-run": [*CHECK, "--dry-run"],
        "verify": ["evalops", "verify"],
        "report audit": ["evalops", "report", "audit", "--gate", "GATE-1", "-o", report],
        "gate replay": ["evalops", "gate", "replay", "GATE-1"],
        "estimate --dry-run": [*ESTIMATE, "--dry-run"],
    }


def p9(small: int, runs: int) -> bool:
    big = small * 10
    peaks: dict[str, dict[int, dict[str, float]]] = {}
    for size in (small, big):
        ws = workspace(size)
        for name, argv in commands(ws).items():
            samples = [run(argv, cwd=ws) for _ in range(runs)]
            for s in samples:
                # gate replay exits 0 only when the decision replays byte for byte.
                assert s["code"] in ((0,) if name == "gate replay" else (0, 3, 4)), (name, s)
            peaks.setdefault(name, {})[size] = medians(samples)
    ok = True
    for name, by_size in peaks.items():
        a, b = by_size[big], by_size[small]
        detail = f"{big:,}: {_fmt(a)}; {small:,}: {_fmt(b)}"
        ok &= figure(
            f"P9 peak memory of {name} at {big:,} vs {small:,} gated trials",
            a["peak_kib"] / b["peak_kib"],
            1.5,
            detail,
        )
    return ok


def huge(count: int, runs: int, ingest: int | None = None) -> bool:
    """`gate check` of a build of `count` trials: its peak under `HUGE_LIMIT_MIB`."""
    ws = workspace(count, ingest)
    samples = [run([*CHECK, "--dry-run"], cwd=ws) for _ in range(runs)]
    for s in samples:
        assert s["code"] in (0, 3, 4), s
    dry = medians(samples)
    stored = json.loads((ws / ".evalops" / "p9-stored-check.json").read_text("utf-8"))
    ok = figure(
        f"P9 peak memory of gate check --dry-run of {count:,} gated trials, MiB",
        dry["peak_kib"] / 1024,
        HUGE_LIMIT_MIB,
        _fmt(dry),
    )
    return ok & figure(
        f"P9 peak memory of the stored gate check of {count:,} gated trials (one run), MiB",
        stored["peak_kib"] / 1024,
        HUGE_LIMIT_MIB,
        _fmt(stored),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=None, help="default 10,000")
    parser.add_argument("--huge", type=int, default=None, help="default 1,000,000")
    parser.add_argument("--runs", type=int, default=None, help="default 5")
    parser.add_argument("--quick", action="store_true", help="2,000 / 100,000, 3 runs")
    parser.add_argument("--skip-huge", action="store_true")
    parser.add_argument(
        "--huge-ingest",
        type=int,
        default=None,
        help="ingest only this many of the huge build's trials, copy the rest with SQL",
    )
    parser.add_argument("--only-huge", action="store_true")
    args = parser.parse_args(argv)
    small = args.small or (2_000 if args.quick else 10_000)
    big = args.huge or (100_000 if args.quick else 1_000_000)
    runs = args.runs or (3 if args.quick else 5)
    WORK.mkdir(parents=True, exist_ok=True)
    ok = True if args.only_huge else p9(small, runs)
    if not args.skip_huge:
        ok &= huge(big, runs, args.huge_ingest)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
