from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli
from tests.trial_factory import mini_case, record, write_jsonl


def test_factory_records_ingest_as_task_pass(synced: Path, cli: Cli) -> None:
    case = mini_case(synced)
    path = write_jsonl(
        synced / "t.jsonl", [record(case, trial_id=f"t-{i}", trial_index=i) for i in range(3)]
    )
    result = cli("trials", "ingest", str(path), "--json", cwd=synced)
    assert result.code == 0, result.stderr
    assert result.json()["ingested"] == 3
    listed = cli("trials", "list", "--json", cwd=synced).json()
    assert {r["classification"] for r in listed} == {"task_pass"}
