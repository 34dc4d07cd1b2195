"""`verify`'s checks of the chain, definitions, trials and rows read the same through `sqlite3`
as through SQLAlchemy, on SQLite and on PostgreSQL, and on SQLite load no SQLAlchemy.

evalops/services/verify/reads.py is one implementation of checks 1-3 (and the anchors, the
coverage of carried-forward rows, one event's rows) over a `Reader`: `sqlite3` itself for
`verify` on a SQLite file, a SQLAlchemy connection on PostgreSQL and inside ORM sessions.
Each registry here (the demo's, and the 0001 fixture upgraded, whose older rows a migration
vouches for) is read untouched and after each of a set of tamperings (an edited, deleted or
inserted row, a row of no event, a changed payload, a moved, respelled or backwards `at`, a
broken link, a deleted event, an edited definition or trial record, a respelled boolean):
every reading gives the same count, or the same first error, through `sqlite3`, through a
SQLAlchemy connection to the same file, and through PostgreSQL holding the same rows. The
error each tampering must give is derived here from the rows it touched, in the words the
ORM verify used (tests/integrity pins them through the CLI).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.audit_chain import event_hash
from evalops.domain.timestamps import format_timestamp
from evalops.errors import EvalopsError
from evalops.services.verify.anchors import Anchor
from evalops.store.reader import Reader
from tests.conftest import PG_ADMIN_URL, require_postgres
from tests.helpers import copy_rows, run_quiet, sqlalchemy_reader, sqlite3_reader
from tests.store.test_migration_0002 import FIXTURE

DB = Path(".evalops") / "registry.db"
ACTOR = "verify-reads@example.com"
SQLITE_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f"
OTHER_HASH = "sha256:" + "0" * 64
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------- registries


@pytest.fixture(scope="module")
def registries(demo_master: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's database, and the 0001 fixture upgraded to head (a migration event
    vouching for the rows of the 36 events before it)."""
    upgraded = tmp_path_factory.mktemp("upgraded")
    db = upgraded / DB
    db.parent.mkdir()
    shutil.copy(FIXTURE, db)
    code, output = run_quiet("db", "upgrade", cwd=upgraded, db=f"sqlite:///{db}", actor=ACTOR)
    assert code == 0, output
    return {"demo": demo_master / DB, "upgraded": db}


@dataclass
class Facts:
    """What the untouched registry holds, read with `sqlite3` alone."""

    db: Path
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.events = self.query("SELECT * FROM audit_event ORDER BY seq")

    def query(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.db)) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(sql, params)]

    def row(self, table: str, row_id: int) -> dict[str, Any]:
        (found,) = self.query(f'SELECT * FROM "{table}" WHERE id = ?', row_id)
        return found

    def event(self, seq: int) -> dict[str, Any]:
        return self.events[seq - 1]

    def what(self, seq: int) -> str:
        """How a row message names its event."""
        event = self.event(seq)
        return f"audit seq {seq} ({event['kind']} {event['subject']})"

    def declared(self, seq: int, table: str) -> dict[str, Any]:
        """What event `seq` recorded of `table` (a legacy event: what the migration did)."""
        payload = json.loads(self.event(seq)["payload"])
        if "rows" in payload:
            return dict(payload["rows"][table])
        for migration in self.events:
            legacy = json.loads(migration["payload"]).get("legacy_rows", {})
            if str(seq) in legacy and seq < migration["seq"]:
                return dict(legacy[str(seq)][table])
        raise AssertionError(f"nothing recorded the {table} rows of seq {seq}")

    @property
    def head(self) -> dict[str, Any]:
        return self.events[-1]


def _rows_named(table: str, ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:5])
    return f"{table} row{'s' if len(ids[:5]) != 1 else ''} {shown}"


# -------------------------------------------------------------------------- tampering


