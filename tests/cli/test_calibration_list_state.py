"""`calibration list` shows each record's state, the one the gate gives its config.

Expectations come from `calibration status` (the gate's view of each pinned config) and
the rule in words: a record that is no longer its config's newest is stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli


def listed(cli: Cli, demo: Path) -> dict[str, dict[str, Any]]:
    out = cli("--json", "calibration", "list", "--all", cwd=demo)
    assert out.code == 0, out.stderr
    return {r["calibration_id"]: r for r in json.loads(out.stdout)}


def gate_state(cli: Cli, demo: Path, config: str) -> str:
    out = cli("--json", "calibration", "status", cwd=demo)
    rows = json.loads(out.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    (state,) = [r["state"] for r in rows if r["grader_config_digest"] == config]
    return str(state)


def test_each_record_has_the_gates_state_or_stale(demo: Path, cli: Cli) -> None:
    rows = listed(cli, demo)
    # The demo recorded a disputed calibration (CAL-1), then one that meets the bar (CAL-2).
    assert rows["CAL-1"]["state"] == "stale"
    assert rows["CAL-2"]["state"] == gate_state(cli, demo, rows["CAL-2"]["grader_config_digest"])
    assert rows["CAL-2"]["state"] == "valid"
    text = cli("calibration", "list", cwd=demo).stdout
    assert "CAL-1 reply-quality@2 stale " in text and "CAL-2 reply-quality@2 valid " in text


def test_a_newer_failing_record_fails_and_the_older_turns_stale(demo: Path, cli: Cli) -> None:
    out = cli(
        "calibration", "record", "reply-quality",
        "--labels", "registry/calibration/reply-quality-disputed.jsonl",
        "--annotation-guide", "support-reply-guide/v2",
        cwd=demo,
    )  # fmt: skip
    assert out.code == 0, out.stderr
    rows = listed(cli, demo)
    newest = max(rows, key=lambda c: int(c.split("-")[1]))
    config = rows[newest]["grader_config_digest"]
    assert rows[newest]["state"] == gate_state(cli, demo, config) == "failing"
    assert rows["CAL-2"]["state"] == "stale"


def test_an_invalidated_calibration_is_listed_as_the_gate_sees_it(demo: Path, cli: Cli) -> None:
    out = cli("calibration", "invalidate", "reply-quality", "--reason", "label shift", cwd=demo)
    assert out.code == 0, out.stderr
    rows = listed(cli, demo)
    config = rows["CAL-2"]["grader_config_digest"]
    state = gate_state(cli, demo, config)
    assert state != "valid"
    assert {r["state"] for r in rows.values() if r["grader_config_digest"] == config} <= {
        state,
        "stale",
    }
    assert all(r["state"] != "valid" for r in rows.values())
