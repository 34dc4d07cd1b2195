"""verify's own loader of a decision's inputs (evalops/services/verify/gate_inputs.py), on the
demo registry of tests/fixtures (`registry-evaluator3-demo.db`, read through plain `sqlite3`)
with rows added or edited by plain SQL, one change per case.

The demo's decisions (DESIGN 13) were stored with the inputs `gate check` loaded when they
were made (evalops 4977f2e, the ORM loader): the rebuild must give those bytes. Each change
then has the effect DESIGN 6-9 gives it, written here from the contract's words:

- 9: a member's evidence is the build's trials of its pin (same task and grader set digest);
  the others are counted under `ignoredTrials` by reason (`other_task_revision`,
  `other_grader_set_version`, `older_execution_digest`), voided trials too (6.3);
- 9: the members are the suite's current pins (a retirement ends one); risk labels ratchet to
  the strictest of the pinned and later registered revisions; `trials.count`, `k` and
  `passRule` come from the pinned revision;
- 9: waivers are listed with their revocation, refused requests are listed, nothing is
  dropped; `--baseline auto` is the build of the latest stored pass of another build;
- 6.2 and 8: a stored class stands only while nothing it depends on changed: an appended
  reconciliation or review, or a calibration state other than the one recorded at ingest,
  re-derives it (an invalidated calibration makes the model grader's trials grader_invalid).

No CLI, no workspace: `make mutate` runs these for each mutant of the module.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalops.domain.digests import suite_digest
from evalops.errors import InputError
from evalops.services.gate.input_parts import GateRequest
from evalops.services.verify.gate_inputs import rebuilt_inputs
from evalops.store.reader import SqliteReader
from tests.helpers import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "registry-evaluator3-demo.db"
# GATE-3 (build-125, cutoff 36): its members by task id, and their trials' row ids.
APPROVED, IN_ORDER, POLICY = (
    "article-publish-approved-revision",
    "support-refund-in-order",
    "support-refund-policy-explanation",
)
MEMBERS = [APPROVED, IN_ORDER, POLICY]
ROWS = {APPROVED: [58, 59, 60, 61, 62], IN_ORDER: [68, 69, 70, 71, 72], POLICY: [73, 74, 75]}
# support-graders@2, pinned by both support members: reply-quality is a blocking model grader.
SUPPORT_GRADERS = "sha256:aa6d44746570feac469bba9772fac9143c65006607047d53ae5c0e5f5b467a73"
FIX_B125 = "sha256:248feb84a4b87113b241fc8c0d6814a0e362a489ab629c254428a5d8973f2e1d"
CANDIDATE_B124 = "sha256:17f1fe9535c3e26836ac6ee3bc9e976dc2076dbd87d13b7a01c7a1a715c0f242"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return Path(shutil.copy(FIXTURE, tmp_path / "registry.db"))


def sql(db: Path, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A change or a read behind evalops's back: plain SQL."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            return conn.execute(statement, params).fetchall()
    finally:
        conn.close()


def stored_inputs(db: Path, gate_id: str) -> dict[str, Any]:
    ((text,),) = sql(db, "SELECT inputs FROM gate_decision WHERE gate_id = ?", (gate_id,))
    value: dict[str, Any] = json.loads(text)
    return value


def rebuild(db: Path, gate_id: str = "GATE-3", evaluator: int | None = None, **asked: Any) -> Any:
    """The inputs of `gate_id`'s request (with `asked` changed) rebuilt from the rows."""
    stored = stored_inputs(db, gate_id)
    document: Any = {**stored["request"], **asked}
    request = GateRequest.from_dict(document)
    conn = sqlite3.connect(db)
    try:
        return rebuilt_inputs(SqliteReader(conn), request, evaluator or stored["evaluator"])
    finally:
        conn.close()


def task(inputs: dict[str, Any], task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in inputs["tasks"] if t["task_id"] == task_id)
    return found


def trial_ids(db: Path, rows: list[int]) -> list[str]:
    marks = ", ".join("?" * len(rows))
    return [
        r[0]
        for r in sql(
            db, f"SELECT trial_id FROM trial WHERE id IN ({marks}) ORDER BY id", tuple(rows)
        )
    ]


def copy_row(db: Path, table: str, row_id: int, **values: Any) -> None:
    """A copy of row `row_id` of `table` (a new id) with `values` changed."""
    columns = [c[1] for c in sql(db, f"PRAGMA table_info({table})") if c[1] != "id"]
    picked = ", ".join("?" if c in values else c for c in columns)
    sql(
        db,
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table} WHERE id = ?",
        (*(values[c] for c in columns if c in values), row_id),
    )


def add_event(
    db: Path, seq: int, kind: str, payload: dict[str, Any], at: str = "2026-11-30 13:00:00.000000"
) -> None:
    sql(
        db,
        "INSERT INTO audit_event (seq, at, actor, kind, subject, payload_digest, payload, "
        "prev_hash, hash) VALUES (?, ?, 'tester', ?, 'x', 'sha256:x', ?, 'sha256:p', ?)",
        (seq, at, kind, json.dumps(payload), f"sha256:h{seq}"),
    )


# ------------------------------------------------------------------ the demo's decisions


@pytest.mark.parametrize("gate_id", ["GATE-1", "GATE-2", "GATE-3"])
def test_each_decision_rebuilds_to_the_inputs_stored_with_it(db: Path, gate_id: str) -> None:
    stored = stored_inputs(db, gate_id)
    assert {**rebuild(db, gate_id), "gate_id": gate_id} == stored


