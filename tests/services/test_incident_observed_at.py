"""`incident open --observed-at`: a failure is observed before its incident is opened. A time
past this machine's clock by more than a clock's drift (five minutes, docs/cli.md) is a typo
(the year, the month), refused with nothing stored, as every bad input is."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli

NOW = "2026-11-02T09:00:00Z"


def _incidents(ws: Path) -> int:
    con = sqlite3.connect(ws / ".evalops" / "registry.db")
    try:
        return int(con.execute("SELECT count(*) FROM incident").fetchone()[0])
    finally:
        con.close()


def _open(cli: Cli, ws: Path, observed_at: str) -> tuple[int, str]:
    done = cli("incident", "open", "--title", "refunded twice", "--severity", "high",
               "--observed-at", observed_at, "--trace-uri", "trace://prod/1", cwd=ws)  # fmt: skip
    return done.code, done.stderr


@pytest.mark.parametrize(
    "observed_at", ["2026-11-02T09:05:01Z", "2027-11-02T09:00:00Z", "2026-11-02T10:00:00+00:30"]
)
def test_an_observation_after_now_is_refused_with_nothing_stored(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, observed_at: str
) -> None:
    monkeypatch.setenv("EVALOPS_NOW", NOW)
    before = _incidents(synced)
    code, stderr = _open(cli, synced, observed_at)
    assert code == 2, stderr
    assert "--observed-at" in stderr and "in the future" in stderr
    assert _incidents(synced) == before


@pytest.mark.parametrize(
    "observed_at", ["2026-11-02T09:05:00Z", "2026-11-02T08:00:00Z", "2026-11-02T10:04:00+01:00"]
)
def test_an_observation_up_to_a_clock_s_drift_ahead_is_opened(
    synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, observed_at: str
) -> None:
    monkeypatch.setenv("EVALOPS_NOW", NOW)
    before = _incidents(synced)
    code, stderr = _open(cli, synced, observed_at)
    assert code == 0, stderr
    assert _incidents(synced) == before + 1
