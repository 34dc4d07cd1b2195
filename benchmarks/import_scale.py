"""Importer cost against the registry and the log: start-up, peak memory, CPU rate.

    .venv/bin/python -m benchmarks.import_scale [--samples 5000] [--epochs 5] [--tasks 8000]
        [--runs 3] [--cache DIR]

- start-up: `trials import inspect` of a 3-sample x 5-epoch log (a full ingest) into a
  registry of 20 tasks and one of `--tasks` tasks, the map naming the same 3: the import
  reads the registry once, so the large registry's CPU time must stay within 1.5x of the
  small one's.
- peak memory: `trials import ... -o` of `--samples` x `--epochs` sample-epochs against a
  fifth of that, for an Inspect `.eval`, the same log as Inspect `.json`, and a promptfoo
  `.json` of as many rows: each within 1.5x (memory flat in the number of samples).
- rate: sample-epochs per CPU-second of each import past its start-up (the difference in
  CPU time between the two sizes), at least 1,000; the whole command's rate beside it.

The Inspect logs replicate a real sample (benchmarks/import_inspect.py builds them, and the
registries, under build/bench-import/); the promptfoo rows replicate a row of the real
promptfoo fixture (tests/fixtures/promptfoo), one test repeated. Each measurement runs in a
fresh interpreter (median of `--runs`). Each figure is printed with its limit and PASS or
FAIL; the exit status is 1 if any fails. `--cache DIR` builds the logs and registries there
instead of build/bench-import/ (the smoke test runs the whole benchmark at a tiny size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from benchmarks import import_inspect
from benchmarks.import_inspect import FORMAT, REPO, _build_log, _env, _registry, _template

LIMIT = 1.5
TARGET_PER_CPU_S = 1000
PROMPTFOO_FIXTURE = REPO / "tests" / "fixtures" / "promptfoo" / "results.json"

CHILD = r"""
import contextlib, io, json, sys, time
source, log, url, map_path, *rest = sys.argv[1:]
start, cpu0 = time.perf_counter(), time.process_time()
from evalops.cli.main import main
out = io.StringIO()
argv = ["--db", url, "--actor", "bench", "trials", "import", source, log, "--map", map_path]
with contextlib.redirect_stdout(out):
    code = main([*argv, "--json", *rest])
assert code == 0, out.getvalue()[-2000:]
data = json.loads(out.getvalue())
count = data["written"] if "-o" in rest else data["ingested"]
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print("RESULT " + json.dumps({"count": count, "seconds": elapsed, "cpu": cpu, "peak_kib": peak}))
"""


def _child(*args: str, cwd: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        cwd=cwd,
        env={**_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"import failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return dict(json.loads(line.removeprefix("RESULT ")))


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


# ------------------------------------------------------------------------------ inputs


def _json_log(eval_log: Path) -> Path:
    """The `.eval` log as an Inspect `.json` log, written sample by sample."""
    dest = eval_log.with_suffix(".json")
    if dest.exists():
        return dest
    import inspect_ai.log  # noqa: F401  (teaches zipfile Inspect's zstd)

    tmp = dest.with_name("partial-" + dest.name)
    with zipfile.ZipFile(eval_log) as archive, tmp.open("w", encoding="utf-8") as out:
        header = json.loads(archive.read("header.json"))
        out.write("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in header.items()))
        out.write(', "samples": [')
        names = [n for n in archive.namelist() if n.startswith("samples/")]
        for i, name in enumerate(names):
            out.write(("," if i else "") + archive.read(name).decode("utf-8"))
        out.write("]}")
    tmp.rename(dest)
    return dest


def _promptfoo_results(dest: Path, rows: int) -> Path:
    """A promptfoo `.json` of `rows` repeats of one passing row of the real fixture."""
    if dest.exists():
        return dest
    doc = json.loads(PROMPTFOO_FIXTURE.read_text(encoding="utf-8"))
    row = next(
        r
        for r in doc["results"]["results"]
        if r["success"] and r["testCase"].get("description") == "refund in order"
    )
    tmp = dest.with_name("partial-" + dest.name)
    with tmp.open("w", encoding="utf-8") as out:
        out.write(f'{{"evalId": {json.dumps(doc["evalId"])}, "results": {{"version": 3, ')
        out.write(f'"timestamp": {json.dumps(doc["results"]["timestamp"])}, "results": [')
        for i in range(rows):
            row["id"] = f"bench-row-{i}"
            row["response"].setdefault("metadata", {})["repeatIndex"] = i
            out.write(("," if i else "") + json.dumps(row))
        out.write(f'], "stats": {{}}}}, "metadata": {json.dumps(doc["metadata"])}}}')
    tmp.rename(dest)
    return dest


def _promptfoo_map(root: Path) -> Path:
    outcome = {"true": "task_pass", "false": "task_fail"}
    spec = {
        "spec_schema_version": "import-map/v1",
        "source": "promptfoo",
        "execution": "bench-mock",
        "target_agent_id": "support",
        "tasks": {
            "refund in order": {
                "task": "bench-00000",
                "scorers": {
                    "refund_check": {"grader_id": "refund", "grader_version": 1, "values": outcome},
                    "ticket_check": {"grader_id": "ticket", "grader_version": 1, "values": outcome},
                    "reply_quality": {"grader_id": "reply", "grader_version": 1, "values": outcome},
                    "effect_guard": {
                        "grader_id": "guard",
                        "grader_version": 1,
                        "values": {"true": "pass", "false": "hard_constraint_fail"},
                    },
                },
            }
        },
        "tools": {"lookup_order": "crm:lookup-order", "refund": "billing:refund"},
    }
    path = root / "promptfoo-map.json"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def _startup_map(root: Path, samples: int) -> Path:
    """The registry's map cut to the first `samples` tasks (start-up reads only those)."""
    spec: dict[str, Any] = json.loads((root / "map.yaml").read_text(encoding="utf-8"))
    task = spec["tasks"]["refund_agent"]
    task["samples"] = dict(list(task["samples"].items())[:samples])
    path = root / f"map-{samples}.json"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