def test_the_inputs_hold_the_members_pins_and_the_builds_trials(db: Path) -> None:
    inputs = rebuild(db)
    assert [t["task_id"] for t in inputs["tasks"]] == MEMBERS
    for task_id, rows in ROWS.items():
        assert [t["trial_id"] for t in task(inputs, task_id)["trials"]] == trial_ids(db, rows)
        assert task(inputs, task_id)["ignoredTrials"] == {}
    assert (inputs["execution_id"], inputs["execution_digest"]) == ("fix-b125", FIX_B125)
    assert inputs["suite"]["id"] == "regression/core"
    assert inputs["baseline"] is None
    assert inputs["refused_waivers"] == []
    assert inputs["waivers"] == [
        {
            "waiver_id": "WVR-1",
            "task_id": POLICY,
            "suite_id": "regression/core",
            "build": "build-125",
            "states": ["task_fail"],
            "granted_at": "2026-11-30T12:00:00.000000Z",
            "expires_at": "2026-12-14T12:00:00.000000Z",
            "revoked_at": None,
        }
    ]
    assert task(inputs, IN_ORDER)["plan"] == {"count": 5, "k": 3, "passRule": "all", "passScore": 1}
    assert (task(inputs, IN_ORDER)["risk"], task(inputs, POLICY)["risk"]) == (
        "critical",
        "noncritical_regression",
    )


# --------------------------------------------------------------------- ignored trials, 9


def _older_profile(db: Path, seq: int) -> None:
    """An older digest of the execution profile fix-b125, registered at `seq`."""
    sql(
        db,
        "INSERT INTO execution_profile (document_digest, document, file_path, sync_run_id, "
        "audit_seq, id, execution_id, system_build, execution_digest) SELECT 'sha256:old-doc', "
        "document, file_path, sync_run_id, ?, 99, execution_id, system_build, 'sha256:older' "
        "FROM execution_profile WHERE execution_id = 'fix-b125'",
        (seq,),
    )


def _voids(db: Path, *pairs: tuple[int, int]) -> None:
    """A void table (this schema predates voids: the loader reads one when there is one)."""
    sql(db, "CREATE TABLE IF NOT EXISTS voided_trial (trial_row_id INTEGER, audit_seq INTEGER)")
    for row, seq in pairs:
        sql(db, "INSERT INTO voided_trial VALUES (?, ?)", (row, seq))


@pytest.mark.parametrize(
    ("change", "listed", "ignored"),
    [
        (
            ["UPDATE trial SET task_digest = 'sha256:other' WHERE id = 68"],
            4,
            {"other_task_revision": 1},
        ),
        (
            ["UPDATE trial SET grader_set_digest = 'sha256:other' WHERE id IN (68, 69)"],
            3,
            {"other_grader_set_version": 2},
        ),
        # One trial, one reason: another revision's trial is no evidence whatever its graders.
        (
            [
                "UPDATE trial SET task_digest = 'sha256:o', grader_set_digest = 'sha256:o' "
                "WHERE id = 68"
            ],
            4,
            {"other_task_revision": 1},
        ),
        (
            [
                "UPDATE trial SET task_digest = 'sha256:other' WHERE id = 68",
                "UPDATE trial SET grader_set_digest = 'sha256:other' WHERE id = 69",
            ],
            3,
            {"other_grader_set_version": 1, "other_task_revision": 1},
        ),
    ],
)
def test_trials_of_another_pin_are_counted_not_listed(
    db: Path, change: list[str], listed: int, ignored: dict[str, int]
) -> None:
    for statement in change:
        sql(db, statement)
    got = task(rebuild(db), IN_ORDER)
    assert (len(got["trials"]), got["ignoredTrials"]) == (listed, ignored)
    assert list(got["ignoredTrials"]) == sorted(ignored)


@pytest.mark.parametrize(
    ("voids", "listed", "ignored"),
    [
        ([(68, 36)], 4, {"voided": 1}),  # voided at the cutoff: left out
        ([(68, 20), (69, 36)], 3, {"voided": 2}),
        ([(68, 37)], 5, {}),  # voided after the decision: still evidence then
    ],
)
def test_a_trial_voided_by_the_cutoff_is_counted_as_voided(
    db: Path, voids: list[tuple[int, int]], listed: int, ignored: dict[str, int]
) -> None:
    _voids(db, *voids)
    got = task(rebuild(db), IN_ORDER)
    assert (len(got["trials"]), got["ignoredTrials"]) == (listed, ignored)


def test_trials_of_an_older_digest_of_the_profile_are_counted(db: Path) -> None:
    _older_profile(db, 11)
    sql(db, "UPDATE trial SET execution_digest = 'sha256:older' WHERE id IN (68, 69, 73)")
    inputs = rebuild(db)
    assert (len(task(inputs, IN_ORDER)["trials"]), task(inputs, IN_ORDER)["ignoredTrials"]) == (
        3,
        {"older_execution_digest": 2},
    )
    assert task(inputs, POLICY)["ignoredTrials"] == {"older_execution_digest": 1}
    assert task(inputs, APPROVED)["ignoredTrials"] == {}


def test_a_voided_trial_of_an_older_digest_is_not_counted_as_older(db: Path) -> None:
    _older_profile(db, 11)
    sql(db, "UPDATE trial SET execution_digest = 'sha256:older' WHERE id IN (68, 69)")
    _voids(db, (68, 30))
    assert task(rebuild(db), IN_ORDER)["ignoredTrials"] == {"older_execution_digest": 1}


def test_an_older_digest_registered_after_the_cutoff_is_not_yet_older(db: Path) -> None:
    _older_profile(db, 37)
    sql(db, "UPDATE trial SET execution_digest = 'sha256:older' WHERE id IN (68, 69)")
    got = task(rebuild(db), IN_ORDER)
    assert (len(got["trials"]), got["ignoredTrials"]) == (3, {})


