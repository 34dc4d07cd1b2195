"""`verify` and `db check` check the storage the rules rely on (docs/verify.md, "Storage").

The unique keys listed for `verify` are exactly the models' (a migration that adds one adds
it to the list); on PostgreSQL a unique index marked invalid (what a failed
`CREATE UNIQUE INDEX CONCURRENTLY` leaves) or a unique constraint dropped is a damaged
registry (exit 6) even though every row still re-hashes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import UniqueConstraint
from sqlmodel import SQLModel

import evalops.store.tables  # noqa: F401  (registers the tables)
from evalops.store.unique_keys import UNIQUE_KEYS
from tests.conftest import Cli


def _model_unique_keys() -> set[tuple[str, tuple[str, ...]]]:
    keys = set()
    for table in SQLModel.metadata.sorted_tables:
        for constraint in table.constraints:
            if isinstance(constraint, UniqueConstraint):
                keys.add((table.name, tuple(c.name for c in constraint.columns)))
        for column in table.columns:
            if column.unique:
                keys.add((table.name, (column.name,)))
        for index in table.indexes:
            if index.unique:
                keys.add((table.name, tuple(c.name for c in index.columns)))
    return keys


def test_the_checked_unique_keys_are_the_models() -> None:
    assert set(UNIQUE_KEYS) == _model_unique_keys()
    assert len(UNIQUE_KEYS) == len(set(UNIQUE_KEYS))


def _psql(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                         autocommit=True) as conn:  # fmt: skip
        conn.execute(sql)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
            "(SELECT indexrelid FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid "
            " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] "
            " WHERE t.relname = 'trial' AND x.indisunique AND a.attname = 'trial_id' "
            " AND x.indnatts = 2)",
            "the unique index on trial(trial_id, record_digest) is invalid",
        ),
        (
            "DO $$ DECLARE c text; BEGIN SELECT conname INTO c FROM pg_constraint "
            "WHERE conrelid = 'waiver'::regclass AND contype = 'u' AND conkey = ARRAY["
            "(SELECT attnum FROM pg_attribute WHERE attrelid = 'waiver'::regclass "
            "AND attname = 'waiver_id')]; "
            "EXECUTE format('ALTER TABLE waiver DROP CONSTRAINT %I', c); END $$",
            "the unique key on waiver(waiver_id) that the rules rely on is missing",
        ),
    ],
)
def test_an_invalid_or_missing_unique_index_on_postgresql_fails_verify(
    pg_url: str, workspace: Path, cli: Cli, damage: str, named: str
) -> None:
    assert cli("--db", pg_url, "init", cwd=workspace).code == 0
    assert cli("--db", pg_url, "sync", cwd=workspace).code == 0
    assert cli("--db", pg_url, "verify", cwd=workspace).code == 0
    _psql(pg_url, damage)
    result = cli("--db", pg_url, "--json", "verify", cwd=workspace)
    assert result.code == 6, result.stdout + result.stderr
    message = json.loads(result.stdout)["error"]["message"]
    assert named in message and "the database is damaged" in message
    checked = cli("--db", pg_url, "db", "check", cwd=workspace)
    assert checked.code == 6 and named in checked.stderr, checked.stderr
