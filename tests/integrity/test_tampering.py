"""The tampering suite (docs/verify.md, "What verify proves").

One populated registry per engine (the demo's, plus a second waiver and its revocation, a
review, a calibration invalidation, a closed incident, a retirement, an authority and a
revocation signed under it, and a last gate decision), built once; every mutation runs on
a fresh copy (a file copy on SQLite, a template database on PostgreSQL), made as an
attacker with write access to the database would (foreign keys off), and `evalops verify`
must exit 6 naming the first bad item:
- named mutations generated from the table metadata: an edit of every column of every
  table, a deletion and an insertion per table (the test asserts that coverage);
- on SQLite, a re-spelling of every column whose stored value the driver decodes (a
  boolean stored as 2, a timestamp with `T` for the space): the value evalops reads back is
  the same, the stored one is not, so an edit derived from decoded values alone would never
  try it (how an edit of `grader_config.blocking` once got through);
- 200 seeded random mutations (edits, deletions, insertions, swaps of two rows' values);
- the untouched copy verifies, and a consistently re-hashed tail passes plain `verify` but
  fails `verify --anchors` with the report written before it.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Boolean, Connection, Engine, Table, create_engine, func, select, text
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlmodel import SQLModel

import evalops.store.tables  # noqa: F401  (registers every table in the metadata)
from evalops.store.types import UTCDateTime
from tests.conftest import PG_ADMIN_URL, PINNED_NOW, require_postgres
from tests.helpers import copy_rows

POLICY_TASK = "support-refund-policy-explanation"
SUITE = "regression/core"
REPORT = "report.html"
RANDOM_MUTATIONS = 200
SEED = 20261201

# What the populated registry adds to the finished demo, with each step's exit code.
EXTRA_STEPS: list[tuple[tuple[str, ...], int]] = [
    (("trials", "ingest", "review-me.jsonl"), 0),
    (
        (
            "review",
            "resolve",
            "review-me",
            "--grader",
            "reply-quality",
            "--state",
            "task_pass",
            "--reason",
            "a person read the reply",
        ),
        0,
    ),
    # A void (its row and the voided trial's), so tampering with either is tried too.
    (("trials", "void", "review-me", "--reason", "ingested twice under another id"), 0),
    (
        (
            "waiver",
            "grant",
            "--task",
            POLICY_TASK,
            "--suite",
            SUITE,
            "--states",
            "task_fail",
            "--build",
            "build-125",
            "--owner",
            "owner@example.com",
            "--reason",
            "second",
            "--expires",
            "7d",
        ),
        0,
    ),
    (("waiver", "revoke", "WVR-2", "--reason", "changed our mind"), 0),
    (("calibration", "invalidate", "reply-quality", "--reason", "judge drift"), 0),
    (
        (
            "incident",
            "open",
            "--title",
            "a duplicate report",
            "--severity",
            "low",
            "--observed-at",
            "2026-11-03T00:00:00Z",
            "--trace-uri",
            "trace://prod/dup",
        ),
        0,
    ),
    (("incident", "close", "INC-2", "--reason", "duplicate of INC-1"), 0),
    (
        (
            "retire",
            POLICY_TASK,
            "--from",
            SUITE,
            "--reason",
            "obsolete",
            "--approved-by",
            "risk@example.com",
        ),
        0,
    ),
    (("gate", "check", "--build", "build-125", "--suite", SUITE), 3),  # hold: judge stale
    (("report", "audit", "--gate", "GATE-4", "--format", "html", "-o", REPORT), 0),
]


def run(*args: str, cwd: Path, db: str | None = None) -> tuple[int, str]:
    """The CLI in-process with the pinned clock and no other EVALOPS_* setting."""
    from evalops.cli.main import main

    out = io.StringIO()
    before = Path.cwd()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("EVALOPS_")}
    os.environ["EVALOPS_NOW"] = PINNED_NOW
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main([*(["--db", db] if db else []), "--actor", "auditor@example.com", *args])
    finally:
        os.chdir(before)
        os.environ.pop("EVALOPS_NOW", None)
        os.environ.update(saved)
    return code, out.getvalue()


def _review_record(directory: Path) -> None:
    """A fix-build trial of the policy task whose judge abstained: it waits for review."""
    import json

    for line in (directory / "registry/trials/fix-b125.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["task_id"] == POLICY_TASK and record["trial_index"] == 0:
            break
    record.update(trial_id="review-me", trial_index=10)
    record.pop("primary_classification", None)
    for result in record["grader_results"]:
        if result["grader_id"] == "reply-quality":
            result["state"] = "abstain"
            result.pop("score", None)
    (directory / "review-me.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")


def _signed_act(directory: Path) -> None:
    """An authority in force and an act signed under it (the signed_act table's rows)."""
    from tests.helpers import commit_all
    from tests.sshkeys import make_key

    key = make_key(directory, "risk-owner")
    run("new", "authority", "--principal", "risk", "--key", f"{key}.pub", cwd=directory)
    commit_all(directory, "authority")
    assert run("sync", cwd=directory)[0] == 0
    # (the policy task has been retired by now: its first waiver is revoked, signed)
    code, output = run(
        "waiver", "revoke", "WVR-1", "--reason", "signed", "--sign-with", str(key), cwd=directory
    )
    assert code == 0, output


TABLES = sorted(SQLModel.metadata.tables.values(), key=lambda t: t.name)


def _key(table: Table) -> str:
    return "seq" if table.name == "audit_event" else "id"


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory, demo_master: Path) -> Path:
    """The populated registry directory (SQLite database in .evalops/), never modified."""
    # A copy of the run's one demo (pinned clock), not a demo of its own: seconds of CPU.
    directory = Path(
        shutil.copytree(demo_master, tmp_path_factory.mktemp("tampering") / "demo", symlinks=True)
    )
    _review_record(directory)
    for number, (args, expected) in enumerate(EXTRA_STEPS):
        if number == len(EXTRA_STEPS) - 2:  # before the last decision, which stays the head
            _signed_act(directory)
        code, output = run(*args, cwd=directory)
        assert code == expected, (args, output)
    url = f"sqlite:///{directory / '.evalops' / 'registry.db'}"
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            empty = [
                t.name
                for t in TABLES
                if not conn.execute(select(func.count()).select_from(t)).scalar()
            ]
    finally:
        engine.dispose()
    assert not empty, f"the populated registry must hold rows in every table: {empty}"
    return directory


