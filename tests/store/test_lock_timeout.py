"""Writers behind a long ingest (docs/verify.md, "Destructive and failing
operations"), on SQLite and PostgreSQL.

An ingest holds the write lock for as long as the test wants: once it is seen holding it
(inside its write), it is stopped with SIGSTOP, starved the way an overloaded machine or a
debugger starves a writer, and continued with SIGCONT. 4 other writers start while it is
stopped, and are each seen about to wait for the lock (their `BEGIN IMMEDIATE` / advisory
lock statement, recorded by an event listener of their own) before anything goes on:
- with the default lock timeout each waits, then succeeds (recorded after the ingest);
- with `--lock-timeout 2` each, the ingest stopped until the writers end, exits 1 with
  "registry is busy: another writer holds it" and a JSON error, no traceback, nothing
  partial (a writer that got the lock in time would have to succeed);
- and with the lock held by someone else for longer than the timeout, every writer is busy.

The ingest and the writers are processes of their own, forked from the test process
(tests/forked.py); `verify` runs in the test process.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests import forked
from tests.conftest import Cli
from tests.trial_factory import mini_case, record

#: A few insert chunks: the ingest is stopped inside its write, however short that is.
RECORDS = 2000
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


def _start(url: str, cwd: Path, *args: str, marks: Path | None = None) -> forked.Forked:
    """`evalops ARGS` forked; with `marks`, the child appends its pid to that file just
    before each statement that takes the writer lock (it then waits for it, if held)."""
    sqlite_db = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    before = None if marks is None else _marking_lock_waits(marks)
    return forked.start(list(args), cwd, forked.child_env(url, "writer@example.com"),
                        sqlite_db, before)  # fmt: skip


def _marking_lock_waits(marks: Path) -> Callable[[], None]:
    def install() -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        def before_cursor_execute(*args: object) -> None:
            statement = str(args[2])
            if statement.startswith("BEGIN IMMEDIATE") or "pg_advisory_xact_lock" in statement:
                with marks.open("a", encoding="utf-8") as out:
                    out.write(f"{os.getpid()}\n")

        event.listen(Engine, "before_cursor_execute", before_cursor_execute)

    return install


def _waiting(marks: Path) -> set[int]:
    if not marks.exists():
        return set()
    return {int(line) for line in marks.read_text(encoding="utf-8").split()}


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


def _run_behind_an_ingest(
    cwd: Path, url: str, *extra: str, until_writers_end: bool = False
) -> list[tuple[int, str, str]]:
    """Writers started behind an ingest stopped inside its write; the ingest continues once
    every writer is about to wait for the lock (`until_writers_end`: once they ended)."""
    big = _big_file(cwd)
    marks = cwd / "lock-waits.txt"
    with forked.writer_lock_probe(url) as held:
        # Inside its write: the ingest has asked for the lock (its mark) and the lock is
        # held. A lock seen alone may be another's: on SQLite, a connection opening the
        # registry (recovering the WAL index) or closing it (checkpointing) holds it for a
        # moment. Stopped then, before its write, the ingest held nothing ("the stopped
        # ingest must hold the lock" failed once under load).
        ingest_marks = cwd / "ingest-lock-waits.txt"
        ingest = _start(url, cwd, "trials", "ingest", str(big), marks=ingest_marks)
        seen = forked.cpu_when_locked(
            ingest, lambda: ingest.pid in _waiting(ingest_marks) and held()
        )
        os.kill(ingest.pid, signal.SIGSTOP)
        try:
            assert seen is not None, "the ingest ended before it was seen holding the lock"
            assert ingest.progress()[0] and held(), "the stopped ingest must hold the lock"
            writers = [_start(url, cwd, *_writer_args(n, *extra), marks=marks)
                       for n in range(WRITERS)]  # fmt: skip
            deadline = time.monotonic() + 300  # a hang guard only
            pids = {w.pid for w in writers}
            while (waiting := _waiting(marks)) != pids:
                ended = [w.pid for w in writers if not w.progress()[0]]
                assert set(ended) <= waiting, "a writer ended before it reached the lock"
                assert time.monotonic() < deadline, "the writers never reached the lock"
                time.sleep(0.01)
            while until_writers_end and any(w.progress()[0] for w in writers):
                assert time.monotonic() < deadline, "the writers never gave up"
                time.sleep(0.05)
            assert ingest.progress()[0] and held(), "the ingest must still hold the lock"
        finally:
            os.kill(ingest.pid, signal.SIGCONT)
    ingested = ingest.wait(900)
    assert ingested.code == 0, ingested.stdout + ingested.stderr
    return [(r.code, r.stdout, r.stderr) for r in (w.wait(900) for w in writers)]


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
    results = _run_behind_an_ingest(
        cwd, url, "--json", "--lock-timeout", "2", until_writers_end=True
    )
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
    # The writers are forked before this process opens the database (a SQLite connection
    # must not cross a fork), and start their command once it holds the lock.
    go = cwd / "go"
    sqlite_db = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    env = forked.child_env(url, "writer@example.com")
    writers = [forked.start(_writer_args(n, "--json", "--lock-timeout", "2"), cwd, env,
                            sqlite_db, forked.released_by(go)) for n in range(WRITERS)]  # fmt: skip
    with _holding_the_lock(url):
        started = time.monotonic()
        go.touch()
        results = [w.wait(120) for w in writers]
        waited = time.monotonic() - started
    for result in results:
        assert result.code == 1, result.stdout + result.stderr
        assert json.loads(result.stdout)["error"]["message"] == BUSY
        assert "Traceback" not in result.stderr
    assert waited >= 2  # each waited out its lock timeout
    assert _kinds_and_subjects(url) == before
    assert cli("--db", url, "verify", cwd=cwd).code == 0


@pytest.mark.postgres
def test_a_reader_blocked_by_a_table_lock_gives_up_after_the_lock_timeout(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    """An administrator (or a migration) holding a table in ACCESS EXCLUSIVE mode blocks
    every reader on PostgreSQL: `verify` waited without end; it now waits --lock-timeout
    and says the registry is busy (exit 1), as a writer does."""
    import psycopg

    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as holder:
        holder.execute("LOCK TABLE audit_event IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        done = cli("--db", pg_url, "--json", "--lock-timeout", "1", "verify", cwd=workspace)
        waited = time.monotonic() - started
        holder.rollback()
    assert done.code == 1, done.stdout + done.stderr
    message = json.loads(done.stdout)["error"]["message"]
    assert message.startswith(BUSY) and "--lock-timeout" in message
    assert 1 <= waited < 30
    assert cli("--db", pg_url, "verify", cwd=workspace).code == 0


@pytest.mark.postgres
def test_the_lock_timeout_keeps_the_url_s_own_options_and_zero_never_means_forever(
    workspace: Path, cli: Cli, pg_url: str
) -> None:
    """The lock timeout is added to a PostgreSQL URL's own `options` (here a search_path:
    the registry lives in its own schema), never in their place; `--lock-timeout 0` gives
    up at once, where PostgreSQL's own 0 would wait without end; `db upgrade` waits no
    longer than asked either."""
    import psycopg

    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA evals")
    url = f"{pg_url}?options=-csearch_path%3Devals"
    assert cli("--db", url, "init", cwd=workspace).code == 0
    assert cli("--db", url, "sync", cwd=workspace).code == 0
    with psycopg.connect(plain) as conn:
        found = conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'audit_event'"
        ).fetchall()
    assert found == [("evals",)]
    with psycopg.connect(plain) as holder:
        holder.execute(
            "LOCK TABLE evals.audit_event, evals.alembic_version IN ACCESS EXCLUSIVE MODE"
        )
        for args in (["--lock-timeout", "0", "verify"], ["--lock-timeout", "1", "db", "upgrade"]):
            started = time.monotonic()
            done = cli("--db", url, "--json", *args, cwd=workspace)
            assert done.code == 1, (args, done.stdout + done.stderr)
            assert json.loads(done.stdout)["error"]["message"].startswith(BUSY)
            assert time.monotonic() - started < 30, args
        holder.rollback()
    assert cli("--db", url, "verify", cwd=workspace).code == 0
