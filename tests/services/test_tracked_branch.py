"""The rules in force follow the reviewed history of one branch (docs/authority.md, "The
tracked branch"), attacked with real git repositories and real SSH-signed commits.

Each attack is refused (or, off the tracked line, changes nothing in force) with its reason;
`verify` finds the same attacks when the rows are written without the check
(tests/services/test_tracked_verify.py).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PINNED_NOW, Cli, evalops_test_env, pg_holding, run_quietly
from tests.helpers import pack_repositories
from tests.sshkeys import make_key, public_key

DB = Path(".evalops/registry.db")
GATE = Path("registry/policies/gate-policy.yaml")
AUTHORITY = Path("registry/policies/authority.yaml")
SUITE = "regression/core"
TASK = "support-refund-policy-explanation"


@dataclass
class Repo:
    root: Path
    db: list[str]
    keys: dict[str, Path]
    cli: Cli

    def run(self, *args: str) -> Any:
        return self.cli(*self.db, *args, cwd=self.root)

    def git(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
            cwd=self.root, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"git {args}: {done.stderr}")
        return done.stdout.strip()

    def commit(self, key: str | None, message: str, *extra: str) -> str:
        """`git add -A` and commit, SSH-signed by `key` (None: unsigned)."""
        self.git("add", "-A")
        sign = (
            ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.keys[key]}.pub"] if key else []
        )
        self.git(*sign, "commit", "-q", *(["-S"] if key else []), "-m", message, *extra)
        return self.git("rev-parse", "HEAD")

    def merge(self, key: str | None, branch: str, *extra: str) -> str:
        sign = (
            ["-c", "gpg.format=ssh", "-c", f"user.signingkey={self.keys[key]}.pub"] if key else []
        )
        self.git(*sign, "merge", "-q", "--no-ff", *(["-S"] if key else []), *extra, branch)
        return self.git("rev-parse", "HEAD")

    @property
    def branch(self) -> str:
        return self.git("rev-parse", "--abbrev-ref", "HEAD")

    def sql(self, query: str) -> list[Any]:
        from sqlalchemy import create_engine, text

        engine = create_engine(self.db[1] if self.db else f"sqlite:///{self.root / DB}")
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(query)).all())
        finally:
            engine.dispose()

    def in_force(self, kind: str, ident: str) -> str:
        rows = self.sql(
            "SELECT document_digest FROM sync_in_force WHERE kind = '" + kind + "' AND "
            "definition_id = '" + ident + "' AND sync_run_id = (SELECT max(r.id) FROM sync_run "
            "r WHERE EXISTS (SELECT 1 FROM sync_in_force x WHERE x.sync_run_id = r.id))"
        )
        assert rows, f"{kind} {ident} is not in force"
        return str(rows[0][0])

    def digest_of(self, path: Path) -> str:
        import hashlib

        import rfc8785
        import yaml

        value = yaml.safe_load((self.root / path).read_text())
        return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()

    def edit(self, path: Path, old: str, new: str) -> None:
        target = self.root / path
        text = target.read_text()
        assert old in text, (path, old)
        target.write_text(text.replace(old, new), "utf-8")

    def authority(self) -> None:
        """Declare the authority (alice: policy owner and risk owner of regression/*)."""
        self.write_authority()
        done = self.run("sync", "registry")
        assert done.code == 0, done.stdout + done.stderr

    def write_authority(self) -> None:
        """The authority file, committed unsigned (its bootstrap), not yet synced."""
        doc = {
            "spec_schema_version": "authority/v1",
            "id": "authority",
            "principals": [
                {"id": name, "keys": [public_key(self.keys[name])]} for name in ("alice", "bob")
            ],
            "roles": {
                "risk_owner": [{"principal": "alice", "suites": ["regression/*"]}],
                "reviewer": [{"principal": "bob"}],
                "ingester": [{"principal": "bob"}],
                "policy_owner": [{"principal": "alice"}],
            },
            "max_act_age_days": 7,
        }
        (self.root / AUTHORITY).write_text(json.dumps(doc, indent=2), "utf-8")
        self.commit(None, "the authority (bootstrap)")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("keys")
    return {name: make_key(root, name) for name in ("alice", "bob", "mallory")}


def _repo(demo: Path, keys: dict[str, Path], cli: Cli, db: list[str], authority: bool) -> Repo:
    repo = Repo(demo, db, keys, cli)
    if authority:
        repo.authority()
    return repo


@pytest.fixture(scope="module")
def governed_master(
    demo_master: Path, keys: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The demo with the authority declared and synced (`Repo.authority`), on SQLite, once
    per module: most tests here start from it, and each copies it."""
    root = tmp_path_factory.mktemp("governed") / "demo"
    shutil.copytree(demo_master, root, symlinks=True)
    Repo(root, [], keys, cli=None).write_authority()  # type: ignore[arg-type]  (git only)
    with evalops_test_env():
        os.environ["EVALOPS_NOW"] = PINNED_NOW  # as the `demo` fixture runs it
        run_quietly(["sync", "registry"], root)
    pack_repositories(root)
    return root


@pytest.fixture
def governed(governed_master: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of `governed_master`, clock pinned (as `demo`)."""
    copy = tmp_path / "demo"
    shutil.copytree(governed_master, copy, symlinks=True)
    monkeypatch.setenv("EVALOPS_NOW", PINNED_NOW)
    return copy


@pytest.fixture
def repo(governed: Path, keys: dict[str, Path], cli: Cli) -> Repo:
    return Repo(governed, [], keys, cli)


@pytest.fixture
def plain(demo: Path, keys: dict[str, Path], cli: Cli) -> Repo:
    """The demo registry without an authority."""
    return _repo(demo, keys, cli, [], False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_repo(request: pytest.FixtureRequest, keys: dict[str, Path], cli: Cli) -> Repo:
    if request.param == "sqlite":
        return Repo(request.getfixturevalue("governed"), [], keys, cli)
    demo: Path = request.getfixturevalue("demo")
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _repo(demo, keys, cli, ["--db", url], True)


def loosen(repo: Repo, days: str = "3650") -> None:
    repo.edit(GATE, "max_duration_days: 30", f"max_duration_days: {days}")


def unsigned_waiver_refused(repo: Repo) -> None:
    """The authority still governs: an unsigned waiver is refused."""
    done = repo.run(
        "waiver", "grant", "--task", TASK, "--suite", SUITE, "--states", "task_fail",
        "--build", "build-125", "--owner", "lead@example.com", "--reason", "r",
        "--expires", "20d",
    )  # fmt: skip
    assert done.code == 5 and "unsigned" in done.stdout, done.stdout + done.stderr


def refused(done: Any, *words: str) -> None:
    assert done.code == 5, done.stdout + done.stderr
    for word in words:
        assert word in done.stdout + done.stderr, (word, done.stdout, done.stderr)


# ------------------------------------------------------------------ another path, another branch


def test_another_directory_does_not_replace_the_rules(any_repo: Repo) -> None:
    """`sync old/`: a copy of the registry from before the authority, committed unsigned."""
    repo = any_repo
    authority = repo.in_force("authority", "authority")
    gate = repo.in_force("gate_policy", "release-gate")
    shutil.copytree(repo.root / "registry", repo.root / "old")
    (repo.root / "old" / "policies" / "authority.yaml").unlink()
    repo.edit(
        Path("old/policies/gate-policy.yaml"), "max_duration_days: 30", "max_duration_days: 3650"
    )
    repo.commit(None, "an old copy")
    done = repo.run("sync", "old")
    assert done.code == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("registered 1 definition from ") and " at old/" in first, first
    assert f"in force unchanged: {repo.branch} tracks registry/" in first
    assert "--definitions" in first
    # The rule change that would follow this path instead (the branch is the same).
    assert done.stdout.splitlines()[1] == (
        "  to follow old/ instead of registry/: evalops registry track --path old (a rule change)"
    ), done.stdout
    main = repo.branch
    repo.git("checkout", "-q", "-b", "feature-old")
    repo.edit(Path("old/tasks/support-reply-tone.yaml"), "revision: 1", "revision: 2")
    repo.commit(None, "another path on another branch")
    both = repo.run("sync", "old")
    assert both.code == 0, both.stdout + both.stderr
    assert both.stdout.splitlines()[1] == (
        f"  to follow feature-old at old/ instead of {main} at registry/: evalops registry "
        "track --path old --branch feature-old (a rule change)"
    ), both.stdout
    repo.git("checkout", "-q", main)
    assert repo.in_force("authority", "authority") == authority
    assert repo.in_force("gate_policy", "release-gate") == gate
    unsigned_waiver_refused(repo)
    # What it registered is there by digest, and the tracked line still moves.
    assert repo.sql(
        "SELECT count(*) FROM policy WHERE policy_digest = '"
        + repo.digest_of(Path("old/policies/gate-policy.yaml"))
        + "'"
    ) == [(1,)]


def test_another_branch_registers_and_changes_nothing_in_force(any_repo: Repo) -> None:
    repo = any_repo
    main = repo.branch
    gate = repo.in_force("gate_policy", "release-gate")
    repo.git("checkout", "-q", "-b", "feature-x")
    loosen(repo)
    repo.commit(None, "loosen, unsigned, on a branch")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith(
        f"registered 1 definition from feature-x; in force unchanged: {main} tracks registry/"
    ), done.stdout
    assert done.stdout.splitlines()[1] == (
        f"  to follow feature-x instead of {main}: evalops registry track --branch feature-x "
        "(a rule change)"
    ), done.stdout
    assert "tracking feature-x" not in done.stdout
    assert repo.in_force("gate_policy", "release-gate") == gate
    as_json = repo.run("--json", "sync", "registry").json()
    assert as_json["in_force_changed"] is False
    assert as_json["tracked"] == {"path": "registry", "branch": main}
    assert "--definitions" in as_json["summary"]
    events = repo.sql("SELECT kind FROM audit_event WHERE kind = 'sync.registered'")
    assert len(events) == 1
    assert repo.run("verify").code == 0


def test_without_an_authority_only_the_tracked_branch_changes_what_is_in_force(
    plain: Repo,
) -> None:
    repo = plain
    main = repo.branch
    gate = repo.in_force("gate_policy", "release-gate")
    repo.git("checkout", "-q", "-b", "feature-x")
    loosen(repo)
    feature = repo.commit(None, "loosen on a branch")
    done = repo.run("sync", "registry")
    assert done.code == 0
    assert done.stdout.splitlines()[0].startswith("registered 1 definition from feature-x")
    assert "--definitions" in done.stdout.splitlines()[0]
    assert repo.in_force("gate_policy", "release-gate") == gate
    # Merged into the tracked branch (no authority, nothing signed): now in force.
    repo.git("checkout", "-q", main)
    repo.git("merge", "-q", "--ff-only", feature)
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert "in force unchanged" not in done.stdout
    assert "now in force: gate_policy release-gate" in done.stdout
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)
    assert repo.run("verify").code == 0


def test_registry_show_says_what_is_followed_and_in_force_and_writes_nothing(
    repo: Repo,
) -> None:
    main = repo.branch
    head = repo.git("rev-parse", "HEAD")
    events = repo.sql("SELECT count(*) FROM audit_event")
    (run_id, seq, commit), *_ = repo.sql(
        "SELECT id, audit_seq, git_commit FROM sync_run r WHERE EXISTS (SELECT 1 FROM "
        "sync_in_force x WHERE x.sync_run_id = r.id) ORDER BY id DESC"
    )
    (authority_digest,) = repo.sql(
        f"SELECT document_digest FROM sync_in_force WHERE sync_run_id = {run_id} "
        "AND kind = 'authority'"
    )[0]
    (definitions,) = repo.sql(f"SELECT count(*) FROM sync_in_force WHERE sync_run_id = {run_id}")[0]
    done = repo.run("--json", "registry", "show")
    assert done.code == 0, done.stdout + done.stderr
    shown = done.json()
    assert shown["tracked"] == {"path": "registry", "branch": main}
    assert shown["tracked_by"] == "sync"
    assert shown["in_force"]["sync_run"] == run_id and shown["in_force"]["audit_seq"] == seq
    assert shown["in_force"]["git_commit"] == commit == head
    assert sum(shown["in_force"]["definitions"].values()) == definitions
    assert shown["authority"] == {"id": "authority", "digest": authority_digest}
    assert shown["registry_id"] == repo.run("--json", "verify").json()["registry_id"]
    human = repo.run("registry", "show").stdout.splitlines()
    assert human[0] == f"tracking {main} at registry/ (chosen by the first sync)"
    assert human[1].startswith(f"in force: sync {run_id} of {head[:12]} on {main}")
    assert repo.sql("SELECT count(*) FROM audit_event") == events
    # A CI checkout: detached, synced with --track; the line says so instead of "on -".
    assert repo.run("new", "execution", "build-777", "--registry", "registry").code == 0
    repo.commit(None, "a new build's profile")
    repo.git("checkout", "-q", "--detach")
    assert repo.run("sync", "registry", "--track", main).code == 0
    human = repo.run("registry", "show").stdout.splitlines()
    assert f" on a detached HEAD synced as {main}," in human[1], human[1]


def test_a_definition_a_branch_registered_is_not_called_unregistered(repo: Repo) -> None:
    """A branch's sync registers its new execution profile without putting it in force:
    asked for it, commands say exactly that (not "is not registered"), and the template
    says how to read the branch's definitions."""
    repo.git("checkout", "-q", "-b", "feature-x")
    assert repo.run("new", "execution", "build-999", "--registry", "registry").code == 0
    repo.commit(None, "a profile for the branch's build")
    done = repo.run("sync", "registry")
    assert done.code == 0 and "in force unchanged" in done.stdout, done.stdout + done.stderr
    template = repo.run("trials", "template", "--task", TASK, "--execution", "build-999")
    assert template.code == 2, template.stdout + template.stderr
    assert "execution profile 'build-999' is registered but not in force" in template.stderr
    assert "--definitions REV" in template.stderr
    assert "is not registered" not in template.stderr
    unknown = repo.run("trials", "template", "--task", TASK, "--execution", "build-998")
    assert unknown.code == 2 and "'build-998' is not registered" in unknown.stderr
    # One the tracked branch deleted: registered, in force until then, and said so.
    repo.git("checkout", "-q", "-")
    (last_run,) = repo.sql("SELECT max(sync_run_id) FROM sync_in_force")[0]
    (repo.root / "registry" / "executions" / "candidate-b124.yaml").unlink()
    repo.commit(None, "candidate-b124 retired")
    assert repo.run("sync", "registry").code == 0
    gone = repo.run("trials", "template", "--task", TASK, "--execution", "candidate-b124")
    assert gone.code == 2, gone.stdout + gone.stderr
    assert (
        f"execution profile 'candidate-b124' is registered but no longer in force: it was in "
        f"force up to sync run {last_run}" in gone.stderr
    ), gone.stderr
    assert "--definitions" not in gone.stderr  # nothing of a branch to read


def test_a_detached_head_names_the_tracked_branch_with_track(repo: Repo) -> None:
    main = repo.branch
    loosen(repo, "31")
    head = repo.commit("alice", "signed change")
    repo.git("checkout", "-q", "--detach", head)
    done = repo.run("sync", "registry")
    assert done.code == 0 and "in force unchanged" in done.stdout
    assert f"sync with --track {main}" in done.stdout
    assert repo.in_force("gate_policy", "release-gate") != repo.digest_of(GATE)
    done = repo.run("sync", "registry", "--track", main)
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)
    wrong = repo.run("sync", "registry", "--track", "feature-x")
    assert wrong.code == 2 and "registry track" in wrong.stderr


def test_track_on_a_detached_head_needs_a_branch_of_that_name_holding_the_commit(
    repo: Repo,
) -> None:
    """`--track main` says which branch a detached HEAD is; a commit on no ref named main
    (a signed proposal never merged) is refused, nothing stored, and the same commit is
    accepted once main holds it, as a remote's copy too (CI checkouts fetch one)."""
    main = repo.branch
    in_force = repo.in_force("gate_policy", "release-gate")
    events = repo.sql("SELECT count(*) FROM audit_event")
    repo.git("checkout", "-q", "-b", "proposal")
    loosen(repo, "31")
    proposal = repo.commit("alice", "a signed proposal, never merged")
    repo.git("checkout", "-q", "--detach", proposal)
    # Registered off the line, and not told to sync it as main: it is not on main.
    done = repo.run("sync", "registry")
    assert done.code == 0 and "in force unchanged" in done.stdout, done.stdout + done.stderr
    assert "--track" not in done.stdout
    events = repo.sql("SELECT count(*) FROM audit_event")
    done = repo.run("sync", "registry", "--track", main)
    assert done.code == 2, done.stdout + done.stderr
    assert f"--track: commit {proposal[:12]} is not on {main}" in done.stderr
    assert f"refs/heads/{main} at" in done.stderr
    assert repo.sql("SELECT count(*) FROM audit_event") == events
    assert repo.in_force("gate_policy", "release-gate") == in_force
    # Only a remote's copy of main (the local branch gone), once it holds the commit.
    repo.git("remote", "add", "origin", str(repo.root))
    repo.git("fetch", "-q", "origin", f"{main}:refs/remotes/origin/{main}")
    repo.git("branch", "-q", "-D", main)
    done = repo.run("sync", "registry", "--track", main)
    assert done.code == 2 and f"refs/remotes/origin/{main} at" in done.stderr, done.stderr
    repo.git("update-ref", f"refs/remotes/origin/{main}", proposal)
    done = repo.run("sync", "registry", "--track", main)
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)
    # No ref of that name at all: nothing to find the commit on. A branch under the name
    # (main/proposal), which git's ref patterns match as a prefix, is not main.
    repo.git("update-ref", "-d", f"refs/remotes/origin/{main}")
    repo.git("update-ref", f"refs/heads/{main}/proposal", proposal)
    repo.git("update-ref", f"refs/remotes/origin/{main}/proposal", proposal)
    done = repo.run("sync", "registry", "--track", main)
    assert done.code == 2 and f"has no branch {main}" in done.stderr, done.stderr


def test_track_naming_another_branch_than_the_checked_out_one_is_exit_2(repo: Repo) -> None:
    done = repo.run("sync", "registry", "--track", "elsewhere")
    assert done.code == 2 and "--track" in done.stderr


# ------------------------------------------------------------------ rewritten history


def test_a_force_push_is_exit_5_naming_both_commits(any_repo: Repo) -> None:
    repo = any_repo
    loosen(repo, "31")
    synced = repo.commit("alice", "a signed change")
    assert repo.run("sync", "registry").code == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")
    loosen(repo, "3650")
    rewritten = repo.commit("alice", "history rewritten")
    before = repo.in_force("gate_policy", "release-gate")
    done = repo.run("sync", "registry")
    refused(done, "rewritten", synced[:12], rewritten[:12], "registry track")
    assert repo.in_force("gate_policy", "release-gate") == before
    kinds = repo.sql("SELECT kind FROM audit_event ORDER BY seq DESC LIMIT 1")
    assert kinds == [("sync.refused",)]


def test_without_an_authority_rewritten_history_is_refused_too(plain: Repo) -> None:
    repo = plain
    repo.git("commit", "-q", "--amend", "-m", "rewritten root")
    done = repo.run("sync", "registry")
    assert done.code == 5 and "rewritten" in done.stdout


# ------------------------------------------------------------------ rule changes over full history


def test_an_evil_merge_hides_no_unsigned_commit(any_repo: Repo) -> None:
    """The unsigned side of a merge is checked even when the merge equals its signed side
    (history simplification would follow the first parent only and never list it)."""
    repo = any_repo
    main = repo.branch
    repo.git("checkout", "-q", "-b", "side")
    loosen(repo, "60")
    unsigned = repo.commit(None, "unsigned loosening")
    repo.git("checkout", "-q", main)
    loosen(repo, "60")
    repo.commit("alice", "the same loosening, signed")
    repo.merge("alice", "side", "-s", "ours")
    done = repo.run("sync", "registry")
    refused(done, unsigned[:12], "(unsigned)", str(GATE), "policy_owner (alice)", "fix:")


def test_a_merge_bringing_a_rule_change_must_be_signed(repo: Repo) -> None:
    main = repo.branch
    repo.git("checkout", "-q", "-b", "side")
    loosen(repo, "45")
    repo.commit("alice", "signed loosening")
    repo.git("checkout", "-q", main)
    (repo.root / "NOTES.md").write_text("unrelated\n")
    repo.commit("alice", "unrelated")
    merge = repo.merge(None, "side")
    refused(repo.run("sync", "registry"), merge[:12], "(unsigned)", str(GATE))
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.merge("alice", "side")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)


def test_an_evil_merge_introducing_its_own_change_unsigned(repo: Repo) -> None:
    main = repo.branch
    repo.git("checkout", "-q", "-b", "side")
    (repo.root / "NOTES.md").write_text("side\n")
    repo.commit("alice", "side work")
    repo.git("checkout", "-q", main)
    repo.git("merge", "-q", "--no-ff", "--no-commit", "side")
    loosen(repo, "3650")
    merge = repo.commit(None, "merge side (and, quietly, the waiver rule)")
    refused(repo.run("sync", "registry"), merge[:12], "(unsigned)", str(GATE))


def test_a_dirty_sync_then_a_clean_one_hides_nothing(any_repo: Repo) -> None:
    repo = any_repo
    original = (repo.root / GATE).read_text()
    loosen(repo)
    unsigned = repo.commit(None, "unsigned loosening")
    # The work tree shows the old file: the dirty sync changes no rule and is accepted...
    (repo.root / GATE).write_text(original, "utf-8")
    (repo.root / "registry" / "executions" / "extra.yaml").write_text(
        (repo.root / "registry" / "executions").glob("*.yaml").__next__().read_text()
        .replace("id: ", "id: extra-", 1), "utf-8",
    )  # fmt: skip
    done = repo.run("sync", "registry", "--allow-dirty")
    assert done.code == 0, done.stdout + done.stderr
    # ...and the next clean sync still checks the unsigned commit.
    (repo.root / "registry" / "executions" / "extra.yaml").unlink()
    repo.git("checkout", "--", str(GATE))
    done = repo.run("sync", "registry")
    refused(done, unsigned[:12], "(unsigned)", "last clean sync")
    assert repo.in_force("gate_policy", "release-gate") != repo.digest_of(GATE)


def test_allow_dirty_never_changes_a_rule(repo: Repo) -> None:
    loosen(repo)
    done = repo.run("sync", "registry", "--allow-dirty")
    refused(done, "--allow-dirty never changes a rule-bearing definition", "fix:")
    assert repo.in_force("gate_policy", "release-gate") != repo.digest_of(GATE)


def _share_the_gate_policy(repo: Repo, chain: bool) -> None:
    """The gate policy moved to shared/ and symlinked (a signed commit): no rule change."""
    shared = repo.root / "shared"
    shared.mkdir()
    (repo.root / GATE).rename(shared / "gate-policy.yaml")
    if chain:
        (repo.root / "links").mkdir()
        (repo.root / "links" / "gate.yaml").symlink_to("../shared/gate-policy.yaml")
        (repo.root / GATE).symlink_to("../../links/gate.yaml")
    else:
        (repo.root / GATE).symlink_to("../../shared/gate-policy.yaml")
    repo.commit("alice", "share the gate policy")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr


def test_a_symlinked_rule_files_target_edited_unsigned(any_repo: Repo) -> None:
    repo = any_repo
    _share_the_gate_policy(repo, chain=False)
    before = repo.in_force("gate_policy", "release-gate")
    repo.edit(Path("shared/gate-policy.yaml"), "max_duration_days: 30", "max_duration_days: 3650")
    unsigned = repo.commit(None, "edit the shared file")
    refused(repo.run("sync", "registry"), unsigned[:12], "(unsigned)", "shared/gate-policy.yaml")
    assert repo.in_force("gate_policy", "release-gate") == before


def test_a_chain_of_symlinks_retargeted_in_the_middle(repo: Repo) -> None:
    _share_the_gate_policy(repo, chain=True)
    loose = (repo.root / "shared" / "gate-policy.yaml").read_text()
    (repo.root / "shared" / "loose.yaml").write_text(
        loose.replace("max_duration_days: 30", "max_duration_days: 3650"), "utf-8"
    )
    repo.commit("alice", "a file nothing reads")  # not rule-bearing yet: any signer would do
    (repo.root / "links" / "gate.yaml").unlink()
    (repo.root / "links" / "gate.yaml").symlink_to("../shared/loose.yaml")
    unsigned = repo.commit(None, "retarget the middle link")
    refused(repo.run("sync", "registry"), unsigned[:12], "(unsigned)", "links/gate.yaml")


def test_a_signed_edit_of_a_symlink_target_is_accepted(repo: Repo) -> None:
    _share_the_gate_policy(repo, chain=True)
    repo.edit(Path("shared/gate-policy.yaml"), "max_duration_days: 30", "max_duration_days: 20")
    repo.commit("alice", "signed")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(
        Path("shared/gate-policy.yaml")
    )


def _weaken_a_grader(repo: Repo) -> Path:
    path = Path("registry/graders/support-graders.yaml")
    text = (repo.root / path).read_text()
    assert "blocking: true" in text
    repo.edit(path, "blocking: true", "blocking: false")
    version = next(line for line in text.splitlines() if line.startswith("version:"))
    repo.edit(path, version, "version: 99")
    return path


def test_a_grader_set_change_needs_a_policy_owner(any_repo: Repo) -> None:
    repo = any_repo
    path = _weaken_a_grader(repo)
    unsigned = repo.commit(None, "weaken a grader")
    done = repo.run("sync", "registry")
    refused(done, "grader_set", unsigned[:12], "(unsigned)", str(path))
    repo.git("reset", "-q", "--hard", "HEAD~1")
    _weaken_a_grader(repo)
    bob = repo.commit("bob", "weaken a grader, signed by a reviewer")
    refused(repo.run("sync", "registry"), bob[:12], "signed by bob", "not a policy_owner")


def test_a_task_risk_label_lowered_on_a_renamed_file(repo: Repo) -> None:
    """Risk labels are compared by task id: a rename does not hide a lowered label."""
    old = Path(f"registry/tasks/{TASK}.yaml")
    text = (repo.root / old).read_text()
    assert "risk: noncritical_regression" in text
    (repo.root / old).unlink()
    (repo.root / "registry" / "tasks" / "renamed.yaml").write_text(
        text.replace("risk: noncritical_regression", "risk: quality_signal").replace(
            "revision: 1", "revision: 9", 1
        ),
        "utf-8",
    )
    unsigned = repo.commit(None, "rename and lower the risk")
    refused(repo.run("sync", "registry"), unsigned[:12], "(unsigned)", "renamed.yaml")


# ------------------------------------------------------------------ verify: rows written unchecked


def _without_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A modified evalops (or rows written by SQL with a consistent chain): sync puts
    anything in force, wherever it comes from."""
    from evalops.services.registry import sync
    from evalops.services.registry.tracking import Placement

    monkeypatch.setattr(sync, "place", lambda *args: Placement(True))
    monkeypatch.setattr(sync, "rule_change_refusal", lambda *args: (None, [], []))


def _attack_another_path(repo: Repo) -> tuple[str, list[str]]:
    shutil.copytree(repo.root / "registry", repo.root / "old")
    repo.edit(
        Path("old/policies/gate-policy.yaml"), "max_duration_days: 30", "max_duration_days: 99"
    )
    repo.commit(None, "old copy")
    return "old", ["off the tracked line", "at old/"]


def _attack_another_branch(repo: Repo) -> tuple[str, list[str]]:
    repo.git("checkout", "-q", "-b", "feature-x")
    loosen(repo)
    repo.commit(None, "branch")
    return "registry", ["off the tracked line", "feature-x"]


def _attack_force_push(repo: Repo) -> tuple[str, list[str]]:
    loosen(repo, "31")
    synced = repo.commit("alice", "signed")
    assert repo.run("sync", "registry").code == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")
    loosen(repo, "32")
    rewritten = repo.commit("alice", "rewritten")
    return "registry", ["rewritten history", synced[:12], rewritten[:12]]


def _attack_evil_merge(repo: Repo) -> tuple[str, list[str]]:
    main = repo.branch
    repo.git("checkout", "-q", "-b", "side")
    loosen(repo, "60")
    unsigned = repo.commit(None, "unsigned")
    repo.git("checkout", "-q", main)
    loosen(repo, "60")
    repo.commit("alice", "signed")
    repo.merge("alice", "side", "-s", "ours")
    return "registry", ["would have been refused", unsigned[:12], "(unsigned)"]


def _attack_dirty_then_clean(repo: Repo) -> tuple[str, list[str]]:
    original = (repo.root / GATE).read_text()
    loosen(repo)
    unsigned = repo.commit(None, "unsigned")
    (repo.root / GATE).write_text(original, "utf-8")
    (repo.root / "registry" / "NOTES.yaml").write_text("x: 1\n")  # any dirt
    done = repo.run("sync", "registry", "--allow-dirty")
    assert done.code == 0, done.stdout + done.stderr
    (repo.root / "registry" / "NOTES.yaml").unlink()
    repo.git("checkout", "--", str(GATE))
    return "registry", ["would have been refused", unsigned[:12]]


def _attack_symlink_target(repo: Repo) -> tuple[str, list[str]]:
    _share_the_gate_policy(repo, chain=False)
    repo.edit(Path("shared/gate-policy.yaml"), "max_duration_days: 30", "max_duration_days: 3650")
    unsigned = repo.commit(None, "edit the target")
    return "registry", ["would have been refused", unsigned[:12], "shared/gate-policy.yaml"]


def _attack_symlink_chain(repo: Repo) -> tuple[str, list[str]]:
    _share_the_gate_policy(repo, chain=True)
    (repo.root / "shared" / "loose.yaml").write_text(
        (repo.root / "shared" / "gate-policy.yaml")
        .read_text()
        .replace("max_duration_days: 30", "max_duration_days: 3650"),
        "utf-8",
    )
    repo.commit("alice", "an unread file")
    (repo.root / "links" / "gate.yaml").unlink()
    (repo.root / "links" / "gate.yaml").symlink_to("../shared/loose.yaml")
    unsigned = repo.commit(None, "retarget")
    return "registry", ["would have been refused", unsigned[:12], "links/gate.yaml"]


def _attack_grader_set(repo: Repo) -> tuple[str, list[str]]:
    path = _weaken_a_grader(repo)
    unsigned = repo.commit(None, "weaken")
    return "registry", ["would have been refused", "grader_set", unsigned[:12], str(path)]


ATTACKS = {
    "another_path": _attack_another_path,
    "another_branch": _attack_another_branch,
    "force_push": _attack_force_push,
    "evil_merge": _attack_evil_merge,
    "dirty_then_clean": _attack_dirty_then_clean,
    "symlink_target": _attack_symlink_target,
    "symlink_chain": _attack_symlink_chain,
    "grader_set": _attack_grader_set,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_verify_finds_each_attack_written_without_the_check(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, attack: str
) -> None:
    where, words = ATTACKS[attack](repo)
    before = repo.run("verify")
    if attack == "force_push":
        # What is in force came from a commit the force-push took off the branch.
        assert before.code == 6 and "a force-push took off it" in before.stderr, before.stderr
    else:
        assert before.code == 0, before.stderr
    with monkeypatch.context() as patched:
        _without_the_check(patched)
        done = repo.run("sync", where)
        assert done.code == 0, done.stdout + done.stderr
        assert "in force unchanged" not in done.stdout
    done = repo.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def _forget_head(repo: Repo) -> None:
    """The commit checked out leaves the repository (verify in a clone that never had it,
    or a sync that recorded a made-up commit)."""
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")


def test_verify_refuses_a_rule_change_from_a_commit_the_repository_does_not_hold(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    loosen(repo)
    unsigned = repo.commit(None, "unsigned, and soon gone")
    with monkeypatch.context() as patched:
        _without_the_check(patched)
        assert repo.run("sync", "registry").code == 0
    _forget_head(repo)
    assert repo.git("cat-file", "-t", unsigned, check=False) == ""
    done = repo.run("verify")
    assert done.code == 6, done.stdout + done.stderr
    assert unsigned[:12] in done.stderr and "does not hold" in done.stderr, done.stderr
    assert "gate_policy release-gate" in done.stderr


def test_a_commit_the_repository_does_not_hold_is_counted_when_it_changed_no_rule(
    repo: Repo,
) -> None:
    assert repo.run("new", "execution", "build-999", "--registry", "registry").code == 0
    repo.commit(None, "a new execution profile: no rule")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    (run_id,) = repo.sql("SELECT max(id) FROM sync_run")[0]
    _forget_head(repo)
    done = repo.run("--json", "verify")
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["rule_history"]["unknown_commits"] == [run_id]


def test_verify_finds_what_is_in_force_off_the_branch_it_was_synced_as(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed proposal never merged, synced as main by an evalops that did not ask git
    (or a row written by SQL): the commit is a fast-forward and its rule change is signed,
    so only the branch's refs tell; once main holds the commit, verify passes."""
    from evalops.services.registry import sync

    main = repo.branch
    repo.git("checkout", "-q", "-b", "proposal")
    loosen(repo, "31")
    proposal = repo.commit("alice", "a signed proposal")
    repo.git("checkout", "-q", "--detach", proposal)
    with monkeypatch.context() as patched:
        patched.setattr(sync, "check_detached_on", lambda *args: None)
        done = repo.run("sync", "registry", "--track", main)
        assert done.code == 0 and "in force unchanged" not in done.stdout, done.stdout
    found = repo.run("verify")
    assert found.code == 6, found.stdout + found.stderr
    assert f"put its commit in force as {main}, but no ref named {main}" in found.stderr
    assert proposal[:12] in found.stderr
    repo.git("checkout", "-q", main)
    repo.git("merge", "-q", "--ff-only", proposal)
    assert repo.run("verify").code == 0


@pytest.mark.postgres
def test_verify_finds_an_unchecked_rule_change_on_postgresql(
    demo: Path, keys: dict[str, Path], cli: Cli, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_holding(pg_url, demo)
    repo = _repo(demo, keys, cli, ["--db", pg_url], True)
    where, words = _attack_evil_merge(repo)
    with monkeypatch.context() as patched:
        _without_the_check(patched)
        assert repo.run("sync", where).code == 0
    done = repo.run("verify")
    assert done.code == 6 and all(w in done.stderr for w in words), done.stderr


def test_verify_passes_an_honest_history_and_says_what_it_checked(repo: Repo) -> None:
    main = repo.branch
    repo.git("checkout", "-q", "-b", "side")
    loosen(repo, "45")
    repo.commit("alice", "signed")
    repo.git("checkout", "-q", main)
    repo.merge("alice", "side")
    assert repo.run("sync", "registry").code == 0
    done = repo.run("--json", "verify")
    assert done.code == 0, done.stdout + done.stderr
    history = done.json()["rule_history"]
    assert history["checked"] >= 3 and history["skipped"] is None


def test_verify_finds_an_unsigned_promotion_written_without_the_check(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalops.services.authority.acts import Authorized
    from evalops.services.registry import promotion

    assert repo.run("verify").code == 0
    with monkeypatch.context() as patched:
        patched.setattr(promotion, "authorize", lambda *a, **k: Authorized("suite.promote"))
        assert repo.run("promote", PROMOTABLE, "--to", SUITE).code == 0
    done = repo.run("verify")
    assert done.code == 6 and "accepted unsigned" in done.stderr, done.stdout + done.stderr


# ------------------------------------------------------------------ promotion, registry track


#: A task the demo's regression suite would accept (its entry checklist is met).
PROMOTABLE = "article-source-records-complete"


def test_an_unsigned_promote_is_refused_and_a_risk_owners_is_accepted(any_repo: Repo) -> None:
    repo = any_repo
    members = "SELECT count(*) FROM suite_membership"
    (before,) = repo.sql(members)[0]
    # The dry run says, before any act is signed, who can sign it (`write_authority`: alice
    # holds risk_owner for regression/*); the authority judges only the signed act.
    dry = repo.run("promote", PROMOTABLE, "--to", SUITE, "--dry-run", "--json")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert dry.json()["signers"] == ["alice"]
    said = repo.run("promote", PROMOTABLE, "--to", SUITE, "--dry-run").stdout
    assert "it needs the act suite.promote signed by alice (--sign-with)" in said, said
    done = repo.run("promote", PROMOTABLE, "--to", SUITE)
    refused(done, "suite.promote is unsigned", "--sign-with")
    assert "fix: a new act signed by alice (--sign-with KEY" in done.stdout, done.stdout
    done = repo.run("promote", PROMOTABLE, "--to", SUITE, "--sign-with", str(repo.keys["bob"]))
    refused(done, "bob")
    assert repo.sql(members) == [(before,)]
    done = repo.run("promote", PROMOTABLE, "--to", SUITE, "--sign-with", str(repo.keys["alice"]))
    assert done.code == 0, done.stdout + done.stderr
    assert repo.sql(members) == [(before + 1,)]
    assert repo.sql("SELECT kind FROM signed_act ORDER BY id DESC LIMIT 1") == [("suite.promote",)]
    assert repo.run("verify").code == 0


def _fingerprint(private: Path) -> str:
    """The key's fingerprint as `ssh-keygen -l` prints it, from the public key the
    authority file names (not from evalops)."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{private}.pub"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()[1]


def _text(html: str) -> str:
    """The page's text: tags (and the <wbr> an identifier may carry) left out."""
    import re

    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def test_every_promotion_line_names_its_signers(repo: Repo) -> None:
    """`suite show` (text and --json), the suite card and the site's suite page show who
    signed each promotion: alice's principal and key fingerprint, or "unsigned" for the
    members promoted before the authority."""
    alice = _fingerprint(repo.keys["alice"])
    assert alice.startswith("SHA256:")
    done = repo.run("promote", PROMOTABLE, "--to", SUITE, "--sign-with", str(repo.keys["alice"]))
    assert done.code == 0, done.stdout + done.stderr
    members = {
        m["task_id"]: m for m in repo.run("suite", "show", SUITE, "--json").json()["members"]
    }
    assert members[PROMOTABLE]["signers"] == [{"principal": "alice", "fingerprint": alice}]
    assert members[TASK]["signers"] == []
    text = repo.run("suite", "show", SUITE)
    assert text.code == 0, text.stdout + text.stderr
    flat = " ".join(text.stdout.split())
    assert f"signed by alice ({alice})" in flat, text.stdout
    assert "unsigned" in flat, text.stdout
    card = repo.run("report", "suite", SUITE, "--format", "json").json()
    by_task = {m["task_id"]: m for m in card["members"]}
    assert by_task[PROMOTABLE]["signers"] == [{"principal": "alice", "fingerprint": alice}]
    assert by_task[TASK]["signers"] == []
    markdown = repo.run("report", "suite", SUITE, "--format", "md").stdout
    line = next(x for x in markdown.splitlines() if x.startswith(f"| `{PROMOTABLE}`"))
    assert f"signed by `alice` (`{alice}`)" in line, line
    line = next(x for x in markdown.splitlines() if x.startswith(f"| `{TASK}`"))
    assert "unsigned" in line, line
    html = _text(repo.run("report", "suite", SUITE, "--format", "html").stdout)
    assert f"signed by alice ({alice})" in html
    done = repo.run("report", "site", "site", "--suite", SUITE)
    assert done.code == 0, done.stdout + done.stderr
    pages = [p.read_text("utf-8") for p in (repo.root / "site" / "suites").glob("*.html")]
    (page,) = [p for p in pages if f"Suite {SUITE}" in _text(p)]
    history = page[
        page.index('id="membership"') : page.index("</table>", page.index('id="membership"'))
    ]
    rows = {
        task: [_text(r) for r in history.split("<tr>") if task in r] for task in (PROMOTABLE, TASK)
    }
    assert len(rows[PROMOTABLE]) == 1 and f"signed by alice ({alice})" in rows[PROMOTABLE][0], rows
    assert len(rows[TASK]) == 1 and rows[TASK][0].endswith("; unsigned–"), rows


def test_a_dry_run_into_a_suite_nobody_may_sign_for_says_so(repo: Repo) -> None:
    """ "would be accepted" read as a promise: no principal holds risk_owner for
    incidents/production, so the real run can only be refused."""
    dry = repo.run("promote", PROMOTABLE, "--to", "incidents/production", "--dry-run")
    assert dry.code == 0, dry.stdout + dry.stderr
    assert "suite.promote signed by nobody: no principal's role covers it" in dry.stdout
    real = repo.run("promote", PROMOTABLE, "--to", "incidents/production")
    refused(real, "nobody: no principal's role covers it; a policy owner must change the")
    as_json = repo.run("promote", PROMOTABLE, "--to", "incidents/production", "--dry-run",
                       "--json")  # fmt: skip
    assert as_json.json()["signers"] == []


def test_without_an_authority_a_promotion_is_shown_unsigned(plain: Repo) -> None:
    dry = plain.run("promote", PROMOTABLE, "--to", SUITE, "--dry-run", "--json")
    assert dry.json()["signers"] is None  # no authority: no act to sign
    assert (
        "suite.promote signed by"
        not in plain.run("promote", PROMOTABLE, "--to", SUITE, "--dry-run").stdout
    )
    done = plain.run("promote", PROMOTABLE, "--to", SUITE)
    assert done.code == 0, done.stdout + done.stderr
    members = {
        m["task_id"]: m for m in plain.run("suite", "show", SUITE, "--json").json()["members"]
    }
    assert members[PROMOTABLE]["signers"] == []
    assert plain.sql("SELECT count(*) FROM signed_act WHERE kind = 'suite.promote'") == [(0,)]
    card = plain.run("report", "suite", SUITE, "--format", "md").stdout
    line = next(x for x in card.splitlines() if x.startswith(f"| `{PROMOTABLE}`"))
    assert "unsigned" in line and "signed by" not in line, line


def test_registry_track_is_a_policy_owners_signed_act(any_repo: Repo) -> None:
    repo = any_repo
    refused(repo.run("registry", "track", "--branch", "release"), "registry.track is unsigned")
    refused(
        repo.run("registry", "track", "--branch", "release", "--sign-with", str(repo.keys["bob"])),
        "bob",
    )
    done = repo.run(
        "registry", "track", "--branch", "release", "--sign-with", str(repo.keys["alice"])
    )
    assert done.code == 0, done.stdout + done.stderr
    assert "tracked: release tracks registry/" in done.stdout
    shown = repo.run("--json", "registry", "show").json()
    assert (shown["tracked"]["branch"], shown["tracked_by"]) == ("release", "registry track")
    main = repo.branch
    loosen(repo, "31")
    repo.commit("alice", "on main, signed")
    assert "in force unchanged: release tracks registry/" in repo.run("sync", "registry").stdout
    repo.git("checkout", "-q", "-b", "release")
    done = repo.run("sync", "registry")
    assert done.code == 0 and "in force unchanged" not in done.stdout, done.stdout
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)
    assert main != "release"
    assert repo.run("verify").code == 0


def test_registry_track_rebases_a_rewritten_history(repo: Repo) -> None:
    loosen(repo, "31")
    repo.commit("alice", "signed")
    assert repo.run("sync", "registry").code == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")
    loosen(repo, "33")
    repo.commit("alice", "rewritten, signed")
    assert repo.run("sync", "registry").code == 5
    done = repo.run(
        "registry", "track", "--branch", repo.branch, "--sign-with", str(repo.keys["alice"])
    )
    assert done.code == 0, done.stdout + done.stderr
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert repo.run("verify").code == 0


def test_without_an_authority_registry_track_is_recorded_unsigned(plain: Repo) -> None:
    done = plain.run("--json", "registry", "track", "--path", "old")
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["tracked"]["path"] == "old"
    assert plain.run("registry", "track").code == 2


def test_tracking_a_branch_the_repository_lacks_says_so(plain: Repo) -> None:
    """A typo in `--branch` is recorded (CI may track a branch its clone did not fetch),
    but said: otherwise every sync would be "in force unchanged" with no word why."""
    note = "has no branch"
    typo = plain.run("registry", "track", "--branch", "mian")
    assert typo.code == 0, typo.stdout + typo.stderr
    assert "no branch mian, local or remote-tracking" in typo.stderr
    current = plain.git("rev-parse", "--abbrev-ref", "HEAD")
    known = plain.run("registry", "track", "--branch", current)
    assert known.code == 0 and note not in known.stderr, known.stderr
    # A remote-tracking branch counts: a CI clone often has only `origin/main`.
    plain.git("update-ref", "refs/remotes/origin/release", "HEAD")
    remote = plain.run("registry", "track", "--branch", "release")
    assert remote.code == 0 and note not in remote.stderr, remote.stderr


# ------------------------------------------------------------------ --definitions, the hint


def test_a_dry_run_under_a_commits_definitions_registers_nothing(any_repo: Repo) -> None:
    repo = any_repo
    count = "SELECT (SELECT count(*) FROM audit_event), (SELECT count(*) FROM policy)"
    before = repo.sql(count)
    in_force = repo.in_force("gate_policy", "release-gate")
    repo.git("checkout", "-q", "-b", "feature-x")
    loosen(repo, "31")
    head = repo.commit(None, "a pull request, unsigned")
    report = repo.root / "pr.md"
    args = ("gate", "check", "--build", "build-124", "--suite", SUITE, "--dry-run")
    done = repo.run("--json", *args, "--definitions", "HEAD", "--report", str(report))
    assert done.code == 4, done.stdout + done.stderr
    data = done.json()
    assert data["definitions"] == {
        "revision": "HEAD", "git_commit": head, "registry_path": "registry", "in_force": False,
    }  # fmt: skip
    assert data["policy"]["digest"] == repo.digest_of(GATE) != in_force
    text = report.read_text()
    assert head in text and "not in force" in text
    human = repo.run(*args, "--definitions", head[:12])
    assert human.stdout.splitlines()[0] == (
        f"dry run under the definitions of commit {head[:12]}, not in force: nothing registered"
    )
    # A name (HEAD, a branch) is said beside the commit it resolved to.
    named = repo.run(*args, "--definitions", "HEAD")
    assert named.stdout.splitlines()[0].startswith(
        f"dry run under the definitions of commit {head[:12]} (HEAD), not in force"
    )
    # Nothing registered, nothing in force changed, nothing audited.
    assert repo.sql(count) == before
    assert repo.in_force("gate_policy", "release-gate") == in_force
    plain = repo.run("--json", *args).json()
    assert plain["policy"]["digest"] == in_force and "definitions" not in plain
    assert repo.run("verify").code == 0


def test_definitions_needs_dry_run_and_a_commit(repo: Repo) -> None:
    args = ("gate", "check", "--build", "build-124", "--suite", SUITE)
    done = repo.run(*args, "--definitions", "HEAD")
    assert done.code == 2 and "only with --dry-run" in done.stderr
    done = repo.run(*args, "--dry-run", "--definitions", "no-such-branch")
    assert done.code == 2 and "no such commit 'no-such-branch'" in done.stderr
    assert done.stderr.count("--definitions") == 1, "the option is named once"
    done = repo.run(*args, "--dry-run", "--definitions", "--upload-pack=x")
    assert done.code == 2


def _trials_under(repo: Repo, profile: Path, source: Path, target: Path) -> None:
    """The demo's trials of build 125, as if run under `profile` (ids made unique)."""
    from evalops.domain import digests
    from evalops.registry.definitions import load_definition

    execution = load_definition(repo.root / profile).digest
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        for key in ("trial_id", "attempt_id", "run_id"):
            record[key] += "-pr"
        record["execution_digest"] = execution
        record["eval_case_digest"] = digests.eval_case_digest(
            record["task_digest"], execution, record["grader_set_digest"]
        )
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")


def test_a_hold_on_a_branch_syncs_definitions_names_that_sync(plain: Repo) -> None:
    """A pull request changes build-200's profile and syncs its branch (registered, not in
    force); its trials then hold the stored gate, and the hint names the sync, not a re-run."""
    repo = plain
    profile = Path("registry/executions/fix-b200.yaml")
    text = (repo.root / "registry/executions/fix-b125.yaml").read_text()
    (repo.root / profile).write_text(
        text.replace("id: fix-b125", "id: fix-b200").replace("build-125", "build-200")
    )
    repo.commit(None, "build 200's profile")
    assert repo.run("sync", "registry").code == 0
    repo.git("checkout", "-q", "-b", "feature-x")
    repo.edit(profile, 'adapter_version: "2.4.2"', 'adapter_version: "2.5.0"')
    head = repo.commit(None, "the pull request's runner")
    synced = repo.run("--json", "sync", "registry").json()
    assert synced["in_force_changed"] is False
    trials = repo.root / "pr-trials.jsonl"
    _trials_under(repo, profile, repo.root / "registry/trials/fix-b125.jsonl", trials)
    assert repo.run("trials", "ingest", str(trials)).code == 0, "its profile is registered"
    done = repo.run("gate", "check", "--build", "build-200", "--suite", SUITE)
    assert done.code == 3, done.stdout + done.stderr
    hints = [line for line in done.stdout.splitlines() if line.startswith("next:")]
    assert f"sync run {synced['sync_run']} registered from feature-x" in hints[0], hints
    assert f"--dry-run --definitions {head[:12]}" in hints[0]
    assert "re-running the eval will not change that" in hints[0]
    # The dry run under the branch's definitions counts those trials.
    dry = repo.run(
        "--json", "gate", "check", "--build", "build-200", "--suite", SUITE, "--dry-run",
        "--definitions", head,
    )  # fmt: skip
    assert dry.json()["decision"] != "hold" or all(
        not t.get("ignoredTrials") for t in dry.json()["tasks"]
    ), dry.stdout


def test_a_registry_synced_before_the_tracked_line_adopts_its_last_sync(
    plain: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A database whose syncs recorded no line (an older evalops): the last sync's path and
    branch are tracked."""
    from evalops.services.registry import sync

    url = f"sqlite:///{tmp_path / 'old.db'}"
    repo = Repo(plain.root, ["--db", url], plain.keys, plain.cli)
    assert repo.run("init").code == 0
    recorded = sync.append_event

    def older(session: Any, **event: Any) -> Any:
        event["payload"] = {k: v for k, v in event["payload"].items() if k != "tracked"}
        return recorded(session, **event)

    with monkeypatch.context() as patched:
        patched.setattr(sync, "append_event", older)
        assert repo.run("sync", "registry").code == 0
    assert not any("tracked" in p for (p,) in repo.sql("SELECT payload FROM audit_event"))
    main = repo.branch
    repo.git("checkout", "-q", "-b", "feature-x")
    loosen(repo)
    repo.commit(None, "a branch")
    done = repo.run("sync", "registry")
    assert done.code == 0 and f"in force unchanged: {main} tracks registry/" in done.stdout
    repo.git("checkout", "-q", main)
    repo.git("merge", "-q", "--ff-only", "feature-x")
    done = repo.run("sync", "registry")
    assert done.code == 0 and "in force unchanged" not in done.stdout, done.stdout
    assert repo.run("verify").code == 0


def test_a_build_registered_on_a_branch_names_its_commit_and_the_dry_run(plain: Repo) -> None:
    """A pull request adds the execution profile of its build: `gate check` of that build
    on the shared database cannot use it (it is not in force, docs/ci.md), and says
    where it is registered from and how to evaluate it (`--dry-run --definitions COMMIT`),
    instead of only "did you mean" another build."""
    repo = plain
    source = repo.root / "registry" / "executions" / "fix-b125.yaml"
    text = source.read_text("utf-8")
    assert "id: fix-b125" in text and "system_build: build-125" in text
    (repo.root / "registry" / "executions" / "pr-7.yaml").write_text(
        text.replace("id: fix-b125", "id: pr-7").replace(
            "system_build: build-125", "system_build: build-pr-7"
        ),
        "utf-8",
    )
    repo.git("checkout", "-q", "-b", "feature-x")
    commit = repo.commit(None, "the build of a pull request")
    synced = repo.run("sync", "registry")
    assert synced.code == 0, synced.stdout + synced.stderr
    # The dry run sync names is a command to paste, once its build and suite are filled in.
    hint = (synced.stdout + synced.stderr).partition("to see how it decides: evalops ")[2]
    hint = hint.splitlines()[0].replace("BUILD", "build-pr-7").replace("SUITE", "regression/core")
    dry = repo.run(*shlex.split(hint))
    assert dry.code in (0, 3, 4), (hint, dry.stdout + dry.stderr)
    assert f"dry run under the definitions of commit {commit[:12]}" in dry.stdout + dry.stderr
    done = repo.run("gate", "check", "--build", "build-pr-7", "--suite", "regression/core")
    assert done.code == 2, done.stdout + done.stderr
    line = done.stderr.strip()
    assert "build 'build-pr-7' is registered (execution profile 'pr-7', from commit " in line
    assert f"commit {commit[:12]} on feature-x) but not in force" in line
    assert f"--dry-run --definitions {commit[:12]} --build build-pr-7" in line
    # A build nobody registered keeps the plain message.
    unknown = repo.run("gate", "check", "--build", "build-none", "--suite", "regression/core")
    assert unknown.code == 2 and "is registered" not in unknown.stderr
    # The harness's template of its records reads the branch's definitions with
    # --definitions (the profile is not in force, so without it: exit 2 saying so).
    args = ("trials", "template", "--task", TASK, "--execution", "pr-7", "--count", "2")
    refused = repo.run(*args)
    assert refused.code == 2 and "add --definitions REV" in refused.stderr, refused.stderr
    made = repo.run(*args, "--definitions", "HEAD", "--jsonl")
    assert made.code == 0, made.stdout + made.stderr
    from evalops.domain import digests
    from evalops.registry.definitions import load_definition

    profile = load_definition(repo.root / "registry" / "executions" / "pr-7.yaml").digest
    records = [json.loads(line) for line in made.stdout.splitlines()]
    for record in records:
        assert record["execution_digest"] == profile
        assert record["eval_case_digest"] == digests.eval_case_digest(
            record["task_digest"], profile, record["grader_set_digest"]
        )
    # They ingest, and the dry run under the same commit counts them.
    (repo.root / "pr-7.jsonl").write_text(made.stdout, "utf-8")
    ingested = repo.run("trials", "ingest", "pr-7.jsonl", "--json")
    assert ingested.code == 0 and ingested.json()["ingested"] == 2, ingested.stdout
    decided = repo.run(*shlex.split(hint), "--json")
    task = next(t for t in decided.json()["tasks"] if t["task_id"] == TASK)
    assert task["n"] == 2, task
    assert repo.run("verify").code == 0


def test_the_audit_report_groups_its_pins_promotions_by_who_signed_them(repo: Repo) -> None:
    """One line per set of signers, however many pins: the demo's pins came in unsigned
    (before the authority), the new one signed by alice."""
    before = [m["task_id"] for m in repo.run("suite", "show", SUITE, "--json").json()["members"]]
    done = repo.run("promote", PROMOTABLE, "--to", SUITE, "--sign-with", str(repo.keys["alice"]))
    assert done.code == 0, done.stdout + done.stderr
    gate = repo.run("gate", "check", "--build", "build-125", "--suite", SUITE, "--json")
    assert gate.code in (0, 3, 4), gate.stdout + gate.stderr
    report = repo.run("report", "audit", gate.json()["gate_id"], "--format", "json", "-o", "-")
    acts = [
        a for a in json.loads(report.stdout)["authority"]["acts"] if a["act"] == "suite.promote"
    ]
    got = {(a["subject"], tuple(s["principal"] for s in a["signers"])) for a in acts}
    assert got == {(f"{len(before)} pins", ()), (PROMOTABLE, ("alice",))}, acts


def test_verify_of_a_repository_git_refuses_still_verifies_the_chain(
    plain: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's checkout (container CI): git will not read it, so the syncs cannot
    be re-checked against its history; the chain still is, and `verify` says why it skipped
    the rest, in git's words (it exited 2 after verifying the chain)."""
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")  # git's own test knob
    done = plain.run("verify")
    assert done.code == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "syncs not re-checked: git refuses to read this repository" in said, said
    assert "safe.directory" in said


def test_verify_with_a_registry_directory_that_does_not_exist_says_so(
    demo: Path, cli: Cli, tmp_path: Path
) -> None:
    """A mistyped --registry is no "not in a git repository" (which sends people to `git
    init`): the chain is verified and the skip names the missing directory."""
    missing = tmp_path / "no-such-registry"
    done = cli("--registry", str(missing), "verify", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert f"registry directory {missing} does not exist" in said
    assert "not in a git repository" not in said
    a_file = tmp_path / "registry.yaml"
    a_file.write_text("x", encoding="utf-8")
    done = cli("--registry", str(a_file), "verify", cwd=demo)
    assert f"registry directory {a_file} is a file, not a directory" in done.stdout + done.stderr


def test_a_sync_from_a_directory_outside_git_says_so(demo: Path, cli: Cli, tmp_path: Path) -> None:
    """A copy of the registry outside any repository, synced with --allow-dirty: nothing in
    force changes, and the summary says where it read from (not "a detached HEAD", which
    it has none of) without a `--definitions REV` that names no commit."""
    import shutil

    copy = tmp_path / "outside" / "registry"
    shutil.copytree(demo / "registry", copy)
    done = cli("--registry", str(copy), "sync", "--allow-dirty", cwd=demo)
    assert done.code == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "from a directory outside git (no branch, no commit)" in said
    assert "detached HEAD" not in said and "--definitions REV" not in said
    assert "in force unchanged" in said


def test_a_proposal_synced_as_main_from_a_forged_ref_is_named_when_main_syncs_next(
    repo: Repo,
) -> None:
    """A pull request's job runs its own workflow: in its checkout it can point a ref named
    main at a signed proposal never merged and sync it as main (evalops can only believe
    the checkout's refs). main's next sync sees its last synced commit is not an ancestor,
    and, finding that commit on another branch and on no main, says it may never have been
    on main, instead of only advising to re-base (which would adopt it)."""
    main = repo.branch
    repo.git("checkout", "-q", "-b", "proposal")
    loosen(repo, "31")
    proposal = repo.commit("alice", "a signed proposal, never merged")
    repo.git("checkout", "-q", "--detach", proposal)
    repo.git("update-ref", f"refs/remotes/origin/{main}", proposal)  # the forged ref
    forged = repo.run("sync", "registry", "--track", main)
    assert forged.code == 0, forged.stdout + forged.stderr
    # main's own job: a checkout of main, whose refs are main's, a commit on main after.
    repo.git("update-ref", "-d", f"refs/remotes/origin/{main}")
    repo.git("checkout", "-q", main)
    (repo.root / "README.md").write_text("an ordinary change\n", encoding="utf-8")
    repo.commit(None, "an ordinary change on main")
    refused = repo.run("sync", "registry")
    said = refused.stdout + refused.stderr
    assert refused.code == 5, said
    assert f"{proposal[:12]} is on proposal and on no {main} here" in said
    assert "re-basing would adopt what" in said and "evalops verify" in said


def test_an_unsigned_rule_edit_reverted_unsigned_is_vouched_for_by_re_signing_it(
    repo: Repo,
) -> None:
    """mallory edits the gate policy unsigned (refused) and reverts it unsigned (a net
    change of nothing: accepted, nothing in force changes). Both commits stay in the history
    every later sync reads, so alice's signed change is refused naming them; the fix
    the refusal gives (a policy owner re-signs it and the commits after it) is accepted."""
    in_force = repo.in_force("gate_policy", "release-gate")
    base = repo.git("rev-parse", "HEAD")
    loosen(repo)
    edit = repo.commit(None, "mallory: a longer waiver, unsigned")
    refused(repo.run("sync", "registry"), edit[:12], "(unsigned)")
    repo.git("revert", "--no-edit", "HEAD")
    revert = repo.git("rev-parse", "HEAD")
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == in_force
    loosen(repo, "20")
    repo.commit("alice", "alice: a shorter waiver, signed")
    said = repo.run("sync", "registry")
    # The newest unsigned rule-bearing commit is named first: the revert.
    refused(said, revert[:12], "(unsigned)", "git rebase --exec 'git commit --amend --no-edit -S'")
    assert "a revert on top does not take it out" in said.stdout + said.stderr
    # The fix as given: alice re-signs every commit after the last clean sync.
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingkey", f"{repo.keys['alice']}.pub")
    repo.git("rebase", "-q", "--exec", "git commit -q --amend --no-edit -S", base)
    done = repo.run("sync", "registry")
    assert done.code == 0, done.stdout + done.stderr
    assert repo.in_force("gate_policy", "release-gate") == repo.digest_of(GATE)