# ------------------------------------------------------------------------- engines


class Copies:
    """Fresh copies of the populated registry on one engine."""

    name = ""

    @contextlib.contextmanager
    def copy(self) -> Iterator[str]:
        raise NotImplementedError
        yield ""

    @contextlib.contextmanager
    def mutated(self, mutation: Mutation) -> Iterator[str]:
        """A database holding the populated registry with `mutation` applied."""
        with self.copy() as url:
            apply(url, mutation)
            yield url

    def close(self) -> None:
        pass


class SqliteCopies(Copies):
    name = "sqlite"

    def __init__(self, master: Path, scratch: Path) -> None:
        self.master, self.scratch = master, scratch

    @contextlib.contextmanager
    def copy(self) -> Iterator[str]:
        target = self.scratch / f"{uuid.uuid4().hex[:8]}.db"
        shutil.copy(self.master, target)
        try:
            yield f"sqlite:///{target}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)


def _admin() -> Any:
    import psycopg

    return psycopg.connect(PG_ADMIN_URL.replace("+psycopg", ""), autocommit=True)


class PostgresCopies(Copies):
    """Copies from a template database; mutations run on one working copy and are undone
    after each check (a template copy per mutation would take a second each)."""

    name = "postgresql"

    def __init__(self, template: str) -> None:
        self.template = template
        self.work: str | None = None
        self.engine: Engine | None = None  # on `work`, for the mutations and their undoing

    @contextlib.contextmanager
    def copy(self) -> Iterator[str]:
        name = f"evalops_tamper_{uuid.uuid4().hex[:12]}"
        with _admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        base, _, _ = PG_ADMIN_URL.rpartition("/")
        try:
            yield f"{base}/{name}"
        finally:
            with _admin() as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.contextmanager
    def mutated(self, mutation: Mutation) -> Iterator[str]:
        if self.work is None:
            self._work = self.copy()
            self.work = self._work.__enter__()
            # One engine for all of them: a new one per change cost more than the change.
            self.engine = _open(self.work)
        assert self.engine is not None
        undo = apply(self.work, mutation, self.engine)
        try:
            yield self.work
        finally:
            with self.engine.begin() as conn:
                _constraints_off(conn)
                undo(conn)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None
        if self.work is not None:
            self._work.__exit__(None, None, None)
            self.work = None


