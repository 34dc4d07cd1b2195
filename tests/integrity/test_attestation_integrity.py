"""Attestations certify only what verifies, and standard DSSE verifiers accept them.

An attacker with write access to the database edits a BLOCK into a PASS and asks for a
signed attestation: refused (exit 6), nothing written, on both engines. An attacker with a
valid signing key hand-edits a statement so that it contradicts its own decision document:
`verify-attestation` refuses it. A release job relies on the attestation alone with
`--require pass`. securesystemslib verifies the envelope with the key id it derives itself,
and in-toto-attestation validates the statement.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.conftest import Cli, pg_holding
from tests.export.test_exports import keypair

DB = Path(".evalops") / "registry.db"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "urn:evalops:predicate:gate-decision:v1"


def pae(payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding, from the DSSE specification's words."""
    kind = PAYLOAD_TYPE.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def sign(statement: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """What anyone holding the release key can produce: a valid DSSE envelope."""
    payload = json.dumps(statement).encode()
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": "", "sig": base64.b64encode(key.sign(pae(payload))).decode()}],
    }


def attest(cli: Cli, demo: Path, gate_id: str, out: Path, *extra: str) -> int:
    result = cli("export", "attestation", "--gate", gate_id, *extra, "-o", str(out), cwd=demo)
    return result.code


def statement_of(envelope_path: Path) -> dict[str, Any]:
    envelope = json.loads(envelope_path.read_text(encoding="utf-8"))
    value: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return value


def statement_of_plain(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


def result_digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(document)).hexdigest()


# --- the attacker edits the database: nothing is signed --------------------------------


def _block_to_pass(execute: Callable[..., list[tuple[Any, ...]]]) -> None:
    """GATE-1 (a BLOCK) rewritten as a PASS the way a careful attacker would: the decision
    column, the stored document, and its digest recomputed so the digest matches."""
    (raw,) = execute("SELECT result FROM gate_decision WHERE gate_id = 'GATE-1'")[0]
    document = json.loads(raw)
    assert document["decision"] == "block"
    document["decision"] = "pass"
    document["reasons"] = []
    forged = rfc8785.dumps(document).decode()
    execute(
        "UPDATE gate_decision SET decision = 'pass', result = {p}, result_digest = {p} "
        "WHERE gate_id = 'GATE-1'",
        forged,
        result_digest(document),
    )


def _sqlite_executor(demo: Path) -> Callable[..., list[tuple[Any, ...]]]:
    def execute(sql: str, *args: Any) -> list[tuple[Any, ...]]:
        con = sqlite3.connect(demo / DB)
        try:
            rows = list(con.execute(sql.replace("{p}", "?"), args))
            con.commit()
            return rows
        finally:
            con.close()

    return execute


