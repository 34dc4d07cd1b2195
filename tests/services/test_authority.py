"""Signed acts under an authority, attacked (docs/authority.md).

Real keys from `ssh-keygen`, real `ssh-keygen -Y sign` signatures, on a copy of the demo
registry with an authority committed and synced. Each refusal is exit 5, audited, names its
reason and stores no waiver; tampering with stored acts is `verify` exit 6.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.authority import META_FIELDS
from evalops.domain.vocabulary import format_timestamp, parse_timestamp
from tests.conftest import PINNED_NOW, Cli, pg_holding
from tests.helpers import commit_all, pack_repositories
from tests.sshkeys import make_key, public_key, sign_file

DB = Path(".evalops/registry.db")
TASK = "support-refund-policy-explanation"
SUITE = "regression/core"


@dataclass
class World:
    root: Path
    db: list[str]
    keys: dict[str, Path]
    cli: Cli
    synced: bool = False

    def run(self, *args: str) -> Any:
        return self.cli(*self.db, *args, cwd=self.root)

    def grant(self, *extra: str, reason: str = "flaky judge") -> Any:
        return self.run(
            "waiver", "grant", "--task", TASK, "--suite", SUITE, "--states", "task_fail",
            "--build", "build-125", "--owner", "lead@example.com", "--reason", reason,
            "--expires", "20d", *extra,
        )  # fmt: skip

    def waivers(self) -> list[dict[str, Any]]:
        done = self.run("waiver", "list", "--all", "--json")
        assert done.code == 0, done.stderr
        rows: list[dict[str, Any]] = done.json()
        return rows

    def sql(self, query: str) -> list[Any]:
        """Rows of a query on this world's database, SQLite or PostgreSQL."""
        from sqlalchemy import create_engine, text

        engine = create_engine(self.db[1] if self.db else f"sqlite:///{self.root / DB}")
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(query)).all())
        finally:
            engine.dispose()

    def last_event(self) -> dict[str, Any]:
        done = self.run("verify", "--json")
        assert done.code == 0, done.stdout + done.stderr
        head: dict[str, Any] = done.json()["audit_head"]
        return head

    def authority(self, **changes: Any) -> None:
        """Write, commit and sync the authority (changes override the defaults)."""
        doc: dict[str, Any] = {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [
                {"id": name, "keys": [public_key(self.keys[name])]}
                for name in ("alice", "bob", "carol", "dave")
            ],
            "roles": {
                "risk_owner": [
                    {"principal": "alice", "suites": ["regression/*"]},
                    {"principal": "carol", "suites": ["capability/*"]},
                    {"principal": "dave"},
                ],
                "reviewer": [{"principal": "bob"}, {"principal": "carol"}],
                "ingester": [{"principal": "alice"}, {"principal": "bob"}],
                "calibrator": [{"principal": "bob"}],
                "policy_owner": [{"principal": "alice"}],
            },
            "separation_of_duties": ["no_self_waiver", "no_self_review"],
            "max_act_age_days": 7,
            **changes,
        }
        path = self.root / "registry" / "policies" / "authority.yaml"
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        if self.synced:
            signed_commit(self.root, self.keys["alice"], "authority")  # alice: policy owner
        else:
            commit_all(self.root, "authority")  # the bootstrap: nobody could sign it
        done = self.run("sync", "registry")
        assert done.code == 0, done.stdout + done.stderr
        self.synced = True

    def print_act(self, *extra: str, reason: str = "flaky judge") -> Path:
        done = self.grant("--print-act", *extra, reason=reason)
        assert done.code == 0, done.stderr
        path = self.root / f"act-{len(list(self.root.glob('act-*.json')))}.json"
        path.write_text(done.stdout, encoding="utf-8")
        return path


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("alice", "bob", "carol", "dave", "mallory")}


def signed_commit(root: Path, key: Path | None, message: str) -> str:
    """`git commit -S` with an SSH key (git's gpg.format ssh); key None: unsigned."""
    config = ["-c", "user.email=policy@example.com", "-c", "user.name=policy"]
    if key is not None:
        config += ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}.pub"]
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, capture_output=True)
    subprocess.run(
        ["git", *config, "commit", "-q", *(["-S"] if key else []), "-m", message],
        cwd=root, check=True, capture_output=True,
    )  # fmt: skip
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


# The SQLite world (the demo with the authority committed and synced: a git commit and a
# sync) built once per keyring in a test process, beside the keys; each test gets a private
# copy, since tests write to it. A PostgreSQL world is built per test (its database is).
_WORLD_MASTERS: dict[tuple[tuple[str, str], ...], Path] = {}


def _world(demo: Path, keyring: dict[str, Path], cli: Cli, db: list[str]) -> World:
    if db:
        world = World(demo, db, keyring, cli)
        world.authority()
        return world
    key = tuple(sorted((name, str(path)) for name, path in keyring.items()))
    master = _WORLD_MASTERS.get(key)
    if master is None:
        # Built by this test's own `cli`, clock and actor, from its untouched demo copy.
        master = next(iter(keyring.values())).parent / "world-master"
        shutil.copytree(demo, master, symlinks=True)
        World(master, [], keyring, cli).authority()
        pack_repositories(master)  # the commit's loose objects: fewer files to copy
        _WORLD_MASTERS[key] = master
    shutil.rmtree(demo)
    shutil.copytree(master, demo, symlinks=True)
    return World(demo, db, keyring, cli, synced=True)


@pytest.fixture
def world(demo: Path, keyring: dict[str, Path], cli: Cli) -> World:
    return _world(demo, keyring, cli, [])


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_engine(
    request: pytest.FixtureRequest, demo: Path, keyring: dict[str, Path], cli: Cli
) -> World:
    if request.param == "sqlite":
        return _world(demo, keyring, cli, [])
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _world(demo, keyring, cli, ["--db", url])


def _refused(world: World, done: Any, *words: str) -> None:
    """Exit 5, the reason named, no waiver stored, the refusal audited."""
    assert done.code == 5, done.stdout + done.stderr
    for word in words:
        assert word in done.stdout, done.stdout
    assert [w["waiver_id"] for w in world.waivers()] == ["WVR-1"]