def test_trials_ingested_after_the_cutoff_are_not_read(db: Path) -> None:
    sql(db, "UPDATE trial SET audit_seq = 37 WHERE id IN (68, 73)")
    inputs = rebuild(db)
    assert [t["trial_id"] for t in task(inputs, IN_ORDER)["trials"]] == trial_ids(
        db, ROWS[IN_ORDER][1:]
    )
    assert len(task(inputs, POLICY)["trials"]) == 2


# ------------------------------------------------------------------------- members, 9


def _membership(db: Path, task_id: str, action: str, seq: int) -> None:
    sql(
        db,
        "INSERT INTO suite_membership (suite_id, task_id, action, task_digest, "
        "grader_set_digest, task_revision_id, at, actor, audit_seq) SELECT suite_id, task_id, "
        "?, task_digest, grader_set_digest, task_revision_id, at, actor, ? FROM "
        "suite_membership WHERE task_id = ?",
        (action, seq, task_id),
    )


def test_a_retired_member_is_no_longer_a_member(db: Path) -> None:
    _membership(db, IN_ORDER, "retired", 36)
    inputs = rebuild(db)
    assert [t["task_id"] for t in inputs["tasks"]] == [APPROVED, POLICY]
    pins = [
        {
            "task_id": t["task_id"],
            "task_digest": t["task_digest"],
            "grader_set_digest": t["grader_set_digest"],
        }
        for t in inputs["tasks"]
    ]
    assert inputs["suite"]["suite_digest"] == suite_digest("regression/core", "regression", pins)


def test_a_retirement_after_the_cutoff_is_not_read(db: Path) -> None:
    _membership(db, IN_ORDER, "retired", 37)
    assert [t["task_id"] for t in rebuild(db)["tasks"]] == MEMBERS


def test_a_retired_member_added_again_is_a_member(db: Path) -> None:
    _membership(db, IN_ORDER, "retired", 35)
    _membership(db, IN_ORDER, "added", 36)
    assert [t["task_id"] for t in rebuild(db)["tasks"]] == MEMBERS


def test_a_pin_of_an_unregistered_revision_is_refused(db: Path) -> None:
    sql(
        db,
        "UPDATE suite_membership SET task_digest = 'sha256:nowhere' WHERE task_id = ?",
        (IN_ORDER,),
    )
    with pytest.raises(InputError) as caught:
        rebuild(db)
    assert caught.value.message == (
        f"suite member {IN_ORDER} pins task_digest sha256:nowhere, which is not registered: "
        "the database was changed outside evalops (run `evalops verify`)"
    )


def _revision(db: Path, task_id: str, revision: int, seq: int, edit: Any) -> None:
    """Another registered revision of `task_id` (its document changed by `edit`)."""
    ((doc, digest),) = sql(
        db, "SELECT document, task_digest FROM task_revision WHERE task_id = ?", (task_id,)
    )
    document = json.loads(doc)
    edit(document)
    sql(
        db,
        "INSERT INTO task_revision (document_digest, document, file_path, sync_run_id, "
        "audit_seq, id, task_id, revision, task_digest, grader_set_id, risk) SELECT ?, ?, "
        "file_path, sync_run_id, ?, ?, task_id, ?, ?, grader_set_id, risk FROM task_revision "
        "WHERE task_id = ?",
        (f"sha256:doc-{revision}", json.dumps(document), seq, 100 + revision, revision,
         f"{digest}-r{revision}", task_id),
    )  # fmt: skip


def _riskier(document: dict[str, Any]) -> None:
    document["meta"]["risk"] = "critical"
    document["meta"]["protects"] = ["customer_money"]


def test_risk_ratchets_up_to_a_later_registered_revision(db: Path) -> None:
    """DESIGN 9: the strictest labels among the pinned revision and every later registered
    revision: raising a task's risk takes effect at the next sync."""
    _revision(db, POLICY, 2, 36, _riskier)
    got = task(rebuild(db), POLICY)
    assert (got["risk"], got["protects"]) == ("critical", ["customer_money"])


def test_a_revision_registered_after_the_cutoff_does_not_ratchet(db: Path) -> None:
    _revision(db, POLICY, 2, 37, _riskier)
    assert task(rebuild(db), POLICY)["risk"] == "noncritical_regression"


def test_the_plan_is_the_pinned_revisions(db: Path) -> None:
    """The pinned revision's `trials`: count, k (else the count), passRule, passScore; with
    none, one trial that must pass."""
    pinned = ROWS  # noqa: F841 (the members as above)

    def edit_plan(trials: dict[str, Any] | None) -> None:
        ((doc,),) = sql(db, "SELECT document FROM task_revision WHERE task_id = ?", (IN_ORDER,))
        document = json.loads(doc)
        if trials is None:
            del document["contract"]["trials"]
        else:
            document["contract"]["trials"] = trials
        sql(
            db,
            "UPDATE task_revision SET document = ? WHERE task_id = ?",
            (json.dumps(document), IN_ORDER),
        )

    edit_plan({"count": 4, "passRule": "mean", "passScore": 0.75})
    assert task(rebuild(db), IN_ORDER)["plan"] == {
        "count": 4,
        "k": 4,
        "passRule": "mean",
        "passScore": 0.75,
    }
    edit_plan(None)
    assert task(rebuild(db), IN_ORDER)["plan"] == {
        "count": 1,
        "k": 1,
        "passRule": "all",
        "passScore": 1,
    }


# -------------------------------------------------------------------------- waivers, 9


def _revoke(db: Path, revoked_at: str, seq: int) -> None:
    sql(
        db,
        "INSERT INTO waiver_revocation (waiver_row_id, revoked_at, reason, actor, audit_seq) "
        "VALUES (1, ?, 'fixed', 'tester', ?)",
        (revoked_at, seq),
    )


