"""Ingest streams: peak memory must not grow with the file (docs/verify.md).

    .venv/bin/python -m benchmarks.ingest_memory [--small 2000] [--factor 10]

Ingests a small and a `factor`-times larger JSONL file, each into a fresh SQLite registry
in its own process, side by side in one run, and prints peak RSS, time and throughput of
each and the ratios. Streaming holds when the memory ratio stays near 1 while the file
ratio is `factor` (the check fails above 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import commit_all, write_mini_registry
from tests.trial_factory import mini_case, record

CHILD = """
import json, sys, time
from datetime import UTC, datetime
from pathlib import Path
from evalops.services.database import open_database
from evalops.services.ingest.records import ingest_files
engine = open_database(sys.argv[1])
start = time.perf_counter()
result = ingest_files(engine, [Path(sys.argv[2])], actor="bench", now=datetime.now(UTC))
elapsed = time.perf_counter() - start
# VmHWM, this process's own peak: ru_maxrss would include the benchmark's (measure.own_peak_kib).
peak_kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"ingested": result.ingested, "seconds": elapsed, "peak_kib": peak_kib}))
"""


def _workspace(root: Path) -> tuple[Path, dict[str, str]]:
    write_mini_registry(root / "registry")
    commit_all(root)
    return root, mini_case(root)


def _write(path: Path, case: dict[str, str], count: int) -> int:
    calls = [
        {"tool": "crm:lookup-order", "args": {"orderId": f"A-{i}"}, "agent_id": "a"}
        for i in range(5)
    ]
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            rec = record(
                case,
                trial_id=f"bench-{i:07d}",
                run_id=f"run-{i // 5}",
                trial_index=i % 5,
                tool_calls=calls,
            )
            out.write(json.dumps(rec) + "\n")
    return path.stat().st_size


def _measure(root: Path, jsonl: Path, name: str) -> dict[str, float]:
    url = f"sqlite:///{root / (name + '.db')}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    subprocess.run(
        [sys.executable, "-m", "evalops", "--db", url, "init"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "-m", "evalops", "--db", url, "sync"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(jsonl)],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(done.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--factor", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, case = _workspace(Path(tmp))
        sizes = {}
        results = {}
        for name, count in (("small", args.small), ("large", args.small * args.factor)):
            path = root / f"{name}.jsonl"
            sizes[name] = _write(path, case, count)
            results[name] = _measure(root, path, name)
        for name in ("small", "large"):
            r = results[name]
            print(
                f"{name:>5}: {int(r['ingested']):>7} records, {sizes[name] / 2**20:7.1f} MiB file, "
                f"peak RSS {r['peak_kib'] / 1024:6.1f} MiB, {r['seconds']:6.2f} s, "
                f"{r['ingested'] / r['seconds']:8.0f} records/s"
            )
        file_ratio = sizes["large"] / sizes["small"]
        memory_ratio = results["large"]["peak_kib"] / results["small"]["peak_kib"]
        print(f"file size ratio {file_ratio:.1f}x, peak memory ratio {memory_ratio:.2f}x")
        ok = memory_ratio < 1.5
        print("streaming: ok" if ok else "streaming: FAILED (memory grows with the file)")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