class Writer:
    """Statements on one engine, as an attacker with write access makes them."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn, self.dialect = conn, dialect

    def run(self, sql: str, **params: Any) -> None:
        if self.dialect == "sqlite":
            changed = self.conn.execute(sql, params).rowcount
        else:
            from sqlalchemy import text

            changed = self.conn.execute(text(sql), params).rowcount
        assert changed, sql

    def moment(self, value: datetime) -> Any:
        """A timestamp as this engine stores it."""
        return value.strftime(SQLITE_TIMESTAMP) if self.dialect == "sqlite" else value

    def insert_copy(self, facts: Facts, table: str, row_id: int, **changes: Any) -> None:
        row = {**facts.row(table, row_id), **changes}
        for column, value in row.items():
            if self.dialect != "sqlite" and isinstance(value, str) and column.endswith("_at"):
                row[column] = datetime.fromisoformat(value).replace(tzinfo=UTC)
            if self.dialect != "sqlite" and column in BOOLEANS.get(table, ()):
                row[column] = bool(value)
        names = ", ".join(f'"{c}"' for c in row)
        values = ", ".join(f":{c}" for c in row)
        self.run(f'INSERT INTO "{table}" ({names}) VALUES ({values})', **row)


# Booleans SQLite stores as integers, for a row copied into PostgreSQL.
BOOLEANS = {"promotion": ("accepted",)}


def _rehash_from(writer: Writer, facts: Facts, seq: int, at: dict[int, datetime]) -> None:
    """Events from `seq` on re-hashed, as a consistent rewrite would leave them, with the
    moments `at` gives in place of theirs."""
    prev = facts.event(seq - 1)["hash"] if seq > 1 else None
    for event in facts.events[seq - 1 :]:
        moment = at.get(event["seq"], _stored(event["at"]))
        fields = {k: event[k] for k in ("seq", "actor", "kind", "subject", "payload_digest")}
        assert prev is not None
        new = event_hash(prev, at=format_timestamp(moment), **fields)
        writer.run(
            "UPDATE audit_event SET at = :at, prev_hash = :prev, hash = :hash WHERE seq = :seq",
            at=writer.moment(moment),
            prev=prev,
            hash=new,
            seq=event["seq"],
        )
        prev = new


def _stored(text: str) -> datetime:
    return datetime.strptime(text, SQLITE_TIMESTAMP).replace(tzinfo=UTC)


Expected = dict[str, Any]


@dataclass(frozen=True)
class Tampering:
    """One change to a registry and the first error each check must then give."""

    name: str
    registry: str
    apply: Callable[[Writer, Facts], Expected]
    sqlite_only: bool = False  # a stored spelling PostgreSQL cannot hold


def _edited_row(w: Writer, f: Facts) -> Expected:
    waiver = f.row("waiver", 1)
    w.run("UPDATE waiver SET reason = reason || '~' WHERE id = 1")
    seq = waiver["audit_seq"]
    return {"rows": f"{f.what(seq)}: waiver row 1 changed since the event recorded them"}


def _deleted_row(w: Writer, f: Facts) -> Expected:
    incident = f.row("incident", 1)
    w.run("DELETE FROM incident WHERE id = 1")
    seq = incident["audit_seq"]
    count = f.declared(seq, "incident")["count"]
    return {
        "rows": f"{f.what(seq)}: its {count} incident row(s) are gone (deleted outside "
        "evalops, or dropped by a forced `db downgrade`)"
    }


def _inserted_row(w: Writer, f: Facts) -> Expected:
    promotion = f.row("promotion", 3)
    w.insert_copy(f, "promotion", 3, id=100_003)
    seq = promotion["audit_seq"]
    ids = [r["id"] for r in f.query("SELECT id FROM promotion WHERE audit_seq = ?", seq)]
    recorded = f.declared(seq, "promotion")["count"]
    return {
        "rows": f"{f.what(seq)}: recorded {recorded} promotion row(s), {len(ids) + 1} are "
        f"stored ({_rows_named('promotion', [*ids, 100_003])})"
    }


def _row_of_no_event(w: Writer, f: Facts) -> Expected:
    seq = f.head["seq"] + 50
    w.insert_copy(f, "promotion", 2, id=100_002, audit_seq=seq)
    return {"rows": f"promotion row 100002 claim audit seq {seq}, which does not exist"}


def _changed_payload(w: Writer, f: Facts) -> Expected:
    w.run("UPDATE audit_event SET payload = payload || ' ' WHERE seq = 20")
    return {"chain": "audit seq 20: payload does not match payload_digest"}


def _moved_at(w: Writer, f: Facts) -> Expected:
    event = f.event(21)
    moved = _stored(event["at"]) + timedelta(seconds=1)
    w.run("UPDATE audit_event SET at = :at WHERE seq = 21", at=w.moment(moved))
    fields = {k: event[k] for k in ("seq", "actor", "kind", "subject", "payload_digest")}
    recomputed = event_hash(event["prev_hash"], at=format_timestamp(moved), **fields)
    return {
        "chain": f"audit seq 21: hash mismatch (stored {event['hash']}, recomputed {recomputed})"
    }


def _respelled_at(w: Writer, f: Facts) -> Expected:
    at = f.event(22)["at"]
    respelled = at.replace(" ", "T")
    w.run("UPDATE audit_event SET at = :at WHERE seq = 22", at=respelled)
    return {"chain": f"audit seq 22: at {respelled!r} is not in its stored spelling"}


def _backwards_at(w: Writer, f: Facts) -> Expected:
    previous = _stored(f.event(22)["at"])
    earlier = previous - timedelta(days=1)
    _rehash_from(w, f, 23, {23: earlier})
    return {
        "chain": f"audit seq 23: at {format_timestamp(earlier)} is earlier than the previous "
        f"event's {format_timestamp(previous)} (audit time runs backwards)"
    }


def _broken_link(w: Writer, f: Facts) -> Expected:
    w.run("UPDATE audit_event SET prev_hash = :h WHERE seq = 24", h=OTHER_HASH)
    return {"chain": "audit seq 24: prev_hash does not link to seq 23"}


def _deleted_event(w: Writer, f: Facts) -> Expected:
    seq = 21
    tables = sorted(json.loads(f.event(seq)["payload"])["rows"])
    first = tables[0]
    ids = [r["id"] for r in f.query(f'SELECT id FROM "{first}" WHERE audit_seq = ?', seq)]
    w.run("DELETE FROM audit_event WHERE seq = :seq", seq=seq)
    return {
        "chain": f"audit seq {seq}: missing (next stored seq is {seq + 1})",
        "rows": f"{_rows_named(first, ids)} claim audit seq {seq}, which does not exist",
    }


def _edited_definition(w: Writer, f: Facts) -> Expected:
    task = f.row("task_revision", 2)
    w.run("UPDATE task_revision SET document = document || ' ' WHERE id = 2")
    name = f"task {task['task_id']}@{task['revision']} (row 2)"
    return {
        "definitions": f"{name}: stored document is not canonical JSON",
        "rows": f"{f.what(task['audit_seq'])}: task_revision row 2 changed since the event "
        "recorded them",
    }


def _definition_digest(w: Writer, f: Facts) -> Expected:
    grader_set = f.row("grader_set", 1)
    w.run("UPDATE grader_set SET grader_set_digest = :d WHERE id = 1", d=OTHER_HASH)
    name = f"grader_set {grader_set['grader_set_id']}@{grader_set['version']} (row 1)"
    return {
        "definitions": f"{name}: grader_set_digest {OTHER_HASH} does not match the stored "
        f"document ({grader_set['grader_set_digest']})",
        "rows": f"{f.what(grader_set['audit_seq'])}: grader_set row 1 changed since the event "
        "recorded them",
    }


def _edited_record(w: Writer, f: Facts) -> Expected:
    trial = f.row("trial", 7)
    w.run("UPDATE trial SET record = record || ' ' WHERE id = 7")
    # The row digest leaves the record to its stored digest, which the trials check re-hashes.
    return {"trials": f"trial {trial['trial_id']}: stored record was changed"}


def _respelled_boolean(w: Writer, f: Facts) -> Expected:
    config = f.row("grader_config", 1)
    assert config["blocking"] == 1
    w.run("UPDATE grader_config SET blocking = 2 WHERE id = 1")
    seq = config["audit_seq"]
    ids = [r["id"] for r in f.query("SELECT id FROM grader_config WHERE audit_seq = ?", seq)]
    return {
        "rows": f"{f.what(seq)}: {_rows_named('grader_config', ids)} changed since the event "
        "recorded them"
    }


def _edited_legacy_row(w: Writer, f: Facts) -> Expected:
    """A row of schema 0001 that the migration vouched for, edited after the upgrade."""
    waiver = f.row("waiver", 1)
    w.run("UPDATE waiver SET owner = 'mallory@example.com' WHERE id = 1")
    seq = waiver["audit_seq"]
    assert "rows" not in json.loads(f.event(seq)["payload"])  # legacy: vouched by migration
    return {"rows": f"{f.what(seq)}: waiver row 1 changed since the event recorded them"}


def _deleted_migration(w: Writer, f: Facts) -> Expected:
    """Without its migration event, the legacy rows belong to events that recorded none."""
    (migration,) = [e for e in f.events if e["kind"] == "migration.rows"]
    seq = migration["seq"]
    w.run("DELETE FROM audit_event WHERE seq = :seq", seq=seq)
    assert seq < f.head["seq"]
    legacy = json.loads(migration["payload"])["legacy_rows"]
    # The first event holding rows, its first table: the first a migration vouched for.
    legacy_seq, table = sorted((int(s), t) for s, tables in legacy.items() for t in tables)[0]
    ids = [r["id"] for r in f.query(f'SELECT id FROM "{table}" WHERE audit_seq = ?', legacy_seq)]
    return {
        "chain": f"audit seq {seq}: missing (next stored seq is {seq + 1})",
        "rows": f"{f.what(legacy_seq)}: {_rows_named(table, ids)} claim this event, which "
        f"recorded no {table} row (inserted outside evalops)",
    }


TAMPERINGS = [
    Tampering("untouched", "demo", lambda w, f: {}),
    Tampering("edited-row", "demo", _edited_row),
    Tampering("deleted-row", "demo", _deleted_row),
    Tampering("inserted-row", "demo", _inserted_row),
    Tampering("row-of-no-event", "demo", _row_of_no_event),
    Tampering("changed-payload", "demo", _changed_payload),
    Tampering("moved-at", "demo", _moved_at),
    Tampering("respelled-at", "demo", _respelled_at, sqlite_only=True),
    Tampering("backwards-at-rehashed", "demo", _backwards_at),
    Tampering("broken-link", "demo", _broken_link),
    Tampering("deleted-event", "demo", _deleted_event),
    Tampering("edited-definition", "demo", _edited_definition),
    Tampering("definition-digest", "demo", _definition_digest),
    Tampering("edited-trial-record", "demo", _edited_record),
    Tampering("respelled-boolean", "demo", _respelled_boolean, sqlite_only=True),
    Tampering("upgraded", "upgraded", lambda w, f: {}),
    Tampering("edited-legacy-row", "upgraded", _edited_legacy_row),
    Tampering("deleted-migration", "upgraded", _deleted_migration),
]


# ------------------------------------------------------------------------ the readings


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return ("value", call())
    except EvalopsError as exc:
        return ("error", type(exc).__name__, exc.message)


def _anchors(facts: Facts) -> list[Anchor]:
    head = facts.head
    return [
        Anchor(head["seq"], head["hash"], "the head"),
        Anchor(1, facts.event(1)["hash"], "the first"),
        Anchor(2, OTHER_HASH, "another hash"),
        Anchor(head["seq"] + 1, head["hash"], "past the head"),
        Anchor(2**70, head["hash"], "past any seq"),
    ]


def readings(reader: Reader, facts: Facts) -> dict[str, Any]:
    """Every check of verify_reads on one reader (each its value or its error)."""
    from evalops.services.verify import reads as v

    return {
        "chain": _outcome(lambda: v.check_chain(reader)),
        "chain_problem": v.chain_problem(reader),
        "definitions": _outcome(lambda: v.check_definitions(reader)),
        "trials": _outcome(lambda: v.check_trials(reader)),
        "rows": _outcome(lambda: v.check_rows(reader)),
        "carried_forward": v.carried_forward(reader),
        "anchors": [v.anchor_problem(reader, a) for a in _anchors(facts)],
        "event_rows": [v.event_rows_problem(reader, s) for s in range(facts.head["seq"] + 2)],
    }


def _counts(facts: Facts) -> dict[str, Any]:
    """What the untouched registry's checks count, counted here with `sqlite3`."""

    def count(sql: str) -> int:
        return int(facts.query(f"SELECT count(*) AS n FROM {sql}")[0]["n"])

    from evalops.store.audited_columns import AUDITED_COLUMNS

    definitions = ("task_revision", "execution_profile", "grader_set", "suite", "policy")
    return {
        "chain": (
            "value",
            (len(facts.events), {"seq": facts.head["seq"], "hash": facts.head["hash"]}),
        ),
        "definitions": ("value", sum(count(t) for t in definitions)),
        "trials": ("value", count("trial")),
        "rows": ("value", sum(count(f'"{t}"') for t in AUDITED_COLUMNS)),
    }


