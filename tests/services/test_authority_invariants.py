"""The authority's rules as properties of the registry, attacked (docs/authority.md).

Each rule holds whichever order the acts come in, whichever registry is handed an act, and
whatever the act and signature files hold: separation of duties in both orders (and over
the chain for `verify`), acts bound to one registry, bounded act input, keys that cannot be
loaded. Real keys and `ssh-keygen` signatures, on a copy of the demo registry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, pg_holding
from tests.services.test_authority import (
    SUITE,
    TASK,
    World,
    _review_me,
    _world,
    keyring,
    world,
)
from tests.sshkeys import public_key, sign_file

__all__ = ["keyring", "world"]  # fixtures, shared

NO_SEPARATION: dict[str, Any] = {"separation_of_duties": []}


def _gate(world: World) -> dict[str, Any]:
    gate = world.run("gate", "check", "--build", "build-125", "--suite", SUITE, "--json")
    assert gate.code in (0, 3), gate.stdout + gate.stderr
    decided: dict[str, Any] = gate.json()
    return decided


def _plain(world: World, trial_id: str, index: int) -> Path:
    """A build-125 trial of TASK as the demo stored its first one, under a new id."""
    for line in (world.root / "registry/trials/fix-b125.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["task_id"] == TASK and record["trial_index"] == 0:
            break
    record.update(trial_id=trial_id, trial_index=index)
    path = world.root / f"{trial_id}.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _ingest(world: World, who: str, trial: str = "review-me", index: int = 10) -> Any:
    made = _review_me(world, trial, index) if trial == "review-me" else _plain(world, trial, index)
    return world.run("trials", "ingest", str(made), "--sign-with", str(world.keys[who]))


def _alice_waives(world: World) -> None:
    """WVR-1 (the demo's) revoked, WVR-2 granted by alice for build-125."""
    revoked = world.run("waiver", "revoke", "WVR-1", "--reason", "re-signed",
                        "--sign-with", str(world.keys["dave"]))  # fmt: skip
    assert revoked.code == 0, revoked.stdout + revoked.stderr
    granted = world.grant("--sign-with", str(world.keys["alice"]))
    assert granted.code == 0, granted.stdout + granted.stderr


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_engine(
    request: pytest.FixtureRequest, demo: Path, keyring: dict[str, Path], cli: Cli
) -> World:
    if request.param == "sqlite":
        return _world(demo, keyring, cli, [])
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _world(demo, keyring, cli, ["--db", url])


# ------------------------------------------------------------ no_self_waiver, both orders


def test_an_ingest_by_the_signer_of_a_valid_waiver_of_its_build_is_refused(
    any_engine: World,
) -> None:
    """Waiver first, ingest second: the order `waiver grant` alone never saw."""
    w = any_engine
    _alice_waives(w)
    seq = w.last_event()["seq"]
    done = _ingest(w, "alice")
    assert done.code == 5, done.stdout + done.stderr
    assert "[no_self_waiver]" in done.stderr and "WVR-2" in done.stderr
    assert w.last_event()["seq"] == seq + 1  # the refusal audited, no trial stored
    assert _ingest(w, "bob").code == 0  # bob signed no waiver of build-125
    assert w.run("verify").code == 0


def test_an_ingest_on_a_clock_behind_the_waiver_s_grant_is_refused_too(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiver is recorded: an ingest whose clock says it came an hour before the grant
    (a lagging machine, or EVALOPS_NOW) is the same pair, refused; `verify` stays ok."""
    from datetime import timedelta

    from evalops.domain.timestamps import format_timestamp, parse_timestamp
    from tests.conftest import PINNED_NOW

    _alice_waives(world)
    seq = world.last_event()["seq"]
    earlier = parse_timestamp(PINNED_NOW) - timedelta(hours=1)
    monkeypatch.setenv("EVALOPS_NOW", format_timestamp(earlier))
    done = _ingest(world, "alice")
    assert done.code == 5, done.stdout + done.stderr
    assert "[no_self_waiver]" in done.stderr and "WVR-2" in done.stderr
    assert world.last_event()["seq"] == seq + 1
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    assert world.run("verify").code == 0


def test_an_ingest_after_the_waiver_is_revoked_is_not_refused(world: World) -> None:
    _alice_waives(world)
    revoked = world.run("waiver", "revoke", "WVR-2", "--reason", "done",
                        "--sign-with", str(world.keys["dave"]))  # fmt: skip
    assert revoked.code == 0, revoked.stdout
    assert _ingest(world, "alice").code == 0


def test_a_waiver_by_the_signer_of_an_ingest_is_refused_by_the_gate(any_engine: World) -> None:
    """Both acts recorded while the rule was not declared; once it is, the gate lists the
    waiver under `refused` with the rule and never applies it (both loaders: verify agrees)."""
    w = any_engine
    w.authority(**NO_SEPARATION)
    _alice_waives(w)
    assert _ingest(w, "alice", "plain", 20).code == 0
    assert _gate(w)["waivers"]["applied"] == ["WVR-2"]
    w.authority()  # both rules declared, by alice's signed commit
    decided = _gate(w)
    assert decided["waivers"]["applied"] == []
    refused = [r for r in decided["waivers"]["refused"] if r.get("waiver_id") == "WVR-2"]
    assert len(refused) == 1 and refused[0]["rules"] == ["no_self_waiver"]
    assert "alice" in refused[0]["refusal"]
    assert decided["decision"] != "pass"
    text = w.run("gate", "check", "--build", "build-125", "--suite", SUITE, "--dry-run")
    (line,) = [x for x in text.stdout.splitlines() if x.strip().startswith("waivers:")]
    assert f"WVR-2 {TASK} (no_self_waiver: alice signed WVR-2" in line, line
    assert w.run("verify").code == 0  # the plain-SQL loader rebuilds the same inputs


@pytest.mark.tampers
def test_a_stored_decision_that_applied_a_self_waiver_is_exit_6(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision stored by an evalops that did not look (the loaders' check switched off)."""
    from evalops.services.gate import inputs

    _alice_waives(world)
    world.authority(**NO_SEPARATION)
    assert _ingest(world, "alice", "plain", 20).code == 0
    world.authority()
    monkeypatch.setattr(inputs, "self_waivers", lambda *a, **k: {})
    assert _gate(world)["waivers"]["applied"] == ["WVR-2"]
    monkeypatch.undo()
    done = world.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert "refused" in done.stderr or "waivers" in done.stderr


@pytest.mark.parametrize("hours_behind", [0, 1])
def test_verify_finds_an_ingest_that_followed_its_signers_waiver(
    world: World, monkeypatch: pytest.MonkeyPatch, hours_behind: int
) -> None:
    """The ingest stored by an evalops that did not look: `verify` makes the refusal, also
    when the ingest's clock put it before the waiver's grant."""
    from datetime import timedelta

    from evalops.domain.timestamps import format_timestamp, parse_timestamp
    from evalops.services.authority import acts
    from tests.conftest import PINNED_NOW

    _alice_waives(world)
    monkeypatch.setattr(acts, "ingest_separation_refusal", lambda *a, **k: None)
    then = parse_timestamp(PINNED_NOW) - timedelta(hours=hours_behind)
    monkeypatch.setenv("EVALOPS_NOW", format_timestamp(then))
    assert _ingest(world, "alice").code == 0
    monkeypatch.undo()
    done = world.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert "no_self_waiver" in done.stderr


def test_verify_finds_a_waiver_that_followed_its_signers_ingest(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalops.services.gate import waivers

    assert _ingest(world, "alice").code == 0
    monkeypatch.setattr(waivers, "separation_refusal", lambda *a, **k: None)
    revoked = world.run("waiver", "revoke", "WVR-1", "--reason", "re-signed",
                        "--sign-with", str(world.keys["dave"]))  # fmt: skip
    assert revoked.code == 0
    assert world.grant("--sign-with", str(world.keys["alice"])).code == 0
    monkeypatch.undo()
    done = world.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert "no_self_waiver" in done.stderr


def test_verify_finds_a_review_by_the_ingests_signer(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalops.services.evidence import review

    assert _ingest(world, "bob").code == 0
    monkeypatch.setattr(review, "separation_refusal", lambda *a, **k: None)
    done = world.run(
        "review", "resolve", "review-me", "--grader", "reply-quality", "--state", "task_pass",
        "--reason", "read it", "--sign-with", str(world.keys["bob"]),
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    monkeypatch.undo()
    done = world.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert "no_self_review" in done.stderr


# ------------------------------------------------------------ acts belong to one registry


def _second_registry(world: World, tmp_path: Path, cli: Cli) -> World:
    """Another registry of the same git repository and the same authority file (staging)."""
    other = tmp_path / "staging"
    shutil.copytree(world.root, other, symlinks=True)
    shutil.rmtree(other / ".evalops")
    assert cli("init", cwd=other).code == 0
    assert cli("sync", "registry", cwd=other).code == 0
    return World(other, [], world.keys, cli, synced=True)


def test_every_act_names_its_registry(world: World) -> None:
    act = json.loads(world.print_act().read_text())
    shown = world.run("verify", "--json").json()
    assert act["registry_id"] == shown["registry_id"]
    assert len(act["registry_id"]) == 36  # a UUID


CALIBRATE = ("calibration", "record", "reply-quality", "--labels",
             "registry/calibration/reply-quality.jsonl")  # fmt: skip


def test_an_act_signed_for_another_registry_is_refused(
    any_engine: World, tmp_path: Path, cli: Cli
) -> None:
    """Staging and production: one repository, one authority file, one signer. The act
    staging printed and bob signed stands in staging and nowhere else."""
    production = any_engine
    staging = _second_registry(production, tmp_path, cli)
    printed = staging.run(*CALIBRATE, "--print-act")
    assert printed.code == 0, printed.stdout + printed.stderr
    act = tmp_path / "staging-act.json"
    act.write_text(printed.stdout, encoding="utf-8")
    signature = sign_file(production.keys["bob"], act)
    ours = json.loads(production.run(*CALIBRATE, "--print-act").stdout)["registry_id"]
    assert json.loads(printed.stdout)["registry_id"] != ours
    before = production.last_event()["seq"]
    done = production.run(*CALIBRATE, "--act", str(act), "--signature", str(signature))
    assert done.code == 5, done.stdout + done.stderr
    assert "[registry]" in done.stderr and "registry" in done.stderr
    assert production.last_event()["seq"] == before + 1  # the refusal audited, nothing else
    # The same bytes are an act of staging, where they stand.
    stands = staging.run(*CALIBRATE, "--act", str(act), "--signature", str(signature))
    assert stands.code == 0, stands.stdout + stands.stderr
    assert staging.run("verify").code == 0


def test_two_registries_built_alike_at_one_moment_have_two_ids(
    world: World, tmp_path: Path, cli: Cli
) -> None:
    """Same repository, same content, same actor, the same (pinned) clock: the first event
    of each would hash alike, so the id is drawn at random, never derived from it. An act
    of one is refused by the other."""
    first = _second_registry(world, tmp_path / "a", cli)
    second = _second_registry(world, tmp_path / "b", cli)
    ids = [r.run("verify", "--json").json()["registry_id"] for r in (first, second)]
    assert ids[0] != ids[1]
    printed = first.run(*CALIBRATE, "--print-act")
    assert printed.code == 0, printed.stdout + printed.stderr
    act = tmp_path / "act.json"
    act.write_text(printed.stdout, encoding="utf-8")
    signature = sign_file(world.keys["bob"], act)
    done = second.run(*CALIBRATE, "--act", str(act), "--signature", str(signature))
    assert done.code == 5 and "[registry]" in done.stderr, done.stdout + done.stderr
    assert first.run(*CALIBRATE, "--act", str(act), "--signature", str(signature)).code == 0


def test_the_registry_id_is_the_same_on_every_read(world: World) -> None:
    first = world.run("verify", "--json").json()["registry_id"]
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    assert world.run("verify", "--json").json()["registry_id"] == first


# ------------------------------------------------------------ bounded act input


def _two_step(world: World, act: Path, signature: Path) -> Any:
    return world.grant("--act", str(act), "--signature", str(signature))


def test_a_deeply_nested_act_is_exit_2(world: World) -> None:
    act = world.root / "deep.json"
    act.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    signature = sign_file(world.keys["alice"], world.print_act())
    done = _two_step(world, act, signature)
    assert done.code == 2, done.stdout + done.stderr
    assert "nested" in done.stderr


def test_an_act_from_dev_zero_is_exit_2(world: World) -> None:
    signature = sign_file(world.keys["alice"], world.print_act())
    done = _two_step(world, Path("/dev/zero"), signature)
    assert done.code == 2, done.stdout + done.stderr
    assert "1 MiB" in done.stderr


def test_a_signature_from_dev_zero_is_exit_2(world: World) -> None:
    act = world.print_act()
    done = _two_step(world, act, Path("/dev/zero"))
    assert done.code == 2, done.stdout + done.stderr
    assert "64 KiB" in done.stderr


def test_an_act_id_that_is_no_uuid_is_exit_2(any_engine: World) -> None:
    w = any_engine
    act = w.print_act()
    doc = json.loads(act.read_text())
    doc["act_id"] = "x" * 4000
    from evalops.domain.canonical import canonical_json

    act.write_bytes(canonical_json(doc) + b"\n")
    signature = sign_file(w.keys["alice"], act)
    done = _two_step(w, act, signature)
    assert done.code == 2, done.stdout + done.stderr
    assert "act_id" in done.stderr and "INSERT" not in done.stderr


def _compressed(key_line: str) -> str:
    """The same ECDSA P-256 key with its point in SEC1 compressed form (valid SEC1)."""
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    kind, encoded = key_line.split()[:2]
    blob = base64.b64decode(encoded)
    point = blob[-65:]
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    packed = key.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)

    def string(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    new = string(kind.encode()) + string(b"nistp256") + string(packed)
    return f"{kind} {base64.b64encode(new).decode()} compressed"


def test_a_compressed_ecdsa_key_is_a_malformed_key(tmp_path: Path, cli: Cli) -> None:
    from tests.sshkeys import make_key

    key = make_key(tmp_path, "ec", "ecdsa256")
    folder = tmp_path / "registry" / "policies"
    folder.mkdir(parents=True)
    doc = {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "alice", "keys": [_compressed(public_key(key))]}],
    }
    (folder / "authority.yaml").write_text(json.dumps(doc), encoding="utf-8")
    done = cli("validate", str(tmp_path / "registry"))
    assert done.code == 2, done.stdout + done.stderr
    assert "principals[0].keys[0]" in done.stderr


def _compressed_signature(key: Path, message: bytes, namespace: str, out: Path) -> Path:
    """A real SSHSIG of `message` by `key`, its embedded key rewritten in compressed form."""
    import base64

    from evalops.domain import sshsig
    from tests.sshkeys import sign

    blob = sshsig.dearmor(sign(key, message, namespace))
    old = base64.b64decode(public_key(key).split()[1])
    new = base64.b64decode(_compressed(public_key(key)).split()[1])
    body = blob.replace(len(old).to_bytes(4, "big") + old, len(new).to_bytes(4, "big") + new)
    assert body != blob
    wrapped = base64.b64encode(body).decode()
    out.write_text(
        "-----BEGIN SSH SIGNATURE-----\n"
        + "\n".join(wrapped[i : i + 70] for i in range(0, len(wrapped), 70))
        + "\n-----END SSH SIGNATURE-----\n"
    )
    return out


def test_a_signature_by_a_compressed_key_is_exit_2(world: World, tmp_path: Path) -> None:
    from tests.sshkeys import make_key

    act = world.print_act()
    key = make_key(tmp_path, "ec", "ecdsa256")
    sig = _compressed_signature(key, act.read_bytes(), "evalops", tmp_path / "c.sig")
    done = _two_step(world, act, sig)
    assert done.code == 2, done.stdout + done.stderr
    assert "--signature" in done.stderr


def test_a_commit_signed_with_a_compressed_key_is_a_named_refusal(
    world: World, tmp_path: Path
) -> None:
    """One pushed commit signed with such a key must not make every later sync crash:
    judging the commit names the malformed key."""
    from evalops.domain.authority import judge_commit
    from evalops.domain.specs import AuthoritySpec
    from tests.sshkeys import make_key

    key = make_key(tmp_path, "ec", "ecdsa256")
    payload = b"tree 0000\n\nloosen\n"
    sig = _compressed_signature(key, payload, "git", tmp_path / "commit.sig")
    authority = AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [{"id": "alice", "keys": [public_key(world.keys["alice"])]}],
            "roles": {"policy_owner": [{"principal": "alice"}]},
        }
    )
    refusal, signer = judge_commit(authority, "a" * 40, payload, sig.read_bytes())
    assert signer is None and refusal is not None and "malformed" in refusal


def test_one_key_in_two_encodings_is_one_principal(tmp_path: Path, cli: Cli) -> None:
    """An RSA key whose exponent is written with a leading zero byte is the same key."""
    import base64

    from tests.sshkeys import make_key

    key = make_key(tmp_path, "r", "rsa")
    line = public_key(key)
    blob = base64.b64decode(line.split()[1])

    def string(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    at = 4 + 7  # "ssh-rsa"
    e_len = int.from_bytes(blob[at : at + 4], "big")
    e = blob[at + 4 : at + 4 + e_len]
    padded = blob[:at] + string(b"\x00" + e) + blob[at + 4 + e_len :]
    other = f"ssh-rsa {base64.b64encode(padded).decode()} same"
    folder = tmp_path / "registry" / "policies"
    folder.mkdir(parents=True)
    doc = {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "alice", "keys": [line]}, {"id": "eve", "keys": [other]}],
        "roles": {"risk_owner": [{"principal": "alice"}, {"principal": "eve"}]},
        "thresholds": {"waiver.grant": 2},
    }
    (folder / "authority.yaml").write_text(json.dumps(doc), encoding="utf-8")
    done = cli("validate", str(tmp_path / "registry"))
    assert done.code == 2, done.stdout + done.stderr


