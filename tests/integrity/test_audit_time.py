"""Audit time (docs/verify.md): monotonic along the chain, `--at` by audit sequence.

On a copy of the finished demo (clock pinned at 12:00), on SQLite and PostgreSQL:
- a writer whose clock is behind records its predecessor's time, so `gate check --at T`
  never counts the rows it wrote after T;
- `at` re-spelled in the database (`T` for the space) neither hides an event from `--at`
  nor passes `verify`; nor does an `at` that runs backwards, even consistently re-hashed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from evalops.domain.audit_chain import event_hash
from evalops.domain.vocabulary import format_timestamp
from tests.conftest import Cli
from tests.helpers import CliResult, copy_rows
from tests.integrity.test_decision_integrity_cli import CRITICAL, fix_record, with_guard
from tests.trial_factory import write_jsonl

SUITE = "regression/core"
DEMO_TIME = "2026-11-30T12:00:00Z"  # every event of the pinned demo


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def registry(request: pytest.FixtureRequest, demo: Path, cli: Cli) -> Iterator[list[str]]:
    """The `--db` arguments of the demo's registry on each engine (SQLite: its own file)."""
    if request.param == "sqlite":
        yield []
        return
    url: str = request.getfixturevalue("pg_url")
    assert cli("--db", url, "db", "upgrade", cwd=demo).code == 0
    copy_rows(f"sqlite:///{demo / '.evalops' / 'registry.db'}", url)
    yield ["--db", url]


def _sql(demo: Path, db: list[str], statement: str, **params: object) -> list[tuple[object, ...]]:
    url = db[1] if db else f"sqlite:///{demo / '.evalops' / 'registry.db'}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    _CLOCK["monkeypatch"] = monkeypatch


_CLOCK: dict[str, pytest.MonkeyPatch] = {}


def _at(cli: Cli, demo: Path, db: list[str], clock: str, *args: str) -> CliResult:
    """`evalops ARGS` on a machine whose clock reads `clock`."""
    _CLOCK["monkeypatch"].setenv("EVALOPS_NOW", clock)
    return cli(*db, *args, cwd=demo)


def _ingest_hard_failure(cli: Cli, demo: Path, db: list[str], clock: str) -> None:
    record = with_guard(
        fix_record(demo, CRITICAL), "hard_constraint_fail", trial_id="late-failure", index=7
    )
    path = write_jsonl(demo / "late-failure.jsonl", [record])
    result = _at(cli, demo, db, clock, "trials", "ingest", str(path))
    assert result.code == 0, result.stdout + result.stderr


def _gate_at(cli: Cli, demo: Path, db: list[str], at: str) -> dict[str, object]:
    result = _at(
        cli, demo, db, "2026-11-30T18:00:00Z",
        "gate", "check", "--build", "build-125", "--suite", SUITE, "--at", at, "--json",
    )  # fmt: skip
    assert result.code in (0, 4), result.stdout + result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _audit_times(demo: Path, db: list[str]) -> list[datetime]:
    rows = _sql(demo, db, "SELECT at FROM audit_event ORDER BY seq")
    return [
        value if isinstance(value, datetime) else datetime.fromisoformat(f"{value}+00:00")
        for (value,) in rows
    ]


def test_a_writer_whose_clock_is_behind_records_its_predecessors_time(
    registry: list[str], demo: Path, cli: Cli
) -> None:
    # A writer with a good clock acts at 14:00; then one whose clock says 12:30 (it is
    # really after 14:00) ingests a hard failure of the passing build.
    opened = _at(
        cli, demo, registry, "2026-11-30T14:00:00Z",
        "incident", "open", "--title", "seen at two", "--severity", "low",
        "--observed-at", "2026-11-30T13:59:00Z", "--trace-uri", "trace://prod/two",
    )  # fmt: skip
    assert opened.code == 0, opened.stdout + opened.stderr
    _ingest_hard_failure(cli, demo, registry, "2026-11-30T12:30:00Z")
    times = _audit_times(demo, registry)
    assert times == sorted(times), "audit time runs backwards"
    assert format_timestamp(times[-1]) == "2026-11-30T14:00:00.000000Z"
    # As the registry stood at 13:00 the failure had not been recorded: build-125 passes.
    then = _gate_at(cli, demo, registry, "2026-11-30T13:00:00Z")
    assert then["decision"] == "pass", then["reasons"]
    # From 14:00 on it counts.
    assert _gate_at(cli, demo, registry, "2026-11-30T14:00:00Z")["decision"] == "block"
    assert cli(*registry, "verify", cwd=demo).code == 0


def _respell(db_path: Path, seq: int) -> None:
    con = sqlite3.connect(db_path)
    try:
        con.execute("UPDATE audit_event SET at = replace(at, ' ', 'T') WHERE seq = ?", (seq,))
        con.commit()
    finally:
        con.close()


def test_a_respelled_audit_time_neither_hides_an_event_nor_verifies(demo: Path, cli: Cli) -> None:
    _ingest_hard_failure(cli, demo, [], "2026-11-30T13:00:00Z")
    (seq,) = _sql(demo, [], "SELECT max(seq) FROM audit_event")[0]
    assert isinstance(seq, int)
    _respell(demo / ".evalops" / "registry.db", seq)  # every hash still recomputes
    # The failure was recorded at 13:00: a decision as of 13:30 must count it.
    assert _gate_at(cli, demo, [], "2026-11-30T13:30:00Z")["decision"] == "block"
    result = cli("verify", cwd=demo)
    assert result.code == 6, result.stdout + result.stderr
    assert f"audit seq {seq}: at" in result.stderr and "stored spelling" in result.stderr


def test_an_audit_time_running_backwards_fails_verify_even_rehashed(
    registry: list[str], demo: Path, cli: Cli
) -> None:
    _ingest_hard_failure(cli, demo, registry, "2026-11-30T13:00:00Z")
    ((seq, actor, kind, subject, payload_digest, prev),) = _sql(
        demo, registry,
        "SELECT seq, actor, kind, subject, payload_digest, prev_hash FROM audit_event "
        "WHERE seq = (SELECT max(seq) FROM audit_event)",
    )  # fmt: skip
    # The attacker back-dates the head before the demo's events and re-hashes it.
    earlier = "2026-11-30T11:00:00.000000Z"
    forged = event_hash(
        str(prev), seq=int(str(seq)), at=earlier, actor=str(actor), kind=str(kind),
        subject=str(subject), payload_digest=str(payload_digest),
    )  # fmt: skip
    stored = "2026-11-30 11:00:00.000000" if not registry else "2026-11-30T11:00:00+00:00"
    _sql(
        demo, registry, "UPDATE audit_event SET at = :at, hash = :hash WHERE seq = :seq",
        at=stored, hash=forged, seq=seq,
    )  # fmt: skip
    result = cli(*registry, "verify", cwd=demo)
    assert result.code == 6, result.stdout + result.stderr
    assert f"audit seq {seq}: at {earlier} is earlier" in result.stderr
    assert DEMO_TIME.replace("Z", ".000000Z") in result.stderr