@pytest.fixture(scope="module")
def pg_template(populated: Path) -> Iterator[str]:
    """A PostgreSQL template database holding the populated registry's rows."""
    require_postgres()
    name = f"evalops_tamper_tpl_{uuid.uuid4().hex[:8]}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    url = f"{base}/{name}"
    try:
        code, output = run("db", "upgrade", cwd=populated, db=url)
        assert code == 0, output
        copy_rows(f"sqlite:///{populated / '.evalops' / 'registry.db'}", url)
        yield name
    finally:
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def copies(
    request: pytest.FixtureRequest, populated: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Copies]:
    if request.param == "sqlite":
        yield SqliteCopies(
            populated / ".evalops" / "registry.db", tmp_path_factory.mktemp("copies")
        )
        return
    copies = PostgresCopies(request.getfixturevalue("pg_template"))
    try:
        yield copies
    finally:
        copies.close()


def _open(url: str) -> Engine:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


# ----------------------------------------------------------------------- mutations


@dataclass
class Mutation:
    """One direct change to the database, and what `verify` must name."""

    name: str
    table: str
    action: str  # edit | respell | delete | insert | swap
    key: int  # the row's primary key (seq for audit_event)
    column: str | None = None
    other: int | None = None  # the second row of a swap
    names: list[str] = field(default_factory=list)


def _changed(value: Any, column: Any, table: Table, unique: set[str]) -> Any:
    """A value that differs from `value` (a one-character or one-unit edit)."""
    big = column.primary_key or column.name in unique
    if value is None:
        if isinstance(column.type, UTCDateTime):
            return datetime(2026, 1, 1, tzinfo=UTC)
        python = column.type.python_type
        return {int: 7, float: 0.5, bool: True, str: "x", object: "x"}[python]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + (100_000 if big else 1)
    if isinstance(value, float):
        return value + 0.25
    if isinstance(value, datetime):
        return value + timedelta(seconds=1)
    if isinstance(value, str):
        if not value:
            return "x"
        return value[:-1] + ("~" if value[-1] != "~" else "!")
    raise AssertionError(f"no edit for {table.name}.{column.name} = {value!r}")


def _unique_columns(table: Table) -> set[str]:
    names = {c.name for c in table.columns if c.unique}
    for constraint in table.constraints:
        if constraint.__class__.__name__ == "UniqueConstraint":
            names |= {c.name for c in constraint.columns}  # type: ignore[attr-defined]
    for index in table.indexes:
        if index.unique:
            names |= {c.name for c in index.columns}
    return names


Undo = Callable[[Connection], None]


