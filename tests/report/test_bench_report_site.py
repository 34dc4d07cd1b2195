"""The registry-site benchmark runs (a small size; `make bench` runs the real one)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_site_benchmark_runs_and_reports_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import report_site

    result = report_site.run(decisions=10, tasks=3, root=tmp_path)
    assert result["decisions"] == 10 and result["tasks"] == 3
    # index, one suite, ten decisions, three tasks
    assert result["pages"] == 15
    assert result["rewritten"] == 0, "an unchanged re-run rewrote files"
    assert result["first"]["code"] == result["again"]["code"] == 0
    assert result["again"]["cpu"] < result["first"]["cpu"]
    report_site.report(result)
    out = capsys.readouterr().out
    assert "10 decisions over 3 tasks, 30 trials" in out
    for figure in ("first run:", "peak memory vs a registry one tenth", "unchanged re-run"):
        assert figure in out
    assert out.count("PASS") + out.count("FAIL") == 3
