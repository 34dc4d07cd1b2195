"""`verify` on a SQLite file through `sqlite3` alone and through SQLAlchemy, attacked with
values no evalops writer stores (docs/verify.md, "What verify proves").

An attacker with write access to the file is not bound by the columns' types: a blob in a
text column, an infinite float, an integer past JSON's safe range, text that is not UTF-8,
a table dropped, an event payload that is no JSON object (with its digest and the chain
after it re-hashed). Each must be exit 6 naming the bad item, never an internal error, and
`sqlite:///PATH` (read by `sqlite3`) must say exactly what `sqlite+pysqlite:///PATH` (read
through SQLAlchemy) says.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.integrity.test_tampering import run

# (name, SQL run on a copy of the demo's database, re-hash the chain after it, what the
# error must name). `{waiver}`, `{ingest}` and `{decision}` stand for the seq of the demo's
# waiver.grant WVR-1, trials.ingest ingest:1 and gate.decision GATE-3 events, read from the
# database: the demo's chain grows as the demo does, the events attacked stay the same.
ATTACKS: list[tuple[str, str, bool, str]] = [
    (
        "blob-in-a-text-column",
        "UPDATE waiver SET reason = CAST(reason AS BLOB)",
        False,
        "audit seq {waiver} (waiver.grant WVR-1): waiver row 1 changed",
    ),
    (
        "blob-in-a-grader-config",
        "UPDATE grader_config SET layer = CAST(layer AS BLOB) WHERE id = 1",
        False,
        "grader_config rows 1, 2, 3, 4, 5 changed",
    ),
    (
        "integer-past-json-range",
        "UPDATE waiver SET number = 9223372036854775807",
        False,
        "audit seq {waiver} (waiver.grant WVR-1): waiver row 1 changed",
    ),
    (
        "infinite-score",
        "UPDATE trial SET score = 9e999 WHERE id = 5",
        False,
        "audit seq {ingest} (trials.ingest ingest:1): trial rows 1, 2, 3, 4, 5 changed",
    ),
    (
        "blob-payload",
        "UPDATE audit_event SET payload = CAST(payload AS BLOB) WHERE seq = {waiver}",
        False,
        "audit seq {waiver}: payload does not match payload_digest",
    ),
    (
        "blob-actor",
        "UPDATE audit_event SET actor = CAST(actor AS BLOB) WHERE seq = {waiver}",
        False,
        "audit seq {waiver}: hash mismatch",
    ),
    (
        "blob-trial-record",
        "UPDATE trial SET record = CAST(record AS BLOB) WHERE id = 5",
        False,
        "stored record was changed",
    ),
    (
        "text-not-utf8",
        "UPDATE waiver SET reason = CAST(X'FF' AS TEXT)",
        False,
        "Could not decode to UTF-8 column 'reason'",
    ),
    (
        "table-dropped",
        "DROP TABLE waiver_revocation",
        False,
        "no such table: waiver_revocation",
    ),
    (
        "rehashed-payload-not-json",
        "UPDATE audit_event SET payload = 'x' WHERE seq = {decision}",
        True,
        "audit seq {decision}: payload is not an evalops event payload",
    ),
    (
        "rehashed-payload-rows-not-a-block",
        "UPDATE audit_event SET payload = '{\"rows\": 5}' WHERE seq = {waiver}",
        True,
        "audit seq {waiver}: payload is not an evalops event payload",
    ),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_master: Path) -> Path:
    # A copy of the run's one demo (pinned clock), not a demo of its own: seconds of CPU.
    return Path(
        shutil.copytree(demo_master, tmp_path_factory.mktemp("vsqlite3") / "demo", symlinks=True)
    )


def _rehash_chain(conn: sqlite3.Connection) -> None:
    """Re-hash every payload and the whole chain, as an attacker covering an edit would."""
    from evalops.domain.audit_chain import event_hash
    from evalops.domain.canonical import GENESIS_HASH, sha256_digest
    from evalops.domain.timestamps import format_timestamp
    from evalops.store.reader import timestamp

    prev = GENESIS_HASH
    events = conn.execute(
        "SELECT seq, at, actor, kind, subject, payload FROM audit_event ORDER BY seq"
    ).fetchall()
    for seq, at, actor, kind, subject, payload in events:
        digest = sha256_digest(payload.encode("utf-8"))
        hashed = event_hash(
            prev,
            seq=seq,
            at=format_timestamp(timestamp(at)),
            actor=actor,
            kind=kind,
            subject=subject,
            payload_digest=digest,
        )
        conn.execute(
            "UPDATE audit_event SET payload_digest = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (digest, prev, hashed, seq),
        )
        prev = hashed


_EVENTS = {
    "waiver": ("waiver.grant", "WVR-1"),
    "ingest": ("trials.ingest", "ingest:1"),
    "decision": ("gate.decision", "GATE-3"),
}


def _seqs(demo: Path) -> dict[str, int]:
    """The seq of each event the attacks name, in the demo's own chain."""
    conn = sqlite3.connect(demo / ".evalops" / "registry.db")
    try:
        seqs: dict[str, int] = {}
        for key, (kind, subject) in _EVENTS.items():
            rows = conn.execute(
                "SELECT seq FROM audit_event WHERE kind = ? AND subject = ?", (kind, subject)
            ).fetchall()
            assert len(rows) == 1, (kind, subject, rows)
            seqs[key] = int(rows[0][0])
    finally:
        conn.close()
    return seqs


def _attacked(demo: Path, target: Path, sql: str, rehash: bool) -> Path:
    shutil.copytree(demo, target)
    path = target / ".evalops" / "registry.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.executescript(sql + ";")
        if rehash:
            _rehash_chain(conn)
    finally:
        conn.close()
    return path


@pytest.mark.parametrize("attack", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_stored_values_no_writer_stores_are_exit_6_the_same_on_both_paths(
    demo: Path, tmp_path: Path, attack: tuple[str, str, bool, str]
) -> None:
    name, sql, rehash, named = attack
    for key, seq in _seqs(demo).items():
        sql, named = sql.replace(f"{{{key}}}", str(seq)), named.replace(f"{{{key}}}", str(seq))
    path = _attacked(demo, tmp_path / name, sql, rehash)
    plain, plain_out = run("verify", cwd=tmp_path / name, db=f"sqlite:///{path}")
    orm, orm_out = run("verify", cwd=tmp_path / name, db=f"sqlite+pysqlite:///{path}")
    assert plain == 6, plain_out
    assert named in plain_out, plain_out
    assert "internal error" not in plain_out and "Traceback" not in plain_out
    assert (orm, orm_out) == (plain, plain_out)


def test_an_untouched_copy_verifies_the_same_on_both_paths(demo: Path, tmp_path: Path) -> None:
    path = _attacked(demo, tmp_path / "untouched", "SELECT 1", rehash=True)
    plain, plain_out = run("verify", cwd=tmp_path / "untouched", db=f"sqlite:///{path}")
    orm, orm_out = run("verify", cwd=tmp_path / "untouched", db=f"sqlite+pysqlite:///{path}")
    assert plain == 0, plain_out
    assert (orm, orm_out) == (plain, plain_out)
