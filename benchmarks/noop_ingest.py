"""P10: re-ingesting a file whose every record is already stored costs at most 0.3x the
first ingest, on SQLite and on PostgreSQL (docs/formats.md, trial records: re-ingesting).

    python -m benchmarks.noop_ingest [--records 50000] [--runs 5] [--only sqlite,postgresql]
        [--spellings 'as written,canonical lines']

Each run starts from a fresh copy of the synced example registry without trials, ingests
the same `--records` records (`trials ingest FILE`, measured), then ingests the same file
again (measured: every record counted identical, nothing stored). Two spellings of the
file: as the workload writes it (`json.dumps`, compact: integral floats as `1.0`, so each
line is parsed and canonicalized to be recognized), and canonical (RFC 8785: each line is
recognized from its bytes, its sha256 being the stored `record_digest`). Both are whole `evalops`
processes (benchmarks/measure.py), side by side in the same run; the figure is the median
CPU of the second over the median CPU of the first (wall printed beside it). On PostgreSQL
the CPU is the evalops process's own, as for P2: the server's work is its wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.measure import medians, run
from benchmarks.perf import (
    WORK,
    _fmt,
    _pg,
    _pg_url,
    copy_db,
    example_base,
    figure,
    records_file,
)
from benchmarks.workload import example_workspace

TARGET = 0.3


def canonical_file(source: Path) -> Path:
    """The same records, one RFC 8785 line each (cached)."""
    import rfc8785

    path = source.with_name(source.stem + "-canonical.jsonl")
    if not path.exists():
        with source.open(encoding="utf-8") as lines, path.open("wb") as out:
            for line in lines:
                out.write(rfc8785.dumps(json.loads(line)) + b"\n")
    return path


def _pair(first: dict[str, Any], again: dict[str, Any]) -> None:
    assert first["code"] == 0, first
    assert again["code"] == 0, again


def _sqlite(data: str, runs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    firsts, agains = [], []
    for i in range(runs):
        ws = copy_db(example_base(), WORK / "p10-run")
        firsts.append(run(["evalops", "trials", "ingest", data], cwd=ws))
        agains.append(run(["evalops", "trials", "ingest", "--json", data], cwd=ws))
        _pair(firsts[-1], agains[-1])
        print(
            f"  P10 SQLite run {i + 1}/{runs}: first {_fmt(firsts[-1])}; again {_fmt(agains[-1])}",
            flush=True,
        )
    return firsts, agains


def _postgres(data: str, runs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import shutil

    template = "evalops_p10_template"
    _pg(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
    _pg(f"CREATE DATABASE {template}")
    ws = WORK / "p10-pg-ws"
    if ws.exists():
        shutil.rmtree(ws)
    example_workspace(ws, db_url=_pg_url(template))
    firsts, agains = [], []
    name = "evalops_p10_run"
    try:
        for i in range(runs):
            _pg(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            _pg(f"CREATE DATABASE {name} TEMPLATE {template}")
            db = ["evalops", "--db", _pg_url(name)]
            firsts.append(run([*db, "trials", "ingest", data], cwd=ws))
            agains.append(run([*db, "trials", "ingest", data], cwd=ws))
            _pair(firsts[-1], agains[-1])
            print(
                f"  P10 PostgreSQL run {i + 1}/{runs}: first {_fmt(firsts[-1])}; "
                f"again {_fmt(agains[-1])}",
                flush=True,
            )
    finally:
        for db_name in (name, template):
            _pg(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
    return firsts, agains


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="sqlite,postgresql")
    parser.add_argument(
        "--spellings", default="as written,canonical lines", help="which files, comma-separated"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    written = records_file(args.records)
    every = {"as written": written, "canonical lines": canonical_file(written)}
    files = {name: every[name] for name in args.spellings.split(",")}
    ok = True
    engines = {"sqlite": ("SQLite", _sqlite), "postgresql": ("PostgreSQL", _postgres)}
    for key in args.only.split(","):
        label, measure = engines[key]
        for spelling, data in files.items():
            firsts, agains = measure(str(data), args.runs)
            a, b = medians(firsts), medians(agains)
            ok &= figure(
                f"P10 no-op re-ingest {label}, {args.records:,} stored records ({spelling}), "
                "again/first CPU",
                b["cpu"] / a["cpu"],
                TARGET,
                f"first {_fmt(a)}; again {_fmt(b)}; wall ratio {b['wall'] / a['wall']:.2f}",
            )
    print(json.dumps({"noop_ingest": "done"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