def _postgres_executor(url: str) -> Callable[..., list[tuple[Any, ...]]]:
    import psycopg

    def execute(sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
            cursor = conn.execute(sql.replace("{p}", "%s"), args)
            return list(cursor.fetchall()) if cursor.description else []

    return execute


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engine_db(request: pytest.FixtureRequest, demo: Path, cli: Cli) -> list[str]:
    """`--db` arguments for the demo registry on each engine (PostgreSQL: a copy)."""
    if request.param == "sqlite":
        return []

    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return ["--db", url]


def _executor(demo: Path, db: list[str]) -> Callable[..., list[tuple[Any, ...]]]:
    return _postgres_executor(db[1]) if db else _sqlite_executor(demo)


@pytest.mark.tampers
def test_a_block_edited_to_pass_is_never_signed(
    demo: Path, cli: Cli, tmp_path: Path, engine_db: list[str]
) -> None:
    private, _, _ = keypair(tmp_path)
    out = tmp_path / "gate.intoto.json"
    honest = cli(*engine_db, "export", "attestation", "--gate", "GATE-1", "-o", str(out), cwd=demo)
    assert honest.code == 0, honest.stderr  # the untouched BLOCK is attested as a BLOCK
    assert statement_of_plain(out)["predicate"]["decision"] == "block"
    out.unlink()

    _block_to_pass(_executor(demo, engine_db))
    refused = cli(
        *engine_db,
        "export",
        "attestation",
        "--gate",
        "GATE-1",
        "--sign-key",
        str(private),
        "-o",
        str(out),
        cwd=demo,
    )
    assert refused.code == 6, refused.stdout + refused.stderr
    assert "GATE-1" in refused.stderr
    assert not out.exists()
    assert not list(tmp_path.glob(".gate.intoto.json.*"))  # no partial file either


@pytest.mark.tampers
def test_a_decision_column_edited_alone_is_never_attested(
    demo: Path, cli: Cli, tmp_path: Path, engine_db: list[str]
) -> None:
    """The stored document still says block and replays; only the row's `decision` column
    says pass: the row no longer says what its audit event recorded."""
    edit = _executor(demo, engine_db)
    edit("UPDATE gate_decision SET decision = 'pass' WHERE gate_id = 'GATE-1'")
    out = tmp_path / "gate.intoto.json"
    result = cli(*engine_db, "export", "attestation", "--gate", "GATE-1", "-o", str(out), cwd=demo)
    assert result.code == 6, result.stdout + result.stderr
    assert not out.exists()


def test_an_anchor_the_chain_no_longer_holds_refuses_the_attestation(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    con = sqlite3.connect(demo / DB)
    try:
        seq, hash_ = con.execute("SELECT seq, hash FROM audit_event ORDER BY seq DESC").fetchone()
    finally:
        con.close()
    out = tmp_path / "gate.json"
    assert attest(cli, demo, "GATE-3", out, "--anchor", f"{seq}:{hash_}") == 0
    out.unlink()
    forged = "sha256:" + ("0" if hash_[-1] != "0" else "1") * 64
    assert attest(cli, demo, "GATE-3", out, "--anchor", f"{seq}:{forged}") == 6
    assert attest(cli, demo, "GATE-3", out, "--anchor", f"{seq + 100}:{hash_}") == 6
    assert not out.exists()
    assert attest(cli, demo, "GATE-3", out, "--anchor", "not-an-anchor") == 2


# --- the attacker holds a valid key: the statement must agree with itself --------------


def _signed_block(cli: Cli, demo: Path, tmp_path: Path) -> tuple[dict[str, Any], Path, Any]:
    private, public, key = keypair(tmp_path)
    out = tmp_path / "block.intoto.json"
    assert attest(cli, demo, "GATE-1", out, "--sign-key", str(private)) == 0
    return statement_of(out), public, key


def _verify(cli: Cli, tmp_path: Path, envelope: dict[str, Any], public: Path, *extra: str) -> Any:
    path = tmp_path / f"candidate-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(envelope), encoding="utf-8")
    return cli("verify-attestation", str(path), "--key", str(public), *extra)


def test_a_hand_edited_statement_resigned_with_a_valid_key_is_refused(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    statement, public, key = _signed_block(cli, demo, tmp_path)
    assert _verify(cli, tmp_path, sign(statement, key), public).code == 0  # re-signed as is

    def decision_only(s: dict[str, Any]) -> None:
        s["predicate"]["decision"] = "pass"

    def document_too(s: dict[str, Any]) -> None:  # the document no longer hashes to its digest
        s["predicate"]["decision"] = "pass"
        s["predicate"]["decision_document"]["decision"] = "pass"

    def another_subject(s: dict[str, Any]) -> None:  # a PASS of one build claimed for another
        s["subject"][0]["digest"]["sha256"] = "ab" * 32

    def another_execution(s: dict[str, Any]) -> None:
        s["predicate"]["digests"]["execution_digest"] = "sha256:" + "ab" * 32
        s["subject"][0]["digest"]["sha256"] = "ab" * 32

    def no_document(s: dict[str, Any]) -> None:
        del s["predicate"]["decision_document"]

    for edit in (decision_only, document_too, another_subject, another_execution, no_document):
        forged = copy.deepcopy(statement)
        edit(forged)
        result = _verify(cli, tmp_path, sign(forged, key), public, "--require", "pass")
        assert result.code == 6, (edit.__name__, result.stdout, result.stderr)
        assert "consistent" in result.stderr, result.stderr


def test_a_hand_made_document_with_no_decision_evalops_writes_is_refused(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """Signed with the valid key, consistent with itself (its digests recomputed), yet its
    decision is none evalops writes: absent, upper case, a list; or its gate_id is not a
    GATE-<n>. Exit 6 naming why, never "verified" and never an internal error."""
    statement, public, key = _signed_block(cli, demo, tmp_path)

    def with_document(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        forged = copy.deepcopy(statement)
        document = forged["predicate"]["decision_document"]
        change(document)
        for name in ("gate_id", "decision"):
            if name in document:
                forged["predicate"][name] = document[name]
            else:
                forged["predicate"].pop(name, None)
        forged["predicate"]["digests"]["result_digest"] = result_digest(document)
        return forged

    cases = {
        "no decision": lambda d: d.pop("decision"),
        "PASS": lambda d: d.update(decision="PASS"),
        "a list": lambda d: d.update(decision=["pass"]),
        "no gate_id": lambda d: d.pop("gate_id"),
        "gate_id of another form": lambda d: d.update(gate_id="../GATE-1"),
    }
    for name, change in cases.items():
        result = _verify(cli, tmp_path, sign(with_document(change), key), public)
        assert result.code == 6, (name, result.stdout, result.stderr)
        assert "internal error" not in result.stderr and "verified" not in result.stdout
        assert "decision document's" in result.stderr, (name, result.stderr)


def test_a_decision_row_of_an_upgraded_registry_edited_after_its_upgrade_is_not_attested(
    tmp_path: Path, cli: Cli
) -> None:
    """A registry made by schema 0001 (events recorded no rows then: the upgrade's
    migration event vouches for them). Its GATE-3 row edited afterwards (who decided it)
    fails `verify`, so `export attestation` refuses it too, instead of signing the edit."""
    import shutil

    fixture = Path(__file__).parents[1] / "fixtures" / "registry-0001-demo.db"
    root = tmp_path / "old"
    (root / ".evalops").mkdir(parents=True)
    shutil.copy(fixture, root / DB)
    assert cli("db", "upgrade", cwd=root).code == 0
    out = tmp_path / "gate.intoto.json"
    assert attest(cli, root, "GATE-3", out) == 0  # as upgraded: attested
    out.unlink()
    with sqlite3.connect(root / DB) as db:
        db.execute(
            "UPDATE gate_decision SET actor = 'mallory@example.com' WHERE gate_id = 'GATE-3'"
        )
    assert cli("verify", cwd=root).code == 6
    result = cli("export", "attestation", "--gate", "GATE-3", "-o", str(out), cwd=root)
    assert result.code == 6, result.stdout + result.stderr
    assert "rows of audit seq" in result.stderr and "changed since" in result.stderr
    assert not out.exists()


# --- a release job relies on the attestation alone ---------------------------------------


@pytest.mark.parametrize(("gate_id", "decision", "code"), [
    ("GATE-1", "block", 4), ("GATE-2", "hold", 3), ("GATE-3", "pass", 0)
])  # fmt: skip
def test_require_pass_exits_as_the_gate_did(
    demo: Path, cli: Cli, tmp_path: Path, gate_id: str, decision: str, code: int
) -> None:
    private, public, _ = keypair(tmp_path)
    out = tmp_path / "gate.intoto.json"
    assert attest(cli, demo, gate_id, out, "--sign-key", str(private)) == 0
    plain = cli("verify-attestation", str(out), "--key", str(public))
    assert plain.code == 0  # the signature verifies whatever it attests...
    assert f"{gate_id} {decision.upper()}" in plain.stdout  # ...and it says what it attests
    gated = cli("--json", "verify-attestation", str(out), "--key", str(public), "--require", "pass")
    assert gated.code == code, gated.stdout + gated.stderr
    assert gated.json()["decision"] == decision
    assert cli("verify-attestation", str(out), "--key", str(public), "--require", "hold").code == 2
    # Tied to the release being shipped: the attestation of its build on its suite says
    # nothing of another build or suite.
    base = ("verify-attestation", str(out), "--key", str(public))
    attested = gated.json()
    assert cli(*base, "--build", attested["build"], "--suite", attested["suite"]).code == 0
    for option, other in (("--build", "build-126"), ("--suite", "regression/other")):
        elsewhere = cli(*base, option, other, "--require", "pass")
        assert elsewhere.code == 6, elsewhere.stdout + elsewhere.stderr
        assert f"not {other!r} ({option})" in elsewhere.stderr


def test_attestation_files_are_read_up_to_1_mib(demo: Path, cli: Cli, tmp_path: Path) -> None:
    _, public, _ = keypair(tmp_path)
    # CPU time, not wall time: reading /dev/zero without a limit costs CPU whatever the
    # machine's load, while a wall-clock bound failed at random on a loaded machine.
    started = time.process_time()
    endless = cli("verify-attestation", "/dev/zero", "--key", str(public))
    assert endless.code == 2, endless.stderr
    assert "/dev/zero" in endless.stderr and "1 MiB" in endless.stderr
    assert time.process_time() - started < 10
    big = tmp_path / "big.json"
    big.write_text('{"payload": "' + "A" * (1024 * 1024) + '"}', encoding="utf-8")
    result = cli("verify-attestation", str(big), "--key", str(public))
    assert result.code == 2 and str(big) in result.stderr
    assert cli("verify-attestation", str(big), "--key", "/dev/zero").code == 2


# --- standard verifiers ---------------------------------------------------------------


def test_securesystemslib_verifies_the_envelope_with_its_default_key_id(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    private, _, key = keypair(tmp_path)
    out = tmp_path / "gate.intoto.json"
    assert attest(cli, demo, "GATE-3", out, "--sign-key", str(private)) == 0
    verifier = SSlibKey.from_crypto(key.public_key())  # the key id it derives itself
    envelope = Envelope.from_dict(json.loads(out.read_text(encoding="utf-8")))
    accepted = envelope.verify([verifier], 1)
    assert list(accepted) == [verifier.keyid]

    value = json.loads(envelope.payload)
    statement = Statement(
        [_descriptor(s) for s in value["subject"]], value["predicateType"], value["predicate"]
    )
    statement.validate()
    assert statement.pb.predicate_type == PREDICATE_TYPE


def _descriptor(subject: dict[str, Any]) -> Any:
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor

    descriptor = ResourceDescriptor(name=subject["name"], digest=subject["digest"])
    descriptor.validate()
    return descriptor.pb


def test_url_safe_unpadded_base64_is_accepted(demo: Path, cli: Cli, tmp_path: Path) -> None:
    """DSSE lets a signer use either base64 alphabet; pick a signature that shows it."""
    private, public, key = keypair(tmp_path)
    out = tmp_path / "gate.intoto.json"
    assert attest(cli, demo, "GATE-3", out, "--sign-key", str(private)) == 0
    envelope = json.loads(out.read_text(encoding="utf-8"))
    payload = base64.b64decode(envelope["payload"])
    sig = key.sign(pae(payload))
    while not {"+", "/"} & set(base64.b64encode(sig).decode()):
        payload += b" "  # JSON allows trailing whitespace; find a signature with + or /
        sig = key.sign(pae(payload))
    envelope["payload"] = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    envelope["signatures"][0]["sig"] = base64.urlsafe_b64encode(sig).decode().rstrip("=")
    assert _verify(cli, tmp_path, envelope, public).code == 0
    # `verify --anchors` reads the same envelope's anchor (one base64 reader for both).
    again = tmp_path / "unpadded.intoto.json"
    again.write_text(json.dumps(envelope), encoding="utf-8")
    anchored = cli("verify", "--anchors", str(again), cwd=demo)
    assert anchored.code == 0, anchored.stdout + anchored.stderr
    assert "no chain anchor found" not in anchored.stdout + anchored.stderr


def test_a_decision_made_as_of_an_earlier_moment_is_not_attested(
    demo: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WVR-1 lets build-125 pass (GATE-3). Revoked later, the build holds; `gate check --at`
    the earlier moment stores a PASS that reads the registry before the revocation. It
    verifies (it says what it read), but a release job relying on an attestation alone
    would take it for today's decision: it is refused (exit 2), nothing written."""
    monkeypatch.setenv("EVALOPS_NOW", "2026-11-30T13:00:00Z")
    assert cli("waiver", "revoke", "WVR-1", "--reason", "fix slipped", cwd=demo).code == 0
    check = ("gate", "check", "--build", "build-125", "--suite", "regression/core", "--json")
    assert cli(*check, cwd=demo).json()["decision"] == "hold"
    backdated = cli(*check, "--at", "2026-11-30T12:30:00Z", cwd=demo).json()
    assert backdated["decision"] == "pass"
    out = tmp_path / "backdated.intoto.json"
    result = cli("export", "attestation", "--gate", backdated["gate_id"], "-o", str(out), cwd=demo)
    assert result.code == 2, result.stdout + result.stderr
    assert "gate check --at" in result.stderr and "is not attested" in result.stderr
    assert not out.exists()
    assert cli("verify", cwd=demo).code == 0  # it verifies: it is what it says it read
