"""`verify`'s signed-acts stage reads through a `Reader` (evalops/services/verify/act_checks.py):
over `sqlite3` on a SQLite registry, with no SQLAlchemy, table models or spec models
loaded, and over a SQLAlchemy connection (PostgreSQL, and what `verify` passes it).

Every outcome below is the stage's on each reader (the `sqlite3` one where the registry is
a SQLite file) and each path (inline, workers only, workers and the parent): all must be
equal, and equal to the message the scenario calls for. The registries are the demo's
signed one and the authority worlds of tests/services/test_verify_act_pool.py, good and
tampered: a changed signature, a changed act or event payload, an act by a key of no
principal, an act by a key an authority had removed, an act replayed into another row, no
authority in force, a stored authority the spec model refuses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.authority import META_FIELDS
from evalops.errors import VerificationError
from evalops.services.authority import acts as authority
from evalops.services.verify.act_checks import ActPool, signed_acts_check
from evalops.store.engine import make_engine, snapshot_session
from evalops.store.reader import ConnectionReader, Reader, open_sqlite
from tests.conftest import Cli, pg_holding
from tests.services.test_authority import DB, World, _world
from tests.services.test_verify_act_pool import (
    INLINE,
    PATHS,
    _acts,
    _edited,
    _forged,
    _grants,
    _not_a_principal,
    _url,
)
from tests.sshkeys import make_key, public_key

REPO = Path(__file__).resolve().parents[2]
#: What the stage never imports when it reads a SQLite registry through `sqlite3`.
OFF_THE_PATH = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "pydantic",
    "evalops.store.tables",
    "evalops.domain.specs",
)
Outcome = tuple[Any, ...]


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("alice", "bob", "carol", "dave", "mallory")}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, demo: Path, keyring: dict[str, Path], cli: Cli) -> World:
    """The demo registry under an authority, on each engine."""
    if request.param == "sqlite":
        return _world(demo, keyring, cli, [])
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _world(demo, keyring, cli, ["--db", url])


def _finish(reader: Reader, pool: ActPool) -> Outcome:
    try:
        with signed_acts_check(reader, pool) as check:
            assert check.pooled == (pool is not INLINE)
            return ("ok", check.finish())
    except VerificationError as exc:
        return ("exit 6", exc.message)
    except AssertionError:
        raise
    except Exception as exc:  # what the spec model raises of a stored authority it refuses
        return ("raised", type(exc).__name__, str(exc))


def _through_sqlite3(url: str, pool: ActPool) -> Outcome:
    reader = open_sqlite(url, lock_timeout=5)
    assert reader is not None, url
    try:
        return _finish(reader, pool)
    finally:
        reader.close()


def _through_sqlalchemy(url: str, pool: ActPool) -> Outcome:
    """As `verify` reads: its snapshot session's connection."""
    engine = make_engine(url)
    try:
        with snapshot_session(engine) as session:
            return _finish(ConnectionReader(session.connection()), pool)
    finally:
        engine.dispose()


def _stage(url: str) -> Outcome:
    """The stage's one outcome, on every reader and path."""
    outcomes: dict[tuple[str, str], Outcome] = {}
    for name, pool in PATHS.items():
        outcomes[("sqlalchemy", name)] = _through_sqlalchemy(url, pool)
        if url.startswith("sqlite:///"):
            outcomes[("sqlite3", name)] = _through_sqlite3(url, pool)
    assert len(set(outcomes.values())) == 1, outcomes
    assert len(outcomes) == (6 if url.startswith("sqlite:///") else 3)
    return next(iter(outcomes.values()))


def _where(act: Any) -> str:
    return f"audit seq {act.audit_seq} (waiver.grant {act.subject}): signed act {act.act_id}: "


SET_ROW = "UPDATE signed_act SET {} = :v WHERE id = :i"


# ------------------------------------------------------------------ the demo's signed registry


def _demo_acts(url: str) -> list[dict[str, Any]]:
    reader = open_sqlite(url, lock_timeout=5)
    assert reader is not None
    try:
        return reader.rows(
            "SELECT a.id, a.audit_seq, a.act_id, a.kind, a.act, a.signatures, e.kind AS event, "
            "e.subject FROM signed_act a JOIN audit_event e ON e.seq = a.audit_seq "
            "ORDER BY a.audit_seq"
        )
    finally:
        reader.close()