def _fingerprint(key: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()[1]


# ------------------------------------------------------------------ the honest paths


def test_two_step_signing_stores_the_act_and_verifies(any_engine: World) -> None:
    w = any_engine
    act = w.print_act()
    assert json.loads(act.read_text())["act"] == "waiver.grant"
    assert w.waivers()[-1]["waiver_id"] == "WVR-1"  # --print-act stored nothing
    signature = sign_file(w.keys["alice"], act)
    done = w.grant("--act", str(act), "--signature", str(signature), "--json")
    assert done.code == 0, done.stdout + done.stderr
    stored = w.waivers()[-1]
    assert stored["signers"] == [
        {"principal": "alice", "fingerprint": _fingerprint(w.keys["alice"])}
    ]
    # A relative --expires resolved against the act's signed_at in both steps.
    signed_at = parse_timestamp(json.loads(act.read_text())["signed_at"])
    assert stored["expires_at"] == format_timestamp(signed_at + timedelta(days=20))
    assert w.run("verify").code == 0
    human = w.run("waiver", "list")
    assert f"signed by alice ({_fingerprint(w.keys['alice'])})" in human.stdout


def test_sign_with_runs_ssh_keygen(world: World) -> None:
    done = world.grant("--sign-with", str(world.keys["dave"]))
    assert done.code == 0, done.stdout + done.stderr
    assert world.waivers()[-1]["signers"][0]["principal"] == "dave"
    # A key path that names no file is exit 2 saying so, nothing recorded (ssh-keygen
    # said "Couldn't load public key" of it).
    before = world.last_event()["seq"]
    missing = world.grant("--sign-with", str(world.root / "no-such-key"))
    assert missing.code == 2, missing.stdout + missing.stderr
    assert "no such key file" in missing.stderr and "--sign-with" in missing.stderr
    assert world.last_event()["seq"] == before
    # A directory exists, but is no key (ssh-keygen said "No such file or directory").
    folder = world.grant("--sign-with", str(world.root))
    assert folder.code == 2, folder.stdout + folder.stderr
    assert "a directory, not a key file" in folder.stderr and "--sign-with" in folder.stderr
    assert world.last_event()["seq"] == before
    # Asked to print the act and to sign it at once: the option it cannot go with is named.
    both = world.grant("--print-act", "--sign-with", str(world.keys["dave"]))
    assert both.code == 2, both.stdout + both.stderr
    assert both.stdout == ""
    assert "--print-act" in both.stderr and "not with --sign-with" in both.stderr, both.stderr
    assert world.last_event()["seq"] == before


# ------------------------------------------------------------------ every refusal


def test_unsigned_is_refused_and_audited(world: World) -> None:
    before = world.last_event()["seq"]
    _refused(world, world.grant(), "unsigned", "--sign-with")
    assert world.last_event()["seq"] == before + 1
    with sqlite3.connect(world.root / DB) as con:
        kind = con.execute("SELECT kind FROM audit_event ORDER BY seq DESC LIMIT 1").fetchone()
    assert kind == ("authority.refused",)


def test_unknown_key_is_refused(world: World) -> None:
    _refused(world, world.grant("--sign-with", str(world.keys["mallory"])), "not a key of any")


def test_principal_without_the_role_is_refused(world: World) -> None:
    _refused(
        world, world.grant("--sign-with", str(world.keys["bob"])), "'bob' does not hold risk_owner"
    )


def test_principal_outside_its_scope_is_refused(world: World) -> None:
    _refused(
        world,
        world.grant("--sign-with", str(world.keys["carol"])),
        "'carol' holds risk_owner but not for suite 'regression/core'",
    )


def test_wrong_namespace_is_refused(world: World) -> None:
    act = world.print_act()
    signature = sign_file(world.keys["alice"], act, namespace="git")
    _refused(
        world, world.grant("--act", str(act), "--signature", str(signature)), "namespace 'git'"
    )


def test_an_act_differing_in_one_field_is_refused(world: World) -> None:
    """The signer saw reason A; the command is run with reason B."""
    act = world.print_act(reason="flaky judge")
    signature = sign_file(world.keys["alice"], act)
    done = world.grant("--act", str(act), "--signature", str(signature), reason="flaky judgE")
    _refused(world, done, "differs from what this command would store", "reason")


def test_an_act_differing_in_one_byte_is_refused(world: World) -> None:
    """Same JSON value, other bytes (a space): the signed bytes are what is compared."""
    act = world.print_act()
    act.write_text(act.read_text().replace('"act":', '"act": ', 1), encoding="utf-8")
    signature = sign_file(world.keys["alice"], act)
    _refused(world, world.grant("--act", str(act), "--signature", str(signature)), "differ")


def test_a_valid_signature_of_another_act_is_refused(any_engine: World) -> None:
    """A forged act carrying the signature of an act the risk owner did sign."""
    world = any_engine
    signed = world.print_act(reason="the act alice read")
    signature = sign_file(world.keys["alice"], signed)
    forged = world.print_act(reason="what mallory wants")
    done = world.grant(
        "--act", str(forged), "--signature", str(signature), reason="what mallory wants"
    )
    _refused(world, done, "does not match")


def test_an_act_older_than_max_act_age_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    act = world.print_act()
    signature = sign_file(world.keys["alice"], act)
    later = parse_timestamp(PINNED_NOW) + timedelta(days=8)
    monkeypatch.setenv("EVALOPS_NOW", format_timestamp(later))
    _refused(
        world, world.grant("--act", str(act), "--signature", str(signature)), "max_act_age_days 7"
    )


def test_an_act_signed_in_the_future_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lying clock on the signer's machine."""
    monkeypatch.setenv(
        "EVALOPS_NOW", format_timestamp(parse_timestamp(PINNED_NOW) + timedelta(days=1))
    )
    act = world.print_act()
    signature = sign_file(world.keys["alice"], act)
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    _refused(world, world.grant("--act", str(act), "--signature", str(signature)), "in the future")


def test_an_act_under_another_authority_is_refused(world: World) -> None:
    act = world.print_act()
    signature = sign_file(world.keys["alice"], act)
    world.authority(max_act_age_days=3)  # a new authority digest in force
    _refused(
        world,
        world.grant("--act", str(act), "--signature", str(signature)),
        "signed under authority",
    )


def test_a_replayed_act_is_refused(any_engine: World) -> None:
    w = any_engine
    act = w.print_act()
    signature = sign_file(w.keys["alice"], act)
    assert w.grant("--act", str(act), "--signature", str(signature)).code == 0
    again = w.grant("--act", str(act), "--signature", str(signature))
    assert again.code == 5 and "already used" in again.stdout
    assert [x["waiver_id"] for x in w.waivers()] == ["WVR-1", "WVR-2"]


def test_a_threshold_of_two_is_not_met_by_one_key_twice(any_engine: World) -> None:
    world = any_engine
    world.authority(thresholds={"waiver.grant": 2})
    act = world.print_act()
    first = sign_file(world.keys["alice"], act)
    second = act.with_suffix(".again.sig")
    second.write_bytes(subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "evalops", "-f", str(world.keys["alice"])],
        input=act.read_bytes(), capture_output=True, check=True,
    ).stdout)  # fmt: skip
    done = world.grant("--act", str(act), "--signature", str(first), "--signature", str(second))
    _refused(world, done, "needs 2 distinct signers, has 1 (alice)")
    dave = act.with_suffix(".dave.sig")
    dave.write_bytes(second.read_bytes())
    dave.write_bytes(subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-n", "evalops", "-f", str(world.keys["dave"])],
        input=act.read_bytes(), capture_output=True, check=True,
    ).stdout)  # fmt: skip
    done = world.grant("--act", str(act), "--signature", str(first), "--signature", str(dave))
    assert done.code == 0, done.stdout
    assert {s["principal"] for s in world.waivers()[-1]["signers"]} == {"alice", "dave"}


