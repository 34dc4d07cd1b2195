"""`verify` reads one consistent snapshot (docs/verify.md): an ingest committed while it
runs can never make an untouched registry look tampered, on SQLite and PostgreSQL.

The writer is a real `evalops trials ingest` on its own connection (run in-process: a
connection of another process sees the same snapshots, for a second of CPU more per run).
It is let in at the worst
moment: after verify has read the `ingest_batch` rows and before it reads the `trial` rows
(tables are read in name order), so a verify that read each table in a fresh snapshot
would find the new batch's trials without their batch.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops.services.verify import run as verify
from evalops.store.engine import make_engine
from evalops.store.reader import ConnectionReader
from tests.conftest import Cli
from tests.trial_factory import mini_case, record, write_jsonl


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, synced: Path, cli: Cli) -> Iterator[str]:
    """The synced mini registry with one ingested batch, on each engine; its URL."""
    if request.param == "sqlite":
        url = f"sqlite:///{synced / '.evalops' / 'registry.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        assert cli("--db", url, "init", cwd=synced).code == 0
        assert cli("--db", url, "sync", cwd=synced).code == 0
    _ingest_in_process(cli, synced, url, "first", 0)
    yield url


def _records(synced: Path, name: str, start: int) -> Path:
    case = mini_case(synced)
    return write_jsonl(
        synced / f"{name}.jsonl",
        [record(case, trial_id=f"{name}-{i}", trial_index=start + i) for i in range(3)],
    )


def _ingest_in_process(cli: Cli, synced: Path, url: str, name: str, start: int) -> None:
    ingested = cli("--db", url, "trials", "ingest", str(_records(synced, name, start)), cwd=synced)
    assert ingested.code == 0, ingested.stdout + ingested.stderr


def _ingest_on_another_connection(synced: Path, url: str) -> None:
    from evalops.cli.main import main

    out = io.StringIO()
    before = Path.cwd()
    os.chdir(synced)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(
                ["--db", url, "--actor", "writer@example.com", "trials", "ingest",
                 str(_records(synced, "late", 10))]
            )  # fmt: skip
    finally:
        os.chdir(before)
    assert code == 0, out.getvalue()


def test_an_ingest_committed_during_verify_is_not_tampering(
    database: str, synced: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_tuples = ConnectionReader.tuples
    writes: list[str] = []

    def tuples_with_a_writer(
        reader: ConnectionReader, sql: str, params: Any = None
    ) -> Iterator[tuple[Any, ...]]:
        if 'FROM "trial" ' in sql and "ORDER BY audit_seq" in sql and not writes:
            writes.append(sql)  # the ingest_batch rows are read; the trial rows are not
            _ingest_on_another_connection(synced, database)
        yield from real_tuples(reader, sql, params)

    monkeypatch.setattr(ConnectionReader, "tuples", tuples_with_a_writer)
    engine = make_engine(database)
    try:
        report = verify.verify_database(engine)
    finally:
        engine.dispose()
    assert writes, "the writer never ran"
    assert report.trials == 3  # the snapshot: the late batch is not part of it
    # The late batch is there all the same, and a new verify checks it too.
    monkeypatch.setattr(ConnectionReader, "tuples", real_tuples)
    result = cli("--db", database, "verify", "--json", cwd=synced)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["trials"] == 6