def _expected(untouched: dict[str, Any], changes: Expected) -> dict[str, Any]:
    out = dict(untouched)
    for check, message in changes.items():
        out[check] = ("error", "VerificationError", message)
    return out


def _tampered_copy(source: Path, target: Path, tampering: Tampering, facts: Facts) -> Expected:
    shutil.copy(source, target)
    with closing(sqlite3.connect(target)) as conn:
        changes = tampering.apply(Writer(conn, "sqlite"), facts)
        conn.commit()
    return changes


@pytest.mark.parametrize("tampering", TAMPERINGS, ids=lambda t: t.name)
def test_sqlite3_and_sqlalchemy_give_the_same_counts_and_first_errors(
    tampering: Tampering, registries: dict[str, Path], tmp_path: Path
) -> None:
    source = registries[tampering.registry]
    facts = Facts(source)
    db = tmp_path / "registry.db"
    changes = _tampered_copy(source, db, tampering, facts)
    with sqlite3_reader(db) as reader:
        plain = readings(reader, facts)
    with sqlalchemy_reader(f"sqlite+pysqlite:///{db}") as reader:
        core = readings(reader, facts)
    assert plain == core
    shown = {k: plain[k] for k in ("chain", "definitions", "trials", "rows")}
    assert shown == _expected(_counts(facts), changes)
    if tampering.name.startswith("untouched"):
        assert plain["chain_problem"] is None
        assert plain["anchors"][:2] == [None, None]
        assert all(p is None for p in plain["event_rows"])
    carried = [
        {"seq": e["seq"], "migration": e["subject"].removeprefix("migration:")}
        for e in facts.events
        if e["kind"] == "migration.rows" and tampering.name != "deleted-migration"
    ]
    assert plain["carried_forward"] == carried
    assert bool(carried) == (tampering.registry == "upgraded" and "migration" not in tampering.name)