def test_a_revoked_waiver_is_listed_with_its_first_revocation(db: Path) -> None:
    _revoke(db, "2026-11-30 12:30:00.000000", 36)
    _revoke(db, "2026-11-30 12:10:00.000000", 36)
    _revoke(db, "2026-11-30 12:05:00.000000", 37)  # after the cutoff
    (listed,) = rebuild(db)["waivers"]
    assert listed["revoked_at"] == "2026-11-30T12:10:00.000000Z"


def test_a_revocation_after_the_cutoff_is_not_read(db: Path) -> None:
    _revoke(db, "2026-11-30 12:05:00.000000", 37)
    assert rebuild(db)["waivers"][0]["revoked_at"] is None


def test_waivers_of_other_builds_and_after_the_cutoff_are_not_listed(db: Path) -> None:
    for build, seq in (("build-124", 36), ("build-125", 37)):
        copy_row(db, "waiver", 1, number=seq, waiver_id=f"WVR-{seq}", build=build, audit_seq=seq)
    assert [w["waiver_id"] for w in rebuild(db)["waivers"]] == ["WVR-1"]
    assert [w["waiver_id"] for w in rebuild(db, cutoff=37)["waivers"]] == ["WVR-1", "WVR-37"]


def test_refused_waiver_requests_of_the_build_and_suite_are_listed_in_order(db: Path) -> None:
    mine = {
        "build": "build-125",
        "suite_id": "regression/core",
        "task_id": IN_ORDER,
        "states": ["task_fail"],
    }
    add_event(
        db,
        38,
        "waiver.refused",
        {"request": mine, "refusals": [{"rule": "critical_task"}, {"rule": "protects"}]},
    )
    add_event(
        db,
        39,
        "waiver.refused",
        {"request": {**mine, "build": "build-124"}, "refusals": [{"rule": "x"}]},
    )
    add_event(
        db,
        40,
        "waiver.refused",
        {"request": {**mine, "suite_id": "other"}, "refusals": [{"rule": "x"}]},
    )
    add_event(
        db, 41, "authority.refused",
        {
            "act": "waiver.grant",
            "request": mine,
            "refusal": {"rule": "scope", "message": "not yours"},
        },
        at="2026-11-30 14:00:00+00:00",
    )  # fmt: skip
    add_event(
        db, 42, "authority.refused", {"act": "review.resolve", "request": mine, "refusal": {}}
    )
    add_event(db, 43, "waiver.refused", {"request": mine, "refusals": []})
    add_event(db, 44, "waiver.refused", {"request": mine, "refusals": [{"rule": "late"}]})
    assert rebuild(db, cutoff=43)["refused_waivers"] == [
        {
            "seq": 38,
            "task_id": IN_ORDER,
            "states": ["task_fail"],
            "rules": ["critical_task", "protects"],
            "at": "2026-11-30T13:00:00.000000Z",
        },
        {
            "seq": 41,
            "task_id": IN_ORDER,
            "states": ["task_fail"],
            "rules": ["scope"],
            "at": "2026-11-30T14:00:00.000000Z",
            "refusal": "refused by the authority: not yours",
        },
        {
            "seq": 43,
            "task_id": IN_ORDER,
            "states": ["task_fail"],
            "rules": [],
            "at": "2026-11-30T13:00:00.000000Z",
        },
    ]


# ------------------------------------------------------------------------- baseline, 9


def test_auto_is_the_build_of_the_latest_pass_of_another_build(db: Path) -> None:
    """GATE-3 passed build-125 (audit seq 37): build-124 asked with `--baseline auto` after
    it pairs with build-125, loaded as GATE-3 loaded it."""
    inputs = rebuild(db, "GATE-1", build="build-124", baseline="auto", cutoff=37)
    block = inputs["baseline"]
    assert (block["build"], block["asked"], block["note"]) == ("build-125", "auto", None)
    assert block["execution_digest"] == FIX_B125
    assert block["tasks"] == stored_inputs(db, "GATE-3")["tasks"]


@pytest.mark.parametrize(("build", "cutoff"), [("build-125", 37), ("build-124", 36)])
def test_auto_finds_no_pass_of_the_build_itself_or_after_the_cutoff(
    db: Path, build: str, cutoff: int
) -> None:
    block = rebuild(db, build=build, baseline="auto", cutoff=cutoff)["baseline"]
    assert (block["build"], block["note"]) == (
        None,
        "--baseline auto: no stored pass decision for regression/core on a build other than "
        + build,
    )


def test_a_baseline_asked_is_loaded_by_its_build(db: Path) -> None:
    """At GATE-1's cutoff, build-124's trials as GATE-1 loaded them (a reconciliation was
    appended to one of them later)."""
    block = rebuild(db, baseline="build-124", method="sign-test", cutoff=31)["baseline"]
    assert (block["build"], block["execution_digest"], block["method"]) == (
        "build-124",
        CANDIDATE_B124,
        "sign-test",
    )
    assert block["tasks"] == stored_inputs(db, "GATE-1")["tasks"]


def test_a_baseline_build_without_a_profile_names_the_baseline_option(db: Path) -> None:
    with pytest.raises(InputError) as caught:
        rebuild(db, baseline="build-999")
    assert caught.value.field == "--baseline"


# ------------------------------------------------------------------ policy and execution


def test_a_policy_named_by_id_or_digest_is_the_registered_one(db: Path) -> None:
    stored = stored_inputs(db, "GATE-3")
    for ref in ("release-gate", stored["policy_digest"]):
        inputs = rebuild(db, policy=ref)
        assert (inputs["policy_digest"], inputs["policy"]) == (
            stored["policy_digest"],
            stored["policy"],
        )


