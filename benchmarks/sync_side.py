"""A sync that changes nothing, side by side: another checkout's `evalops sync` and this
tree's, on a registry of 10,000 tasks already synced (what a CI job on the main branch runs
on every push that leaves the registry as it was).

    python -m benchmarks.sync_side --against DIR [--rounds 5]

DIR is another commit's tree (`git archive COMMIT | tar -x -C DIR`). Each round runs DIR's
`evalops sync` and this tree's, one after the other, each in a fresh process on a fresh
copy of `build/bench/suite-10000` (`perf.big_suite`); after a warm-up round it prints the
medians and the per-round ratio of this tree's CPU to DIR's. The 1-minute load average is
read before every round: the machine is shared, so only figures of one run compare.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.perf import big_suite
from benchmarks.side import paired_rounds, run_in_tree, side_arguments

ARGV = ["evalops", "--json", "sync"]


def _sync(suite: Path, code: Path | None) -> dict[str, Any]:
    done = run_in_tree(ARGV, suite, code, "sync-side-run")
    assert done["code"] == 0, done
    return done


def main() -> None:
    suite = big_suite(10_000)
    rows: list[dict[str, Any]] = []
    against, rounds = side_arguments(5)
    for number, load, other, ours in paired_rounds(partial(_sync, suite), against, rounds):
        if number == 0:  # the warm-up round: caches, byte-compiled modules
            continue
        ratio = ours["cpu"] / other["cpu"]
        rows.append({"load": load, "other": other["cpu"], "ours": ours["cpu"], "ratio": ratio})
        print(
            f"round {number}: load {load:.2f}  other {other['cpu']:.2f}s  "
            f"ours {ours['cpu']:.2f}s  ours/other {ratio:.2f}",
            flush=True,
        )
    print(
        json.dumps(
            {
                "against": str(against),
                "rounds": len(rows),
                "other_cpu_median": round(median(r["other"] for r in rows), 3),
                "ours_cpu_median": round(median(r["ours"] for r in rows), 3),
                "ratio_median": round(median(r["ratio"] for r in rows), 3),
                "load": [min(r["load"] for r in rows), max(r["load"] for r in rows)],
            }
        )
    )


if __name__ == "__main__":
    main()
