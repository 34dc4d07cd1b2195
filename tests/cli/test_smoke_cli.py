from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli


def test_sync_registers_then_resync_changes_nothing(workspace: Path, cli: Cli) -> None:
    assert cli("init", cwd=workspace).code == 0
    first = cli("sync", "--json", cwd=workspace)
    assert first.code == 0, first.stderr
    assert {e["kind"] for e in first.json()["registered"]} == {
        "task",
        "grader_set",
        "execution_profile",
    }
    again = cli("sync", "--json", cwd=workspace)
    assert again.json()["registered"] == []
    assert again.json()["unchanged"] == 3