def test_the_anchor_problems_name_what_the_chain_holds(registries: dict[str, Path]) -> None:
    facts = Facts(registries["demo"])
    with sqlite3_reader(facts.db) as reader:
        found = readings(reader, facts)["anchors"]
    head = facts.head
    assert found[:2] == [None, None]
    assert found[2] == (
        f"anchor 2:{OTHER_HASH} from another hash: the chain holds {facts.event(2)['hash']} at "
        "seq 2 (rewritten since the anchor was taken, unless the anchor is another registry's: "
        "check --db)"
    )
    for problem, anchor in zip(found[3:], _anchors(facts)[3:], strict=True):
        assert problem == (
            f"anchor {anchor.seq}:{head['hash']} from {anchor.source}: the chain has no event "
            f"{anchor.seq} any more (its tail was cut, unless the anchor is another registry's: "
            "check --db)"
        )


def test_one_event_s_rows_are_checked_alone(registries: dict[str, Path], tmp_path: Path) -> None:
    """`export attestation`'s share of the rows check: only the edited row's event."""
    facts = Facts(registries["demo"])
    db = tmp_path / "registry.db"
    _tampered_copy(facts.db, db, TAMPERINGS[1], facts)  # the edited waiver
    seq = facts.row("waiver", 1)["audit_seq"]
    with sqlite3_reader(db) as reader:
        found = readings(reader, facts)["event_rows"]
    assert [s for s, problem in enumerate(found) if problem] == [seq]
    assert found[seq] == f"rows of {facts.what(seq)} changed since"