def test_the_demo_signed_registry_reads_alike_and_each_tampered_act_is_named(demo: Path) -> None:
    """Its acts: an ingest, a calibration, a promotion and a waiver."""
    url = f"sqlite:///{demo / 'signed' / DB}"
    acts = _demo_acts(url)
    assert [a["kind"] for a in acts] == [
        "trials.ingest", "calibration.record", "suite.promote", "waiver.grant",
    ]  # fmt: skip
    assert _stage(url) == ("ok", 4)
    for act, other in zip(acts, acts[1:] + acts[:1], strict=True):
        where = (
            f"audit seq {act['audit_seq']} ({act['event']} {act['subject']}): "
            f"signed act {act['act_id']}: "
        )
        # Another act's signature: it does not sign this act's bytes.
        edit = (SET_ROW.format("signatures"), {"v": other["signatures"], "i": act["id"]})
        with _edited(url, [edit]):
            assert _stage(url) == (
                "exit 6",
                where + "signature 1: the signature does not match the signed data",
            )
        # A field of the act changed: no longer what its event recorded.
        body = json.loads(act["act"])
        name = sorted(k for k in body if k not in META_FIELDS)[0]
        body[name] = "edited"
        text = json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"
        with _edited(url, [(SET_ROW.format("act"), {"v": text, "i": act["id"]})]):
            assert _stage(url) == (
                "exit 6",
                where + f"the act's {name} is not what its event recorded",
            )
    assert _stage(url) == ("ok", 4)  # every edit undone


# ------------------------------------------------------------------ the authority worlds


def test_a_good_world_reads_alike(world: World) -> None:
    _grants(world, 3)
    assert _stage(_url(world)) == ("ok", len(_acts(world)))


