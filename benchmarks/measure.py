"""Measure one evalops command (or a floor script) in a fresh process.

    python -m benchmarks.measure RESULT.json -- evalops ARGS...
    python -m benchmarks.measure RESULT.json -- script MODULE ARGS...

The child runs the command in-process and writes `{"code", "cpu", "wall", "peak_kib"}` to
RESULT.json: CPU time (user + system) and wall time of the command itself (start-up
included, as a user sees it) and the process's peak resident memory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any


def own_peak_kib() -> int:
    """This process's peak resident memory (KiB) since it was started.

    Not `ru_maxrss`: on Linux a process started by fork or vfork and exec keeps its parent's
    high-water mark in `ru_maxrss`, so under `make bench` (every benchmark in one process)
    each command measured after the benchmark process itself grew read that process's peak
    (790 MiB for a 100 MiB command). `VmHWM` is the peak of this process image alone.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(result: str, argv: list[str]) -> None:
    start_cpu, start_wall = _cpu(), time.perf_counter()
    code = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if argv[0] == "evalops":
            from evalops.cli.context import mark_own_process
            from evalops.cli.main import main

            mark_own_process()  # this process runs one command, as `evalops` does
            code = main(argv[1:])
        else:  # a floor script: `script MODULE ARGS...`
            sys.argv = [argv[1], *argv[2:]]
            try:
                runpy.run_module(argv[1], run_name="__main__")
            except SystemExit as done:
                code = int(done.code or 0)
    Path(result).write_text(
        json.dumps(
            {
                "code": code,
                "cpu": _cpu() - start_cpu,
                "wall": time.perf_counter() - start_wall,
                "peak_kib": own_peak_kib(),
            }
        ),
        encoding="utf-8",
    )


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Measure `argv` (`["evalops", ...]` or `["script", MODULE, ...]`) in a new process."""
    result = cwd / f".measure-{os.getpid()}-{time.monotonic_ns()}.json"
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    base["EVALOPS_ACTOR"] = "bench@evalops.invalid"
    base["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.measure", str(result), "--", *argv],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not result.exists():
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    result.unlink()
    return data


def process(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Measure a whole process, interpreter start-up included (what `time` would say).

    CPU is the child's own user + system time (from `wait4`, so other processes on the
    machine do not count); wall is from spawn to exit. Its `peak_kib` is only an upper
    bound (`wait4`'s `ru_maxrss` includes this process's own high-water mark, see
    `own_peak_kib`): the benchmarks that use it hold CPU and wall to targets, never memory.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    base["EVALOPS_ACTOR"] = "bench@evalops.invalid"
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        child_process = subprocess.Popen(
            argv, cwd=cwd, env={**base, **(env or {})}, stdout=subprocess.DEVNULL, stderr=errors
        )
        _, status, usage = os.wait4(child_process.pid, 0)
        wall = time.perf_counter() - start
        child_process.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errors.seek(0)
            message = errors.read().decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {message}")
    return {
        "code": code,
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "peak_kib": usage.ru_maxrss,
    }


def medians(samples: list[dict[str, Any]]) -> dict[str, float]:
    return {key: median(float(s[key]) for s in samples) for key in ("cpu", "wall", "peak_kib")}


if __name__ == "__main__":
    separator = sys.argv.index("--")
    child(sys.argv[1], sys.argv[separator + 1 :])
