"""P11: `estimate` of an estimation suite of 10,000 tasks x 5 trials within 2x the CPU of
`gate check` of the same build, and memory flat as the build grows (docs/estimation.md).

    python -m benchmarks.estimate_scale [--tasks 10000] [--trials 5] [--grow 4] [--runs 3]

The suite fixture (benchmarks/suite_fixture.py) makes the same tasks the members of a
regression suite and of an estimation suite in three strata. Both commands read the build's
trials through the same loader (`estimate` reuses the gate's): the estimate adds only its
statistics, per task. Measured as dry runs (nothing stored), each in a fresh process:

- CPU of `estimate --dry-run` over CPU of `gate check --dry-run`: <= 2;
- peak memory of `estimate --dry-run` with `--grow` times the trials per task over its peak
  with `--trials`: <= 1.5 (the loader keeps a summary per task, not the trials).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.measure import medians, run
from benchmarks.perf import WORK, _fmt, figure
from benchmarks.suite_fixture import build_suite

GATE = ["evalops", "gate", "check", "--build", "build-1", "--suite", "regression/bench"]
ESTIMATE = ["evalops", "estimate", "--suite", "estimation/bench", "--build", "build-1"]


def workspace(tasks: int, trials: int) -> Path:
    ws = WORK / f"p10-{tasks}x{trials}"
    marker = ws / ".evalops" / "p10-ready"
    if not marker.exists():
        build_suite(ws, tasks, trials, estimation=True)
        marker.write_text("", encoding="utf-8")
    return ws


def measure(argv: list[str], ws: Path, runs: int) -> dict[str, float]:
    samples = [run([*argv, "--dry-run"], cwd=ws) for _ in range(runs)]
    for s in samples:
        assert s["code"] in (0, 3, 4), (argv, s)
    return medians(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--grow", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    ws = workspace(args.tasks, args.trials)
    gate = measure(GATE, ws, args.runs)
    estimate = measure(ESTIMATE, ws, args.runs)
    size = f"{args.tasks:,} tasks x {args.trials} trials"
    ok = figure(
        f"P11 CPU of estimate vs gate check, {size}",
        estimate["cpu"] / gate["cpu"],
        2.0,
        f"estimate: {_fmt(estimate)}; gate check: {_fmt(gate)}",
    )
    grown = measure(ESTIMATE, workspace(args.tasks, args.trials * args.grow), args.runs)
    ok &= figure(
        f"P11 peak memory of estimate at {args.trials * args.grow} vs {args.trials} trials a task",
        grown["peak_kib"] / estimate["peak_kib"],
        1.5,
        f"grown: {_fmt(grown)}; {size}: {_fmt(estimate)}",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