def test_revoke_is_a_signed_act_too(world: World) -> None:
    refused = world.run("waiver", "revoke", "WVR-1", "--reason", "no")
    assert refused.code == 5 and "unsigned" in refused.stdout
    done = world.run(
        "waiver", "revoke", "WVR-1", "--reason", "no", "--sign-with", str(world.keys["alice"])
    )
    assert done.code == 0, done.stdout + done.stderr
    assert world.waivers()[0]["revocation_signers"][0]["principal"] == "alice"
    assert world.run("verify").code == 0


# ------------------------------------------------------------------ bad input: exit 2


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a signature",
        b"-----BEGIN SSH SIGNATURE-----\nU1NI\n-----END SSH SIGNATURE-----\n",
    ],
)
def test_a_malformed_signature_file_is_exit_2_and_records_nothing(
    world: World, content: bytes
) -> None:
    act = world.print_act()
    bad = world.root / "bad.sig"
    bad.write_bytes(content)
    before = world.last_event()["seq"]
    done = world.grant("--act", str(act), "--signature", str(bad))
    assert done.code == 2
    assert "bad.sig" in done.stderr and "--signature" in done.stderr
    assert world.last_event()["seq"] == before


def test_signing_without_an_authority_is_exit_2(
    demo: Path, cli: Cli, keyring: dict[str, Path]
) -> None:
    done = cli(
        "waiver", "grant", "--task", TASK, "--suite", SUITE, "--states", "task_fail",
        "--build", "build-125", "--owner", "o@example.com", "--reason", "r", "--expires", "7d",
        "--sign-with", str(keyring["alice"]), cwd=demo,
    )  # fmt: skip
    assert done.code == 2 and "no authority is in force" in done.stderr


def test_without_an_authority_waivers_say_unsigned(demo: Path, cli: Cli) -> None:
    listed = cli("waiver", "list", "--all", cwd=demo)
    assert "unsigned" in listed.stdout
    assert cli("waiver", "list", "--all", "--json", cwd=demo).json()[0]["signers"] == []


# ------------------------------------------------------------------ verify: exit 6


def test_a_signature_moved_to_another_row_by_sql_is_exit_6(any_engine: World) -> None:
    w = any_engine
    for reason in ("first", "second"):
        done = w.grant("--sign-with", str(w.keys["alice"]), reason=reason)
        assert done.code == 0, done.stdout
    assert w.run("verify").code == 0
    from sqlalchemy import create_engine, text

    url = w.db[1] if w.db else f"sqlite:///{w.root / DB}"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SET session_replication_role = replica"))
            first, second = conn.execute(
                text("SELECT id, signatures, act FROM signed_act ORDER BY id")
            ).all()
            # The second waiver now carries the first one's act and signature.
            conn.execute(
                text("UPDATE signed_act SET signatures = :s, act = :a WHERE id = :i"),
                {"s": first.signatures, "a": first.act, "i": second.id},
            )
    finally:
        engine.dispose()
    done = w.run("verify")
    assert done.code == 6 and "signed_act" in done.stderr


def test_a_later_key_removal_voids_nothing_earlier(any_engine: World) -> None:
    world = any_engine
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    world.authority(
        principals=[
            {"id": name, "keys": [public_key(world.keys[name])]}
            for name in ("alice", "bob", "carol")
        ],
        roles={"risk_owner": [{"principal": "alice"}]},
    )
    assert world.run("verify").code == 0
    # The removed key, used after its removal: refused at once.
    refused = world.grant("--sign-with", str(world.keys["dave"]), reason="after removal")
    assert refused.code == 5 and "not a key of any principal" in refused.stdout
    assert [w["waiver_id"] for w in world.waivers()] == ["WVR-1", "WVR-2"]


