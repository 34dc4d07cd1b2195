"""Import of a 5,000-sample x 5-epoch Inspect `.eval` log: samples/s, CPU, wall, peak RSS.

    .venv/bin/python -m benchmarks.import_inspect [--samples 5000] [--epochs 5] [--runs 3]

The log is made from a real one: tests/importer_tasks/refund_task.py runs once with Inspect's
mock model, and its sample A-1/1 (as Inspect wrote it: events, scores, usage) is replicated
under 5,000 sample ids x 5 epochs into a zip with Inspect's layout and zstd compression, with
a header, summaries and a map of its own. Inspect's own readers check it before use. The
log, a 5,000-task registry and its database are cached under build/bench-import/.

Each measurement runs in a fresh interpreter (median of `--runs`; a full ingest once):
- `summaries`: inspect_ai.log.read_eval_log_sample_summaries, the speed to compare with;
- `reader`: evalops' reader and translation alone (every sample read once, zip opened once);
- `import -o`: `evalops trials import inspect LOG --map MAP -o OUT` end to end;
- `import`: a full ingest into a copy of the registry database;
- memory: `import -o` on a log a fifth the size: peak RSS must not grow with the log.
The check fails below 1,000 samples per CPU-second for the reader (wall time, which a
shared machine's load stretches, is printed beside it) or a memory ratio above 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "build" / "bench-import"
FORMAT = "v1"  # bump to rebuild the cached log and registry
TARGET_SAMPLES_PER_S = 1000

CHILD = r"""
import json, sys, time
mode, args = sys.argv[1], sys.argv[2:]
if mode in ("summaries", "reader"):
    import inspect_ai.log  # a fixed start-up cost (~2 s), not per sample: outside the clock
start, cpu0 = time.perf_counter(), time.process_time()
count = 0
if mode == "summaries":
    from inspect_ai.log import read_eval_log_sample_summaries
    count = len(read_eval_log_sample_summaries(args[0]))
elif mode == "reader":
    from pathlib import Path
    from evalops.importers.inspect import read_inspect
    from evalops.importers.common import Translated
    from evalops.registry.import_maps import load_import_map
    from evalops.services.database import open_database
    from evalops.services.ingest.imports import resolve
    from evalops.store.engine import read_session
    engine = open_database(args[1])
    with read_session(engine) as session:
        resolved = resolve(session, load_import_map(Path(args[2])))
    start, cpu0 = time.perf_counter(), time.process_time()
    _, items = read_inspect(Path(args[0]), args[0], resolved, unmapped="error")
    seen = set()
    for item in items:
        if isinstance(item, Translated):
            seen.add(item.label.split("#")[0])
    count = len(seen)
else:
    import contextlib, io
    from evalops.cli.main import main
    out = io.StringIO()
    argv = ["--db", args[1], "--actor", "bench", "trials", "import", "inspect", args[0]]
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--map", args[2], "--json", *args[3:]])
    assert code == 0, out.getvalue()[-2000:]
    data = json.loads(out.getvalue())
    count = data["written"] if mode == "output" else data["ingested"]
    # Trials per sample record: failed attempts are trials too; none in this log.
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
# VmHWM: this process's own peak (ru_maxrss would report the benchmark's, across exec).
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print("RESULT " + json.dumps({"count": count, "seconds": elapsed, "cpu": cpu, "peak_kib": peak}))
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("EVALOPS_", "INSPECT_"))}


def _template() -> Path:
    out = CACHE / "template"
    log = out / "refund.eval"
    if not log.exists():
        subprocess.run(
            [sys.executable, "-m", "tests.importer_tasks.generate", str(out)],
            cwd=REPO,
            env=_env(),
            check=True,
            capture_output=True,
        )
    return log