# --------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def pg_copies(
    registries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Each registry's rows in a PostgreSQL database of its own (dropped afterwards)."""
    import psycopg

    require_postgres()
    admin = PG_ADMIN_URL.replace("+psycopg", "")
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    names = {r: f"evalops_vreads_{uuid.uuid4().hex[:10]}" for r in registries}
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'CREATE DATABASE "{name}"')
        urls = {r: f"{base}/{name}" for r, name in names.items()}
        for registry, url in urls.items():
            root = tmp_path_factory.mktemp(f"pg-{registry}")
            code, output = run_quiet("init", cwd=root, db=url, actor=ACTOR)
            assert code == 0, output
            copy_rows(f"sqlite:///{registries[registry]}", url)
        yield urls
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
@pytest.mark.parametrize(
    "tampering", [t for t in TAMPERINGS if not t.sqlite_only], ids=lambda t: t.name
)
def test_postgresql_gives_what_sqlite3_gives(
    tampering: Tampering, registries: dict[str, Path], pg_copies: dict[str, str], tmp_path: Path
) -> None:
    """The same tampering on PostgreSQL (in a transaction rolled back afterwards) and on a
    SQLite copy: every reading equal, hashes, ids and messages included."""
    from sqlalchemy import create_engine, text

    from evalops.store.reader import ConnectionReader

    source = registries[tampering.registry]
    facts = Facts(source)
    db = tmp_path / "registry.db"
    _tampered_copy(source, db, tampering, facts)
    with sqlite3_reader(db) as reader:
        plain = readings(reader, facts)
    engine = create_engine(pg_copies[tampering.registry])
    try:
        with engine.connect() as conn:
            transaction = conn.begin()
            try:
                conn.execute(text("SET LOCAL session_replication_role = replica"))
                tampering.apply(Writer(conn, "postgresql"), facts)
                on_postgres = readings(ConnectionReader(conn), facts)
            finally:
                transaction.rollback()
    finally:
        engine.dispose()
    assert on_postgres == plain


