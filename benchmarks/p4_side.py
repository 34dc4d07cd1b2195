"""P4 side by side: another checkout's stored `gate check`, this tree's, and the floor.

    python -m benchmarks.p4_side --against DIR [--rounds 7]

DIR is another commit's tree (`git archive COMMIT | tar -x -C DIR`, with its `evalops`
and `benchmarks` packages). Each round measures, one after the other, DIR's stored
`gate check --build build-1 --suite regression/bench` and this tree's, each in a fresh
process on a fresh copy of `build/bench/suite-10000` (as `perf.py` measures P4), then the
floor (`floor_gate_read.py`) and this tree's imports alone (`check_imports.py`: what the
check spends before it reads a row); after a warm-up round, the medians of `--rounds` rounds and
the per-round ratio of this tree to DIR. The 1-minute load average is read before every
round: the machine is shared, so only figures of the same rounds compare.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.measure import run
from benchmarks.perf import big_suite
from benchmarks.side import paired_rounds, run_in_tree, side_arguments

ARGV = ["evalops", "gate", "check", "--build", "build-1", "--suite", "regression/bench"]


def _gate(suite: Path, code: Path | None) -> dict[str, Any]:
    done = run_in_tree(ARGV, suite, code, "p4-side-run")
    assert done["code"] in (0, 3, 4), done
    return done


def main() -> None:
    suite = big_suite(10_000)
    rows: list[dict[str, Any]] = []
    against, rounds = side_arguments(7)
    for number, load, other, ours in paired_rounds(partial(_gate, suite), against, rounds):
        floor = run(
            ["script", "benchmarks.floor_gate_read", ".evalops/registry.db", "build-1"], cwd=suite
        )
        imports = run(["script", "benchmarks.check_imports"], cwd=suite)
        if number == 0:  # the warm-up round: caches, byte-compiled modules
            continue
        rows.append(
            {"load": load, "other": other, "ours": ours, "floor": floor, "imports": imports}
        )
        print(
            f"round {number}: load {load:.2f}  other {other['cpu']:.3f}s  ours "
            f"{ours['cpu']:.3f}s  floor {floor['cpu']:.3f}s  imports {imports['cpu']:.3f}s  "
            f"ours/other {ours['cpu'] / other['cpu']:.2f}",
            flush=True,
        )

    def med(key: str, field: str = "cpu") -> float:
        return median(float(r[key][field]) for r in rows)

    floor_cpu = med("floor")
    print(
        f"against {against}; {len(rows)} rounds, load {min(r['load'] for r in rows):.1f}-"
        f"{max(r['load'] for r in rows):.1f}, pid {os.getpid()}"
    )
    for key, name in (("other", "other"), ("ours", "this tree")):
        lo = min(float(r[key]["cpu"]) for r in rows)
        hi = max(float(r[key]["cpu"]) for r in rows)
        print(
            f"{name}: CPU {med(key):.3f}s ({lo:.3f}-{hi:.3f}), {med(key) / floor_cpu:.2f}x the "
            f"floor; wall {med(key, 'wall'):.3f}s; peak {med(key, 'peak_kib') / 1024:.0f} MiB"
        )
    print(f"floor: CPU {floor_cpu:.3f}s, wall {med('floor', 'wall'):.3f}s")
    print(
        f"the check's imports alone (benchmarks.check_imports, this tree): CPU "
        f"{med('imports'):.3f}s, {med('imports') / floor_cpu:.2f}x the floor"
    )
    per_round = median(float(r["ours"]["cpu"]) / float(r["other"]["cpu"]) for r in rows)
    print(f"this tree / other, per round (median): {per_round:.2f}")


if __name__ == "__main__":
    main()