def test_a_threshold_of_two_is_not_met_by_one_principal_with_two_keys(world: World) -> None:
    world.authority(
        principals=[
            {"id": "alice", "keys": [public_key(world.keys[k]) for k in ("alice", "mallory")]},
            {"id": "dave", "keys": [public_key(world.keys["dave"])]},
            {"id": "bob", "keys": [public_key(world.keys["bob"])]},
            {"id": "carol", "keys": [public_key(world.keys["carol"])]},
        ],
        thresholds={"waiver.grant": 2},
    )  # fmt: skip
    act = world.print_act()
    first = sign_file(world.keys["alice"], act)
    second = act.with_suffix(".m.sig")
    second.write_bytes(subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "evalops", "-f", str(world.keys["mallory"])],
        input=act.read_bytes(), capture_output=True, check=True,
    ).stdout)  # fmt: skip
    done = world.grant("--act", str(act), "--signature", str(first), "--signature", str(second))
    assert done.code == 5 and "needs 2 distinct signers, has 1 (alice)" in done.stdout


# ------------------------------------------------------------ refusals visible, scopes closed


def test_a_waiver_the_authority_refused_is_listed_by_the_gate(any_engine: World) -> None:
    w = any_engine
    refused = w.grant("--sign-with", str(w.keys["carol"]))  # carol: capability/* only
    assert refused.code == 5, refused.stdout + refused.stderr
    decided = _gate(w)
    listed = [r for r in decided["waivers"]["refused"] if r["rules"] == ["authority"]]
    assert len(listed) == 1, decided["waivers"]
    assert listed[0]["task_id"] == TASK and "carol" in listed[0]["refusal"]
    assert w.run("verify").code == 0  # the plain-SQL loader lists it too