def apply(url: str, mutation: Mutation, engine: Engine | None = None) -> Undo:
    """Make the change as an attacker would (constraints off); returns how to undo it.
    `engine`: one already open on `url`, kept open (else one is opened and disposed of)."""
    table = SQLModel.metadata.tables[mutation.table]
    key = table.c[_key(table)]
    own = engine is None
    engine = _open(url) if engine is None else engine
    try:
        with engine.begin() as conn:
            _constraints_off(conn)
            row = dict(conn.execute(select(table).where(key == mutation.key)).one()._mapping)
            unique = _unique_columns(table)
            if mutation.action == "delete":
                conn.execute(table.delete().where(key == mutation.key))

                def reinsert(c: Connection) -> None:
                    c.execute(table.insert().values(row))

                return reinsert
            if mutation.action == "edit":
                column = mutation.column
                assert column is not None
                new = _changed(row[column], table.c[column], table, unique)
                conn.execute(table.update().where(key == mutation.key).values({column: new}))
                now_key = new if column == key.name else mutation.key

                def restore(c: Connection) -> None:
                    c.execute(table.update().where(key == now_key).values({column: row[column]}))

                return restore
            if mutation.action == "respell":
                column = mutation.column
                assert column is not None
                raw = text(f'SELECT "{column}" FROM "{table.name}" WHERE "{key.name}" = :k')
                stored = conn.execute(raw, {"k": mutation.key}).scalar_one()
                spelled = respelled(table.c[column], stored)
                update = text(f'UPDATE "{table.name}" SET "{column}" = :v WHERE "{key.name}" = :k')
                conn.execute(update, {"v": spelled, "k": mutation.key})
                decoded = conn.execute(select(table.c[column]).where(key == mutation.key))
                # The point of the mutation: evalops reads back the very same value.
                assert decoded.scalar_one() == row[column], (mutation.name, spelled)
                return lambda c: c.execute(update, {"v": stored, "k": mutation.key})
            if mutation.action == "insert":
                copy = dict(row)
                top = conn.execute(select(func.max(key))).scalar_one()
                copy[key.name] = top + (1 if key.name == "seq" else 100_000)
                for name in unique - {key.name}:
                    copy[name] = _changed(copy[name], table.c[name], table, unique)
                conn.execute(table.insert().values(copy))

                def remove(c: Connection) -> None:
                    c.execute(table.delete().where(key == copy[key.name]))

                return remove
            if mutation.action == "swap":
                column, other_key = mutation.column, mutation.other
                assert column is not None and other_key is not None
                other = conn.execute(select(table.c[column]).where(key == other_key)).scalar_one()

                def swap(c: Connection, a: Any, b: Any) -> None:
                    c.execute(table.update().where(key == mutation.key).values({column: a}))
                    c.execute(table.update().where(key == other_key).values({column: b}))

                swap(conn, other, row[column])
                return lambda c: swap(c, row[column], other)
            raise AssertionError(mutation.action)
    finally:
        if own:
            engine.dispose()


