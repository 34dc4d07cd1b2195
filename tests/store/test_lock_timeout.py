"""Writers behind a long ingest (docs/verify.md, "Destructive and failing
operations"), on SQLite and PostgreSQL.

An ingest of 25,000 records holds the write lock (several seconds, far beyond the 2-second
lock timeout below; each test asserts it is still running when the writers start); 4
other writers start while it does:
- with the default lock timeout each waits, then succeeds (recorded after the ingest);
- with `--lock-timeout 2` each either got the lock in time or exits 1 with "registry is
  busy: another writer holds it" and a JSON error, no traceback, nothing partial;
- and with the lock held by someone else for longer than the timeout, every writer is busy.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import Cli
from tests.trial_factory import mini_case, record

RECORDS = 25_000
WRITERS = 4
BUSY = "registry is busy: another writer holds it"


def _engine_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def registry(request: pytest.FixtureRequest, workspace: Path, cli: Cli) -> tuple[Path, str]:
    """The mini registry synced into a fresh database; returns (work dir, database URL)."""
    if request.param == "sqlite":
        url = f"sqlite:///{workspace / 'registry.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    assert cli("--db", url, "init", cwd=workspace).code == 0
    assert cli("--db", url, "sync", cwd=workspace).code == 0
    return workspace, url


def _big_file(workspace: Path) -> Path:
    case = mini_case(workspace)
    path = workspace / "big.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n in range(RECORDS):
            out.write(json.dumps(record(case, trial_id=f"big-{n}", trial_index=n)) + "\n")
    return path


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_DATABASE_URL"] = url
    env["EVALOPS_ACTOR"] = "writer@example.com"
    return env


def _start(url: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evalops", *args],
        cwd=cwd,
        env=_env(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lock_held(url: str) -> bool:
    """Is the writer lock held by someone (BEGIN IMMEDIATE fails / an advisory lock)?"""
    if url.startswith("sqlite:///"):
        con = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return True
        finally:
            con.close()
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            # This database's locks only: other tests (other xdist workers) run in their own
            # databases on the same server at the same time.
            held = conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND database = (SELECT oid FROM pg_database"
                    " WHERE datname = current_database())"
                )
            ).scalar_one()
            return bool(held)
    finally:
        engine.dispose()


def _wait_for_lock(url: str, ingest: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not _lock_held(url):
        assert ingest.poll() is None, "the ingest ended before it was seen holding the lock"
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _kinds_and_subjects(url: str) -> list[tuple[str, str]]:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT kind, subject FROM audit_event ORDER BY seq"))
            return [(k, s) for k, s in rows]
    finally:
        engine.dispose()


def _count(url: str, table: str) -> int:
    engine = create_engine(_engine_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


def _writer_args(n: int, *extra: str) -> list[str]:
    return [*extra, "incident", "open", "--title", f"writer {n}", "--severity", "low",
            "--observed-at", "2026-11-02T09:14:00Z", "--trace-uri", f"trace://w/{n}"]  # fmt: skip


def _run_behind_an_ingest(cwd: Path, url: str, *extra: str) -> list[tuple[int, str, str]]:
    big = _big_file(cwd)
    ingest = _start(url, cwd, "trials", "ingest", str(big))
    _wait_for_lock(url, ingest)
    writers = [_start(url, cwd, *_writer_args(n, *extra)) for n in range(WRITERS)]
    assert ingest.poll() is None, "the ingest must still be running when the writers start"
    out, err = ingest.communicate(timeout=900)
    assert ingest.returncode == 0, out + err
    results = []
    for proc in writers:
        stdout, stderr = proc.communicate(timeout=900)
        results.append((proc.returncode, stdout, stderr))
    return results


@pytest.mark.load
def test_writers_behind_a_long_ingest_wait_and_then_succeed(
    registry: tuple[Path, str], cli: Cli
) -> None:
    cwd, url = registry
    results = _run_behind_an_ingest(cwd, url)
    for code, stdout, stderr in results:
        assert code == 0, stdout + stderr
        assert "Traceback" not in stderr
    events = _kinds_and_subjects(url)
    ingest_at = next(i for i, (kind, _) in enumerate(events) if kind == "trials.ingest")
    opened = [i for i, (kind, _) in enumerate(events) if kind == "incident.open"]
    assert len(opened) == WRITERS and min(opened) > ingest_at  # they waited for the ingest
    assert _count(url, "trial") == RECORDS
    verified = cli("--db", url, "verify", cwd=cwd)
    assert verified.code == 0, verified.stdout + verified.stderr


@pytest.mark.load
def test_writers_with_a_short_lock_timeout_are_busy_or_succeed_never_partial(
    registry: tuple[Path, str], cli: Cli
) -> None:
    cwd, url = registry
    results = _run_behind_an_ingest(cwd, url, "--json", "--lock-timeout", "2")
    for code, stdout, stderr in results:
        assert code in (0, 1), stdout + stderr
        assert "Traceback" not in stderr and "internal error" not in stdout + stderr
        if code == 1:
            assert json.loads(stdout) == {"error": {"code": 1, "message": BUSY, "file": None,
                                                    "line": None, "field": None}}  # fmt: skip
            assert BUSY in stderr
    succeeded = sum(code == 0 for code, _, _ in results)
    assert _count(url, "incident") == succeeded  # a busy writer left nothing behind
    assert _count(url, "trial") == RECORDS
    assert cli("--db", url, "verify", cwd=cwd).code == 0


@contextmanager
def _holding_the_lock(url: str) -> Iterator[None]:
    """Hold the writer lock the way a writer does (BEGIN IMMEDIATE / the advisory lock)."""
    from evalops.store.engine import make_engine, write_session

    engine = make_engine(url)
    try:
        with write_session(engine):
            yield
    finally:
        engine.dispose()


@pytest.mark.load
def test_every_writer_is_busy_while_the_lock_is_held_beyond_the_timeout(
    registry: tuple[Path, str], cli: Cli
) -> None:
    cwd, url = registry
    before = _kinds_and_subjects(url)
    with _holding_the_lock(url):
        started = time.monotonic()
        writers = [_start(url, cwd, *_writer_args(n, "--json", "--lock-timeout", "2"))
                   for n in range(WRITERS)]  # fmt: skip
        results = [(p, *p.communicate(timeout=120)) for p in writers]
        waited = time.monotonic() - started
    for proc, stdout, stderr in results:
        assert proc.returncode == 1, stdout + stderr
        assert json.loads(stdout)["error"]["message"] == BUSY
        assert "Traceback" not in stderr
    assert waited >= 2  # each waited out its lock timeout
    assert _kinds_and_subjects(url) == before
    assert cli("--db", url, "verify", cwd=cwd).code == 0