#: Which grants may sign which acts, from the contract's words (docs/authority.md): a grant
#: "scoped" to suites or tasks covers only acts inside its globs, and an act naming no suite
#: (or no task) is inside no glob. Written out by hand, not computed by the code under test.
SCOPE_TABLE = [
    # (grant suites, grant tasks, act kind, act suite, act task, may sign)
    ([], [], "calibration.invalidate", None, None, True),
    (["smoke/*"], [], "calibration.invalidate", None, None, False),
    (["smoke/*"], [], "calibration.record", None, None, False),
    ([], ["t-*"], "calibration.record", None, None, False),
    (["smoke/*"], [], "trials.ingest", None, None, False),
    (["smoke/*"], [], "review.resolve", None, "t-1", False),
    ([], ["t-*"], "review.resolve", None, "t-1", True),
    ([], ["t-*"], "review.resolve", None, "u-1", False),
    (["smoke/*"], [], "waiver.grant", "smoke/a", "t-1", True),
    (["smoke/*"], [], "waiver.grant", "regression/a", "t-1", False),
    (["smoke/*"], ["t-*"], "waiver.grant", "smoke/a", "u-1", False),
    (["smoke/*"], ["t-*"], "waiver.grant", "smoke/a", "t-1", True),
]


@pytest.mark.parametrize("row", SCOPE_TABLE)
def test_a_scoped_grant_never_covers_an_act_outside_its_scope(
    row: tuple[list[str], list[str], str, str | None, str | None, bool],
) -> None:
    suites, tasks, kind, suite, task, may = row
    from evalops.domain.act_roles import ACT_ROLES
    from evalops.domain.authority import Scope, role_refusal
    from evalops.domain.specs import AuthoritySpec

    grant: dict[str, Any] = {"principal": "p"}
    if suites:
        grant["suites"] = suites
    if tasks:
        grant["tasks"] = tasks
    authority = AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [{"id": "p", "keys": [_ED25519]}],
            "roles": {ACT_ROLES[kind]: [grant]},
        }
    )
    refusal = role_refusal(authority, "p", kind, Scope(suite=suite, task=task))
    assert (refusal is None) is may, refusal


_ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl p"


@pytest.mark.parametrize(
    ("roles", "thresholds", "ok"),
    [
        # Two calibrators, one scoped to smoke/*: a calibration names no suite, so only one
        # principal can ever sign it.
        ({"calibrator": [{"principal": "a"}, {"principal": "b", "suites": ["smoke/*"]}]},
         {"calibration.record": 2}, False),
        ({"calibrator": [{"principal": "a"}, {"principal": "b"}]},
         {"calibration.record": 2}, True),
        # Risk owners of two disjoint suites never sign one waiver together.
        ({"risk_owner": [{"principal": "a", "suites": ["regression/*"]},
                         {"principal": "b", "suites": ["capability/*"]}]},
         {"waiver.grant": 2}, False),
        ({"risk_owner": [{"principal": "a", "suites": ["regression/*"]},
                         {"principal": "b"}]},
         {"waiver.grant": 2}, True),
        # A reviewer scoped to suites reviews nothing (a review names a task only).
        ({"reviewer": [{"principal": "a"}, {"principal": "b", "suites": ["smoke/*"]}]},
         {"review.resolve": 2}, False),
        ({"reviewer": [{"principal": "a"}, {"principal": "b", "tasks": ["t-*"]}]},
         {"review.resolve": 2}, True),
    ],
)  # fmt: skip
def test_a_threshold_is_validated_against_scope(
    tmp_path: Path, cli: Cli, roles: dict[str, Any], thresholds: dict[str, int], ok: bool
) -> None:
    folder = tmp_path / "registry" / "policies"
    folder.mkdir(parents=True)
    doc = {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "a", "keys": [_ED25519]}, {"id": "b", "keys": [_ED25519_B]}],
        "roles": roles,
        "thresholds": thresholds,
    }
    (folder / "authority.yaml").write_text(json.dumps(doc), encoding="utf-8")
    done = cli("validate", str(tmp_path / "registry"))
    assert done.code == (0 if ok else 2), done.stdout + done.stderr
    if not ok:
        assert "thresholds" in done.stderr and "distinct signers" in done.stderr
    # The stored view (verify's) vouches for exactly the documents the model accepts.
    from evalops.domain.stored_authority import NotAView, StoredAuthority

    try:
        StoredAuthority.of(doc)
        viewed = True
    except NotAView:
        viewed = False
    assert viewed is ok


