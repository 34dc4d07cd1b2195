"""What the side-by-side benchmarks share (`p4_side.py`, `sync_side.py`): one command run
by another checkout's code or this tree's, on a fresh copy of a prepared registry, and the
machine's load read before each round (the machine is shared: only figures of the same
rounds compare)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.measure import run
from benchmarks.perf import WORK, copy_db


def run_in_tree(argv: list[str], source: Path, tree: Path | None, scratch: str) -> dict[str, Any]:
    """`argv` measured in a fresh process on a fresh copy of `source` (under WORK/`scratch`),
    with `tree`'s `evalops` (another checkout, `git archive COMMIT | tar -x -C DIR`) or, for
    None, this tree's."""
    copy = copy_db(source, WORK / scratch)
    env = {"PYTHONPATH": str(tree)} if tree is not None else None
    return run(argv, cwd=copy, env=env)


def load_average() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text(encoding="ascii").split()[0])


def side_arguments(default_rounds: int) -> tuple[Path, int]:
    """`--against DIR` (another checkout) and `--rounds N` from the command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=default_rounds)
    args = parser.parse_args()
    return args.against.resolve(), args.rounds


def paired_rounds(
    measure: Callable[[Path | None], dict[str, Any]], against: Path, rounds: int
) -> Iterator[tuple[int, float, dict[str, Any], dict[str, Any]]]:
    """For the warm-up round 0 (caches, byte-compiled modules: its figures are not to be
    kept) and rounds 1 to `rounds`: (round, load, `against`'s figures, this tree's) of
    `measure(against)` and `measure(None)`, run one after the other."""
    for number in range(rounds + 1):
        load = load_average()
        other, ours = measure(against), measure(None)
        yield number, load, other, ours
