"""`benchmarks/import_scale.py` (part of `make bench`) runs end to end at a tiny size.

The figures at this size mean nothing (start-up dominates); what is checked is that every
stage runs (the logs, the promptfoo results and the registries are built, each import
succeeds) and that each figure is printed with its limit and PASS or FAIL, the exit status
agreeing with them.

The benchmark measures each import in a new interpreter (`import_scale._child`), which
spends about 3 CPU seconds importing evalops and Inspect before its command starts: eight
of them were most of this test. The first runs so, as `make bench` runs it; the other
seven run the same command in a child forked from this process (`tests/forked.py`), where
those imports are done: the command, its output and its count are the same.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.import_support import inspect_logs

pytestmark = pytest.mark.slow

FIGURE = re.compile(
    r"^(?P<name>.+): (?P<value>[\d,.]+x?) \(target (?:<=|>=) [\d,.]+x?\) (?P<v>PASS|FAIL)$"
)


def test_import_scale_runs_and_prints_each_figure_with_its_verdict(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import import_inspect, import_scale

    cache = tmp_path / "bench"
    # The template log is the importer tests' own mockllm run (the benchmark would run it).
    (cache / "template").mkdir(parents=True)
    shutil.copyfile(inspect_logs(tmp_path_factory)["eval"], cache / "template" / "refund.eval")
    monkeypatch.setattr(import_inspect, "CACHE", import_inspect.CACHE)  # restored afterwards
    real_child = import_scale._child
    children: list[str] = []

    def child(*args: str, cwd: Path) -> dict[str, float]:
        children.append("new interpreter" if not children else "forked")
        if len(children) == 1:
            return real_child(*args, cwd=cwd)
        return _forked_child(*args, cwd=cwd)

    monkeypatch.setattr(import_scale, "_child", child)
    argv = ["import_scale", "--samples", "5", "--epochs", "2", "--tasks", "25", "--runs", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--cache", str(cache)])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = import_scale.main()
    lines = out.getvalue().splitlines()
    figures = [m for m in map(FIGURE.match, lines) if m]
    names = [m["name"] for m in figures]
    assert names == [
        ".eval peak memory 10 / 2 s-e",
        ".eval sample-epochs per CPU-second",
        ".json peak memory 10 / 2 s-e",
        ".json sample-epochs per CPU-second",
        "promptfoo .json peak memory 10 / 2 s-e",
        "promptfoo .json sample-epochs per CPU-second",
        "start-up 25 / 20 registered tasks",
    ], out.getvalue()
    assert children == ["new interpreter"] + ["forked"] * 7, children
    failed = [m["name"] for m in figures if m["v"] == "FAIL"]
    assert code == (1 if failed else 0)
    assert lines[-1].startswith("import scale: ok" if not failed else "import scale: FAILED")
    # The logs were built where asked, not in the checkout's build/.
    assert (cache / "log-v1-5x2.eval").is_file()
    assert (cache / "promptfoo-v1-10.json").is_file()


def _forked_child(*args: str, cwd: Path) -> dict[str, float]:
    """What `import_scale.CHILD` runs and returns, in a forked child: `trials import` of
    the log into the database (or to the file after `-o`), its count read from its `--json`
    output; its CPU and peak memory as the kernel counted them."""
    import json
    import time

    source, log, url, map_path, *rest = args
    argv = ["--db", url, "--actor", "bench", "trials", "import", source, log, "--map", map_path]
    database = Path(url.removeprefix("sqlite:///"))
    started = time.perf_counter()
    child = forked.start([*argv, "--json", *rest], cwd, forked.child_env(url, "bench"), database)
    done = child.wait()
    assert done.code == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(done.stdout)
    return {
        "count": data["written"] if "-o" in rest else data["ingested"],
        "seconds": time.perf_counter() - started,
        "cpu": child.cpu_total,
        "peak_kib": child.peak_kib,
    }