def _constraints_off(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET session_replication_role = replica"))


def _names(table: Table, row: dict[str, Any], extra: list[int] | None = None) -> list[str]:
    """What a correct verify message may name for a bad row: its event, or the row itself."""
    if table.name == "audit_event":
        return [f"audit seq {row['seq']}:"]
    seqs = [row["audit_seq"], *(extra or [])]
    names = [f"audit seq {s} (" for s in seqs] + [f"(row {row['id']})"]
    if table.name == "trial":
        names.append(f"trial {row['trial_id']}:")
    return names


def _rows(url: str) -> dict[str, list[dict[str, Any]]]:
    engine = _open(url)
    try:
        with engine.connect() as conn:
            return {
                t.name: [dict(r._mapping) for r in conn.execute(select(t).order_by(t.c[_key(t)]))]
                for t in TABLES
            }
    finally:
        engine.dispose()


def named_mutations(rows: dict[str, list[dict[str, Any]]]) -> list[Mutation]:
    """Per table: an edit of every column, a deletion and an insertion, on a middle row."""
    out = []
    for table in TABLES:
        row = rows[table.name][len(rows[table.name]) // 2]
        key = row[_key(table)]
        for column in table.columns:
            extra = [row["audit_seq"] + 1] if column.name == "audit_seq" else None
            out.append(
                Mutation(
                    f"edit-{table.name}.{column.name}",
                    table.name,
                    "edit",
                    key,
                    column.name,
                    names=_names(table, row, extra),
                )
            )
        out.append(
            Mutation(f"delete-{table.name}", table.name, "delete", key, names=_names(table, row))
        )
        top = max(r[_key(table)] for r in rows[table.name])
        insert_names = [*_names(table, row), f"(row {top + 100_000})"]
        if table.name == "audit_event":
            insert_names = [f"audit seq {rows['audit_event'][-1]['seq'] + 1}:"]
        out.append(Mutation(f"insert-{table.name}", table.name, "insert", key, names=insert_names))
    return out


def decodes_on_sqlite(column: Any) -> bool:
    """Whether SQLite hands this column's stored values to a decoder on the way out: then
    several stored spellings can read back as one value."""
    dialect = sqlite_dialect()
    return column.type.dialect_impl(dialect).result_processor(dialect, None) is not None


def respelled(column: Any, stored: Any) -> Any:
    """Another stored spelling of the same decoded value (fails for a type it does not know,
    so a new decoded column type cannot slip past the suite)."""
    if isinstance(column.type, Boolean):
        return 2 if stored else ""  # the driver reads 2 as True, '' as False
    if isinstance(column.type, UTCDateTime):
        assert isinstance(stored, str) and stored[10] == " ", stored
        return stored.replace(" ", "T", 1)  # same moment, ISO 8601 spelling
    raise AssertionError(f"no re-spelling known for {column.table.name}.{column.name}")


def respell_mutations(rows: dict[str, list[dict[str, Any]]]) -> list[Mutation]:
    """Per column SQLite decodes: the first row holding a value, stored spelled otherwise."""
    out = []
    for table in TABLES:
        for column in table.columns:
            if not decodes_on_sqlite(column):
                continue
            row = next(r for r in rows[table.name] if r[column.name] is not None)
            out.append(
                Mutation(
                    f"respell-{table.name}.{column.name}",
                    table.name,
                    "respell",
                    row[_key(table)],
                    column.name,
                    names=_names(table, row),
                )
            )
    return out


def random_mutations(rows: dict[str, list[dict[str, Any]]], count: int) -> list[Mutation]:
    """`count` seeded random mutations, each of which really changes the database."""
    rng = random.Random(SEED)
    out: list[Mutation] = []
    seen: set[tuple[Any, ...]] = set()
    while len(out) < count:
        table = rng.choice(TABLES)
        table_rows = rows[table.name]
        row = rng.choice(table_rows)
        key = row[_key(table)]
        action = rng.choice(["edit", "edit", "edit", "delete", "insert", "swap"])
        column = rng.choice(list(table.columns)).name if action in ("edit", "swap") else None
        other: int | None = None
        names = _names(table, row)
        if action == "swap":
            assert column is not None
            partner = rng.choice(table_rows)
            if partner[column] == row[column] or column in {*_unique_columns(table), _key(table)}:
                continue
            other = partner[_key(table)]
            names += _names(table, partner)
        if action == "edit" and column == "audit_seq":
            names += [f"audit seq {row['audit_seq'] + 1} ("]
        if action == "insert":
            names += [f"(row {max(r[_key(table)] for r in table_rows) + 100_000})"]
        if action == "insert" and table.name == "audit_event":
            names = [f"audit seq {rows['audit_event'][-1]['seq'] + 1}:"]
        if action == "delete" and table.name == "audit_event" and key == table_rows[-1]["seq"]:
            names += [f"audit seq {key} ("]  # rows claim the deleted head
        signature = (table.name, key, action, column, other)
        if signature in seen:
            continue
        seen.add(signature)
        out.append(
            Mutation(
                f"random-{len(out)}-{action}-{table.name}.{column or ''}-{key}",
                table.name,
                action,
                key,
                column,
                other,
                names,
            )
        )
    return out


def check(copies: Copies, cwd: Path, mutations: list[Mutation]) -> list[str]:
    """Apply each mutation to a fresh copy; list every one that verify missed or misnamed."""
    problems = []
    for mutation in mutations:
        with copies.mutated(mutation) as url:
            code, output = run("verify", cwd=cwd, db=url)
        if code != 6:
            problems.append(f"{mutation.name}: exit {code}: {output.strip()}")
        elif "Traceback" in output or not any(n in output for n in mutation.names):
            problems.append(f"{mutation.name}: does not name {mutation.names}: {output.strip()}")
    if isinstance(copies, PostgresCopies) and copies.work is not None:
        code, output = run("verify", cwd=cwd, db=copies.work)
        assert code == 0, f"the working copy was not restored: {output}"
    return problems


# --------------------------------------------------------------------------- tests


def test_untouched_registry_verifies(copies: Copies, populated: Path) -> None:
    with copies.copy() as url:
        code, output = run("verify", "--anchors", REPORT, cwd=populated, db=url)
    assert code == 0, output
    assert "1 anchor held by the chain" in output


def test_named_mutations_cover_every_table_and_column(populated: Path) -> None:
    rows = _rows(f"sqlite:///{populated / '.evalops' / 'registry.db'}")
    mutations = named_mutations(rows)
    names = {m.name for m in mutations}
    assert len(names) == len(mutations) >= 60
    for table in TABLES:
        assert {f"delete-{table.name}", f"insert-{table.name}"} <= names
        assert {f"edit-{table.name}.{c.name}" for c in table.columns} <= names
    # The columns decisions read are among them (the list of what once slipped through).
    for column in (
        "trial.trajectory",
        "trial.execution_digest",
        "trial.classification",
        "waiver.expires_at",
        "suite_membership.task_id",
        "waiver_revocation.waiver_row_id",
    ):
        assert f"edit-{column}" in names
    assert {"delete-waiver_revocation", "delete-ingest_batch", "delete-gate_decision"} <= names
    # Every column whose stored value passes a decoder is also stored spelled otherwise.
    respelled_names = {m.name for m in respell_mutations(rows)}
    for table in TABLES:
        for column in table.columns:
            if decodes_on_sqlite(column):
                assert f"respell-{table.name}.{column.name}" in respelled_names
    assert {"respell-grader_config.blocking", "respell-audit_event.at"} <= respelled_names


def test_every_respelled_value_is_caught(populated: Path, tmp_path: Path) -> None:
    """A stored value evalops decodes unchanged but spelled otherwise (`blocking` = 2, a
    timestamp with `T`) is an edit all the same: SQL comparing the stored text sees it."""
    rows = _rows_of_sqlite(populated)
    copies = SqliteCopies(populated / ".evalops" / "registry.db", tmp_path)
    problems = check(copies, populated, respell_mutations(rows))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("table", [t.name for t in TABLES])
def test_every_named_mutation_is_caught(copies: Copies, populated: Path, table: str) -> None:
    mutations = [m for m in named_mutations(_rows_of(copies, populated)) if m.table == table]
    assert mutations
    problems = check(copies, populated, mutations)
    assert not problems, "\n".join(problems)


_ROWS: dict[str, dict[str, list[dict[str, Any]]]] = {}


def _rows_of(copies: Copies, populated: Path) -> dict[str, list[dict[str, Any]]]:
    """The populated registry's rows (read once; the SQLite master is the source of both)."""
    return _rows_of_sqlite(populated)


def _rows_of_sqlite(populated: Path) -> dict[str, list[dict[str, Any]]]:
    if "rows" not in _ROWS:
        _ROWS["rows"] = _rows(f"sqlite:///{populated / '.evalops' / 'registry.db'}")
    return _ROWS["rows"]


@pytest.mark.slow
def test_random_mutations_are_caught(copies: Copies, populated: Path) -> None:
    mutations = random_mutations(_rows_of(copies, populated), RANDOM_MUTATIONS)
    assert len({m.name for m in mutations}) == RANDOM_MUTATIONS
    problems = check(copies, populated, mutations)
    assert not problems, f"{len(problems)} missed:\n" + "\n".join(problems[:20])


def test_a_rewritten_tail_passes_plain_verify_and_fails_the_anchor(
    copies: Copies, populated: Path
) -> None:
    """The last decision and its event replaced by a different, consistently hashed one."""
    rows = _rows_of(copies, populated)
    head = rows["audit_event"][-1]
    assert head["kind"].startswith("gate.")
    with copies.copy() as url:
        engine = _open(url)
        try:
            with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    conn.execute(text("SET session_replication_role = replica"))
                table = SQLModel.metadata.tables["gate_decision"]
                deleted = conn.execute(table.delete().where(table.c.audit_seq == head["seq"]))
                assert deleted.rowcount == 1
                events = SQLModel.metadata.tables["audit_event"]
                conn.execute(events.delete().where(events.c.seq == head["seq"]))
        finally:
            engine.dispose()
        # evalops itself re-hashes the forged tail: a blocking decision in place of the pass.
        code, output = run(
            "gate", "check", "--build", "build-124", "--suite", SUITE, cwd=populated, db=url
        )
        assert code == 4, output
        forged = _rows(url)["audit_event"][-1]
        assert forged["seq"] == head["seq"] and forged["hash"] != head["hash"]
        plain, output = run("verify", cwd=populated, db=url)
        assert plain == 0, output
        anchored, output = run("verify", "--anchors", REPORT, cwd=populated, db=url)
    assert anchored == 6, output
    assert f"{head['seq']}" in output and "Traceback" not in output