# ------------------------------------------------------------------------ measurements


def _startup(template: Path, tasks: int, runs: int) -> tuple[dict[str, float], dict[str, float]]:
    log = _build_log(template, import_inspect.CACHE / f"log-{FORMAT}-3x5.eval", 3, 5)
    out = []
    for size in (20, tasks):
        root, _, _ = _registry(size)
        map_path = _startup_map(root, 3)
        measured = []
        for _ in range(runs):
            db = import_inspect.CACHE / "startup.db"
            shutil.copyfile(root / "registry.db", db)
            measured.append(_child("inspect", str(log), f"sqlite:///{db}", str(map_path), cwd=root))
            db.unlink()
        out.append(_median(measured))
        assert int(out[-1]["count"]) == 15, out[-1]
    return out[0], out[1]


def _memory(
    source: str, logs: tuple[Path, Path], map_path: Path, root: Path, runs: int
) -> tuple[dict[str, float], dict[str, float]]:
    out = import_inspect.CACHE / "scale-out.jsonl"
    url = f"sqlite:///{root / 'registry.db'}"

    def measure(log: Path) -> dict[str, float]:
        args = (source, str(log), url, str(map_path), "-o", str(out))
        return _median([_child(*args, cwd=root) for _ in range(runs)])

    small, big = measure(logs[0]), measure(logs[1])
    out.unlink(missing_ok=True)
    return small, big


def _verdict(name: str, measured: float, limit: float, unit: str = "") -> str:
    """One figure, its limit and PASS or FAIL: a ratio (unit `x`) passes at or below its
    limit, a rate at or above its target."""
    if unit == "x":
        passed, target = measured <= limit, f"<= {limit}x"
        shown = f"{measured:.2f}x"
    else:
        passed, target = measured >= limit, f">= {limit:,.0f}"
        shown = f"{measured:,.0f}"
    return f"{name}: {shown} (target {target}) {'PASS' if passed else 'FAIL'}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=8000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=import_inspect.CACHE)
    args = parser.parse_args()
    import_inspect.CACHE = CACHE = args.cache.resolve()
    CACHE.mkdir(parents=True, exist_ok=True)
    runs = max(1, args.runs)
    template = _template()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")

    small_n = max(1, args.samples // 5)
    big, small = args.samples * args.epochs, small_n * args.epochs
    small_log, big_log = (
        _build_log(template, CACHE / f"log-{FORMAT}-{n}x{args.epochs}.eval", n, args.epochs)
        for n in (small_n, args.samples)
    )
    eval_logs = (small_log, big_log)
    json_logs = (_json_log(eval_logs[0]), _json_log(eval_logs[1]))
    pf_logs = (
        _promptfoo_results(CACHE / f"promptfoo-{FORMAT}-{small}.json", small),
        _promptfoo_results(CACHE / f"promptfoo-{FORMAT}-{big}.json", big),
    )
    root, _, map_path = _registry(args.samples)
    memory = {
        ".eval": _memory("inspect", eval_logs, map_path, root, runs),
        ".json": _memory("inspect", json_logs, map_path, root, runs),
        "promptfoo .json": _memory("promptfoo", pf_logs, _promptfoo_map(root), root, runs),
    }
    few, many = _startup(template, args.tasks, runs)

    ok = True
    print(
        f"\n{'':>16}  {small:>7} s-e peak  {big:>7} s-e peak  ratio  "
        "samples/CPU-s (whole command; past start-up)"
    )
    verdicts = []
    for name, (lo, hi) in memory.items():
        assert (int(lo["count"]), int(hi["count"])) == (small, big), (name, lo, hi)
        ratio, whole = hi["peak_kib"] / lo["peak_kib"], big / hi["cpu"]
        # The interpreter and Inspect's import cost ~2 CPU-s once: the rate per sample is
        # the difference between the two sizes.
        rate = (big - small) / max(hi["cpu"] - lo["cpu"], 1e-9)
        ok &= ratio <= LIMIT and rate >= TARGET_PER_CPU_S
        print(
            f"{name:>16}  {lo['peak_kib'] / 1024:8.1f} MiB  {hi['peak_kib'] / 1024:8.1f} MiB  "
            f"{ratio:5.2f}x  {whole:9.0f}; {rate:9.0f}"
        )
        verdicts.append(_verdict(f"{name} peak memory {big} / {small} s-e", ratio, LIMIT, "x"))
        verdicts.append(_verdict(f"{name} sample-epochs per CPU-second", rate, TARGET_PER_CPU_S))
    # CPU time: what the import costs; wall time, beside it, is what a shared machine left.
    startup = many["cpu"] / few["cpu"]
    ok &= startup <= LIMIT
    print(
        f"{'start-up':>16}  20 tasks cpu {few['cpu']:.2f} s (wall {few['seconds']:.2f})  "
        f"{args.tasks} tasks cpu {many['cpu']:.2f} s (wall {many['seconds']:.2f})  "
        f"{startup:5.2f}x"
    )
    verdicts.append(_verdict(f"start-up {args.tasks} / 20 registered tasks", startup, LIMIT, "x"))
    print()
    for line in verdicts:
        print(line)
    print(
        f"import scale: {'ok' if ok else 'FAILED'}: memory and start-up ratios limit {LIMIT}x, "
        f"rate target >= {TARGET_PER_CPU_S} sample-epochs per CPU-second"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
