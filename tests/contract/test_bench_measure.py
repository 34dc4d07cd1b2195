"""The benchmarks' memory figure is the measured command's own peak, whatever the size of
the process that runs the benchmark (`make bench` runs every benchmark in one process)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import measure


def test_a_command_measured_by_a_large_process_reports_its_own_peak(tmp_path: Path) -> None:
    ballast = bytearray(400 * 1024 * 1024)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # resident, not just reserved
    # `this` prints a poem: a process of a few tens of MiB, far below the ballast.
    result = measure.run(["script", "this"], cwd=tmp_path)
    assert result["code"] == 0
    assert 0 < result["peak_kib"] < 200 * 1024, result
    del ballast
