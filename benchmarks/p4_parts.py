"""P4 in parts: what a stored `gate check` of 10,000 tasks x 5 trials would cost on the
driver alone, stage by stage, against the floor and the check as it runs today.

    python -m benchmarks.p4_parts [--rounds 5]

Each round, in fresh processes on `build/bench/suite-10000` (`perf.big_suite`): the floor
(`floor_gate_read.py`), the stored check (`evalops gate check`, on a fresh copy), and
`p4_stages.py`, which times in one process the stages of a check that never imports the
ORM (the CLI and the loader on a `Reader`, the floor's own read, the inputs, the
evaluation, the stored bytes and their digests), then the ORM's imports on top. After a
warm-up round it prints the median of each stage as a multiple of the floor's CPU. P4's
target is 5x the floor for the whole check (benchmarks/RESULTS.md): the stages say what
each part leaves of it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.measure import run
from benchmarks.perf import WORK, copy_db
from benchmarks.side import load_average

BUILD_SUITE = ("build-1", "regression/bench")
CHECK = ["evalops", "gate", "check", "--build", BUILD_SUITE[0], "--suite", BUILD_SUITE[1]]


def _stages(suite: Path) -> dict[str, Any]:
    """`p4_stages` in a fresh interpreter, as `measure.run` starts a command: its JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.p4_stages", ".evalops/registry.db", *BUILD_SUITE],
        cwd=suite,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def main() -> None:
    from benchmarks.perf import big_suite

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    suite = big_suite(10_000)
    rows: list[dict[str, Any]] = []
    for number in range(rounds + 1):
        load = load_average()
        floor = run(
            ["script", "benchmarks.floor_gate_read", ".evalops/registry.db", "build-1"], cwd=suite
        )
        check = run(CHECK, cwd=copy_db(suite, WORK / "p4-parts-run"))
        assert check["code"] in (0, 3, 4), check
        stages = _stages(suite)
        # The Reader loader stands for the check's reads only while both build the same inputs.
        assert stages["loaders_agree"], "the Reader loader and the check's loader disagree"
        if number == 0:  # the warm-up round
            continue
        rows.append({"load": load, "floor": floor["cpu"], "check": check["cpu"], **stages})
        print(
            f"round {number}: load {load:.2f}  floor {floor['cpu']:.3f}s  check "
            f"{check['cpu']:.3f}s",
            flush=True,
        )
    floor_cpu = median(r["floor"] for r in rows)
    print(
        f"{len(rows)} rounds, load {min(r['load'] for r in rows):.1f}-"
        f"{max(r['load'] for r in rows):.1f}; {rows[0]['tasks']:,} tasks, "
        f"{rows[0]['stored_bytes'] / 1e6:.1f} MB stored per decision; SQLAlchemy imported "
        f"before the ORM stage: {rows[0]['sqlalchemy_before_orm']}; the two loaders' inputs "
        f"equal: {rows[0]['loaders_agree']}"
    )
    print(f"{'floor (plain sqlite3 read, its own process)':<58} {floor_cpu:6.3f}s  1.00x")
    check_cpu = median(r["check"] for r in rows)
    print(f"{'the stored check today':<58} {check_cpu:6.3f}s {check_cpu / floor_cpu:5.2f}x")
    stage_sum = 0.0
    for name in rows[0]["stages"]:
        cpu = median(r["stages"][name] for r in rows)
        if "ORM" not in name and "check's loader" not in name:
            stage_sum += cpu
        print(f"  {name:<56} {cpu:6.3f}s {cpu / floor_cpu:5.2f}x")
    without = stage_sum - median(r["stages"]["the floor's read"] for r in rows)
    print(
        f"{'driver alone, reading and deciding, nothing written':<58} {without:6.3f}s "
        f"{without / floor_cpu:5.2f}x (target for the whole check: 5.00x)"
    )


if __name__ == "__main__":
    main()
