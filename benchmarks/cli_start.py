"""P6: the CLI starts instantly. `python -m benchmarks.cli_start [--runs 7]`

Three commands, each in a fresh process, against the floor `python -c "import typer"` (the
least any typer CLI can cost): `evalops --help`, `evalops gate check --help` and
`evalops validate registry` (the 17-file example registry). Targets: the two `--help` within
1.6x of the floor, `validate` within 2.0x, in CPU time (the child's own user + system time,
so other load on the machine does not count) and in wall time. Figures are medians of
`--runs` rounds (at least 5); a round
runs the floor and the three commands one after another, so a burst of load hits all four.

Whole processes are measured, interpreter start-up included (what a user waits for). The
package is byte-compiled first, as `pip install` of the wheel would have done: with
PYTHONDONTWRITEBYTECODE set, an editable install would otherwise recompile evalops's
modules on every start.

`--against DIR` also runs the three commands of another checkout (an earlier commit, e.g.
exported with `git archive`) in every round, right after this checkout's, in that checkout
(its own evalops and its own example registry: `python -m` puts the working directory
first on the path): a before/after side by side under the same load (its figures are
printed, not held to the targets).
"""

from __future__ import annotations

import argparse
import compileall
import os
import sys
from pathlib import Path

from benchmarks.measure import medians, process
from benchmarks.perf import figure
from benchmarks.workload import REPO

TARGETS = {
    "evalops --help": 1.6,
    "evalops gate check --help": 1.6,
    "evalops validate registry": 2.0,
}
FLOOR = [sys.executable, "-c", "import typer"]
EVALOPS = [sys.executable, "-m", "evalops"]
COMMANDS = {
    "evalops --help": [*EVALOPS, "--help"],
    "evalops gate check --help": [*EVALOPS, "gate", "check", "--help"],
    "evalops validate registry": [*EVALOPS, "validate", "registry"],
}


def _fmt(m: dict[str, float]) -> str:
    return f"cpu {m['cpu'] * 1000:.0f} ms wall {m['wall'] * 1000:.0f} ms"


def p6_cli_start(runs: int = 7, against: Path | None = None) -> bool:
    runs = max(runs, 5)
    compileall.compile_dir(REPO / "evalops", quiet=1)
    others = {f"{name} ({against})": argv for name, argv in COMMANDS.items()} if against else {}
    if against is not None:
        compileall.compile_dir(against / "evalops", quiet=1)
    other_env = {"PYTHONPATH": str(against)} if against is not None else None
    samples: dict[str, list[dict[str, float]]] = {
        "floor": [],
        **{k: [] for k in COMMANDS},
        **{k: [] for k in others},
    }
    loads: list[float] = []
    for round_ in range(runs + 1):  # the first round only warms the page cache
        loads.append(os.getloadavg()[0])
        for name, argv in (("floor", FLOOR), *COMMANDS.items()):
            result = process(argv, cwd=REPO)
            if round_:
                samples[name].append(result)
        for name, argv in others.items():
            result = process(argv, cwd=against or REPO, env=other_env)
            if round_:
                samples[name].append(result)
    floor = medians(samples["floor"])
    print(
        f"  P6 floor `python -c 'import typer'`: {_fmt(floor)} (median of {runs}; "
        f"1-minute load {min(loads):.1f}-{max(loads):.1f})"
    )
    for name in others:
        theirs = medians(samples[name])
        print(
            f"  P6 {name}: CPU / import typer {theirs['cpu'] / floor['cpu']:.2f}, wall / "
            f"import typer {theirs['wall'] / floor['wall']:.2f}  [{_fmt(theirs)}]"
        )
    ok = True
    for name in COMMANDS:
        ours = medians(samples[name])
        detail = f"{_fmt(ours)}; floor {_fmt(floor)}"
        target = TARGETS[name]
        ok &= figure(f"P6 {name}, CPU / import typer", ours["cpu"] / floor["cpu"], target, detail)
        ok &= figure(
            f"P6 {name}, wall / import typer", ours["wall"] / floor["wall"], target, detail
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds (at least 5)")
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="another checkout, measured alongside"
    )
    args = parser.parse_args()
    print(
        f"CLI start-up ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"{Path(sys.executable).name} {sys.version.split()[0]})",
        flush=True,
    )
    return 0 if p6_cli_start(args.runs, args.against) else 1


if __name__ == "__main__":
    sys.exit(main())
