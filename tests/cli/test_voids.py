"""Voiding trials ingested by mistake, attacked (docs/trials.md, "Voiding a mistaken record").

On a copy of the demo registry: build-125 passed (GATE-3) on trials a void then leaves out;
build-124 holds a hard failure. A void is never a deletion: `--at` before it, replays and
`verify` see the registry as it was; a SQL-deleted void is tampering; a voided id may be
ingested again only with new content; hard failures need a confirmation, or two signers under
an authority, whose signers must be risk owners of the suite.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, pg_holding
from tests.services.test_authority import World, _world, keyring  # noqa: F401  (fixture)

SUITE = "regression/core"
TASK = "support-refund-in-order"
TRIALS = ("trial-b125-support-refund-in-order-0", "trial-b125-support-refund-in-order-1")
HARD = "trial-b124-support-refund-in-order-2"
HARD_CHAIN = (HARD, f"{HARD}-rerun-1")  # the hard failure and the rerun that re-ran it
LATER = "2026-11-30T13:00:00Z"
BETWEEN = "2026-11-30T12:30:00Z"
DB = Path(".evalops/registry.db")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, demo: Path, cli: Cli) -> Iterator[list[str]]:
    """`--db` arguments of the demo registry on either engine."""
    if request.param == "sqlite":
        yield []
        return
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    yield ["--db", url]


def _run(cli: Cli, demo: Path, db: list[str], *args: str) -> Any:
    return cli(*db, *args, cwd=demo)


def _gate(cli: Cli, demo: Path, db: list[str], build: str, *extra: str) -> dict[str, Any]:
    done = _run(
        cli, demo, db, "gate", "check", "--build", build, "--suite", SUITE, *extra, "--json"
    )
    assert done.code in (0, 3, 4), done.stdout + done.stderr
    out: dict[str, Any] = done.json()
    return out


def _task(decision: dict[str, Any], task_id: str = TASK) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in decision["tasks"] if t["task_id"] == task_id)
    return found


def _verify(cli: Cli, demo: Path, db: list[str]) -> int:
    code: int = _run(cli, demo, db, "verify").code
    return code


def _said(done: Any) -> str:
    return str(done.stdout) + str(done.stderr)


def test_a_void_leaves_trials_out_from_then_on_and_every_earlier_read_sees_them(
    demo: Path, cli: Cli, db: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALOPS_NOW", LATER)
    done = _run(
        cli, demo, db, "trials", "void", *TRIALS, "--reason", "ingested under the wrong build"
    )
    assert done.code == 0, _said(done)
    assert "voided: 2 trials, VOID-1 by tester@example.com: ingested under the wrong build" in (
        done.stdout
    )
    # From the void on: left out, counted, and the decision says so with id, who and why.
    after = _gate(cli, demo, db, "build-125")
    assert _task(after)["n"] == 3 and _task(after)["ignoredTrials"] == {"voided": 2}
    assert after["decision"] == "hold"
    shown = _run(cli, demo, db, "gate", "show", after["gate_id"])
    assert "voided: 2 trials, VOID-1 by tester@example.com: ingested under the wrong build" in (
        shown.stdout
    )
    listed = _run(cli, demo, db, "trials", "list", "--task", TASK, "--build", "build-125", "--json")
    assert {t["trial_id"] for t in listed.json()}.isdisjoint(TRIALS)
    assert (
        "voided: 2 matching trials left out"
        in _run(cli, demo, db, "trials", "list", "--task", TASK, "--build", "build-125").stderr
    )
    # Before it: `--at`, the stored decision that read them, and verify see them as they were.
    before = _gate(cli, demo, db, "build-125", "--at", BETWEEN)
    assert _task(before)["n"] == 5 and "voided" not in _task(before)["ignoredTrials"]
    assert before["decision"] == "pass"
    replay = _run(cli, demo, db, "gate", "replay", "GATE-3", "--json")
    assert replay.code == 0 and replay.json()["identical"] is True
    for gate_id in (after["gate_id"], before["gate_id"]):
        assert _run(cli, demo, db, "gate", "replay", gate_id, "--json").json()["identical"]
    assert _verify(cli, demo, db) == 0
    voids = _run(cli, demo, db, "void", "list", "--json").json()
    assert [(v["void_id"], v["trials"], v["hard_count"]) for v in voids] == [
        ("VOID-1", list(TRIALS), 0)
    ]
    again = _run(cli, demo, db, "trials", "void", TRIALS[0], "--reason", "twice")
    assert again.code == 2 and "was voided (VOID-1)" in _said(again)
    # The way back, as ingest takes it: a new trial_id when reviews or reconciliations
    # were appended to the voided record.
    assert "under a new one if reconciliations or reviews were appended" in _said(again)


def test_the_dry_run_shows_the_change_in_the_latest_decision_and_stores_nothing(
    demo: Path, cli: Cli
) -> None:
    head = cli("verify", "--json", cwd=demo).json()["audit_head"]
    done = cli(
        "trials", "void", *TRIALS, "--reason", "wrong build", "--dry-run", "--json", cwd=demo
    )
    assert done.code == 0, _said(done)
    [decision] = done.json()["decisions"]
    assert (decision["suite"], decision["latest"], decision["decision"], decision["with_void"]) == (
        SUITE,
        "GATE-3",
        "pass",
        "hold",
    )
    assert decision["tasks"] == [
        {
            "task_id": TASK,
            "now": {"state": "task_pass", "effect": "pass", "n": 5},
            "with_void": {"state": "missing_required_evidence", "effect": "hold", "n": 3},
        }
    ]
    assert cli("verify", "--json", cwd=demo).json()["audit_head"] == head
    assert cli("void", "list", "--json", cwd=demo).json() == []


def test_a_void_that_would_hide_a_hard_failure_needs_its_confirmation(
    demo: Path, cli: Cli, db: list[str]
) -> None:
    assert _task(_gate(cli, demo, db, "build-124"))["state"] == "hard_constraint_fail"
    # The dry run exits as the void would (5), and records nothing, not even the refusal.
    events = _run(cli, demo, db, "verify", "--json").json()
    dry = _run(
        cli, demo, db, "trials", "void", *HARD_CHAIN, "--reason", "flaky grader", "--dry-run",
        "--json",
    )  # fmt: skip
    assert dry.code == 5, _said(dry)
    assert "--confirm-hard-failure" in dry.json()["refusal"]
    assert _run(cli, demo, db, "verify", "--json").json()["audit_head"] == events["audit_head"]
    refused = _run(cli, demo, db, "trials", "void", *HARD_CHAIN, "--reason", "flaky grader")
    assert refused.code == 5, _said(refused)
    assert "--confirm-hard-failure" in _said(refused) and HARD in _said(refused)
    assert _run(cli, demo, db, "void", "list", "--json").json() == []
    batch_refused = _run(cli, demo, db, "trials", "void", "--batch", "2", "--reason", "x")
    assert batch_refused.code in (2, 5)
    assert _run(cli, demo, db, "void", "list", "--json").json() == []
    assert _task(_gate(cli, demo, db, "build-124"))["state"] == "hard_constraint_fail"
    done = _run(
        cli,
        demo,
        db,
        "trials",
        "void",
        *HARD_CHAIN,
        "--reason",
        "flaky grader",
        "--confirm-hard-failure",
    )
    assert done.code == 0, _said(done)
    assert "(1 hard failure)" in done.stdout
    assert _task(_gate(cli, demo, db, "build-124"))["state"] != "hard_constraint_fail"
    assert _verify(cli, demo, db) == 0


def _record(demo: Path, trial_id: str) -> dict[str, Any]:
    for path in (demo / "registry" / "trials").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line)["trial_id"] == trial_id:
                found: dict[str, Any] = json.loads(line)
                return found
    raise AssertionError(trial_id)


def _ingest(cli: Cli, demo: Path, db: list[str], name: str, record: dict[str, Any]) -> Any:
    path = demo / name
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return _run(cli, demo, db, "trials", "ingest", str(path), "--json")


def test_a_voided_id_may_be_ingested_again_with_new_content_only(
    demo: Path, cli: Cli, db: list[str]
) -> None:
    original = _record(demo, TRIALS[0])
    corrected = {**original, "completed_at": "2026-11-29T10:09:00Z"}
    # Not voided: the id is taken, whatever the content.
    taken = _ingest(cli, demo, db, "early.jsonl", corrected)
    assert taken.code == 2 and "already has record_digest" in _said(taken)
    assert _run(cli, demo, db, "trials", "void", TRIALS[0], "--reason", "bad clock").code == 0
    # The voided content itself never comes back.
    back = _ingest(cli, demo, db, "back.jsonl", original)
    assert back.code == 2 and "with this content was voided (VOID-1)" in _said(back)
    done = _ingest(cli, demo, db, "fixed.jsonl", corrected)
    assert done.code == 0, _said(done)
    assert done.json()["ingested"] == 1
    shown = _run(cli, demo, db, "trials", "show", TRIALS[0], "--json").json()
    assert shown["void"] is None and shown["completed_at"].startswith("2026-11-29T10:09:00")
    assert _ingest(cli, demo, db, "fixed-again.jsonl", corrected).json()["skipped_identical"] == 1
    third = _ingest(
        cli, demo, db, "third.jsonl", {**corrected, "completed_at": "2026-11-29T10:10:00Z"}
    )
    assert third.code == 2
    assert _task(_gate(cli, demo, db, "build-125"))["n"] == 5
    assert _task(_gate(cli, demo, db, "build-125"))["ignoredTrials"] == {"voided": 1}
    assert _verify(cli, demo, db) == 0


def test_a_rerun_is_never_left_without_its_parent(demo: Path, cli: Cli) -> None:
    parent = _record(demo, TRIALS[0])
    rerun = {
        **parent,
        "trial_id": "rerun-of-0",
        "attempt_id": "attempt-rerun",
        "rerun": {"parent_trial_id": TRIALS[0], "reason": "runner timeout"},
    }
    assert _ingest(cli, demo, [], "rerun.jsonl", rerun).code == 0
    alone = cli("trials", "void", TRIALS[0], "--reason", "wrong build", cwd=demo)
    assert alone.code == 2 and "void them together" in _said(alone)
    # The suggested command, pasted unfilled, stores nothing: its placeholder is refused.
    suggested = re.search(r"`evalops (trials void [^`]*)`", _said(alone))
    assert suggested is not None and suggested.group(1).endswith("--reason REASON")
    pasted = cli(*shlex.split(suggested.group(1)), cwd=demo)
    assert pasted.code == 2 and "--reason REASON is the placeholder" in _said(pasted)
    together = cli("trials", "void", TRIALS[0], "rerun-of-0", "--reason", "wrong build", cwd=demo)
    assert together.code == 0, _said(together)


@pytest.mark.tampers
def test_a_void_deleted_by_sql_is_tampering(demo: Path, cli: Cli) -> None:
    assert cli("trials", "void", *TRIALS, "--reason", "wrong build", cwd=demo).code == 0
    assert cli("verify", cwd=demo).code == 0
    with sqlite3.connect(demo / DB) as conn:
        conn.execute("DELETE FROM voided_trial WHERE trial_id = ?", (TRIALS[1],))
    done = cli("verify", cwd=demo)
    assert done.code == 6, _said(done)
    assert "voided_trial" in _said(done)


@pytest.mark.tampers
def test_a_void_inserted_by_sql_is_tampering(demo: Path, cli: Cli) -> None:
    assert cli("trials", "void", TRIALS[0], "--reason", "wrong build", cwd=demo).code == 0
    with sqlite3.connect(demo / DB) as conn:
        (row,) = conn.execute("SELECT id FROM trial WHERE trial_id = ?", (TRIALS[1],)).fetchone()
        conn.execute(
            "INSERT INTO voided_trial (void_row_id, trial_row_id, trial_id, classification, "
            "audit_seq) SELECT void_row_id, ?, ?, classification, audit_seq FROM voided_trial",
            (row, TRIALS[1]),
        )
    assert cli("verify", cwd=demo).code == 6


# ------------------------------------------------------------------ under an authority


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def governed(request: pytest.FixtureRequest, demo: Path, cli: Cli) -> World:
    """The demo under an authority (tests/services/test_authority.py's), on either engine."""
    keys: dict[str, Path] = request.getfixturevalue("keyring")
    if request.param == "sqlite":
        return _world(demo, keys, cli, [])
    url: str = request.getfixturevalue("pg_url")
    pg_holding(url, demo)
    return _world(demo, keys, cli, ["--db", url])


def _void_signed(
    world: World, trials: tuple[str, ...], *signers: str, reason: str = "wrong build"
) -> Any:
    keys = [arg for name in signers for arg in ("--sign-with", str(world.keys[name]))]
    return world.run("trials", "void", *trials, "--reason", reason, *keys)


def test_under_an_authority_a_void_is_a_risk_owners_signed_act(governed: World) -> None:
    world = governed
    unsigned = world.run("trials", "void", TRIALS[0], "--reason", "wrong build")
    assert unsigned.code == 5 and "unsigned" in _said(unsigned)
    # carol is a risk owner of capability/* only; bob holds no risk_owner at all.
    carol = _void_signed(world, TRIALS[:1], "carol")
    assert carol.code == 5 and "holds risk_owner but not for" in _said(carol)
    bob = _void_signed(world, TRIALS[:1], "bob")
    assert bob.code == 5 and "does not hold risk_owner" in _said(bob)
    # Without the flag and under an authority: a confirmation is no signature.
    flagged = world.run(
        "trials", "void", *HARD_CHAIN, "--reason", "flaky", "--confirm-hard-failure",
        "--sign-with", str(world.keys["alice"]),
    )  # fmt: skip
    assert flagged.code == 5 and "needs 2 distinct signers, has 1 (alice)" in _said(flagged)
    assert world.run("void", "list", "--json").json() == []
    done = _void_signed(world, TRIALS[:1], "alice")
    assert done.code == 0, _said(done)
    assert "VOID-1 by alice" in done.stdout
    hard = _void_signed(world, HARD_CHAIN, "alice", "dave", reason="flaky grader")
    assert hard.code == 0, _said(hard)
    voids = world.run("void", "list", "--json").json()
    assert [v["void_id"] for v in voids] == ["VOID-2", "VOID-1"]  # hard-failure voids first
    assert {s["principal"] for s in voids[0]["signers"]} == {"alice", "dave"}
    assert world.run("verify").code == 0
    # A decision on build-125 rests on VOID-1 (it left a trial of the build out): its audit
    # report's authority section names the act and who signed it.
    checked = world.run("gate", "check", "--build", "build-125", "--suite", "regression/core",
                        "--json")  # fmt: skip
    report = world.run("report", "audit", checked.json()["gate_id"], "--format", "json", "-o", "-")
    acts = [a for a in json.loads(report.stdout)["authority"]["acts"] if a["act"] == "trials.void"]
    assert [(a["subject"], [s["principal"] for s in a["signers"]]) for a in acts] == [
        ("1 void", ["alice"])
    ]


def _a_trial_of_a_task_in_no_suite(world: World) -> str:
    """A build-125 trial whose task no suite holds (the demo registers more tasks than its
    suites promote)."""
    listed = world.run("trials", "list", "--build", "build-125", "--json", "--limit", "1000")
    assert listed.code == 0, _said(listed)
    suites = [s["suite"] for s in world.run("suite", "list", "--json").json()]
    members = {
        m["task_id"]
        for suite in suites
        for m in world.run("suite", "show", suite, "--json").json()["members"]
    }
    lone = [t["trial_id"] for t in listed.json() if t["task_id"] not in members]
    assert lone, "the demo has no build-125 trial of a task in no suite"
    return str(lone[0])


def test_a_void_touching_a_task_in_no_suite_needs_an_unscoped_risk_owner(
    governed: World,
) -> None:
    """alice owns the risk of regression/* only: she may not void a trial of a task in no
    suite, alone or carried in with a trial of her suite; an unscoped risk owner may."""
    world = governed
    lone = _a_trial_of_a_task_in_no_suite(world)
    alone = _void_signed(world, (lone,), "alice")
    assert alone.code == 5 and "holds risk_owner but not for" in _said(alone), _said(alone)
    mixed = _void_signed(world, (lone, TRIALS[0]), "alice")
    assert mixed.code == 5, _said(mixed)
    assert "no signer holds risk_owner for suite tasks in no suite" in _said(mixed)
    assert world.run("void", "list", "--json").json() == []
    done = _void_signed(world, (lone, TRIALS[0]), "alice", "dave")
    assert done.code == 0, _said(done)
    assert world.run("verify").code == 0


def test_a_void_of_a_hard_failure_needs_at_least_the_signers_of_any_void(
    governed: World,
) -> None:
    """With trials.void at 3 and trials.void_hard at its default 2, adding a hard failure
    to a void must not lower what its other trials need."""
    world = governed
    world.authority(
        thresholds={"trials.void": 3},
        roles={
            "risk_owner": [
                {"principal": "alice", "suites": ["regression/*"]},
                {"principal": "carol"},
                {"principal": "dave"},
            ],
            "reviewer": [{"principal": "bob"}],
            "ingester": [{"principal": "bob"}],
            "policy_owner": [{"principal": "alice"}],
        },
    )
    plain = _void_signed(world, TRIALS[:1], "alice", "dave")
    assert plain.code == 5 and "needs 3 distinct signers, has 2" in _said(plain), _said(plain)
    with_hard = _void_signed(world, (*HARD_CHAIN, TRIALS[0]), "alice", "dave", reason="flaky")
    assert with_hard.code == 5, _said(with_hard)
    assert "needs 3 distinct signers, has 2" in _said(with_hard)
    assert world.run("void", "list", "--json").json() == []
    done = _void_signed(world, (*HARD_CHAIN, TRIALS[0]), "alice", "carol", "dave", reason="flaky")
    assert done.code == 0, _said(done)
    assert world.run("verify").code == 0


def test_a_signed_void_act_voids_only_the_trials_it_names(governed: World) -> None:
    """An act printed for one trial, signed, then offered for another: refused, naming the
    field that differs; offered again as signed: stored once, a replay of it refused."""
    world = governed
    world.run("void", "list")  # the world is up
    printed = world.run("trials", "void", TRIALS[0], "--reason", "wrong build", "--print-act")
    assert printed.code == 0, _said(printed)
    act = world.root / "void-act.json"
    act.write_text(printed.stdout, encoding="utf-8")
    from tests.sshkeys import sign_file

    signature = sign_file(world.keys["alice"], act)
    offered = ("--act", str(act), "--signature", str(signature))
    other = world.run("trials", "void", TRIALS[1], "--reason", "wrong build", *offered)
    assert other.code == 5 and "the act differs from what this command would store" in _said(other)
    done = world.run("trials", "void", TRIALS[0], "--reason", "wrong build", *offered)
    assert done.code == 0, _said(done)
    again = world.run("trials", "void", TRIALS[1], "--reason", "wrong build", *offered)
    assert again.code == 5
    assert [v["trials"] for v in world.run("void", "list", "--json").json()] == [[TRIALS[0]]]
    assert world.run("verify").code == 0


def test_bad_void_requests_are_usage_errors_and_store_nothing(demo: Path, cli: Cli) -> None:
    head = cli("verify", "--json", cwd=demo).json()["audit_head"]
    for args, words in (
        ((TRIALS[0], "--batch", "1", "--reason", "x"), "not both"),
        (("--reason", "x"), "TRIAL... or --batch"),
        ((TRIALS[0],), "a void needs a reason: give --reason TEXT"),
        ((TRIALS[0], "--reason", "\u200b"), "a void needs a reason with a visible character"),
        ((TRIALS[0], "--reason", "x" * 4097), "at most 4,096"),
        (("no-such-trial", "--reason", "x"), "unknown trial 'no-such-trial'"),
        (("--batch", "999", "--reason", "x"), "no ingest batch 999"),
        ((TRIALS[0], "--reason", "x", "--sign-with", str(demo / "key")), "no authority"),
    ):
        done = cli("trials", "void", *args, cwd=demo)
        assert done.code == 2, (args, _said(done))
        assert words in _said(done), (args, _said(done))
    assert cli("verify", "--json", cwd=demo).json()["audit_head"] == head


def test_the_site_lists_voids_hard_failures_first_in_the_block_colour(demo: Path, cli: Cli) -> None:
    assert cli("trials", "void", *TRIALS, "--reason", "wrong build", cwd=demo).code == 0
    hard = ("trials", "void", *HARD_CHAIN, "--reason", "flaky grader", "--confirm-hard-failure")
    assert cli(*hard, cwd=demo).code == 0
    assert cli("report", "site", str(demo / "site"), cwd=demo).code == 0
    index = (demo / "site" / "index.html").read_text(encoding="utf-8")
    section = index.split('<h2 id="voids">', 1)[1].split("<h2", 1)[0]
    rows = [r for r in section.split("<tr")[1:] if "data-label" in r]
    assert [("VOID-2" in r, "VOID-1" in r) for r in rows] == [(True, False), (False, True)]
    assert rows[0].startswith(' class="e-block"') and "e-block" not in rows[1]
    assert (
        "voided: 2 trials (1 hard failure), VOID-2 by tester@example.com: flaky grader" in (rows[0])
    )


SOFT = "trial-b124-support-refund-in-order-0"


def _report(cli: Cli, demo: Path, gate_id: str, name: str) -> str:
    path = demo / name
    done = cli("gate", "show", gate_id, "--report", str(path), cwd=demo)
    assert done.code == 0, _said(done)
    return path.read_text(encoding="utf-8")


def test_the_audit_report_and_json_list_the_voids_a_decision_left_out_hard_ones_first(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = _gate(cli, demo, [], "build-124")
    assert earlier["voids"] == []
    replay_before = cli("gate", "replay", earlier["gate_id"], "--json", cwd=demo).json()
    monkeypatch.setenv("EVALOPS_NOW", LATER)
    soft = cli(
        "trials", "void", SOFT, "--reason", "ingested under the wrong build", "--json", cwd=demo
    )
    assert soft.code == 0, _said(soft)
    hard = cli(
        "trials",
        "void",
        *HARD_CHAIN,
        "--reason",
        "flaky grader",
        "--confirm-hard-failure",
        "--json",
        cwd=demo,
    )
    assert hard.code == 0, _said(hard)
    recorded = [hard.json(), soft.json()]  # the hard-failure void first, though recorded last
    assert recorded[0]["hard_count"] > 0 and recorded[1]["hard_count"] == 0
    expected = [
        (v["void_id"], v["reason"], v["actor"], len(v["trials"]), v["hard_count"]) for v in recorded
    ]
    assert [e[3] for e in expected] == [len(HARD_CHAIN), 1]

    after = _gate(cli, demo, [], "build-124")
    got = [
        (v["void_id"], v["reason"], v["by"], v["trials_left_out"], v["hard_count"])
        for v in after["voids"]
    ]
    assert got == expected
    assert after["voids"][0]["actor"] == recorded[0]["actor"]
    assert _task(after)["ignoredTrials"]["voided"] == sum(e[3] for e in expected)
    shown = cli("gate", "show", after["gate_id"], "--json", cwd=demo).json()
    assert shown["voids"] == after["voids"]

    # The report in its three formats: the same list, hard first, in the block colour.
    doc = json.loads(_report(cli, demo, after["gate_id"], "after.json"))
    assert doc["voids"] == after["voids"]
    html = _report(cli, demo, after["gate_id"], "after.html")
    section = html.split('<h2 id="voids">', 1)[1].split("<h2", 1)[0]
    rows = [r for r in section.split("<tr")[1:] if "data-label" in r]
    assert len(rows) == 2
    for row, (void_id, reason, by, n, _hard) in zip(rows, expected, strict=True):
        assert void_id in row and reason in row and by in row
        assert f'data-label="trials left out" class="n">{n}' in row
    assert rows[0].startswith(' class="e-block"') and "e-block" not in rows[1]
    md = _report(cli, demo, after["gate_id"], "after.md")
    first, second = (md.index(f"`{e[0]}`") for e in expected)
    assert first < second
    assert f"| `{expected[0][0]}` | {len(HARD_CHAIN)} (**" in md and expected[1][1] in md

    # A decision made before the voids lists none, however late it is shown or reported,
    # and its replay is what it was; so does one made later as of a time before them.
    assert cli("gate", "show", earlier["gate_id"], "--json", cwd=demo).json()["voids"] == []
    old = json.loads(_report(cli, demo, earlier["gate_id"], "before.json"))
    assert old["voids"] == []
    assert 'id="voids"' not in _report(cli, demo, earlier["gate_id"], "before.html")
    assert "VOID-" not in _report(cli, demo, earlier["gate_id"], "before.md")
    replay = cli("gate", "replay", earlier["gate_id"], "--json", cwd=demo).json()
    assert replay == replay_before and replay["identical"] is True
    assert _gate(cli, demo, [], "build-124", "--at", BETWEEN)["voids"] == []
    dry = _gate(cli, demo, [], "build-124", "--dry-run")
    assert [v["void_id"] for v in dry["voids"]] == [e[0] for e in expected]


def test_a_void_of_two_builds_counts_each_decisions_own_hard_failures(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One void (a batch of two builds, say) left out build-124's hard failure and two
    passing build-125 trials: build-125's decision and its report said "2 (1 hard failure)"
    of a failure that was never its own. Each decision counts its own trials' hard ones."""
    monkeypatch.setenv("EVALOPS_NOW", LATER)
    done = cli(
        "trials", "void", *HARD_CHAIN, *TRIALS, "--reason", "one batch, two builds",
        "--confirm-hard-failure", "--json", cwd=demo,
    )  # fmt: skip
    assert done.code == 0, _said(done)
    hard_classes = ("hard_constraint_fail", "ambiguous_external_effect")
    voided = done.json()["trials"]

    def build_of(trial: dict[str, Any]) -> str:
        return "build-" + str(trial["trial_id"]).split("-")[1].removeprefix("b")

    expected = {
        build: (
            sum(1 for t in voided if build_of(t) == build),
            sum(1 for t in voided if build_of(t) == build and t["classification"] in hard_classes),
        )
        for build in ("build-124", "build-125")
    }
    assert expected == {"build-124": (2, 1), "build-125": (2, 0)}, voided
    for build, (left_out, hard) in expected.items():
        (void,) = _gate(cli, demo, [], build)["voids"]
        assert (void["trials_left_out"], void["hard_count"]) == (left_out, hard), build
    later = _gate(cli, demo, [], "build-125")
    md = _report(cli, demo, later["gate_id"], "later.md")
    row = next(line for line in md.splitlines() if line.startswith(f"| `{voided_id(done)}`"))
    assert "hard failure" not in row, row
    html = _report(cli, demo, later["gate_id"], "later.html")
    section = html.split('<h2 id="voids">', 1)[1].split("<h2", 1)[0]
    (row_html,) = [r for r in section.split("<tr")[1:] if "data-label" in r]
    assert not row_html.startswith(' class="e-block"') and "hard failure" not in row_html


def voided_id(done: Any) -> str:
    return str(done.json()["void_id"])


def test_trials_show_names_the_batch_that_void_batch_takes(demo: Path, cli: Cli) -> None:
    """`void --batch 99` says `trials show TRIAL` names a trial's batch: it does, as stored."""
    with sqlite3.connect(demo / DB) as con:
        (stored,) = con.execute(
            "SELECT ingest_batch_id FROM trial WHERE trial_id = ?", (HARD,)
        ).fetchone()
    shown = cli("trials", "show", HARD, "--json", cwd=demo).json()
    assert shown["batch"] == stored
    text = cli("trials", "show", HARD, cwd=demo).stdout
    assert f"  ingest batch: {stored} (`evalops trials void --batch {stored}`)" in text
    dry = cli(
        "trials", "void", "--batch", str(stored), "--reason", "r", "--dry-run", "--json",
        cwd=demo,
    ).json()  # fmt: skip
    assert HARD in [t["trial_id"] for t in dry["trials"]]
    missing = cli("trials", "void", "--batch", "99", "--reason", "r", cwd=demo)
    assert missing.code == 2 and "`evalops trials show TRIAL` names a trial's batch" in _said(
        missing
    )


def test_a_decision_counts_the_hard_failures_of_its_member_tasks_only(
    demo: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One void holds two hard failures of build-124, one of a task the suite no longer
    has: the suite's decision names one."""
    monkeypatch.setenv("EVALOPS_NOW", LATER)
    other = "trial-b124-article-publish-approved-revision-3"
    retired = cli(
        "retire", "article-publish-approved-revision", "--from", SUITE, "--kind", "obsolete",
        "--reason", "out of scope", "--approved-by", "support-lead@example.com", cwd=demo,
    )  # fmt: skip
    assert retired.code == 0, _said(retired)
    done = cli(
        "trials", "void", *HARD_CHAIN, other, "--reason", "one batch, two tasks",
        "--confirm-hard-failure", "--json", cwd=demo,
    )  # fmt: skip
    assert done.code == 0, _said(done)
    hard_classes = ("hard_constraint_fail", "ambiguous_external_effect")
    mine = [t for t in done.json()["trials"] if t["task_id"] == TASK]
    assert done.json()["hard_count"] == 2
    (void,) = _gate(cli, demo, [], "build-124")["voids"]
    assert void["trials_left_out"] == len(mine)
    assert void["hard_count"] == sum(1 for t in mine if t["classification"] in hard_classes) == 1
