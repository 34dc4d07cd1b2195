"""P8: the everyday read commands answer at the speed of start-up.

    python -m benchmarks.read_commands [--runs 7] [--dir DIR]

On the demo registry (`evalops demo`, built afresh in a temporary directory unless `--dir`
names one it already built), each of `gate list`, `gate show`, `trials list`,
`incident list`, `waiver list`, `suite show` and `calibration status` within 4x the CPU of
`python -c "import typer"`, and `verify` within 8x. Whole processes are measured, interpreter
start-up included (benchmarks/measure.py `process`: the child's own user + system time, so
other load on the machine does not count). A round runs the floor and every command one
after another, so a burst of load hits all of them; figures are medians of `--runs` rounds
(at least 5). The package is byte-compiled first, as installing the wheel would have done.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.measure import medians, process
from benchmarks.perf import figure
from benchmarks.workload import REPO

FLOOR = [sys.executable, "-c", "import typer"]
EVALOPS = [sys.executable, "-m", "evalops"]
READ_TARGET = 4.0
VERIFY_TARGET = 8.0


def commands(gate_id: str) -> dict[str, tuple[list[str], float]]:
    """Each measured command, with its target ratio."""
    return {
        "gate list": (["gate", "list"], READ_TARGET),
        "gate show": (["gate", "show", gate_id], READ_TARGET),
        "trials list": (["trials", "list"], READ_TARGET),
        "incident list": (["incident", "list"], READ_TARGET),
        "waiver list": (["waiver", "list"], READ_TARGET),
        "suite show": (["suite", "show", "regression/core"], READ_TARGET),
        "calibration status": (["calibration", "status"], READ_TARGET),
        "verify": (["verify"], VERIFY_TARGET),
    }


def _environment() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO)}


def build_demo(directory: Path) -> None:
    """The demo registry, as `evalops demo --dir` leaves it."""
    subprocess.run(
        [*EVALOPS, "demo", "--dir", str(directory)],
        cwd=REPO,
        env={**os.environ, **_environment()},
        capture_output=True,
        check=True,
    )


def newest_gate(directory: Path) -> str:
    done = subprocess.run(
        [*EVALOPS, "--json", "gate", "list"],
        cwd=directory,
        env={**os.environ, **_environment()},
        capture_output=True,
        text=True,
        check=True,
    )
    gate_id: str = json.loads(done.stdout)[-1]["gate_id"]
    return gate_id


def _fmt(m: dict[str, float]) -> str:
    return f"cpu {m['cpu'] * 1000:.0f} ms wall {m['wall'] * 1000:.0f} ms"


def p8_read_commands(demo: Path, runs: int = 7) -> bool:
    runs = max(runs, 5)
    compileall.compile_dir(REPO / "evalops", quiet=1)
    measured = commands(newest_gate(demo))
    samples: dict[str, list[dict[str, float]]] = {"floor": [], **{k: [] for k in measured}}
    env = _environment()
    for round_ in range(runs + 1):  # the first round only warms the page cache
        result = process(FLOOR, cwd=demo)
        if round_:
            samples["floor"].append(result)
        for name, (argv, _) in measured.items():
            result = process([*EVALOPS, *argv], cwd=demo, env=env)
            if round_:
                samples[name].append(result)
    floor = medians(samples["floor"])
    print(f"  P8 floor `python -c 'import typer'`: {_fmt(floor)} (median of {runs})")
    ok = True
    for name, (_, target) in measured.items():
        ours = medians(samples[name])
        ok &= figure(
            f"P8 {name}, CPU / import typer",
            ours["cpu"] / floor["cpu"],
            target,
            f"{_fmt(ours)}; peak {ours['peak_kib'] / 1024:.0f} MiB",
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds (at least 5)")
    parser.add_argument("--dir", type=Path, help="a demo directory built earlier")
    args = parser.parse_args()
    print(
        f"Read commands on the demo registry ({os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, {Path(sys.executable).name} {sys.version.split()[0]})",
        flush=True,
    )
    if args.dir is not None:
        if not (args.dir / "demo-summary.md").exists():
            build_demo(args.dir)
        return 0 if p8_read_commands(args.dir, args.runs) else 1
    with tempfile.TemporaryDirectory(prefix="evalops-p8-") as tmp:
        demo = Path(tmp) / "demo"
        build_demo(demo)
        return 0 if p8_read_commands(demo, args.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