@pytest.mark.parametrize("ref", ["no-such-policy", "sha256:" + "0" * 64])
def test_an_unregistered_policy_is_refused(db: Path, ref: str) -> None:
    with pytest.raises(InputError) as caught:
        rebuild(db, policy=ref)
    assert caught.value.field == "--policy"
    assert caught.value.message == (
        f"no registered gate policy {ref!r} (give a registered id or digest, or a policy file "
        "with --dry-run)"
    )


def test_a_policy_registered_after_the_cutoff_is_not_registered_yet(db: Path) -> None:
    with pytest.raises(InputError):
        rebuild(db, policy="release-gate", cutoff=16)


def test_the_execution_asked_must_be_the_builds(db: Path) -> None:
    assert rebuild(db, execution="fix-b125")["execution_id"] == "fix-b125"
    with pytest.raises(InputError) as caught:
        rebuild(db, execution="candidate-b124")
    assert caught.value.message == (
        "execution profile 'candidate-b124' in force is for build build-124, not build-125"
    )


def test_a_suite_not_in_force_is_refused(db: Path) -> None:
    with pytest.raises(InputError) as caught:
        rebuild(db, suite="regression/none")
    assert (caught.value.field, caught.value.message) == (
        "--suite",
        "suite 'regression/none' was not in force at the decision's cutoff",
    )


# ------------------------------------------------------------- stored class or re-derived


def _validity(db: Path, batch_seq: int, validity: dict[str, str] | None) -> None:
    ((payload,),) = sql(db, "SELECT payload FROM audit_event WHERE seq = ?", (batch_seq,))
    document = json.loads(payload)
    if validity is None:
        del document["validity"]
    else:
        document["validity"] = validity
    sql(db, "UPDATE audit_event SET payload = ? WHERE seq = ?", (json.dumps(document), batch_seq))


def _recorded(db: Path, batch_seq: int = 34) -> dict[str, str]:
    ((payload,),) = sql(db, "SELECT payload FROM audit_event WHERE seq = ?", (batch_seq,))
    value: dict[str, str] = json.loads(payload)["validity"]
    return value


def _reconcile(db: Path, trial_row: int, seq: int) -> None:
    sql(
        db,
        "INSERT INTO reconciliation (trial_id, effect_key, status, evidence_uri, at, actor, "
        "audit_seq, effect_index) SELECT trial_id, 'k', 'committed', 'receipt://x', "
        "'2026-11-30 12:00:00.000000', 'tester', ?, 0 FROM trial WHERE id = ?",
        (seq, trial_row),
    )


def _review(db: Path, trial_row: int, seq: int) -> None:
    sql(
        db,
        "INSERT INTO review_result (trial_id, grader_id, state, reason, at, actor, audit_seq) "
        "SELECT trial_id, 'reply-quality', 'task_pass', 'read it', '2026-11-30 12:00:00.000000', "
        "'tester', ? FROM trial WHERE id = ?",
        (seq, trial_row),
    )


# The case: trial 68's stored class edited to task_fail behind evalops's back (its record
# still says it passed). Where the stored class stands, the edit shows; where the class
# must be re-derived, the record's class (task_pass) does.
@pytest.mark.parametrize(
    ("change", "classification"),
    [
        (lambda db: None, "task_fail"),
        # the batch recorded no calibration state (an ingest before evalops recorded it)
        (lambda db: _validity(db, 34, None), "task_pass"),
        # ... or none for this trial's grader set
        (lambda db: _validity(db, 34, {"sha256:another-set": "sha256:v"}), "task_pass"),
        # ... or another state than the current one
        (
            lambda db: _validity(db, 34, {**_recorded(db), SUPPORT_GRADERS: "sha256:then"}),
            "task_pass",
        ),
        # another grader set's recorded state differs: not this trial's
        (
            lambda db: _validity(db, 34, {**_recorded(db), "sha256:another-set": "sha256:v"}),
            "task_fail",
        ),
        (lambda db: _reconcile(db, 68, 36), "task_pass"),
        (lambda db: _review(db, 68, 36), "task_pass"),
        # appended after the cutoff: not read
        (lambda db: _reconcile(db, 68, 37), "task_fail"),
        (lambda db: _review(db, 68, 37), "task_fail"),
        # appended to another trial
        (lambda db: _reconcile(db, 69, 36), "task_fail"),
        # the trial's ingest batch is not found: no state recorded for it
        (lambda db: sql(db, "UPDATE trial SET ingest_batch_id = 999 WHERE id = 68"), "task_pass"),
    ],
)
def test_a_stored_class_stands_only_while_nothing_it_depends_on_changed(
    db: Path, change: Any, classification: str
) -> None:
    sql(db, "UPDATE trial SET classification = 'task_fail' WHERE id = 68")
    change(db)
    first = task(rebuild(db), IN_ORDER)["trials"][0]
    assert (first["trial_id"], first["classification"]) == (trial_ids(db, [68])[0], classification)


def _invalidate(db: Path, calibration_row: int, seq: int) -> None:
    sql(
        db,
        "INSERT INTO calibration_invalidation (calibration_row_id, reason, at, actor, "
        "audit_seq) VALUES (?, 'label shift', '2026-11-30 12:00:00.000000', 'tester', ?)",
        (calibration_row, seq),
    )


def test_an_invalidated_calibration_makes_the_model_graders_trials_grader_invalid(db: Path) -> None:
    """DESIGN 8: the newest calibration of the pinned config (CAL-2) decides; invalidated,
    reply-quality has no valid calibration, and a blocking model grader without one makes
    the trial grader_invalid, an evidence-blocked class (6.2, 9: the task holds). The batch
    recorded the state before: the classes must be re-derived, never the stored
    task_pass kept (a release the contract holds would pass)."""
    _invalidate(db, 2, 36)
    inputs = rebuild(db)
    for task_id in (IN_ORDER, POLICY):
        trials = task(inputs, task_id)["trials"]
        assert {t["classification"] for t in trials} == {"grader_invalid"}, task_id
    # The article member's grader set has no model grader: its stored classes stand.
    assert {t["classification"] for t in task(inputs, APPROVED)["trials"]} == {"task_pass"}