def test_an_act_signed_with_a_key_removed_before_it_is_exit_6(
    any_engine: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compromised evalops that stored an act of a removed key keeps its chain consistent:
    only re-verifying each signature against the authority of its time finds it."""
    from evalops.services.authority import acts as authority

    world = any_engine
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
    done = world.run("verify")
    assert done.code == 6, done.stdout
    assert "not a key of any principal" in done.stderr or "signed under" in done.stderr


# ------------------------------------------------------------------ the authority file


def _validate(tmp_path: Path, cli: Cli, doc: dict[str, Any], name: str = "authority.yaml") -> Any:
    folder = tmp_path / "registry" / "policies"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return cli("validate", str(tmp_path / "registry"))


def _doc(key: str, **changes: Any) -> dict[str, Any]:
    return {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "alice", "keys": [key]}],
        "roles": {"risk_owner": [{"principal": "alice"}]},
        **changes,
    }


def test_validate_names_a_key_that_does_not_parse(tmp_path: Path, cli: Cli) -> None:
    done = _validate(tmp_path, cli, _doc("ssh-ed25519 AAAAnot-a-key alice"))
    assert done.code == 2
    assert "authority.yaml:" in done.stderr and "principals[0].keys[0]" in done.stderr


def test_validate_refuses_an_unreachable_threshold_and_unknown_principals(
    tmp_path: Path, cli: Cli, keyring: dict[str, Path]
) -> None:
    key = public_key(keyring["alice"])
    assert _validate(tmp_path, cli, _doc(key)).code == 0
    done = _validate(tmp_path, cli, _doc(key, thresholds={"waiver.grant": 2}))
    assert done.code == 2 and "needs 2 distinct signers" in done.stderr
    done = _validate(tmp_path, cli, _doc(key, roles={"reviewer": [{"principal": "zed"}]}))
    assert done.code == 2 and "unknown principal 'zed'" in done.stderr


def test_at_most_one_authority(tmp_path: Path, cli: Cli, keyring: dict[str, Path]) -> None:
    key = public_key(keyring["alice"])
    _validate(tmp_path, cli, _doc(key))
    done = _validate(tmp_path, cli, {**_doc(key), "id": "second"}, "second.yaml")
    assert done.code == 2 and "at most one authority" in done.stderr


# ------------------------------------------------------------------ ingest and review


def _review_me(world: World, trial_id: str = "review-me", index: int = 10) -> Path:
    """A build-125 trial whose judge abstained: it waits for a person's review."""
    for line in (world.root / "registry/trials/fix-b125.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["task_id"] == TASK and record["trial_index"] == 0:
            break
    record.update(trial_id=trial_id, trial_index=index)
    record.pop("primary_classification", None)
    for result in record["grader_results"]:
        if result["grader_id"] == "reply-quality":
            result["state"] = "abstain"
            result.pop("score", None)
    path = world.root / f"{trial_id}.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def _trials(world: World) -> int:
    with sqlite3.connect(world.root / DB) as con:
        count: int = con.execute("SELECT count(*) FROM trial").fetchone()[0]
    return count


def test_an_unsigned_ingest_is_refused_audited_and_stores_nothing(world: World) -> None:
    before, seq = _trials(world), world.last_event()["seq"]
    done = world.run("trials", "ingest", str(_review_me(world)))
    assert done.code == 5 and "unsigned" in done.stderr
    assert _trials(world) == before
    assert world.last_event()["seq"] == seq + 1  # the refusal, and nothing else


def test_an_ingest_act_names_exactly_the_records_stored(world: World) -> None:
    """The act printed for one file does not cover another (records_digest differs)."""
    first = _review_me(world, "first")
    done = world.run("trials", "ingest", str(first), "--print-act")
    assert done.code == 0, done.stderr
    act = world.root / "ingest.json"
    act.write_text(done.stdout, encoding="utf-8")
    assert json.loads(done.stdout)["records"] == 1
    signature = sign_file(world.keys["alice"], act)
    other = _review_me(world, "other", 11)
    refused = world.run(
        "trials", "ingest", str(other), "--act", str(act), "--signature", str(signature)
    )
    assert refused.code == 5 and "records_digest" in refused.stderr
    stored = world.run(
        "trials", "ingest", str(first), "--act", str(act), "--signature", str(signature)
    )
    assert stored.code == 0, stored.stderr
    assert world.run("verify").code == 0


def test_no_self_waiver_and_no_self_review(world: World) -> None:
    ingest = world.run(
        "trials", "ingest", str(_review_me(world)), "--sign-with", str(world.keys["bob"])
    )
    assert ingest.code == 0, ingest.stderr
    # bob ingested build-125's trial: bob may not review it; carol may.
    review = ("review", "resolve", "review-me", "--grader", "reply-quality", "--state", "task_pass",
              "--reason", "read it")  # fmt: skip
    mine = world.run(*review, "--sign-with", str(world.keys["bob"]))
    assert mine.code == 5 and "no_self_review" in mine.stderr
    theirs = world.run(*review, "--sign-with", str(world.keys["carol"]))
    assert theirs.code == 0, theirs.stderr
    # alice ingests build-125 too: alice may no longer waive build-125; dave may.
    again = world.run(
        "trials",
        "ingest",
        str(_review_me(world, "more", 11)),
        "--sign-with",
        str(world.keys["alice"]),
    )
    assert again.code == 0, again.stderr
    _refused(
        world, world.grant("--sign-with", str(world.keys["alice"])), "[no_self_waiver]", "alice"
    )
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    assert world.run("verify").code == 0


def test_calibration_record_is_a_calibrators_signed_act(world: World) -> None:
    args = ("calibration", "record", "reply-quality", "--labels",
            "registry/calibration/reply-quality.jsonl")  # fmt: skip
    unsigned = world.run(*args)
    assert unsigned.code == 5 and "unsigned" in unsigned.stderr
    not_calibrator = world.run(*args, "--sign-with", str(world.keys["alice"]))
    assert not_calibrator.code == 5 and "does not hold calibrator" in not_calibrator.stderr
    signed = world.run(*args, "--sign-with", str(world.keys["bob"]), "--json")
    assert signed.code == 0, signed.stderr
    listed = world.run("calibration", "list", "--json").json()
    assert listed[-1]["signers"][0]["principal"] == "bob"
    assert all(row["signers"] == [] for row in listed[:-1])  # the demo's: unsigned
    assert "signed by bob (SHA256:" in world.run("calibration", "list").stdout
    assert world.run("verify").code == 0


def test_calibration_invalidate_is_a_calibrators_signed_act(world: World) -> None:
    """A stale calibration holds every release its grader judges: under an authority,
    withdrawing one takes a calibrator's signature as recording one does (unsigned, it let
    anyone hold a release while `calibration list` still named the recorder's signer)."""
    args = ("calibration", "invalidate", "reply-quality", "--reason", "label drift")

    def states() -> list[str]:
        return [row["state"] for row in world.run("calibration", "list", "--json").json()]

    before, seq = states(), world.last_event()["seq"]
    unsigned = world.run(*args)
    assert unsigned.code == 5 and "unsigned" in unsigned.stderr, unsigned.stderr
    not_calibrator = world.run(*args, "--sign-with", str(world.keys["alice"]))
    assert not_calibrator.code == 5 and "does not hold calibrator" in not_calibrator.stderr
    assert states() == before
    assert world.last_event()["seq"] == seq + 2  # both refusals audited, nothing else
    signed = world.run(*args, "--sign-with", str(world.keys["bob"]))
    assert signed.code == 0, signed.stdout + signed.stderr
    assert states()[-1] == "stale" and before[-1] != "stale"
    listed = world.run("calibration", "list", "--json").json()[-1]
    acts = world.sql("SELECT kind, subject FROM signed_act ORDER BY id")
    assert tuple(acts[-1]) == ("calibration.invalidate", listed["calibration_id"])
    # Who withdrew it, and who signed that, not only who recorded it.
    assert listed["invalidated"]["reason"] == "label drift"
    assert listed["invalidated"]["signers"][0]["principal"] == "bob"
    human = world.run("calibration", "list").stdout.splitlines()[-1]
    assert "invalidated " in human and "(signed by bob (SHA256:" in human.split("invalidated")[1]
    assert world.run("verify").code == 0


def test_retire_needs_the_threshold_of_risk_owners_who_are_its_approval(world: World) -> None:
    world.authority(thresholds={"retire": 2})
    args = ("retire", TASK, "--from", SUITE, "--reason", "obsolete", "--json")
    unsigned = world.run(*args)
    assert unsigned.code == 5 and "unsigned" in unsigned.stdout
    one = world.run(*args, "--sign-with", str(world.keys["alice"]))
    assert one.code == 5 and "needs 2 distinct signers" in one.stdout
    # The fix names the threshold and who may sign, from the authority's own roles.
    (requirement,) = one.json()["requirements"]
    document = json.loads((world.root / "registry" / "policies" / "authority.yaml").read_text())
    holders = [
        g["principal"]
        for g in document["roles"]["risk_owner"]
        if not g.get("suites") or any(fnmatch(SUITE, pattern) for pattern in g["suites"])
    ]
    assert requirement["fix"].startswith(f"a new act signed by 2 of {', '.join(holders)} ")
    two = world.run(
        *args, "--sign-with", str(world.keys["alice"]), "--sign-with", str(world.keys["dave"])
    )
    assert two.code == 0, two.stdout + two.stderr
    members = world.run("suite", "show", SUITE, "--json").json()
    assert TASK not in json.dumps(members.get("members", members))
    with sqlite3.connect(world.root / DB) as con:
        approved = con.execute(
            "SELECT approved_by FROM suite_membership WHERE action = 'retired'"
        ).fetchall()
    assert approved == [("alice, dave",)]
    assert world.run("verify").code == 0


# ------------------------------------------------------------------ changing the rules


def _loosen_gate_policy(world: World) -> None:
    policy = world.root / "registry" / "policies" / "gate-policy.yaml"
    policy.write_text(
        policy.read_text().replace("max_duration_days: 30", "max_duration_days: 60"), "utf-8"
    )


@pytest.mark.parametrize(
    ("signer", "expected", "words"),
    [
        (None, 5, "is not SSH-signed"),
        ("mallory", 5, "no principal's"),
        ("bob", 5, "'bob', who is not a policy_owner"),
        ("alice", 0, ""),
    ],
)
def test_a_rule_change_needs_a_policy_owners_signed_commit(
    any_engine: World, signer: str | None, expected: int, words: str
) -> None:
    world = any_engine
    _loosen_gate_policy(world)
    signed_commit(world.root, world.keys[signer] if signer else None, "loosen the waiver rule")
    before = world.last_event()["seq"]
    done = world.run("sync", "registry")
    assert done.code == expected, done.stdout + done.stderr
    assert words in done.stdout
    if expected == 5:
        assert world.last_event()["seq"] == before + 1  # the refusal is audited, nothing else
        policy = world.run("--json", "digest", "registry/policies/gate-policy.yaml").json()[0]
        in_force = world.sql(
            "SELECT document_digest FROM sync_in_force WHERE kind = 'gate_policy' "
            "AND sync_run_id = (SELECT max(id) FROM sync_run)"
        )
        assert policy["policy_digest"] not in {d for (d,) in in_force}


def test_every_commit_since_the_last_sync_must_be_signed(world: World) -> None:
    """A signed commit on top does not launder an unsigned one below it."""
    _loosen_gate_policy(world)
    signed_commit(world.root, None, "sneak it in")
    readme = world.root / "registry" / "policies" / "gate-policy.yaml"
    readme.write_text(readme.read_text() + "# reviewed\n", "utf-8")
    signed_commit(world.root, world.keys["alice"], "looks fine")
    done = world.run("sync", "registry")
    assert done.code == 5 and "is not SSH-signed" in done.stdout


def test_a_task_risk_label_change_is_a_rule_change(world: World) -> None:
    task = world.root / "registry" / "tasks" / f"{TASK}.yaml"
    text = task.read_text()
    assert "risk: noncritical_regression" in text
    text = text.replace("risk: noncritical_regression", "risk: quality_signal")
    text = text.replace("revision: 1", "revision: 9", 1)  # labels change with a new revision
    task.write_text(text, "utf-8")
    signed_commit(world.root, None, "lower the risk")
    done = world.run("sync", "registry")
    assert done.code == 5, done.stdout + done.stderr
    assert f"task {TASK} meta.risk" in done.stdout


def test_the_python_verifier_agrees_with_git_verify_commit(world: World) -> None:
    _loosen_gate_policy(world)
    allowed = world.root / "allowed_signers"
    allowed.write_text(f"alice@example.com {public_key(world.keys['alice'])}\n")
    from evalops.domain.authority import judge_commit
    from evalops.domain.specs import AuthoritySpec
    from evalops.domain.sshsig import split_signed_commit
    from evalops.registry.history import raw_commit

    authority = AuthoritySpec.model_validate(
        {
            "spec_schema_version": "authority/v1",
            "id": "a",
            "principals": [{"id": "alice", "keys": [public_key(world.keys["alice"])]}],
            "roles": {"policy_owner": [{"principal": "alice"}]},
        }
    )
    for signer in ("alice", "mallory", None):
        sha = signed_commit(world.root, world.keys[signer] if signer else None, f"by {signer}")
        # The commit as `sync` reads it (evalops/services/authority/rule_changes.py).
        payload, signature = split_signed_commit(raw_commit(world.root, sha))
        ours = judge_commit(authority, sha, payload, signature)[0] is None
        git_says = subprocess.run(
            ["git", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", sha],
            cwd=world.root, capture_output=True, check=False,
        ).returncode == 0  # fmt: skip
        assert ours == git_says == (signer == "alice")
        (world.root / "registry" / "policies" / "gate-policy.yaml").write_text(
            (world.root / "registry" / "policies" / "gate-policy.yaml").read_text() + "#\n"
        )


def test_the_first_authority_is_recorded_as_the_bootstrap(world: World) -> None:
    with sqlite3.connect(world.root / DB) as con:
        payloads = [
            json.loads(p)
            for (p,) in con.execute("SELECT payload FROM audit_event WHERE kind = 'sync.in_force'")
        ]
    assert [p.get("authority_bootstrap") for p in payloads][-1] is True


def test_the_library_signs_what_the_cli_accepts(world: World) -> None:
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    from evalops.authority import check_act_signature, fingerprint, sign_act

    act = world.print_act()
    key = load_ssh_private_key(world.keys["alice"].read_bytes(), None)
    signature = act.with_suffix(".json.sig")
    signature.write_bytes(sign_act(act.read_bytes(), key))
    check = check_act_signature(act.read_bytes(), signature.read_bytes())
    assert check.valid
    assert check.signature.public_key.fingerprint == fingerprint(public_key(world.keys["alice"]))
    done = world.grant("--act", str(act), "--signature", str(signature))
    assert done.code == 0, done.stdout + done.stderr


def test_the_audit_report_names_the_authority_and_who_signed(world: World) -> None:
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    gate = world.run("gate", "check", "--build", "build-125", "--suite", SUITE, "--json")
    assert gate.code in (0, 3, 4), gate.stderr
    gate_id = gate.json()["gate_id"]
    report = world.run("report", "audit", "--gate", gate_id, "--format", "json", "-o", "-")
    assert report.code == 0, report.stderr
    authority = json.loads(report.stdout)["authority"]
    digest = world.run("--json", "digest", "registry/policies/authority.yaml").json()[0]
    assert authority["digest"] == digest["authority_digest"]
    listed = {w["waiver_id"]: w["signers"] for w in world.waivers()}
    grants = [a for a in authority["acts"] if a["act"] == "waiver.grant"]
    assert grants, "the decision rests on waivers"
    for act in grants:
        assert act["signers"] == listed[act["subject"]]
    md = world.run("report", "audit", "--gate", gate_id, "--format", "md", "-o", "-").stdout
    assert "Authority in force" in md
    assert ("unsigned" in md) == any(not a["signers"] for a in authority["acts"])


def test_the_audit_report_lists_every_signed_act_the_decision_rests_on(
    demo: Path, cli: Cli
) -> None:
    """docs/authority.md: "every act it rests on with its signers". It listed the waivers
    only: not who signed the promotion of its pins, the ingest of its trials or the
    calibration it used. Expected from the signed_act rows, read with sqlite3."""
    signed = demo / "signed"
    report = cli("report", "audit", "GATE-1", "--format", "json", "-o", "-", cwd=signed)
    assert report.code == 0, report.stderr
    doc = json.loads(report.stdout)
    got = {(a["act"], a["subject"], tuple(s["principal"] for s in a["signers"]))
           for a in doc["authority"]["acts"]}  # fmt: skip
    with sqlite3.connect(signed / DB) as con:

        def signed_at(seq: int) -> set[tuple[str, tuple[str, ...]]]:
            rows = con.execute("SELECT kind, signers FROM signed_act WHERE audit_seq = ?", (seq,))
            return {(k, tuple(s["principal"] for s in json.loads(v))) for k, v in rows}

        expected: set[tuple[str, str, tuple[str, ...]]] = set()
        for waiver_id in (w["waiver_id"] for w in doc["waivers"]["applied"]):
            (seq,) = con.execute(
                "SELECT audit_seq FROM waiver WHERE waiver_id = ?", (waiver_id,)
            ).fetchone()
            expected |= {(k, waiver_id, who) for k, who in signed_at(seq)}
        members = con.execute(
            "SELECT task_id, audit_seq FROM suite_membership WHERE suite_id = ? AND action IN "
            "('added', 'repinned') ORDER BY id",
            (doc["suite"],),
        ).fetchall()
        (task_id, seq) = members[-1]
        assert len({t for t, _ in members}) == 1  # one member: its promotion is its own line
        expected |= {(k, task_id, who) for k, who in signed_at(seq)}
        # The batches that stored the trials the report lists (the decision's own).
        batches = {
            con.execute(
                "SELECT b.id, b.audit_seq FROM trial t JOIN ingest_batch b ON "
                "b.id = t.ingest_batch_id WHERE t.trial_id = ?",
                (t["trial_id"],),
            ).fetchone()
            for t in doc["trials"]
        }
        assert len(batches) == 1  # one batch: its own line
        for batch_id, seq in batches:
            expected |= {(k, f"batch {batch_id}", who) for k, who in signed_at(seq)}
        for c in doc["calibration"]:
            if c["calibration_id"]:
                (seq,) = con.execute(
                    "SELECT audit_seq FROM calibration WHERE calibration_id = ?",
                    (c["calibration_id"],),
                ).fetchone()
                expected |= {(k, c["calibration_id"], who) for k, who in signed_at(seq)}
    kinds = {k for k, _, _ in expected}
    assert {"waiver.grant", "suite.promote", "trials.ingest", "calibration.record"} <= kinds
    assert got == expected
    # Acts recorded after the decision are none of its own: a later signed promotion into
    # its suite leaves its report as it was.
    later = cli(
        "promote", "support-refund-in-order", "--to", "regression/core",
        "--sign-with", str(demo / "keys" / "support-lead"), cwd=signed,
    )  # fmt: skip
    assert later.code == 0, later.stdout + later.stderr
    again = cli("report", "audit", "GATE-1", "--format", "json", "-o", "-", cwd=signed)
    assert json.loads(again.stdout)["authority"]["acts"] == doc["authority"]["acts"]


def test_a_registry_without_authority_reports_unsigned(demo: Path, cli: Cli) -> None:
    md = cli("report", "audit", "--gate", "GATE-3", "--format", "md", "-o", "-", cwd=demo)
    assert "No authority in force: every act is unsigned." in md.stdout
    assert "waiver.grant `WVR-1`: unsigned" in md.stdout


def test_an_import_is_an_ingesters_signed_act(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, keyring: dict[str, Path], cli: Cli
) -> None:
    from tests.import_support import PROMPTFOO_FIXTURES, copy_workspace, counts, import_base

    ws = copy_workspace(import_base(tmp_path_factory), tmp_path / "ws")
    world = World(ws, [], keyring, cli)
    world.authority()
    args = ("trials", "import", "promptfoo", str(PROMPTFOO_FIXTURES / "results.json"),
            "--map", "maps/promptfoo.yaml")  # fmt: skip
    before = counts(ws)
    unsigned = world.run(*args)
    assert unsigned.code == 5 and "trials.import" in unsigned.stderr
    assert counts(ws)[:2] == before[:2]  # no trial, no batch: only the refusal was audited
    signed = world.run(*args, "--sign-with", str(keyring["alice"]))
    assert signed.code == 0, signed.stdout + signed.stderr
    with sqlite3.connect(ws / DB) as con:
        kind, scope = con.execute("SELECT kind, scope FROM signed_act").fetchone()
    assert kind == "trials.import" and json.loads(scope)["builds"]
    assert world.run("verify").code == 0


# ------------------------------------------------------------------ who signed, shown everywhere


def _signed(world: World, name: str) -> str:
    return f"signed by {name} ({_fingerprint(world.keys[name])})"


def _gate(world: World) -> str:
    gate = world.run("gate", "check", "--build", "build-125", "--suite", SUITE, "--json")
    assert gate.code in (0, 3), gate.stdout + gate.stderr
    gate_id: str = gate.json()["gate_id"]
    return gate_id


def test_gate_show_names_who_signed_each_waiver(world: World) -> None:
    world.run("waiver", "revoke", "WVR-1", "--reason", "re-signed",
              "--sign-with", str(world.keys["alice"]))  # fmt: skip
    assert world.grant("--sign-with", str(world.keys["dave"])).code == 0
    gate_id = _gate(world)
    shown = world.run("gate", "show", gate_id, "--json").json()
    assert shown["waivers"]["applied"] == ["WVR-2"]
    assert shown["waiver_signers"]["WVR-2"] == [
        {"principal": "dave", "fingerprint": _fingerprint(world.keys["dave"])}
    ]
    assert shown["waiver_signers"]["WVR-1"] == []  # the demo's, granted before the authority
    human = world.run("gate", "show", gate_id).stdout
    assert f"waiver WVR-2: {_signed(world, 'dave')}" in human
    assert "waiver WVR-1: unsigned" in human


def test_without_an_authority_gate_show_says_unsigned(demo: Path, cli: Cli) -> None:
    shown = cli("gate", "show", "GATE-3", cwd=demo)
    assert "waiver WVR-1: unsigned" in shown.stdout
    assert cli("gate", "show", "GATE-3", "--json", cwd=demo).json()["waiver_signers"] == {
        "WVR-1": []
    }


def test_review_list_names_the_ingest_signers_and_the_reviewers(world: World) -> None:
    ingest = world.run(
        "trials", "ingest", str(_review_me(world)), "--sign-with", str(world.keys["bob"])
    )
    assert ingest.code == 0, ingest.stderr
    queue = world.run("review", "list", "--json").json()
    mine = [r for r in queue if r["trial_id"] == "review-me"]
    assert [r["ingest_signers"][0]["principal"] for r in mine] == ["bob"]
    line = next(x for x in world.run("review", "list").stdout.splitlines() if "review-me" in x)
    assert f"ingest {_signed(world, 'bob')}" in line
    others = [r for r in queue if r["trial_id"] != "review-me"]
    assert all(r["ingest_signers"] == [] for r in others)  # ingested before the authority
    done = world.run(
        "review", "resolve", "review-me", "--grader", "reply-quality", "--state", "task_pass",
        "--reason", "read it", "--sign-with", str(world.keys["carol"]),
    )  # fmt: skip
    assert done.code == 0, done.stderr
    resolved = world.run("review", "list", "--resolved", "--json").json()
    assert [(r["trial_id"], r["signers"][0]["principal"]) for r in resolved] == [
        ("review-me", "carol")
    ]
    human = world.run("review", "list", "--resolved").stdout
    assert "review-me reply-quality -> task_pass" in human
    assert _signed(world, "carol") in human


def test_without_an_authority_review_list_says_unsigned(demo: Path, cli: Cli) -> None:
    plain = World(demo, [], {}, cli)
    assert plain.run("trials", "ingest", str(_review_me(plain))).code == 0
    queue = cli("review", "list", "--json", cwd=demo).json()
    assert queue, "the trial waits for review"
    assert all(r["ingest_signers"] == [] for r in queue)
    assert "ingest unsigned" in cli("review", "list", cwd=demo).stdout
    first = queue[0]
    done = cli("review", "resolve", first["trial_id"], "--grader", first["grader_id"],
               "--state", "task_fail", "--reason", "r", cwd=demo)  # fmt: skip
    assert done.code == 0, done.stderr
    assert cli("review", "list", "--resolved", "--json", cwd=demo).json()[0]["signers"] == []
    assert "(unsigned)" in cli("review", "list", "--resolved", cwd=demo).stdout


def test_the_audit_report_names_who_last_changed_the_policy_and_the_suite(world: World) -> None:
    _loosen_gate_policy(world)
    sha = signed_commit(world.root, world.keys["alice"], "gate policy: longer waivers")
    assert world.run("sync", "registry").code == 0
    gate_id = _gate(world)
    report = world.run("report", "audit", "--gate", gate_id, "--format", "json", "-o", "-")
    changed = {c["kind"]: c for c in json.loads(report.stdout)["authority"]["rules_changed_by"]}
    assert changed["gate_policy"]["commit"] == sha
    assert changed["gate_policy"]["signers"] == [
        {"principal": "alice", "fingerprint": _fingerprint(world.keys["alice"])}
    ]
    assert changed["suite"]["id"] == SUITE
    assert changed["suite"]["signers"] == []  # declared before the authority: unsigned
    md = world.run("report", "audit", "--gate", gate_id, "--format", "md", "-o", "-").stdout
    assert (
        f"gate\\_policy `release-gate` last changed in commit `{sha[:12]}`: signed by `alice`" in md
    )
    assert f"suite `{SUITE}` last changed" in md
    html = world.run("report", "audit", "--gate", gate_id, "--format", "html", "-o", "-").stdout
    commit = f'<span class="mono"><span class="id">{sha[:12]}</span></span>'
    assert f"last changed in commit {commit}: signed by alice" in html


def test_without_an_authority_the_report_says_the_rules_are_unsigned(demo: Path, cli: Cli) -> None:
    report = cli("report", "audit", "--gate", "GATE-3", "--format", "json", "-o", "-", cwd=demo)
    changed = json.loads(report.stdout)["authority"]["rules_changed_by"]
    assert [(c["kind"], c["signers"]) for c in changed] == [
        ("gate_policy", []),
        ("suite", []),
    ]
    md = cli("report", "audit", "--gate", "GATE-3", "--format", "md", "-o", "-", cwd=demo).stdout
    assert "gate\\_policy `release-gate` last changed in commit" in md
    assert md.count("last changed in commit") == 2 and ": unsigned" in md


def test_retire_acts_keep_the_old_body_for_the_old_form_and_sign_kind_and_reason(
    world: World,
) -> None:
    """`--reason WORD` alone prints the act it printed before `--kind` (an act signed then
    still matches); `--kind K --reason TEXT` signs both, and a different kind is refused."""
    base = ("retire", TASK, "--from", SUITE)

    def printed(*args: str) -> tuple[Path, dict[str, Any]]:
        done = world.run(*base, *args, "--print-act")
        assert done.code == 0, done.stdout + done.stderr
        path = world.root / f"retire-act-{len(list(world.root.glob('retire-act-*')))}.json"
        path.write_text(done.stdout, encoding="utf-8")
        body = {k: v for k, v in json.loads(done.stdout).items() if k not in META_FIELDS}
        return path, body

    _, old = printed("--reason", "obsolete")
    assert old == {"task_id": TASK, "suite_id": SUITE, "reason": "obsolete", "replaced_by": None}

    text = "the vendor API it drives is gone"
    act, new = printed("--kind", "unsupported", "--reason", text)
    assert (new["kind"], new["reason"]) == ("unsupported", text)
    signature = sign_file(world.keys["alice"], act)
    other_kind = world.run(
        *base, "--kind", "obsolete", "--reason", text, "--act", str(act),
        "--signature", str(signature), "--json",
    )  # fmt: skip
    assert other_kind.code == 5 and "differs" in other_kind.stdout + other_kind.stderr
    done = world.run(
        *base, "--kind", "unsupported", "--reason", text, "--act", str(act),
        "--signature", str(signature), "--json",
    )  # fmt: skip
    assert done.code == 0, done.stdout + done.stderr
    members = world.run("suite", "show", SUITE, "--all", "--json").json()["members"]
    removed = next(m["removed"] for m in members if m["task_id"] == TASK)
    assert (removed["kind"], removed["reason"]) == ("unsupported", text)
    assert world.run("verify").code == 0


def test_who_may_sign_a_retirement_honours_a_grants_task_scope(world: World) -> None:
    """The refusal's fix names the principals whose grant covers this very task: `alice`
    (every task of regression/*), `carol` (this task only), `dave` (unscoped); never `bob`,
    scoped to another task of the suite."""
    roles = {
        "risk_owner": [
            {"principal": "alice", "suites": ["regression/*"]},
            {"principal": "bob", "suites": ["regression/*"], "tasks": ["some-other-task"]},
            {"principal": "carol", "suites": ["regression/*"], "tasks": [TASK]},
            {"principal": "dave"},
        ],
        "policy_owner": [{"principal": "alice"}],
    }
    world.authority(roles=roles)
    refused = world.run("retire", TASK, "--from", SUITE, "--reason", "obsolete", "--json")
    assert refused.code == 5, refused.stdout + refused.stderr
    (requirement,) = refused.json()["requirements"]
    assert requirement["fix"].startswith("a new act signed by one of alice, carol, dave ("), (
        requirement
    )