_ED25519_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7cHmI3sW9mZ5T0Nq9fLqS6p0oBq4n1pYh1y6d2H9Qx b"


# ------------------------------------------------------------ next: under an authority


def test_next_steps_under_an_authority_sign_and_name_who_may(world: World) -> None:
    """A held failing task: the waiver command carries --sign-with KEY and names the risk
    owners of the suite (from the authority, not placeholders)."""
    revoked = world.run("waiver", "revoke", "WVR-1", "--reason", "gone",
                        "--sign-with", str(world.keys["dave"]))  # fmt: skip
    assert revoked.code == 0, revoked.stdout
    done = world.run("gate", "check", "--build", "build-125", "--suite", SUITE)
    waive = [line for line in done.stdout.splitlines() if "evalops waiver grant" in line]
    assert waive, done.stdout
    assert "--sign-with KEY`" in waive[0]
    assert f"(risk_owner for {SUITE}: alice, dave)" in waive[0]


def test_next_steps_fill_in_the_awaited_grader(world: World) -> None:
    assert _ingest(world, "bob").code == 0  # review-me: reply-quality abstained
    done = world.run("gate", "check", "--build", "build-125", "--suite", SUITE)
    review = [line for line in done.stdout.splitlines() if "evalops review resolve" in line]
    assert review, done.stdout
    assert "--grader reply-quality " in review[0] and "--sign-with KEY`" in review[0]
    # bob signed the trial's ingest: no_self_review bars him, so carol alone is named.
    assert "(reviewer for " in review[0] and review[0].endswith(": carol)")


