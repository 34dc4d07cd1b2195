"""P9: a decision of any size in flat memory (the default and only evaluator of new
decisions, 4: per-task summaries; docs/gate.md).

    python -m benchmarks.grown_build [--small 10000] [--runs 5]

The gated build itself grows tenfold: every record is one of the example's build-124
records (its six tasks), `--small` of them, then ten times as many, each in a workspace of
its own with one decision stored by `gate check`. Peak memory (RSS) of each
read command at the big build must stay within 1.5x of the small one's:

- `gate check --dry-run` (the loader streams the trials into task summaries);
- `verify` (re-hashes every trial, replays the decision, rebuilds its summaries);
- `report audit --gate GATE-1 --format html`;
- `gate replay GATE-1` (exit 0: byte for byte).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.measure import medians, run
from benchmarks.perf import WORK, _copy_db, _fmt, example_base, figure
from benchmarks.workload import EXAMPLE, templates

GATED_TEMPLATE = "candidate-b124.jsonl"
CHECK = ["evalops", "gate", "check", "--build", "build-124", "--suite", "regression/core"]


def _gated_records(path: Path, count: int) -> None:
    """`count` records of build-124 alone: its templates again, each copy in its own run."""
    wanted = {
        json.loads(line)["trial_id"]
        for line in (EXAMPLE / "trials" / GATED_TEMPLATE).read_text(encoding="utf-8").splitlines()
    }
    base = [t for t in templates() if t["trial_id"] in wanted]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            record = dict(base[i % len(base)])
            record["trial_id"] = f"g-{i:08d}"
            record["run_id"] = f"g-run-{i // len(base)}"
            record["attempt_id"] = f"g-attempt-{i}"
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def workspace(count: int) -> Path:
    """The example with `count` build-124 trials and one evaluator-4 decision (cached)."""
    ws = WORK / f"p9-{count}"
    marker = ws / ".evalops" / "p9-ready"
    if marker.exists():
        return ws
    _copy_db(example_base(), ws)
    records = WORK / f"p9-records-{count}.jsonl"
    _gated_records(records, count)
    steps = [
        ["evalops", "trials", "ingest", str(records)],
        *(
            ["evalops", "promote", task, "--to", "regression/core"]
            for task in ("article-publish-approved-revision", "support-refund-in-order")
        ),
        CHECK,
    ]
    for argv in steps:
        done = run(argv, cwd=ws)
        assert done["code"] in (0, 3, 4), (argv, done)
    marker.write_text("", encoding="utf-8")
    return ws


def commands(ws: Path) -> dict[str, list[str]]:
    report = str(ws / "p9-report.html")
    return {
        "gate check --dry-run": [*CHECK, "--dry-run"],
        "verify": ["evalops", "verify"],
        "report audit": ["evalops", "report", "audit", "--gate", "GATE-1", "-o", report],
        "gate replay": ["evalops", "gate", "replay", "GATE-1"],
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    return 0 if p9(args.small, args.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