def _build_log(template: Path, dest: Path, samples: int, epochs: int) -> Path:
    """Replicate the template's sample A-1/1 into a zip laid out as Inspect lays out .eval."""
    import zipfile

    from inspect_ai.log import EvalSample, read_eval_log_sample, read_eval_log_sample_summaries

    if dest.exists():
        return dest
    tmp = dest.with_name("partial-" + dest.name)
    with zipfile.ZipFile(template) as source:
        header = json.loads(source.read("header.json"))
        sample = json.loads(source.read("samples/A-1_epoch_1.json"))
        start = json.loads(source.read("_journal/start.json"))
    summary = EvalSample.model_validate(sample).summary().model_dump(mode="json", exclude_none=True)
    ids = [f"S-{i:05d}" for i in range(samples)]
    for doc in (header, start):
        doc["eval"]["dataset"].update({"samples": samples, "sample_ids": ids})
        doc["eval"]["config"]["epochs"] = epochs
    header.pop("reductions", None)
    if header.get("results"):
        header["results"].update(
            {"total_samples": samples * epochs, "completed_samples": samples * epochs}
        )
    # Inspect's zipfile patch (imported above) provides its zstd compression.
    method = getattr(zipfile, "ZIP_ZSTANDARD", zipfile.ZIP_DEFLATED)
    summaries = []
    with zipfile.ZipFile(tmp, "w", compression=method) as out:
        out.writestr("_journal/start.json", json.dumps(start))
        for n, sample_id in enumerate(ids):
            for epoch in range(1, epochs + 1):
                # Vary the verdict so the trials are not all alike (every 7th fails).
                value = "I" if (n + epoch) % 7 == 0 else "C"
                sample["id"], sample["epoch"] = sample_id, epoch
                sample["uuid"] = f"bench-{n}-{epoch}"
                sample["scores"]["refund_check"]["value"] = value
                out.writestr(f"samples/{sample_id}_epoch_{epoch}.json", json.dumps(sample))
                summaries.append(
                    {**summary, "id": sample_id, "epoch": epoch, "uuid": sample["uuid"]}
                )
        out.writestr("summaries.json", json.dumps(summaries))
        out.writestr("header.json", json.dumps(header))
    # Inspect's own readers must accept it.
    assert len(read_eval_log_sample_summaries(str(tmp))) == samples * epochs
    assert read_eval_log_sample(str(tmp), id=ids[-1], epoch=epochs).epoch == epochs
    tmp.rename(dest)
    return dest


TASK_TEMPLATE: dict[str, Any] = {
    "spec_schema_version": "eval-task/v1",
    "revision": 1,
    "meta": {"title": "bench task", "risk": "quality_signal"},
    "contract": {
        "environment": {"clock": "2026-09-06T00:00:00Z", "network_policy": "deny"},
        "success_state": {"refunded": True},
        "expected": {
            "kind": "trajectory",
            "trajectory": {
                "match": "in-order",
                "calls": [
                    {"tool": "crm:lookup-order", "argsMatch": "ignore"},
                    {
                        "tool": "billing:refund",
                        "args": {"amountMinor": 4200},
                        "argsMatch": "subset",
                    },
                ],
                "forbidden": ["billing:refund-all"],
            },
        },
        "trials": {"count": 5, "k": 3},
    },
    "grader_set": "bench-graders",
}


def _grader(grader_id: str, layer: str) -> dict[str, Any]:
    produces = (
        ["task_pass", "task_fail"] if layer == "outcome" else ["pass", "hard_constraint_fail"]
    )
    return {"id": grader_id, "version": 1, "layer": layer, "type": "deterministic",
            "produces": produces, "blocking": True, "covers": []}  # fmt: skip


def _registry(samples: int) -> tuple[Path, str, Path]:
    """A git work tree with `samples` tasks, synced into a SQLite database (cached)."""
    import yaml

    from tests.helpers import commit_all

    root = CACHE / f"registry-{samples}"
    url = f"sqlite:///{root / 'registry.db'}"
    map_path = root / "map.yaml"
    if (root / "registry.db").exists():
        return root, url, map_path
    shutil.rmtree(root, ignore_errors=True)
    reg = root / "registry"
    for sub in ("tasks", "graders", "executions"):
        (reg / sub).mkdir(parents=True)
    graders = {
        "spec_schema_version": "grader-set/v1",
        "id": "bench-graders",
        "version": 1,
        "graders": [
            _grader("refund", "outcome"),
            _grader("ticket", "outcome"),
            _grader("reply", "outcome"),
            _grader("guard", "hard_constraint"),
        ],
    }
    (reg / "graders" / "bench.yaml").write_text(yaml.safe_dump(graders))
    profile = {
        "spec_schema_version": "execution-profile/v1",
        "id": "bench-mock",
        "system_build": "bench-1",
        "model": {"provider": "mockllm", "name": "model"},
    }
    (reg / "executions" / "bench.yaml").write_text(yaml.safe_dump(profile))
    for i in range(samples):
        task = {**TASK_TEMPLATE, "id": f"bench-{i:05d}"}
        task["contract"] = {**TASK_TEMPLATE["contract"], "goal": f"bench_goal_{i}"}
        (reg / "tasks" / f"bench-{i:05d}.yaml").write_text(yaml.safe_dump(task))
    commit_all(root)
    outcome = {"C": "task_pass", "I": "task_fail"}
    spec = {
        "spec_schema_version": "import-map/v1",
        "source": "inspect",
        "execution": "bench-mock",
        "target_agent_id": "support",
        "tasks": {
            "refund_agent": {
                "samples": {f"S-{i:05d}": f"bench-{i:05d}" for i in range(samples)},
                "scorers": {
                    "refund_check": {"grader_id": "refund", "grader_version": 1, "values": outcome},
                    "ticket_check": {"grader_id": "ticket", "grader_version": 1, "values": outcome},
                    "reply_judge": {"grader_id": "reply", "grader_version": 1, "values": outcome},
                    "effect_guard": {
                        "grader_id": "guard",
                        "grader_version": 1,
                        "values": {"C": "pass", "I": "hard_constraint_fail"},
                    },
                },
            }
        },
        "tools": {
            "lookup_order": "crm:lookup-order",
            "refund": "billing:refund",
            "refund_all": "billing:refund-all",
            "kb_search": "kb:search",
        },
    }
    map_path.write_text(json.dumps(spec, indent=1))
    from benchmarks.workload import evalops_here

    for args in (("init",), ("sync", "registry")):
        evalops_here("--db", url, *args, cwd=root)  # setup: not measured
    return root, url, map_path