# ------------------------------------------------------------------ what the checks load


OFF_THE_VERIFY_PATH = ("sqlalchemy", "sqlmodel", "alembic", "pydantic", "evalops.store.tables")


def test_the_checks_on_sqlite3_load_no_sqlalchemy_or_table_models(
    registries: dict[str, Path],
) -> None:
    """In a fresh interpreter: every check over the upgraded registry (a migration, legacy
    rows) through `sqlite3`, then what it imported."""
    url = f"sqlite:///{registries['upgraded']}"
    script = (
        "import json, sys\n"
        "from evalops.services.verify import reads as v\n"
        "from evalops.services.verify.anchors import Anchor\n"
        "from evalops.store.reader import open_sqlite\n"
        f"reader = open_sqlite({url!r}, lock_timeout=5)\n"
        "events, head = v.check_chain(reader)\n"
        "done = [events, v.check_definitions(reader), v.check_trials(reader),\n"
        "        v.check_rows(reader), v.carried_forward(reader),\n"
        "        v.anchor_problem(reader, Anchor(head['seq'], head['hash'], 'x')),\n"
        "        v.event_rows_problem(reader, head['seq'])]\n"
        f"print(json.dumps([done, {{m: m in sys.modules for m in {OFF_THE_VERIFY_PATH!r}}}]))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    done, loaded = json.loads(ran.stdout.strip().splitlines()[-1])
    assert done[0] > 36 and done[1] > 0 and done[2] > 0 and done[3] > 0, done
    assert done[4] and done[5] is None and done[6] is None, done
    assert not any(loaded.values()), [m for m, yes in loaded.items() if yes]


class Spy(Reader):
    """A reader that notes which of its ways each query went through."""

    def __init__(self, inner: Reader) -> None:
        self.inner, self.calls = inner, []

    def rows(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        self.calls.append(("rows", sql))
        return self.inner.rows(sql, params)

    def each(self, sql: str, params: Any = None) -> Iterator[dict[str, Any]]:
        self.calls.append(("each", sql))
        return self.inner.each(sql, params)

    def tuples(self, sql: str, params: Any = None) -> Iterator[tuple[Any, ...]]:
        self.calls.append(("tuples", sql))
        return self.inner.tuples(sql, params)


def test_every_table_wide_read_is_streamed(registries: dict[str, Path]) -> None:
    """Memory stays flat at a million trials only if no check holds a table's rows: each
    reads through `tuples` (a server-side cursor on PostgreSQL), one row lookup aside."""
    from evalops.services.verify import reads as v

    with sqlite3_reader(registries["upgraded"]) as inner:
        spy = Spy(inner)
        v.check_chain(spy)
        v.check_definitions(spy)
        v.check_trials(spy)
        v.check_rows(spy)
        v.carried_forward(spy)
        wide = list(spy.calls)
        v.anchor_problem(spy, Anchor(1, OTHER_HASH, "x"))
        v.event_rows_problem(spy, 3)
    assert len(wide) > 25
    assert {way for way, _ in wide} == {"tuples"}, [c for c in wide if c[0] != "tuples"]
    lookups = spy.calls[len(wide) :]
    assert [way for way, _ in lookups if way != "tuples"] == ["rows", "rows"]
    assert all("WHERE seq = :seq" in sql for way, sql in lookups if way == "rows")


@pytest.mark.postgres
@pytest.mark.parametrize(
    "drop", ["DROP TABLE waiver_revocation", "ALTER TABLE waiver DROP COLUMN reason"]
)
def test_a_table_or_column_gone_on_postgresql_is_a_verification_failure(
    drop: str, pg_copies: dict[str, str]
) -> None:
    """Exit 6 naming what is gone, as on SQLite, not an internal error."""
    from sqlalchemy import create_engine, text

    from evalops.errors import VerificationError
    from evalops.services.verify.run import verify_reader
    from evalops.store.reader import ConnectionReader

    engine = create_engine(next(iter(pg_copies.values())))
    try:
        with engine.connect() as conn:
            transaction = conn.begin()
            try:
                conn.execute(text(drop))
                with pytest.raises(VerificationError) as raised:
                    verify_reader(ConnectionReader(conn))
            finally:
                transaction.rollback()
    finally:
        engine.dispose()
    message = raised.value.message
    assert message.startswith("the database no longer holds what evalops wrote: "), message
    assert ("waiver_revocation" if "TABLE waiver_revocation" in drop else "reason") in message