def test_an_invalidation_after_the_cutoff_changes_nothing(db: Path) -> None:
    _invalidate(db, 2, 37)
    assert {**rebuild(db), "gate_id": "GATE-3"} == stored_inputs(db, "GATE-3")


def test_invalidating_an_older_calibration_changes_nothing(db: Path) -> None:
    """CAL-1 is not the newest calibration of the config: it never decides."""
    _invalidate(db, 1, 36)
    assert {**rebuild(db), "gate_id": "GATE-3"} == stored_inputs(db, "GATE-3")


def test_fixture_misses_not_in_the_counts_are_read_from_the_record(db: Path) -> None:
    """Trial 75 (policy explanation) missed one fixture; a trial stored before ingest put
    the count beside its efficiency counts has it only in its record."""
    sql(
        db,
        "UPDATE trial SET efficiency = json_remove(efficiency, '$.fixtureMisses') "
        "WHERE id IN (74, 75)",
    )
    trials = task(rebuild(db), POLICY)["trials"]
    assert [t["fixture_misses"] for t in trials] == [0, 0, 1]
    assert "fixtureMisses" not in trials[2]["efficiency"]


def test_fixture_misses_in_the_counts_are_the_ones_read(db: Path) -> None:
    sql(
        db, "UPDATE trial SET efficiency = json_set(efficiency, '$.fixtureMisses', 4) WHERE id = 75"
    )
    assert [t["fixture_misses"] for t in task(rebuild(db), POLICY)["trials"]] == [0, 0, 4]


# ---------------------------------------------------------------- evaluator 4 summaries


def test_evaluator_4_summarizes_each_members_trials(db: Path) -> None:
    """Evaluator 4 reads per-task summaries (`trialCount`, and `single` trials counted by
    class with the first of each) instead of every trial listed."""
    inputs = rebuild(db, evaluator=4)
    assert inputs["evaluator"] == 4
    policy = task(inputs, POLICY)
    assert "trials" not in policy
    ids = trial_ids(db, ROWS[POLICY])
    assert policy["trialCount"] == 3
    assert policy["single"]["n"] == 3
    assert policy["single"]["classes"] == {"task_fail": 2, "task_pass": 1}
    assert policy["single"]["first"] == {"task_fail": [1, ids[1]], "task_pass": [0, ids[0]]}
    assert policy["single"]["fixtureMisses"] == 1
    assert policy["chained"] == []
    assert policy["ignoredTrials"] == {}
    assert task(inputs, IN_ORDER)["single"]["classes"] == {"task_pass": 5}


def test_evaluator_4_keeps_each_rerun_chain_whole(db: Path) -> None:
    """Build-124's support-refund-in-order trial 2 was rerun: the parent and its rerun are
    kept as a chain (their order decides which one stands in), the others summarized."""
    sql(
        db,
        "UPDATE trial SET task_digest = 'sha256:other' "
        "WHERE trial_id = 'trial-b124-support-refund-in-order-4'",
    )
    got = task(rebuild(db, "GATE-1", evaluator=4), IN_ORDER)
    assert [c["trial_id"] for c in got["chained"]] == [
        "trial-b124-support-refund-in-order-2",
        "trial-b124-support-refund-in-order-2-rerun-1",
    ]
    assert got["single"]["n"] == got["trialCount"] - 2
    assert got["ignoredTrials"] == {"other_task_revision": 1}


# ------------------------------------- separation of duties (docs/authority.md), under an authority

_ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a"
_ED25519_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7cHmI3sW9mZ5T0Nq9fLqS6p0oBq4n1pYh1y6d2H9Qx b"


def _authority(db: Path, rules: list[str]) -> None:
    """An authority in force from the demo's sync on, declaring `rules`."""
    document = {
        "spec_schema_version": "authority/v1",
        "id": "authority",
        "principals": [{"id": "alice", "keys": [_ED25519]}, {"id": "bob", "keys": [_ED25519_B]}],
        "roles": {"risk_owner": [{"principal": "alice"}], "reviewer": [{"principal": "bob"}]},
        "separation_of_duties": rules,
    }
    sql(
        db,
        "INSERT INTO policy (document_digest, document, file_path, sync_run_id, audit_seq, kind, "
        "policy_id, policy_digest) VALUES ('sha256:auth', ?, 'registry/policies/authority.yaml', "
        "1, 17, 'authority', 'authority', 'sha256:auth')",
        (json.dumps(document),),
    )
    sql(
        db,
        "INSERT INTO sync_in_force (sync_run_id, kind, definition_id, document_digest, "
        "audit_seq) VALUES (1, 'authority', 'authority', 'sha256:auth', 18)",
    )


def _act(
    db: Path, seq: int, kind: str, signers: list[str], builds: list[str] | None = None
) -> None:
    scope = {"builds": builds} if builds is not None else {}
    sql(
        db,
        "INSERT INTO signed_act (act_id, kind, subject, act, signatures, signers, scope, "
        "authority_digest, audit_seq) VALUES (?, ?, 'x', '{}', '[]', ?, ?, 'sha256:auth', ?)",
        (f"act-{seq}-{kind}", kind, json.dumps([{"principal": p} for p in signers]),
         json.dumps(scope), seq),
    )  # fmt: skip


