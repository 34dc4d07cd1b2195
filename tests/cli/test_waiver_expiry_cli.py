"""`waiver grant --expires` and `waiver list` states (docs/gate.md).

`--expires` is an RFC 3339 timestamp with an offset or a duration from now (`7d`, `72h`,
`90m`); anything else is a usage error (exit 2) that records nothing, not even a refusal.
`waiver list` shows each waiver's state at the registry's present (a clock behind the newest
event reads that event's time) and its interval. Runs on a copy of the demo database,
whose clock is pinned at tests/conftest.py PINNED_NOW.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.vocabulary import format_timestamp, parse_timestamp
from tests.conftest import PINNED_NOW, Cli

NOW = parse_timestamp(PINNED_NOW)
TASK = "support-refund-policy-explanation"


def grant(cli: Cli, demo: Path, expires: str) -> Any:
    return cli(
        "waiver", "grant", "--task", TASK, "--suite", "regression/core", "--states",
        "task_fail", "--build", "build-125", "--owner", "lead@example.com", "--reason",
        "copy fix ships next sprint", "--expires", expires, "--json", cwd=demo,
    )  # fmt: skip


def audit_count(demo: Path) -> int:
    with sqlite3.connect(demo / ".evalops" / "registry.db") as con:
        count: int = con.execute("SELECT count(*) FROM audit_event").fetchone()[0]
    return count


@pytest.mark.parametrize(
    ("expires", "delta"),
    [("7d", timedelta(days=7)), ("72h", timedelta(hours=72)), ("90m", timedelta(minutes=90))],
)
def test_a_duration_counts_from_now(demo: Path, cli: Cli, expires: str, delta: timedelta) -> None:
    result = grant(cli, demo, expires)

    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["expires_at"] == format_timestamp(NOW + delta)


def test_a_timestamp_with_an_offset_is_stored_in_utc(demo: Path, cli: Cli) -> None:
    result = grant(cli, demo, "2026-12-04T00:00:00+09:00")

    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["expires_at"] == "2026-12-03T15:00:00.000000Z"


@pytest.mark.parametrize("garbage", ["tomorrow", "+24:00", "7 days", "7w", "-7d", "2026-13-01"])
def test_garbage_is_a_usage_error_that_records_nothing(demo: Path, cli: Cli, garbage: str) -> None:
    before = audit_count(demo)

    result = grant(cli, demo, garbage)

    assert result.code == 2, result.stdout + result.stderr
    error = result.json()["error"]
    assert error["code"] == 2 and error["field"] == "--expires"
    assert "7d, 72h" in error["message"]  # says which forms work
    assert audit_count(demo) == before  # not even a refusal is recorded


def test_a_naive_timestamp_is_refused_by_the_waiver_rules(demo: Path, cli: Cli) -> None:
    """Well-formed but without an offset: a policy refusal (exit 5, audited), as before."""
    before = audit_count(demo)

    result = grant(cli, demo, "2026-12-04T00:00:00")

    assert result.code == 5
    assert [r["rule"] for r in result.json()["refusals"]] == ["expires_at_naive"]
    assert audit_count(demo) == before + 1


def test_a_waiver_listed_by_a_clock_behind_its_grant_is_valid_as_recorded(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed from a machine whose clock says a day before the grant, the waiver is still
    recorded: the listing stands at the registry's present (never before its newest event,
    docs/gate.md), where the waiver is valid, as every gate check there reads it."""
    granted = grant(cli, demo, "7d").json()
    earlier = NOW - timedelta(days=1)
    monkeypatch.setenv("EVALOPS_NOW", format_timestamp(earlier))

    listed = cli("waiver", "list", "--all", "--json", cwd=demo).json()
    shown = cli("waiver", "list", "--all", cwd=demo).stdout

    row = next(r for r in listed if r["waiver_id"] == granted["waiver_id"])
    assert row["status"] == "valid"
    line = next(ln for ln in shown.splitlines() if ln.startswith(granted["waiver_id"] + " "))
    assert "[valid]" in line and "not yet valid" not in line
    assert f"from {granted['granted_at']} until {granted['expires_at']}" in line
    assert granted["waiver_id"] in cli("waiver", "list", cwd=demo).stdout
    checked = cli("gate", "check", "--build", "build-125", "--suite", "regression/core",
                  "--json", cwd=demo)  # fmt: skip
    assert (
        granted["waiver_id"]
        in checked.json()["waivers"]["unused"] + (checked.json()["waivers"]["applied"])
    )


def test_an_expired_waiver_is_listed_as_expired(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    granted = grant(cli, demo, "1h").json()
    later: datetime = NOW + timedelta(hours=2)
    monkeypatch.setenv("EVALOPS_NOW", format_timestamp(later))

    shown = cli("waiver", "list", "--all", cwd=demo).stdout

    line = next(ln for ln in shown.splitlines() if ln.startswith(granted["waiver_id"] + " "))
    assert "[expired]" in line


def test_a_second_waiver_over_a_valid_one_is_granted_and_said(demo: Path, cli: Cli) -> None:
    """WVR-1 (the demo's) covers task_fail of TASK on build-125 until 2026-12-14: a second
    grant of an overlapping state is recorded, and says which waiver already covers it; a
    state WVR-1 does not cover, or a grant after its revocation, overlaps nothing."""
    again = grant(cli, demo, "7d")
    assert again.code == 0, again.stdout + again.stderr
    assert again.json()["overlaps"] == ["WVR-1"]
    text = cli(
        "waiver", "grant", "--task", TASK, "--suite", "regression/core", "--states",
        "task_fail", "--build", "build-125", "--owner", "lead@example.com", "--reason",
        "a third time", "--expires", "7d", cwd=demo,
    )  # fmt: skip
    assert "note: WVR-1, WVR-2 already cover this task on build-125" in text.stdout
    other = cli(
        "waiver", "grant", "--task", TASK, "--suite", "regression/core", "--states",
        "agent_error", "--build", "build-125", "--owner", "lead@example.com", "--reason",
        "another state", "--expires", "7d", "--json", cwd=demo,
    )  # fmt: skip
    assert other.code == 0 and other.json()["overlaps"] == []
    for waiver_id in ("WVR-1", "WVR-2", "WVR-3"):
        done = cli("waiver", "revoke", waiver_id, "--reason", "superseded", cwd=demo)
        assert done.code == 0, done.stdout + done.stderr
    assert grant(cli, demo, "7d").json()["overlaps"] == []
