"""`verify` checks signed acts in worker processes on a large registry (docs/verify.md):
the outcome is the one the in-process check gives, on SQLite and PostgreSQL.

Every scenario is verified three ways and the outcomes must be equal: inline (the check
in `verify`'s own process, as before the pool), on a pool of two workers that each take
one act at a time while the parent only waits, and on one worker with the parent taking
the chunks no worker has started. The scenarios are the attacker tests' setups of
tests/services/test_authority.py (a signature moved by SQL, a key removed then used, an act
stored by a compromised evalops), each stored act edited in turn straight in the database,
and a few orderings: the lowest audit seq wins among acts even when a later chunk finishes
first, and an earlier stage's problem wins over an act's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from evalops.domain.authority import Judgement, Signer
from evalops.errors import EvalopsError, VerificationError
from evalops.services.authority import acts as authority
from evalops.services.verify import act_checks
from evalops.services.verify import run as verify
from evalops.services.verify.act_checks import ActPool, signed_acts_check
from evalops.store.engine import make_engine, snapshot_session
from evalops.store.reader import ConnectionReader
from tests.conftest import Cli, pg_holding
from tests.helpers import children_of
from tests.services.test_authority import DB, World, _world
from tests.sshkeys import make_key, public_key

INLINE = ActPool(workers=0)
#: Each act its own task, the parent taking none: every act is checked in a worker.
WORKERS_ONLY = ActPool(workers=2, from_acts=1, chunk=1, parent_checks=False)
#: Two acts a task, the parent taking the tasks no worker has started.
WITH_PARENT = ActPool(workers=1, from_acts=1, chunk=2)
_TABLE = re.compile(r"(?:UPDATE|DELETE FROM) (\w+)")
PATHS = {"inline": INLINE, "workers only": WORKERS_ONLY, "with the parent": WITH_PARENT}


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("alice", "bob", "carol", "dave", "mallory")}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, demo: Path, keyring: dict[str, Path], cli: Cli) -> World:
    """The demo registry under an authority, on each engine (as test_authority's)."""
    if request.param == "sqlite":
        return _world(demo, keyring, cli, [])
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _world(demo, keyring, cli, ["--db", url])


def _url(world: World) -> str:
    return world.db[1] if world.db else f"sqlite:///{world.root / DB}"


def _grants(world: World, count: int, key: str = "alice") -> None:
    for n in range(count):
        done = world.grant("--sign-with", str(world.keys[key]), reason=f"signed {n}")
        assert done.code == 0, done.stdout + done.stderr


def _acts(world: World) -> list[Any]:
    """The stored acts in audit seq order (id, audit_seq, act_id, the columns)."""
    return world.sql("SELECT * FROM signed_act ORDER BY audit_seq, id")


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], list[tuple[int, int]]]:
    """Record (pid, audit seq) of every act checked, in whichever process checks it (workers
    are forked after this patch, so they run it too); returns a reader of the record."""
    record = tmp_path / "checked.txt"
    real = act_checks._act_problem

    def recording(row: Any, governing: Any) -> str | None:
        problem = real(row, governing)
        with open(record, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {row[0]}\n")
        return problem

    monkeypatch.setattr(act_checks, "_act_problem", recording)

    def read() -> list[tuple[int, int]]:
        if not record.exists():
            return []
        lines = record.read_text(encoding="utf-8").split("\n")
        record.unlink()
        return [(int(p), int(s)) for p, s in (line.split() for line in lines if line)]

    return read


def _children() -> set[int]:
    """This process's child processes, zombies included."""
    return children_of(os.getpid())


def _outcome(url: str, pool: ActPool, **options: Any) -> tuple[str, Any]:
    """What `verify` says: ("ok", its report) or ("exit 6", the message)."""
    engine = make_engine(url)
    try:
        return ("ok", verify.verify_database(engine, act_pool=pool, **options).as_dict())
    except VerificationError as exc:
        return ("exit 6", exc.message)
    finally:
        engine.dispose()


def _every_path(
    url: str, checked: Callable[[], list[tuple[int, int]]], **options: Any
) -> tuple[str, Any]:
    """The outcome of `verify` on each path: equal on all, and each path checked the acts
    where it says (inline: here; the pool: in other processes). No worker is left."""
    before = _children()
    outcomes: dict[str, tuple[str, Any]] = {}
    for name, pool in PATHS.items():
        checked()  # forget the previous path's
        outcomes[name] = _outcome(url, pool, **options)
        pids = {pid for pid, _ in checked()}
        if name == "inline":
            assert pids <= {os.getpid()}, name
        elif name == "workers only":
            assert os.getpid() not in pids, f"{name}: the parent checked acts"
            if outcomes[name][0] == "ok":
                assert pids, f"{name}: no worker checked an act"
        assert _children() <= before, f"{name}: a worker outlived verify"
    assert outcomes["workers only"] == outcomes["inline"], outcomes
    assert outcomes["with the parent"] == outcomes["inline"], outcomes
    return outcomes["inline"]


def _stage(url: str, pool: ActPool) -> tuple[str, Any]:
    """The signed-acts stage alone (no earlier stage can find the edit first)."""
    engine = make_engine(url)
    try:
        with (
            snapshot_session(engine) as session,
            signed_acts_check(ConnectionReader(session.connection()), pool) as check,
        ):
            assert check.pooled == (pool is not INLINE)
            return ("ok", check.finish())
    except VerificationError as exc:
        return ("exit 6", exc.message)
    finally:
        engine.dispose()


@contextmanager
def _edited(url: str, statements: list[tuple[str, dict[str, Any]]]) -> Iterator[None]:
    """The database with `statements` run as an attacker would (foreign keys off), undone
    afterwards (the same rows, re-written from a copy taken before)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            tables = {_TABLE.match(sql).group(1) for sql, _ in statements}  # type: ignore[union-attr]
            saved = {
                table: [dict(r._mapping) for r in conn.execute(text(f"SELECT * FROM {table}"))]
                for table in tables
            }
            if engine.dialect.name == "postgresql":
                conn.execute(text("SET session_replication_role = replica"))
            for sql, values in statements:
                conn.execute(text(sql), values)
        yield
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SET session_replication_role = replica"))
            for table, rows in saved.items():
                conn.execute(text(f"DELETE FROM {table}"))
                names = list(rows[0])
                conn.execute(
                    text(
                        f"INSERT INTO {table} ({', '.join(names)}) "
                        f"VALUES ({', '.join(':' + n for n in names)})"
                    ),
                    rows,
                )
    finally:
        engine.dispose()


# ------------------------------------------------------------------ the whole of verify


def test_a_good_registry_verifies_alike_on_every_path(
    world: World, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    _grants(world, 5)
    kind, report = _every_path(_url(world), checked)
    assert kind == "ok", report
    assert report["events"] == world.sql("SELECT count(*) FROM audit_event")[0][0]


def test_a_signature_moved_by_sql_is_found_by_the_rows_stage_on_every_path(
    world: World, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    """The attacker test's edit: the rows stage, earlier, names it before any act check."""
    _grants(world, 2)
    first, second = _acts(world)[-2:]
    statement = "UPDATE signed_act SET signatures = :s, act = :a WHERE id = :i"
    with _edited(
        _url(world), [(statement, {"s": first.signatures, "a": first.act, "i": second.id})]
    ):
        kind, message = _every_path(_url(world), checked)
    assert kind == "exit 6"
    assert message.startswith(f"audit seq {second.audit_seq} (waiver.grant "), message
    assert f"signed_act row {second.id} changed since the event recorded them" in message


def test_a_key_removed_then_used_is_exit_6_on_every_path(
    world: World, monkeypatch: pytest.MonkeyPatch, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    """A compromised evalops stores an act of a removed key under the old authority, its
    chain consistent: only the act check finds it, naming both authorities."""
    _grants(world, 3)
    old = authority.authority_in_force
    ((before_removal,),) = world.sql("SELECT max(audit_seq) FROM sync_run")
    world.authority(
        principals=[
            {"id": name, "keys": [public_key(world.keys[name])]}
            for name in ("alice", "bob", "carol")
        ],
        roles={"risk_owner": [{"principal": "alice"}]},
    )
    monkeypatch.setattr(
        authority, "authority_in_force", lambda session, cutoff=None: old(session, before_removal)
    )
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    monkeypatch.setattr(authority, "authority_in_force", old)
    digests = [d for (d,) in world.sql("SELECT policy_digest FROM policy ORDER BY id")]
    bad = _acts(world)[-1]
    kind, message = _every_path(_url(world), checked)
    assert kind == "exit 6"
    assert bad.authority_digest != digests[-1] and bad.authority_digest in digests
    assert message == (
        f"audit seq {bad.audit_seq} (waiver.grant {bad.subject}): signed act {bad.act_id}: "
        f"signed under {bad.authority_digest}, but {digests[-1]} was in force at its event"
    )


def _fingerprint(key: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()[1]


def _forged(world: World, monkeypatch: pytest.MonkeyPatch, reason: str) -> Any:
    """An act signed by mallory (no key of the authority) that a compromised evalops
    judged to be alice's and stored, chain and row digests consistent; its row."""

    def judge_as_alice(**_: Any) -> Judgement:
        return Judgement(signers=[Signer("alice", _fingerprint(world.keys["mallory"]))])

    with monkeypatch.context() as patch:
        patch.setattr(authority, "judge", judge_as_alice)
        done = world.grant("--sign-with", str(world.keys["mallory"]), reason=reason)
    assert done.code == 0, done.stdout + done.stderr
    return _acts(world)[-1]


def _not_a_principal(world: World, bad: Any) -> str:
    return (
        f"audit seq {bad.audit_seq} (waiver.grant {bad.subject}): signed act {bad.act_id}: "
        f"signature 1: key {_fingerprint(world.keys['mallory'])} is not a key of any principal "
        "of the authority in force"
    )


def test_a_forged_act_is_exit_6_on_every_path(
    world: World, monkeypatch: pytest.MonkeyPatch, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    _grants(world, 2)
    bad = _forged(world, monkeypatch, "forged")
    _grants(world, 2)
    kind, message = _every_path(_url(world), checked)
    assert (kind, message) == ("exit 6", _not_a_principal(world, bad))


def test_the_lowest_seq_is_reported_when_a_later_chunk_finishes_first(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two forged acts; the worker checking the first one waits until the second one's
    check is done, so the second one's chunk finishes first: the first one is reported."""
    _grants(world, 1)
    first = _forged(world, monkeypatch, "forged 1")
    _grants(world, 2)
    second = _forged(world, monkeypatch, "forged 2")
    done_file = tmp_path / "done.txt"
    real = act_checks._act_problem

    def slow_first(row: Any, governing: Any) -> str | None:
        if row[0] == first.audit_seq:
            deadline = time.monotonic() + 60
            while str(second.audit_seq) not in done_file.read_text().split():
                assert time.monotonic() < deadline, "the later chunk never finished"
                time.sleep(0.01)
        problem = real(row, governing)
        with open(done_file, "a", encoding="utf-8") as out:
            out.write(f"{row[0]}\n")
        return problem

    done_file.write_text("")
    monkeypatch.setattr(act_checks, "_act_problem", slow_first)
    kind, message = _outcome(_url(world), WORKERS_ONLY)
    finished = [int(s) for s in done_file.read_text().split()]
    assert finished.index(second.audit_seq) < finished.index(first.audit_seq), finished
    assert (kind, message) == ("exit 6", _not_a_principal(world, first))


def test_the_parent_checks_the_last_chunks_no_worker_has_started(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker held back: once its own stages are done, the parent takes the chunks from
    the end back to the first one the worker holds; every act is checked once, and a forged
    act among the parent's is reported as inline. (The worker waits until the parent has
    checked the forged act, or a minute: then the test fails, it does not hang.)"""
    _grants(world, 4)
    bad = _forged(world, monkeypatch, "forged")
    _grants(world, 1)
    inline = _outcome(_url(world), INLINE)
    record = tmp_path / "checked.txt"
    real, parent = act_checks._act_problem, os.getpid()

    def slow_worker(row: Any, governing: Any) -> str | None:
        deadline = time.monotonic() + 60
        while os.getpid() != parent and time.monotonic() < deadline:
            if record.exists() and f"{parent} {bad.audit_seq}\n" in record.read_text():
                break
            time.sleep(0.01)
        with open(record, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()} {row[0]}\n")
        return real(row, governing)

    monkeypatch.setattr(act_checks, "_act_problem", slow_worker)
    outcome = _outcome(_url(world), ActPool(workers=1, from_acts=1, chunk=1))
    assert outcome == inline == ("exit 6", _not_a_principal(world, bad))
    checks = [
        (int(p), int(s))
        for p, s in (line.split() for line in record.read_text().split("\n") if line)
    ]
    seqs = [seq for _, seq in checks]
    assert sorted(seqs) == [a.audit_seq for a in _acts(world)]  # each act once
    by_parent = [seq for pid, seq in checks if pid == parent]
    by_worker = [seq for pid, seq in checks if pid != parent]
    assert by_parent and by_worker
    assert by_parent == sorted(by_parent, reverse=True)  # from the end back
    assert max(by_worker) < min(by_parent)  # the worker from the front
    assert bad.audit_seq in by_parent


def test_an_earlier_stage_wins_over_a_bad_act_on_every_path(
    world: World, monkeypatch: pytest.MonkeyPatch, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    _grants(world, 2)
    bad = _forged(world, monkeypatch, "forged")
    url = _url(world)
    ((trial_id, record),) = world.sql("SELECT trial_id, record FROM trial ORDER BY id LIMIT 1")
    edit = ("UPDATE trial SET record = :r WHERE trial_id = :t", {"r": record + " ", "t": trial_id})
    with _edited(url, [edit]):
        kind, message = _every_path(url, checked)
    assert (kind, message) == ("exit 6", f"trial {trial_id}: stored record was changed")
    # The waiver the forged act granted, edited: the rows stage names it first.
    edit = ("UPDATE waiver SET reason = 'edited' WHERE audit_seq = :s", {"s": bad.audit_seq})
    with _edited(url, [edit]):
        kind, message = _every_path(url, checked)
    assert kind == "exit 6"
    assert message.startswith(f"audit seq {bad.audit_seq} (waiver.grant {bad.subject}): waiver")
    assert message.endswith("changed since the event recorded them")
    # Untouched again: the act.
    assert _every_path(url, checked) == ("exit 6", _not_a_principal(world, bad))


def test_a_bad_act_wins_over_a_bad_decision_on_every_path(
    world: World, monkeypatch: pytest.MonkeyPatch, checked: Callable[[], list[tuple[int, int]]]
) -> None:
    """The decisions stage comes after the signed acts: on the pool it runs while the
    workers finish, and its problem waits for theirs."""
    _grants(world, 2)

    def bad_decisions(session: Any) -> int:
        raise VerificationError("gate decision GATE-1: replays to another decision")

    monkeypatch.setattr(verify, "verify_decisions", bad_decisions)
    decision = ("exit 6", "gate decision GATE-1: replays to another decision")
    assert _every_path(_url(world), checked) == decision  # the acts are good
    bad = _forged(world, monkeypatch, "forged")
    assert _every_path(_url(world), checked) == ("exit 6", _not_a_principal(world, bad))


def test_the_cli_verify_is_exit_6_alike_on_the_pool(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _grants(world, 2)
    _forged(world, monkeypatch, "forged")
    inline = world.run("verify")
    monkeypatch.setattr(act_checks, "DEFAULT_POOL", WORKERS_ONLY)
    pooled = world.run("verify")
    assert inline.code == pooled.code == 6
    assert pooled.stderr == inline.stderr and "is not a key of any principal" in pooled.stderr


# ------------------------------------------------------------------ the stage alone


def _every_path_of_the_stage(url: str) -> tuple[str, Any]:
    outcomes = {name: _stage(url, pool) for name, pool in PATHS.items()}
    assert len(set(outcomes.values())) == 1, outcomes
    return outcomes["inline"]


def test_each_stored_act_edited_is_found_alike_on_every_path(world: World) -> None:
    """Straight edits of the signed_act rows (and their events), checked by the stage
    alone: each is the message of the edited act, the same on every path."""
    _grants(world, 4)
    url = _url(world)
    acts = _acts(world)
    assert _every_path_of_the_stage(url) == ("ok", len(acts))
    one, two = acts[-3], acts[-2]
    where = f"audit seq {two.audit_seq} (waiver.grant {two.subject}): signed act {two.act_id}: "
    act = json.loads(two.act)
    set_row = "UPDATE signed_act SET {} = :v WHERE id = :i"
    cases: list[tuple[str, list[tuple[str, dict[str, Any]]], str]] = [
        (
            "another act's signature",
            [(set_row.format("signatures"), {"v": one.signatures, "i": two.id})],
            "signature 1: the signature does not match the signed data",
        ),
        (
            "another act and its signature",
            [
                (set_row.format("signatures"), {"v": one.signatures, "i": two.id}),
                (set_row.format("act"), {"v": one.act, "i": two.id}),
            ],
            "the stored act is not the act this row names",
        ),
        (
            "a field of the act",
            [
                (
                    set_row.format("act"),
                    {"v": two.act.replace('"signed 2"', '"forged"'), "i": two.id},
                )
            ],
            "the act's reason is not what its event recorded",
        ),
        (
            "a field of the act and of its event alike",
            [
                (set_row.format("act"), {"v": two.act.replace('"signed 2"', '"x"'), "i": two.id}),
                (
                    "UPDATE audit_event SET payload = replace(payload, '\"signed 2\"', '\"x\"') "
                    "WHERE seq = :s",
                    {"s": two.audit_seq},
                ),
            ],
            "signature 1: the signature does not match the signed data",
        ),
        (
            "the signers",
            [(set_row.format("signers"), {"v": one.signers.replace("alice", "bob"), "i": two.id})],
            "the stored signers are not those of its signatures",
        ),
        (
            "a signature that does not parse",
            [(set_row.format("signatures"), {"v": '["not a signature"]', "i": two.id})],
            "a stored signature is malformed: not armored between",
        ),
        (
            "no signature",
            [(set_row.format("signatures"), {"v": "[]", "i": two.id})],
            "waiver.grant is unsigned and an authority is in force",
        ),
        (
            "the authority digest",
            [(set_row.format("authority_digest"), {"v": "sha256:" + "0" * 64, "i": two.id})],
            f"signed under {act['authority_digest']}, but {act['authority_digest']} was in force",
        ),
        (
            "an act that is no JSON",
            [(set_row.format("act"), {"v": "{", "i": two.id})],
            "not a JSON act",
        ),
    ]
    for name, statements, expected in cases:
        with _edited(url, statements):
            kind, message = _every_path_of_the_stage(url)
        assert kind == "exit 6", name
        assert message.startswith(where) and expected in message, (name, message)
    # The event gone: the act is named without it.
    with _edited(url, [("DELETE FROM audit_event WHERE seq = :s", {"s": two.audit_seq})]):
        assert _every_path_of_the_stage(url) == (
            "exit 6",
            f"audit seq {two.audit_seq}: signed act {two.act_id}: its audit event does not exist",
        )
    # Two edited acts: the lower seq is named, on every path.
    signers = [(set_row.format("signers"), {"v": "[]", "i": a.id}) for a in (two, one)]
    with _edited(url, signers):
        kind, message = _every_path_of_the_stage(url)
    assert message.startswith(f"audit seq {one.audit_seq} "), message
    assert _every_path_of_the_stage(url) == ("ok", len(acts))  # every edit undone


def test_what_verify_parses_once_per_authority_changes_no_verdict(world: World) -> None:
    """`verify` parses each distinct scope and signers text once per authority, and keeps
    each role refusal and signer per judge: every act's verdict, edited ones among them, is
    the one a fresh parse and a fresh judge give, whatever acts were checked before it."""
    _grants(world, 4)
    url = _url(world)
    acts = _acts(world)
    out_of_scope = json.dumps({"suite": "capability/other", "task": "t"})
    set_row = "UPDATE signed_act SET {} = :v WHERE id = :i"
    edits = [
        (set_row.format("scope"), {"v": out_of_scope, "i": acts[-3].id}),
        (
            set_row.format("signers"),
            {"v": acts[-1].signers.replace("alice", "bob"), "i": acts[-2].id},
        ),
    ]
    with _edited(url, edits):
        engine = make_engine(url)
        try:
            with snapshot_session(engine) as session:
                reader = ConnectionReader(session.connection())
                rows = list(reader.tuples(act_checks._ACT_ROWS))
                shared = act_checks._authorities(reader)
                verdicts = []
                for row in rows + rows[::-1]:  # each text seen before, both ways round
                    fresh = act_checks._first_problem([row], act_checks._authorities(reader))
                    assert act_checks._first_problem([row], shared) == fresh
                    verdicts.append(fresh)
        finally:
            engine.dispose()
    assert sum(v is not None for v in verdicts) == 4, verdicts  # each edited act, twice
    assert any(v and "holds risk_owner but not for suite 'capability/other'" in v for v in verdicts)
    assert any(v and "the stored signers are not those of its signatures" in v for v in verdicts)


# ------------------------------------------------------------------ stopping the pool


@pytest.fixture
def sqlite_world(demo: Path, keyring: dict[str, Path], cli: Cli) -> World:
    world = _world(demo, keyring, cli, [])
    _grants(world, 3)
    return world


@pytest.mark.parametrize("stopped_by", [KeyboardInterrupt, RuntimeError])
def test_stopping_verify_stops_its_workers(
    sqlite_world: World, stopped_by: type[BaseException]
) -> None:
    """Ctrl-C (or any error) in the middle of `verify`: the pool is shut and every worker
    reaped before the exception leaves it."""
    before = _children()
    seen: list[set[int]] = []

    def stop_at_rows(name: str) -> None:
        if name == "rows":
            seen.append(_children() - before)
            raise stopped_by("stop")

    engine = make_engine(_url(sqlite_world))
    try:
        with pytest.raises(stopped_by):
            verify.verify_database(engine, on_stage=stop_at_rows, act_pool=WORKERS_ONLY)
    finally:
        engine.dispose()
    assert seen and len(seen[0]) == 2, "the pool was not running"
    assert _children() <= before


def test_a_worker_that_dies_is_an_error_and_leaves_no_process(
    sqlite_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()

    def die(row: Any, governing: Any) -> str | None:
        if os.getpid() != parent:
            os._exit(3)
        return None

    monkeypatch.setattr(act_checks, "_act_problem", die)
    before = _children()
    engine = make_engine(_url(sqlite_world))
    try:
        with pytest.raises(EvalopsError, match="a process checking signatures stopped"):
            verify.verify_database(engine, act_pool=WORKERS_ONLY)
    finally:
        engine.dispose()
    assert _children() <= before


def test_the_pool_is_used_when_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(act_checks, "usable_cpus", lambda: 1)
    assert ActPool().workers_for(1_000_000) == 0  # one CPU: nothing to overlap
    assert ActPool(workers=2).workers_for(1_000_000) == 2  # unless told
    monkeypatch.setattr(act_checks, "usable_cpus", lambda: 2)
    assert ActPool().workers_for(act_checks.POOL_FROM) == 1  # the other CPU
    monkeypatch.setattr(act_checks, "usable_cpus", lambda: 4)
    assert ActPool().workers_for(act_checks.POOL_FROM - 1) == 0
    assert ActPool().workers_for(act_checks.POOL_FROM) == 3
    assert ActPool(workers=0).workers_for(1_000_000) == 0
    assert ActPool(workers=3, from_acts=1).workers_for(1) == 3
    assert ActPool(workers=3, from_acts=1).workers_for(0) == 0


_SLOW_VERIFY = """
import sys, time
from evalops.services.verify import act_checks
from evalops.services.verify import run as verify
from evalops.store.engine import make_engine

def slow(row, governing):
    time.sleep(120)
    return None

act_checks._act_problem = slow
pool = act_checks.ActPool(workers=2, from_acts=1, chunk=1, parent_checks=False)
verify.verify_database(make_engine(sys.argv[1]), act_pool=pool)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: reaping it is its new parent's business)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_workers_end_with_a_verify_killed_outright(sqlite_world: World) -> None:
    """SIGKILL leaves `verify` no chance to stop its pool: the workers end with it."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_VERIFY, _url(sqlite_world)], env=os.environ.copy()
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2:
            assert process.poll() is None and time.monotonic() < deadline, "no pool started"
            time.sleep(0.05)
            workers = children_of(process.pid)
        time.sleep(0.5)  # each is inside its first, slow chunk
        process.kill()
        process.wait()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers {workers} outlived verify"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in workers:  # the test's own processes, should it fail
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