SELF_WAIVER = {
    "seq": 36,
    "task_id": POLICY,
    "states": ["task_fail"],
    "rules": ["no_self_waiver"],
    "at": "2026-11-30T12:00:00.000000Z",
    "waiver_id": "WVR-1",
    "refusal": "no_self_waiver: alice signed WVR-1 and the ingest of its build's trials "
    "(audit seq 34)",
}


@pytest.mark.parametrize("kind", ["trials.ingest", "trials.import"])
def test_a_waiver_signed_by_a_signer_of_its_builds_ingest_is_refused(db: Path, kind: str) -> None:
    """`no_self_waiver`: WVR-1 (build-125) signed by alice, who signed the ingest of
    build-125's trials: listed as refused, never applied."""
    _authority(db, ["no_self_waiver"])
    _act(db, 34, kind, ["carol", "alice"], ["build-125"])
    _act(db, 36, "waiver.grant", ["alice"])
    inputs = rebuild(db)
    assert (inputs["waivers"], inputs["refused_waivers"]) == ([], [SELF_WAIVER])


@pytest.mark.parametrize(
    ("rules", "ingest_builds", "ingest_seq", "waiver_signer"),
    [
        (["no_self_review"], ["build-125"], 34, "alice"),  # the rule not declared
        (["no_self_waiver"], ["build-124"], 34, "alice"),  # an ingest of another build
        (["no_self_waiver"], ["build-125"], 34, "bob"),  # signed by someone else
        (["no_self_waiver"], ["build-125"], 37, "alice"),  # an ingest after the cutoff
        (["no_self_waiver"], None, 34, "alice"),  # an ingest that names no build
    ],
)
def test_a_waiver_that_is_no_self_waiver_is_applied(
    db: Path,
    rules: list[str],
    ingest_builds: list[str] | None,
    ingest_seq: int,
    waiver_signer: str,
) -> None:
    _authority(db, rules)
    _act(db, ingest_seq, "trials.ingest", ["alice"], ingest_builds)
    _act(db, 36, "waiver.grant", [waiver_signer])
    inputs = rebuild(db)
    assert [w["waiver_id"] for w in inputs["waivers"]] == ["WVR-1"]
    assert inputs["refused_waivers"] == []


def test_a_self_waiver_of_another_act_kind_is_not_read(db: Path) -> None:
    """Only ingests and imports bring a build's trials."""
    _authority(db, ["no_self_waiver"])
    _act(db, 34, "calibration.record", ["alice"], ["build-125"])
    _act(db, 36, "waiver.grant", ["alice"])
    assert [w["waiver_id"] for w in rebuild(db)["waivers"]] == ["WVR-1"]


@pytest.mark.parametrize(
    ("rules", "reviewer", "ingest_signer", "classification"),
    [
        # bob signed the ingest of trial 68 and its review: no human evidence, the stored
        # class stands as if unreviewed
        (["no_self_review"], "bob", "bob", "task_fail"),
        # another reviewer, or the rule not declared: the review counts, the class is
        # re-derived
        (["no_self_review"], "bob", "alice", "task_pass"),
        (["no_self_waiver"], "bob", "bob", "task_pass"),
        ([], "bob", "bob", "task_pass"),
    ],
)
def test_a_self_review_is_no_human_evidence(
    db: Path, rules: list[str], reviewer: str, ingest_signer: str, classification: str
) -> None:
    _authority(db, rules)
    sql(db, "UPDATE trial SET classification = 'task_fail' WHERE id = 68")
    _act(db, 34, "trials.ingest", [ingest_signer], ["build-125"])
    _review(db, 68, 36)
    _act(db, 36, "review.resolve", [reviewer])
    first = task(rebuild(db), IN_ORDER)["trials"][0]
    assert first["classification"] == classification


def test_a_policy_named_by_id_is_the_one_in_force_not_the_newest_registered(db: Path) -> None:
    """`--policy ID` names the registered gate policy in force (the sync's); a newer row of
    the same id registered but not in force is not it."""
    stored = stored_inputs(db, "GATE-3")
    copy_row(db, "policy", 2, document_digest="sha256:newer-doc", policy_digest="sha256:newer",
             audit_seq=20)  # fmt: skip
    assert rebuild(db, policy="release-gate")["policy_digest"] == stored["policy_digest"]
    assert rebuild(db, policy="sha256:newer")["policy_digest"] == "sha256:newer"


def test_a_registered_policy_not_in_force_is_found_by_its_id(db: Path) -> None:
    copy_row(db, "policy", 2, document_digest="sha256:old-doc", policy_digest="sha256:old",
             policy_id="old-gate", audit_seq=17)  # fmt: skip
    assert rebuild(db, policy="old-gate")["policy_digest"] == "sha256:old"


def _second_gate_policy(db: Path) -> None:
    """Another gate policy in force, registered after release-gate."""
    copy_row(db, "policy", 2, document_digest="sha256:strict-doc", policy_digest="sha256:strict",
             policy_id="strict-gate", audit_seq=17)  # fmt: skip
    sql(
        db,
        "INSERT INTO sync_in_force (sync_run_id, kind, definition_id, document_digest, "
        "audit_seq) VALUES (1, 'gate_policy', 'strict-gate', 'sha256:strict-doc', 18)",
    )


def _suite_names(db: Path, policy: str | None) -> None:
    ((doc,),) = sql(db, "SELECT document FROM suite WHERE suite_id = 'regression/core'")
    document = json.loads(doc)
    document.pop("gate_policy", None)
    if policy is not None:
        document["gate_policy"] = policy
    sql(
        db,
        "UPDATE suite SET document = ? WHERE suite_id = 'regression/core'",
        (json.dumps(document),),
    )


