"""The registry's present: what "now" means for a read that sees every event.

Audit time never runs backwards: an event is recorded at no earlier than its predecessor's
moment (docs/audit.md). So a live `gate check`, `estimate` or `waiver list` stands at least
at the newest event's moment, whatever its own clock says, and a revocation recorded by a
writer whose clock is ahead is in force for them. A moment after that present names no
state the registry has stood in: `--at` refuses it (exit 2), rather than storing a decision
that claims a future as the registry's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PINNED_NOW, Cli, pg_holding

CHECK = ("gate", "check", "--build", "build-125", "--suite", "regression/core")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, demo: Path) -> list[str]:
    """`--db` arguments of the demo's registry on either engine."""
    if request.param == "sqlite":
        return []
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return ["--db", url]


def _decisions(cli: Cli, demo: Path, db: list[str]) -> list[str]:
    listed = cli(*db, "gate", "list", "--json", cwd=demo)
    assert listed.code == 0, listed.stdout + listed.stderr
    return [d["gate_id"] for d in json.loads(listed.stdout)]


def test_a_revocation_by_a_clock_ahead_is_in_force_for_a_check_whose_clock_is_behind(
    demo: Path, db: list[str], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WVR-1 lets GATE-3 pass build-125. Revoked at 13:00:05+01:00 (12:00:05Z, five seconds
    after the demo), then checked by a machine whose clock says 12:00:02Z: the revocation
    is recorded, so the waiver is revoked and the task's failure holds the build."""
    monkeypatch.setenv("EVALOPS_NOW", "2026-11-30T13:00:05+01:00")
    revoked = cli(*db, "waiver", "revoke", "WVR-1", "--reason", "the fix slipped", cwd=demo)
    assert revoked.code == 0, revoked.stdout + revoked.stderr
    monkeypatch.setenv("EVALOPS_NOW", "2026-11-30T12:00:02Z")

    checked = cli(*db, *CHECK, "--json", cwd=demo)
    decision = json.loads(checked.stdout)
    assert (checked.code, decision["decision"]) == (3, "hold"), checked.stdout
    assert decision["waivers"]["revoked"] == ["WVR-1"]
    assert decision["waivers"]["applied"] == []
    # Evaluated at the revocation's moment, the newest event's, not the lagging clock's.
    assert decision["evaluated_at"] == "2026-11-30T12:00:05.000000Z"

    listed = cli(*db, "waiver", "list", "--all", "--json", cwd=demo)
    assert listed.code == 0, listed.stdout + listed.stderr
    statuses = {w["waiver_id"]: w["status"] for w in json.loads(listed.stdout)}
    assert statuses == {"WVR-1": "revoked"}
    assert cli(*db, "verify", cwd=demo).code == 0


def test_at_a_moment_after_now_is_refused_and_stores_nothing(
    demo: Path, db: list[str], cli: Cli
) -> None:
    """The demo's clock is pinned at PINNED_NOW: a day later names no state the registry
    has been in (WVR-1 would read expired, and a stored HOLD would claim it)."""
    before = _decisions(cli, demo, db)
    later = "2026-12-01T12:00:00Z"
    for command in (CHECK, ("estimate", "--suite", "estimation/eu-sessions", "--build",
                            "build-125")):  # fmt: skip
        refused = cli(*db, *command, "--at", later, cwd=demo)
        assert refused.code == 2, refused.stdout + refused.stderr
        assert "2026-12-01T12:00:00.000000Z is later than now" in refused.stderr
        assert "--at" in refused.stderr
    assert _decisions(cli, demo, db) == before
    # The present itself is a moment the registry stood in.
    at_now = cli(*db, *CHECK, "--at", PINNED_NOW, "--dry-run", cwd=demo)
    assert at_now.code == 0, at_now.stdout + at_now.stderr


def test_an_offset_out_of_range_is_named_as_such(demo: Path, cli: Cli) -> None:
    for offset in ("+24:00", "-23:60"):
        refused = cli(*CHECK, "--at", f"2026-11-30T11:00:00{offset}", cwd=demo)
        assert refused.code == 2, refused.stdout + refused.stderr
        assert f"has offset {offset}, outside -23:59 .. +23:59" in refused.stderr
        assert "timedelta" not in refused.stderr


def test_after_a_writer_whose_clock_ran_ahead_a_waiver_is_judged_at_the_present(
    demo: Path, db: list[str], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One check from a clock half a year ahead stamps the chain there. A grant from a
    clock at the real time, `--expires 20d`, would be expired at every later check: it is
    refused and says why; an expiry after the present is granted and applies."""
    monkeypatch.setenv("EVALOPS_NOW", "2027-06-01T00:00:00Z")
    assert cli(*db, *CHECK, cwd=demo).code in (0, 3)
    monkeypatch.setenv("EVALOPS_NOW", "2026-12-01T12:05:00Z")
    grant = ("waiver", "grant", "--task", "support-refund-policy-explanation", "--suite",
             "regression/core", "--states", "task_fail", "--build", "build-125", "--owner",
             "lead@example.com", "--reason", "copy fix", "--json")  # fmt: skip
    dead = cli(*db, *grant, "--expires", "20d", cwd=demo)
    assert dead.code == 5, dead.stdout + dead.stderr
    [refusal] = dead.json()["refusals"]
    assert refusal["rule"] == "expires_at_past"
    assert "the registry's present is 2027-06-01T00:00:00.000000Z" in refusal["message"]
    alive = cli(*db, *grant, "--expires", "2027-06-05T00:00:00Z", cwd=demo)
    assert alive.code == 0, alive.stdout + alive.stderr
    checked = cli(*db, *CHECK, "--json", cwd=demo).json()
    assert alive.json()["waiver_id"] in checked["waivers"]["applied"]
    later = cli(*db, *CHECK, "--at", "2027-06-02T00:00:00Z", cwd=demo)
    assert later.code == 2 and "later than the registry's present" in later.stderr
    assert "later than this machine's clock 2026-12-01T12:05:00.000000Z" in later.stderr