def test_without_an_authority_next_steps_are_as_before(demo: Path, cli: Cli) -> None:
    assert cli("waiver", "revoke", "WVR-1", "--reason", "gone", cwd=demo).code == 0
    done = cli("gate", "check", "--build", "build-125", "--suite", SUITE, cwd=demo)
    waive = [line for line in done.stdout.splitlines() if "evalops waiver grant" in line]
    assert waive and "--sign-with" not in waive[0] and "risk_owner" not in waive[0]


# ------------------------------------------------------------ export attestation with SSH keys


def test_an_attestation_signed_with_an_openssh_ed25519_key(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """The key every signed act uses signs the attestation too; securesystemslib verifies the
    envelope with the key id it derives itself, and verify-attestation takes the .pub."""
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    from tests.sshkeys import make_key

    key = make_key(tmp_path, "release")
    out = tmp_path / "gate.intoto.json"
    done = cli("export", "attestation", "--gate", "GATE-3", "--sign-with", str(key),
               "-o", str(out), cwd=demo)  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    private = load_ssh_private_key(key.read_bytes(), None)
    verifier = SSlibKey.from_crypto(private.public_key())  # type: ignore[arg-type]
    envelope = Envelope.from_dict(json.loads(out.read_text(encoding="utf-8")))
    assert list(envelope.verify([verifier], 1)) == [verifier.keyid]
    checked = cli("verify-attestation", str(out), "--key", f"{key}.pub", cwd=demo)
    assert checked.code == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("kind", ["ecdsa256", "rsa"])
def test_an_attestation_key_of_the_wrong_kind_says_which_is_expected(
    demo: Path, cli: Cli, tmp_path: Path, kind: str
) -> None:
    from tests.sshkeys import make_key

    key = make_key(tmp_path, "release", kind)
    done = cli("export", "attestation", "--gate", "GATE-3", "--sign-with", str(key),
               "-o", str(tmp_path / "out.json"), cwd=demo)  # fmt: skip
    assert done.code == 2, done.stdout + done.stderr
    assert "Ed25519" in done.stderr and ("ECDSA" in done.stderr or "RSA" in done.stderr)
    assert "MalformedFraming" not in done.stderr


def test_the_report_names_who_signed_each_waiver_on_its_line(world: World) -> None:
    """Not only in the Authority section: the waiver's own line says who signed it."""
    revoked = world.run("waiver", "revoke", "WVR-1", "--reason", "re-signed",
                        "--sign-with", str(world.keys["alice"]))  # fmt: skip
    assert revoked.code == 0
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    gate_id = _gate(world)["gate_id"]
    for fmt, signed in (("md", "signed by `dave`"), ("html", "(signed by dave (")):
        out = world.root / f"report.{fmt}"
        done = world.run("report", "audit", "--gate", gate_id, "-o", str(out))
        assert done.code == 0, done.stdout + done.stderr
        lines = [line for line in out.read_text().splitlines() if "WVR-2" in line]
        waived = [line for line in lines if "aived by" in line]
        assert waived and signed in waived[0], lines


def test_verify_checks_each_acts_registry(
    any_engine: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acts of this database checked as if it were another registry (its first event
    naming another id): every signed act is then an act of another registry, exit 6."""
    from evalops.services.verify import act_checks

    w = any_engine
    assert w.grant("--sign-with", str(w.keys["dave"])).code == 0
    assert w.run("verify").code == 0
    monkeypatch.setattr(
        act_checks, "registry_id_of", lambda reader: "00000000-0000-4000-8000-000000000000"
    )
    done = w.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert "an act of registry" in done.stderr and "not of this one" in done.stderr


def _review_signed(world: World, who: str) -> None:
    """`who` resolves review-me's abstained judge as a pass, signed."""
    done = world.run(
        "review", "resolve", "review-me", "--grader", "reply-quality", "--state", "task_pass",
        "--reason", "read it", "--sign-with", str(world.keys[who]),
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr


def _task_entry(decided: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [t for t in decided["tasks"] if t["task_id"] == TASK]
    return entry


def test_a_review_by_the_signer_of_the_trials_ingest_is_no_evidence_in_the_gate(
    any_engine: World,
) -> None:
    """bob signed review-me's ingest and then its review while the rule was not declared;
    once `no_self_review` is declared, the gate counts the review as no human evidence:
    the task stands as it stood before any review (both loaders: verify agrees)."""
    w = any_engine
    w.authority(**NO_SEPARATION)
    assert _ingest(w, "bob").code == 0
    unreviewed = _task_entry(_gate(w))
    _review_signed(w, "bob")
    reviewed = _task_entry(_gate(w))
    assert reviewed != unreviewed  # the review counts while the rule is not declared
    w.authority()  # both rules declared, by alice's signed commit
    assert _task_entry(_gate(w)) == unreviewed
    assert w.run("verify").code == 0  # the plain-SQL loader rebuilds the same inputs


def test_a_review_by_another_reviewer_still_counts_under_the_rule(any_engine: World) -> None:
    """The rule leaves out only the ingest signer's review: carol's review of bob's
    ingest counts, before and after the rule is declared."""
    w = any_engine
    w.authority(**NO_SEPARATION)
    assert _ingest(w, "bob").code == 0
    unreviewed = _task_entry(_gate(w))
    _review_signed(w, "carol")
    reviewed = _task_entry(_gate(w))
    assert reviewed != unreviewed
    w.authority()
    assert _task_entry(_gate(w)) == reviewed
    assert w.run("verify").code == 0


def test_a_review_of_a_trial_ingested_again_is_judged_against_its_own_ingest(
    any_engine: World,
) -> None:
    """bob signed the ingest of review-me; dave voided it; alice ingested corrected content
    under the same id, and bob reviewed that trial. The review is of alice's ingest, so
    no_self_review does not bar it: `review resolve` accepts it, the gate counts it, and
    `verify` agrees (the voided row bob ingested is not the trial reviewed)."""
    w = any_engine
    assert w.run("trials", "ingest", str(_review_me(w, "review-me", 10)),
                 "--sign-with", str(w.keys["bob"])).code == 0  # fmt: skip
    voided = w.run("trials", "void", "review-me", "--reason", "wrong harness",
                   "--sign-with", str(w.keys["dave"]))  # fmt: skip
    assert voided.code == 0, voided.stdout + voided.stderr
    again = w.run("trials", "ingest", str(_review_me(w, "review-me", 11)),
                  "--sign-with", str(w.keys["alice"]))  # fmt: skip
    assert again.code == 0, again.stdout + again.stderr
    unreviewed = _task_entry(_gate(w))
    _review_signed(w, "bob")
    reviewed = _task_entry(_gate(w))
    assert reviewed != unreviewed  # counted as human evidence
    assert reviewed["passedCount"] == unreviewed["passedCount"] + 1
    checked = w.run("verify")
    assert checked.code == 0, checked.stdout + checked.stderr


# ------------------------------------------------- reconciliation: a risk owner's signed act


def _ambiguous(world: World) -> Path:
    """A sixth build-125 trial of the critical refund task whose refund came back unknown:
    an ambiguous external effect, which holds the build."""
    for line in (world.root / "registry/trials/fix-b125.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["task_id"] == "support-refund-in-order" and record["trial_index"] == 0:
            break
    record.update(trial_id="amb-1", trial_index=5)
    record["external_effects"] = [{"effect_key": "refund:A-1", "status": "unknown"}]
    path = world.root / "amb-1.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _refund_state(world: World) -> str:
    [task] = [t for t in _gate(world)["tasks"] if t["task_id"] == "support-refund-in-order"]
    return str(task["state"])


def test_a_reconciliation_that_lifts_an_ambiguous_hold_is_a_risk_owner_s_signed_act(
    any_engine: World,
) -> None:
    """Voiding the ambiguous trial needs two risk owners; settling its effect as not
    committed lifts the same hold. Under an authority an unsigned claim, or one signed by a
    principal without the role, is refused (exit 5, audited, nothing stored); a risk owner
    of the task's suites signs it, and `verify` re-verifies that signature."""
    w = any_engine
    done = w.run("trials", "ingest", str(_ambiguous(w)), "--sign-with", str(w.keys["bob"]))
    assert done.code == 0, done.stdout + done.stderr
    assert _refund_state(w) == "ambiguous_external_effect"
    settle = ("trials", "reconcile", "amb-1", "--effect", "refund:A-1", "--status",
              "not_committed", "--evidence", "https://payments.example.com/RF-none")  # fmt: skip
    for signer in ([], ["--sign-with", str(w.keys["bob"])]):
        seq = w.last_event()["seq"]
        refused = w.run(*settle, *signer)
        assert refused.code == 5, refused.stdout + refused.stderr
        assert "trials.reconcile refused" in refused.stderr
        assert w.last_event()["seq"] == seq + 1  # the refusal audited
        assert w.sql("SELECT count(*) FROM reconciliation WHERE trial_id = 'amb-1'") == [(0,)]
        assert _refund_state(w) == "ambiguous_external_effect"
    signed = w.run(*settle, "--sign-with", str(w.keys["dave"]))
    assert signed.code == 0, signed.stdout + signed.stderr
    assert "signed by dave (SHA256:" in signed.stdout
    assert w.sql("SELECT count(*) FROM signed_act WHERE kind = 'trials.reconcile'") == [(1,)]
    assert _refund_state(w) == "task_pass"
    assert w.run("verify").code == 0
    # The audit report of a decision that rests on it names the act and its signer.
    gate_id = _gate(w)["gate_id"]
    report = w.run("report", "audit", gate_id, "--format", "json", "-o", "-")
    acts = json.loads(report.stdout)["authority"]["acts"]
    reconciled = [a for a in acts if a["act"] == "trials.reconcile"]
    assert [(a["subject"], [s["principal"] for s in a["signers"]]) for a in reconciled] == [
        ("1 reconciliation", ["dave"])
    ]
    reviewed_or_voided = [a["act"] for a in acts if a["act"] in ("review.resolve", "trials.void")]
    assert reviewed_or_voided == []  # none of this build's trials was reviewed or voided