def test_the_gate_policy_a_suite_names_governs_it(db: Path) -> None:
    """The demo's suite names release-gate: it governs, whatever else is in force."""
    stored = stored_inputs(db, "GATE-3")
    _second_gate_policy(db)
    assert rebuild(db)["policy_digest"] == stored["policy_digest"]


def test_a_suite_naming_no_gate_policy_is_governed_by_the_one_in_force(db: Path) -> None:
    """Decisions made before suites named their policies: the policy in force (the newest
    registered when several are)."""
    stored = stored_inputs(db, "GATE-3")
    _suite_names(db, None)
    assert rebuild(db)["policy_digest"] == stored["policy_digest"]
    _second_gate_policy(db)
    assert rebuild(db)["policy_digest"] == "sha256:strict"


# ----------------------------------------------------------------- more of the same rules


def test_an_earlier_revision_does_not_ratchet_once_a_later_one_is_pinned(db: Path) -> None:
    """DESIGN 9: the strictest labels among the pinned revision and the later registered
    ones; a revision before the pin no longer counts (re-pinning a milder revision lowers
    the risk)."""

    def milder(document: dict[str, Any]) -> None:
        document["meta"]["risk"] = "quality_signal"
        document["meta"]["protects"] = []

    _revision(db, POLICY, 2, 20, milder)
    ((digest,),) = sql(db, "SELECT task_digest FROM task_revision WHERE id = 102")
    sql(
        db,
        "INSERT INTO suite_membership (suite_id, task_id, action, task_digest, "
        "grader_set_digest, task_revision_id, at, actor, audit_seq) SELECT suite_id, task_id, "
        "'added', ?, grader_set_digest, 102, at, actor, 36 FROM suite_membership "
        "WHERE task_id = ?",
        (digest, POLICY),
    )
    got = task(rebuild(db), POLICY)
    assert (got["task_digest"], got["risk"], got["protects"]) == (digest, "quality_signal", [])


def test_trials_of_several_older_digests_of_the_profile_are_counted_together(db: Path) -> None:
    _older_profile(db, 11)
    sql(
        db,
        "INSERT INTO execution_profile (document_digest, document, file_path, sync_run_id, "
        "audit_seq, id, execution_id, system_build, execution_digest) SELECT 'sha256:old-doc-2', "
        "document, file_path, sync_run_id, 11, 98, execution_id, system_build, 'sha256:older-2' "
        "FROM execution_profile WHERE id = 3",
    )
    sql(db, "UPDATE trial SET execution_digest = 'sha256:older' WHERE id = 68")
    sql(db, "UPDATE trial SET execution_digest = 'sha256:older-2' WHERE id IN (69, 70)")
    got = task(rebuild(db), IN_ORDER)
    assert (len(got["trials"]), got["ignoredTrials"]) == (2, {"older_execution_digest": 3})


def test_a_build_without_a_profile_names_the_build_option(db: Path) -> None:
    with pytest.raises(InputError) as caught:
        rebuild(db, build="build-999")
    assert caught.value.field == "--build"


def test_refusals_without_a_request_or_rules_are_read_as_such(db: Path) -> None:
    """A refusal naming no request is of no build and suite; one naming no rules is listed
    with none (nothing is dropped, DESIGN 9)."""
    mine = {"build": "build-125", "suite_id": "regression/core", "task_id": IN_ORDER,
            "states": ["task_fail"]}  # fmt: skip
    add_event(db, 38, "waiver.refused", {"refusals": [{"rule": "critical_task"}]})
    add_event(db, 39, "waiver.refused", {"request": mine})
    assert rebuild(db, cutoff=39)["refused_waivers"] == [
        {
            "seq": 39,
            "task_id": IN_ORDER,
            "states": ["task_fail"],
            "rules": [],
            "at": "2026-11-30T13:00:00.000000Z",
        }
    ]


def test_a_registry_without_signed_acts_has_no_self_reviews(db: Path) -> None:
    """A registry of a schema before signed acts has no signed_act table: under an
    authority declaring `no_self_review`, no review is a self-review and each counts."""
    _authority(db, ["no_self_review"])
    sql(db, "UPDATE trial SET classification = 'task_fail' WHERE id = 68")
    _review(db, 68, 36)
    sql(db, "DROP TABLE signed_act")
    assert task(rebuild(db), IN_ORDER)["trials"][0]["classification"] == "task_pass"


def test_a_trial_with_no_fixture_misses_recorded_missed_none(db: Path) -> None:
    sql(
        db,
        "UPDATE trial SET efficiency = json_remove(efficiency, '$.fixtureMisses'), "
        "record = json_remove(record, '$.fixture_misses') WHERE id = 74",
    )
    assert [t["fixture_misses"] for t in task(rebuild(db), POLICY)["trials"]] == [0, 0, 1]


@pytest.mark.parametrize(("evaluator", "classes"), [(2, {"task_pass"}), (3, {"grader_invalid"})])
def test_the_pass_class_is_exempt_only_under_the_rule_of_evaluator_2(
    db: Path, evaluator: int, classes: set[str]
) -> None:
    """DESIGN 8: the pass class is never exempt from calibration requirements: CAL-2 with
    too little human agreement on task_pass is failing, and a blocking model grader without
    a valid calibration makes the trial grader_invalid. A decision of evaluator 2 is rebuilt
    under the rule of its day, which exempted the pass class like any other: the model may
    then only not block task_pass, and the calibration stays valid."""
    ((record,),) = sql(db, "SELECT record FROM calibration WHERE id = 2")
    document = json.loads(record)
    document["human_agreement"]["per_class"]["task_pass"] = 0.1
    sql(db, "UPDATE calibration SET record = ? WHERE id = 2", (json.dumps(document),))
    inputs = rebuild(db, evaluator=evaluator)
    assert {t["classification"] for t in task(inputs, IN_ORDER)["trials"]} == classes