def test_tampered_acts_are_named_alike(world: World) -> None:
    _grants(world, 4)
    url = _url(world)
    acts = _acts(world)
    one, two = acts[-3], acts[-2]
    cases: list[tuple[str, list[tuple[str, dict[str, Any]]], str]] = [
        (
            "a changed signature (another act's)",
            [(SET_ROW.format("signatures"), {"v": one.signatures, "i": two.id})],
            "signature 1: the signature does not match the signed data",
        ),
        (
            "another act replayed into this row, signatures and signers too",
            [
                (SET_ROW.format(c), {"v": getattr(one, c), "i": two.id})
                for c in ("act", "signatures", "signers")
            ],
            "the stored act is not the act this row names",
        ),
        (
            "a changed act",
            [(SET_ROW.format("act"), {"v": two.act.replace('"signed 2"', '"x"'), "i": two.id})],
            "the act's reason is not what its event recorded",
        ),
        (
            "a changed act and event payload alike",
            [
                (SET_ROW.format("act"), {"v": two.act.replace('"signed 2"', '"x"'), "i": two.id}),
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
            [(SET_ROW.format("signers"), {"v": one.signers.replace("alice", "bob"), "i": two.id})],
            "the stored signers are not those of its signatures",
        ),
        (
            "a signature that does not parse",
            [(SET_ROW.format("signatures"), {"v": '["not a signature"]', "i": two.id})],
            "a stored signature is malformed: not armored between "
            "'-----BEGIN SSH SIGNATURE-----' and '-----END SSH SIGNATURE-----'",
        ),
        (
            "the scope, out of the signer's grant",
            [
                (
                    SET_ROW.format("scope"),
                    {"v": '{"suite":"capability/x","task":"t"}', "i": two.id},
                )
            ],
            "signature 1: principal 'alice' holds risk_owner but not for suite "
            "'capability/x', task 't'",
        ),
    ]
    for name, statements, expected in cases:
        with _edited(url, statements):
            assert _stage(url) == ("exit 6", _where(two) + expected), name
    with _edited(url, [("DELETE FROM audit_event WHERE seq = :s", {"s": two.audit_seq})]):
        assert _stage(url) == (
            "exit 6",
            f"audit seq {two.audit_seq}: signed act {two.act_id}: its audit event does not exist",
        )
    with _edited(url, [("DELETE FROM sync_in_force", {})]):
        assert _stage(url) == (
            "exit 6",
            _where(acts[0]) + "no authority was in force at its event",
        )
    # Two tampered acts: the lower seq is named.
    signers = [(SET_ROW.format("signers"), {"v": "[]", "i": a.id}) for a in (two, one)]
    with _edited(url, signers):
        assert _stage(url) == (
            "exit 6",
            _where(one) + "the stored signers are not those of its signatures",
        )
    assert _stage(url) == ("ok", len(acts))


def test_an_act_by_a_key_of_no_principal_is_named_alike(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _grants(world, 2)
    bad = _forged(world, monkeypatch, "forged")
    _grants(world, 2)
    assert _stage(_url(world)) == ("exit 6", _not_a_principal(world, bad))


def test_each_act_is_judged_by_the_authority_of_its_event(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dave's key removed by a later sync, then an act of dave's stored under the old
    authority (a compromised evalops): named with both authorities; the acts before the
    removal still stand under the authority of their time."""
    _grants(world, 2, key="dave")
    before = len(_acts(world))
    old = authority.authority_in_force
    ((before_removal,),) = world.sql("SELECT max(audit_seq) FROM sync_run")
    world.authority(
        principals=[
            {"id": name, "keys": [public_key(world.keys[name])]}
            for name in ("alice", "bob", "carol")
        ],
        roles={"risk_owner": [{"principal": "alice"}]},
    )
    assert _stage(_url(world)) == ("ok", before)
    monkeypatch.setattr(
        authority, "authority_in_force", lambda session, cutoff=None: old(session, before_removal)
    )
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    monkeypatch.setattr(authority, "authority_in_force", old)
    digests = [
        d
        for (d,) in world.sql(
            "SELECT policy_digest FROM policy WHERE kind = 'authority' ORDER BY id"
        )
    ]
    bad = _acts(world)[-1]
    assert bad.authority_digest == digests[-2]
    assert _stage(_url(world)) == (
        "exit 6",
        _where(bad) + f"signed under {digests[-2]}, but {digests[-1]} was in force at its event",
    )


def test_a_stored_authority_the_model_refuses_raises_what_the_model_raises(
    world: World,
) -> None:
    """Not what `sync` registers (a threshold as text): the view does not vouch for it and
    the spec model's own error comes out, as before the view, on every reader and path."""
    from pydantic import ValidationError

    from evalops.domain.specs import AuthoritySpec

    _grants(world, 2)
    ((policy_id, document),) = world.sql("SELECT id, document FROM policy WHERE kind = 'authority'")
    edited = {**json.loads(document), "thresholds": {"waiver.grant": "2"}}
    with pytest.raises(ValidationError) as refused:
        AuthoritySpec.model_validate(edited)
    text = json.dumps(edited, sort_keys=True, separators=(",", ":"))
    with _edited(
        _url(world),
        [("UPDATE policy SET document = :v WHERE id = :i", {"v": text, "i": policy_id})],
    ):
        assert _stage(_url(world)) == ("raised", "ValidationError", str(refused.value))


# ------------------------------------------------------------------ what the stage imports

_CHECK = """
import json, sys
from evalops.services.verify.act_checks import ActPool, signed_acts_check
from evalops.store.reader import open_sqlite

reader = open_sqlite(sys.argv[1], lock_timeout=5)
out = []
for pool in (ActPool(workers=0), ActPool(workers=1, from_acts=1, chunk=1)):
    try:
        with signed_acts_check(reader, pool) as check:
            out.append([check.pooled, check.finish()])
    except Exception as exc:
        out.append([pool.workers != 0, type(exc).__name__, str(exc)])
off = {OFF!r}
print(json.dumps([out, sorted(m for m in off if m in sys.modules)]))
""".replace("{OFF!r}", repr(OFF_THE_PATH))


def _in_a_fresh_interpreter(url: str) -> tuple[list[Any], list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, url],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return out, loaded


def test_on_sqlite_the_stage_imports_no_sqlalchemy_table_or_spec_models(
    demo: Path, keyring: dict[str, Path], cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, loaded = _in_a_fresh_interpreter(f"sqlite:///{demo / 'signed' / DB}")
    assert out == [[False, 4], [True, 4]]  # ingest, calibration, promotion, waiver
    assert loaded == []
    # A bad act, named on both paths, and still nothing of the kind imported.
    world = _world(demo, keyring, cli, [])
    _grants(world, 2)
    bad = _forged(world, monkeypatch, "forged")
    out, loaded = _in_a_fresh_interpreter(_url(world))
    message = _not_a_principal(world, bad)
    assert out == [[False, "VerificationError", message], [True, "VerificationError", message]]
    assert loaded == []