def _child(mode: str, *args: str, cwd: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, *args],
        cwd=cwd,
        env={**_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{mode} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return dict(json.loads(line.removeprefix("RESULT ")))


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def _line(name: str, r: dict[str, float], records: int) -> str:
    return (
        f"{name:>11}: {records:>6} samples  wall {r['seconds']:7.2f} s  cpu {r['cpu']:7.2f} s  "
        f"{records / r['seconds']:7.0f} samples/s  peak RSS {r['peak_kib'] / 1024:7.1f} MiB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    template = _template()
    small = max(1, args.samples // 5)
    big_log = _build_log(
        template,
        CACHE / f"log-{FORMAT}-{args.samples}x{args.epochs}.eval",
        args.samples,
        args.epochs,
    )
    small_log = _build_log(
        template, CACHE / f"log-{FORMAT}-{small}x{args.epochs}.eval", small, args.epochs
    )
    root, url, map_path = _registry(args.samples)
    records, small_records = args.samples * args.epochs, small * args.epochs
    size = big_log.stat().st_size / 2**20
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"log: {args.samples} samples x {args.epochs} epochs = {records} sample records, "
        f"{size:.1f} MiB ({big_log.name})"
    )

    out = CACHE / "out.jsonl"
    runs = max(1, args.runs)
    results = {
        "summaries": _median([_child("summaries", str(big_log), cwd=root) for _ in range(runs)]),
        "reader": _median(
            [_child("reader", str(big_log), url, str(map_path), cwd=root) for _ in range(runs)]
        ),
        "import -o": _median(
            [
                _child("output", str(big_log), url, str(map_path), "-o", str(out), cwd=root)
                for _ in range(runs)
            ]
        ),
    }
    db_copy = CACHE / "ingest.db"
    shutil.copyfile(root / "registry.db", db_copy)
    results["import"] = _child(
        "import", str(big_log), f"sqlite:///{db_copy}", str(map_path), cwd=root
    )
    small_run = _child("output", str(small_log), url, str(map_path), "-o", str(out), cwd=root)
    db_copy.unlink()
    out.unlink(missing_ok=True)

    for name, r in results.items():
        assert int(r["count"]) == records, (name, r)
        print(_line(name, r, records))
    print(_line("import -o/5", small_run, small_records))
    reader = results["reader"]
    wall_rate, cpu_rate = records / reader["seconds"], records / reader["cpu"]
    ratio = results["summaries"]["seconds"] / reader["seconds"]
    memory = results["import -o"]["peak_kib"] / small_run["peak_kib"]
    print(f"reader: {ratio:.2f}x the rate of Inspect's own sample-summary reader on this machine")
    print(f"peak memory, {records} vs {small_records} samples: {memory:.2f}x")
    # The machine may be shared: CPU seconds are what the import costs, wall time what the
    # load left of it; the check reads the CPU rate and prints both.
    ok = cpu_rate >= TARGET_SAMPLES_PER_S and memory < 1.5
    print(
        f"import reader: {'ok' if ok else 'FAILED'}: {cpu_rate:.0f} samples per CPU-second "
        f"({wall_rate:.0f}/s wall at load {os.getloadavg()[0]:.1f}), target >= "
        f"{TARGET_SAMPLES_PER_S}; memory ratio {memory:.2f}, limit 1.5"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
