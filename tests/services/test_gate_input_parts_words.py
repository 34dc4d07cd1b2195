"""What the two gate-input loaders share (evalops/services/gate/input_parts.py), word by
word: the parts `tests/services/test_gate_input_parts.py` does not hold to the contract.

Pure calls with hand-built inputs (the review query runs on a SQLite database of four small
tables made here), so `make mutate` can run them for each mutant of the module in well under
a second. Each expectation is written from DESIGN 9 (the request a decision records, its
baseline, which execution profile a build names, which trials are evidence, waivers listed
and never dropped silently) and docs/authority.md "Separation of duties" (a self-waiver is
refused, a self-review is no human evidence), never by calling the function under test.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from evalops.domain.gate_documents import RefusedWaiverRequest, WaiverFactDocument
from evalops.domain.separation import IngestAct
from evalops.errors import InputError
from evalops.services.gate.input_parts import (
    DEFAULT_SEED,
    GateRequest,
    SelfWaiver,
    baseline_block,
    choose_execution,
    efficiency_counts,
    evaluated_at,
    ignored_as,
    is_refused_waiver_act,
    no_profile_for,
    not_a_profile_of,
    refused_by_authority,
    self_review_sql,
    self_reviews_of,
    self_waivers_of,
    trajectory_counts,
    without_self_waivers,
)

# ------------------------------------------------------------ the request a decision records

# Every field distinct, so a field read from or written to another key shows.
FULL = GateRequest(
    build="build-125",
    suite_id="regression/core",
    at="2026-11-30T12:00:00.000000Z",
    cutoff=36,
    execution_id="fix-b125",
    baseline="build-124",
    policy="gate-policy",
    method="sign-test",
    alpha=0.01,
    seed=7,
)
# The stored document's keys (DESIGN 9: a decision is stored with its request, so `verify`
# and `gate replay` can rebuild it): written out here, not produced by `as_dict`.
FULL_DOCUMENT: dict[str, Any] = {
    "build": "build-125",
    "suite": "regression/core",
    "at": "2026-11-30T12:00:00.000000Z",
    "cutoff": 36,
    "execution": "fix-b125",
    "baseline": "build-124",
    "policy": "gate-policy",
    "method": "sign-test",
    "alpha": 0.01,
    "seed": 7,
}


def test_a_request_is_stored_under_the_documented_keys() -> None:
    assert FULL.as_dict() == FULL_DOCUMENT


def test_a_stored_request_reads_back_field_by_field() -> None:
    assert GateRequest.from_dict(json.loads(json.dumps(FULL_DOCUMENT))) == FULL


def test_a_request_stored_with_only_the_required_keys_reads_with_the_defaults() -> None:
    """A request recorded before the optional keys (or with them left out) asks for no
    execution, baseline, policy, method or alpha, and replays with the default seed. A
    cutoff or seed stored as text is still a number."""
    minimal = {"build": "b", "suite": "s", "at": "2026-12-01T00:00:00Z", "cutoff": "12"}
    assert GateRequest.from_dict(minimal) == GateRequest(  # type: ignore[arg-type]
        build="b",
        suite_id="s",
        at="2026-12-01T00:00:00Z",
        cutoff=12,
        execution_id=None,
        baseline=None,
        policy=None,
        method=None,
        alpha=None,
        seed=DEFAULT_SEED,
    )
    assert GateRequest.from_dict({**minimal, "seed": "99"}).seed == 99  # type: ignore[typeddict-item]
    assert isinstance(GateRequest.from_dict(minimal).cutoff, int)  # type: ignore[arg-type]


def test_the_evaluation_time_is_the_requests_at_in_utc() -> None:
    request = GateRequest("b", "s", "2026-12-01T02:30:00+02:00", 1)
    assert evaluated_at(request) == datetime(2026, 12, 1, 0, 30, tzinfo=UTC)


# ------------------------------------------------------------------- stored trial columns


@pytest.mark.parametrize(
    ("text", "counts", "misses"),
    [
        ('{"toolCallCount": 3, "inputTokens": 10}', {"toolCallCount": 3, "inputTokens": 10}, None),
        ('{"toolCallCount": 3, "fixtureMisses": 2}', {"toolCallCount": 3}, 2),
        ('{"fixtureMisses": 0}', {}, 0),
    ],
)
def test_fixture_misses_are_taken_out_of_the_efficiency_counts(
    text: str, counts: dict[str, int], misses: int | None
) -> None:
    """A trial's efficiency column carries its fixture misses when ingest recorded them
    (None: recorded before, the record says); the counts the gate shows never hold them."""
    assert efficiency_counts(text) == (counts, misses)


def test_a_trajectory_block_is_read_as_its_counts() -> None:
    """DESIGN 6.4: the trial's trajectory block as the gate reads it, the RFC 0244 counts;
    the per-call detail kept for reports is not an input."""
    stored = {
        "mode": "in_order",
        "matched": False,
        "expectedCount": 3,
        "observedCount": 5,
        "matchedCount": 2,
        "forbiddenCount": 1,
        "expected": [{"tool": "crm:lookup-order", "state": "matched"}],
        "forbiddenCalled": ["billing:refund"],
    }
    assert trajectory_counts(json.dumps(stored)) == {
        "mode": "in_order",
        "matched": False,
        "expectedCount": 3,
        "observedCount": 5,
        "matchedCount": 2,
        "forbiddenCount": 1,
    }
    assert trajectory_counts(None) is None
    assert trajectory_counts("") is None


# ----------------------------------------------------------------- ignored trials, DESIGN 9


@pytest.mark.parametrize("voided", [True, 1])
def test_a_voided_trial_is_left_out_first_whatever_it_pins(voided: object) -> None:
    """DESIGN 6.3: from the void on, the gate leaves voided trials out and says so; a voided
    trial of the pinned case and one of another revision are both counted as voided."""
    assert ignored_as("t", "g", "t", "g", voided) == "voided"
    assert ignored_as("old", "other", "t", "g", voided) == "voided"


@pytest.mark.parametrize("voided", [False, 0, None])
def test_a_trial_not_voided_is_judged_by_its_pins(voided: object) -> None:
    assert ignored_as("t", "g", "t", "g", voided) is None
    assert ignored_as("old", "g", "t", "g", voided) == "other_task_revision"
    assert ignored_as("t", "other", "t", "g", voided) == "other_grader_set_version"


def test_voided_defaults_to_not_voided() -> None:
    assert ignored_as("t", "g", "t", "g") is None


# ------------------------------------------------------- which execution profile, DESIGN 9


@dataclass(frozen=True)
class Profile:
    system_build: str


FORCED = {
    "agent-a": Profile("build-1"),
    "agent-b": Profile("build-2"),
    "agent-b-gpu": Profile("build-2"),
    "build-3": Profile("build-9"),
}
BUILDS_IN_FORCE = "builds in force: build-1, build-2, build-9"


@pytest.mark.parametrize(
    ("build", "field", "message"),
    [
        (
            "nightly",
            "--build",
            f"no execution profile in force has system_build 'nightly'; {BUILDS_IN_FORCE}",
        ),
        (
            "build-10",
            "--build",
            "no execution profile in force has system_build 'build-10'; did you mean "
            f"'build-1'? ({BUILDS_IN_FORCE})",
        ),
        # A profile's id given for its build: say which build it is.
        (
            "agent-a",
            "--build",
            "no execution profile in force has system_build 'agent-a'; 'agent-a' is an "
            "execution profile id, whose build is build-1: pass --build build-1 "
            f"({BUILDS_IN_FORCE})",
        ),
        # ... and when that build has several profiles, how to pick this one.
        (
            "agent-b",
            "--build",
            "no execution profile in force has system_build 'agent-b'; 'agent-b' is an "
            "execution profile id, whose build is build-2: pass --build build-2 --execution "
            f"agent-b ({BUILDS_IN_FORCE})",
        ),
        # --execution picks the profile of --build only: never suggested for another option.
        (
            "agent-b",
            "--baseline",
            "no execution profile in force has system_build 'agent-b'; 'agent-b' is an "
            "execution profile id, whose build is build-2: pass --baseline build-2 "
            f"({BUILDS_IN_FORCE})",
        ),
    ],
)
def test_no_profile_for_a_build_says_what_was_meant(build: str, field: str, message: str) -> None:
    assert no_profile_for(FORCED, build, field) == message


def test_no_profile_in_force_at_all_says_to_sync_one() -> None:
    assert no_profile_for({}, "build-1", "--build") == (
        "no execution profile in force has system_build 'build-1'; builds in force: none "
        "(sync an execution profile first)"
    )


@pytest.mark.parametrize(
    ("build", "execution", "message"),
    [
        (
            "build-1",
            "agent-b",
            "execution profile 'agent-b' in force is for build build-2, not build-1",
        ),
        # A build's name given for a profile's id.
        (
            "build-2",
            "build-1",
            "no execution profile 'build-1' is in force: build-1 is a build, and --execution "
            "takes a profile's id (execution profiles of build build-2 in force: agent-b, "
            "agent-b-gpu)",
        ),
        (
            "build-2",
            "agent-bb",
            "execution profile 'agent-bb' is not in force; did you mean 'agent-b'? (execution "
            "profiles of build build-2 in force: agent-b, agent-b-gpu)",
        ),
    ],
)
def test_an_execution_not_of_the_build_says_whose_it_is(
    build: str, execution: str, message: str
) -> None:
    latest = {k: v for k, v in FORCED.items() if v.system_build == build}
    assert not_a_profile_of(FORCED, latest, build, execution) == message


@pytest.mark.parametrize(
    ("build", "execution", "field", "want_field", "message"),
    [
        (
            "build-2",
            None,
            "--build",
            "--execution",
            "several execution profiles have system_build build-2: agent-b, agent-b-gpu; "
            "pick one with --execution",
        ),
        (
            "build-2",
            None,
            "--baseline",
            "--baseline",
            "several execution profiles have system_build build-2: agent-b, agent-b-gpu; "
            "--baseline needs a build with one execution profile in force",
        ),
        (
            "build-1",
            "agent-b",
            "--build",
            "--execution",
            "execution profile 'agent-b' in force is for build build-2, not build-1",
        ),
        (
            "nightly",
            None,
            "--candidate",
            "--candidate",
            f"no execution profile in force has system_build 'nightly'; {BUILDS_IN_FORCE}",
        ),
        # A profile's id given for the build: the message names the option to fix.
        (
            "agent-a",
            None,
            "--build",
            "--build",
            "no execution profile in force has system_build 'agent-a'; 'agent-a' is an "
            "execution profile id, whose build is build-1: pass --build build-1 "
            f"({BUILDS_IN_FORCE})",
        ),
        # --execution naming nothing in force, for a build with no profile either: the
        # build is what is missing (its message names the option that gave it).
        (
            "nightly",
            "nope",
            "--build",
            "--build",
            f"no execution profile in force has system_build 'nightly'; {BUILDS_IN_FORCE}",
        ),
    ],
)
def test_choosing_an_execution_refuses_with_the_option_to_fix(
    build: str, execution: str | None, field: str, want_field: str, message: str
) -> None:
    with pytest.raises(InputError) as caught:
        choose_execution(FORCED, build, execution, field)
    assert (caught.value.field, caught.value.message) == (want_field, message)


def test_execution_naming_the_builds_only_profile_is_that_profile() -> None:
    assert choose_execution(FORCED, "build-1", "agent-a", "--baseline") is FORCED["agent-a"]
    assert choose_execution(FORCED, "build-1", None, "--baseline") is FORCED["agent-a"]


# ------------------------------------------------------------------------ baseline, DESIGN 9


@dataclass(frozen=True)
class Rule:
    baseline: str = "optional"
    method: str = "mcnemar"
    alpha: float = 0.05


def request(baseline: str | None, **kw: Any) -> GateRequest:
    return GateRequest(
        "build-2", "regression/core", "2026-12-01T00:00:00Z", 9, baseline=baseline, **kw
    )


def never(*_: Any) -> Any:
    raise AssertionError("not to be called")


def build_loader(calls: list[str]) -> Callable[[str], tuple[str, Any]]:
    def load(build: str) -> tuple[str, Any]:
        calls.append(build)
        return f"sha256:exec-of-{build}", [f"tasks-of-{build}"]

    return load


def test_no_baseline_asked_and_none_required_is_no_block() -> None:
    assert baseline_block(request(None), Rule("optional"), never, never) is None


def test_a_required_baseline_not_given_is_a_block_without_a_build() -> None:
    """DESIGN 9.3: a required baseline with no trials holds; the block says it was required
    and that none was given (no execution, no tasks)."""
    assert baseline_block(request(None), Rule("required", "sign-test", 0.1), never, never) == {
        "build": None,
        "asked": None,
        "note": None,
        "required": True,
        "method": "sign-test",
        "alpha": 0.1,
        "seed": DEFAULT_SEED,
    }


def test_a_baseline_asked_is_loaded_with_the_rules_test_unless_overridden() -> None:
    calls: list[str] = []
    block = baseline_block(request("build-1"), Rule(), never, build_loader(calls))
    assert block == {
        "build": "build-1",
        "asked": "build-1",
        "note": None,
        "required": False,
        "method": "mcnemar",
        "alpha": 0.05,
        "seed": DEFAULT_SEED,
        "execution_digest": "sha256:exec-of-build-1",
        "tasks": ["tasks-of-build-1"],
    }
    assert calls == ["build-1"]
    overridden = baseline_block(
        request("build-1", method="paired-t", alpha=0.2, seed=5),
        Rule("required"),
        never,
        build_loader([]),
    )
    assert overridden is not None
    assert (overridden["method"], overridden["alpha"], overridden["seed"]) == ("paired-t", 0.2, 5)
    assert overridden["required"] is True


def test_auto_is_the_build_of_the_latest_stored_pass() -> None:
    calls: list[str] = []
    block = baseline_block(request("auto"), Rule(), lambda: "build-0", build_loader(calls))
    assert block is not None
    assert (block["build"], block["asked"], block["note"]) == ("build-0", "auto", None)
    assert block["execution_digest"] == "sha256:exec-of-build-0"
    assert calls == ["build-0"]


def test_auto_with_no_stored_pass_says_so_even_when_not_required() -> None:
    """Nothing is dropped silently: `--baseline auto` that finds no pass is a block with a
    note, not the absence of one."""
    block = baseline_block(request("auto"), Rule("optional"), lambda: None, never)
    assert block == {
        "build": None,
        "asked": "auto",
        "note": "--baseline auto: no stored pass decision for regression/core on a build "
        "other than build-2",
        "required": False,
        "method": "mcnemar",
        "alpha": 0.05,
        "seed": DEFAULT_SEED,
    }


def test_the_candidate_is_never_its_own_baseline() -> None:
    with pytest.raises(InputError) as caught:
        baseline_block(request("build-2"), Rule(), never, never)
    assert caught.value.field == "--baseline"
    assert caught.value.message == "the baseline build-2 is the candidate build itself"
    with pytest.raises(InputError):
        baseline_block(request("auto"), Rule(), lambda: "build-2", never)


# ------------------------------------------------------ separation of duties (authority.md)


def waiver(
    waiver_id: str, suite_id: str = "regression/core", task: str = "t1"
) -> WaiverFactDocument:
    return {
        "waiver_id": waiver_id,
        "task_id": task,
        "suite_id": suite_id,
        "build": "build-2",
        "states": ["task_fail", "agent_error"],
        "granted_at": f"2026-12-01T00:00:0{waiver_id[-1]}Z",
        "expires_at": "2026-12-10T00:00:00Z",
        "revoked_at": None,
    }


GRANT_REFUSED: RefusedWaiverRequest = {
    "seq": 3,
    "task_id": "t9",
    "states": ["task_fail"],
    "rules": ["forbidden_states"],
    "at": "2026-11-30T00:00:00Z",
}


def test_a_self_waiver_is_listed_as_refused_and_never_applied() -> None:
    """A self-waiver of the suite joins the refusals (after the ones refused at grant, by
    waiver id) with the rule and the reason; it is never among the waivers the gate may
    apply. One of another suite is not this decision's to list, and not applied either."""
    waivers = [waiver("WVR-3"), waiver("WVR-1"), waiver("WVR-2"), waiver("WVR-4", "other/suite")]
    found = {
        "WVR-3": SelfWaiver(30, "reason three"),
        "WVR-1": SelfWaiver(10, "reason one"),
        "WVR-4": SelfWaiver(40, "reason four"),
    }
    kept, refused = without_self_waivers(waivers, [GRANT_REFUSED], found, "regression/core")
    assert kept == [waiver("WVR-2")]
    assert refused == [
        GRANT_REFUSED,
        {
            "seq": 10,
            "task_id": "t1",
            "states": ["task_fail", "agent_error"],
            "rules": ["no_self_waiver"],
            "at": "2026-12-01T00:00:01Z",
            "waiver_id": "WVR-1",
            "refusal": "reason one",
        },
        {
            "seq": 30,
            "task_id": "t1",
            "states": ["task_fail", "agent_error"],
            "rules": ["no_self_waiver"],
            "at": "2026-12-01T00:00:03Z",
            "waiver_id": "WVR-3",
            "refusal": "reason three",
        },
    ]


def test_no_self_waiver_found_keeps_every_waiver() -> None:
    waivers = [waiver("WVR-1"), waiver("WVR-2")]
    assert without_self_waivers(waivers, [], {}, "regression/core") == (waivers, [])


INGESTS = [
    IngestAct(5, frozenset({"build-2"}), frozenset({"alice", "bob"})),
    IngestAct(2, frozenset({"build-2", "build-3"}), frozenset({"carol", "alice"})),
    IngestAct(8, frozenset({"build-9"}), frozenset({"dave"})),
]


def test_a_waiver_signed_by_a_signer_of_its_builds_ingest_is_a_self_waiver() -> None:
    """`no_self_waiver`: no signer of a waiver for build B signed an ingest that brought
    trials of B, whichever came first. The reason names the rule, who signed both, the
    waiver and the first such ingest's audit seq."""
    waivers = [
        ("WVR-1", 11, "build-2", frozenset({"alice"})),  # signed ingests 2 and 5 of build-2
        ("WVR-2", 12, "build-2", frozenset({"bob", "erin"})),  # signed ingest 5
        ("WVR-3", 13, "build-2", frozenset({"dave"})),  # signed an ingest of build-9 only
        ("WVR-4", 14, "build-9", frozenset({"alice"})),  # alice never ingested build-9
        ("WVR-5", 15, "build-3", frozenset({"carol", "alice", "bob"})),  # ingest 2 of build-3
    ]
    assert self_waivers_of(["no_self_review", "no_self_waiver"], waivers, INGESTS) == {
        "WVR-1": SelfWaiver(
            11,
            "no_self_waiver: alice signed WVR-1 and the ingest of its build's trials (audit seq 2)",
        ),
        "WVR-2": SelfWaiver(
            12,
            "no_self_waiver: bob signed WVR-2 and the ingest of its build's trials (audit seq 5)",
        ),
        "WVR-5": SelfWaiver(
            15,
            "no_self_waiver: alice, carol signed WVR-5 and the ingest of its build's trials "
            "(audit seq 2)",
        ),
    }


def test_without_the_rule_no_waiver_is_a_self_waiver() -> None:
    waivers = [("WVR-1", 11, "build-2", frozenset({"alice"}))]
    assert self_waivers_of(["no_self_review"], waivers, INGESTS) == {}
    assert self_waivers_of([], waivers, INGESTS) == {}


def signers(*principals: str) -> str:
    return json.dumps([{"principal": p, "key": f"SHA256:{p}"} for p in principals])


@pytest.fixture
def acts() -> sqlite3.Connection:
    """The four tables the review query joins, holding: trials T1 (ingest seq 1, by alice),
    T2 (import seq 2, by bob), T3 (seq 3, an act of another kind), and reviews of them."""
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.executescript(
        "CREATE TABLE signed_act (audit_seq INTEGER, kind TEXT, signers TEXT);"
        "CREATE TABLE trial (trial_id TEXT, audit_seq INTEGER);"
        "CREATE TABLE review_result (audit_seq INTEGER, trial_id TEXT);"
    )
    conn.executemany(
        "INSERT INTO signed_act VALUES (?, ?, ?)",
        [
            (1, "trials.ingest", signers("alice")),
            (2, "trials.import", signers("bob", "carol")),
            (3, "waiver.grant", signers("alice")),  # not an ingest: T3 has no ingest act
            (10, "review.resolve", signers("alice")),  # T1 by its ingest's signer
            (11, "review.resolve", signers("dave")),  # T1 by another
            (12, "review.resolve", signers("carol", "erin")),  # T2 by a signer of its import
            (13, "review.resolve", signers("alice")),  # T3: no ingest act to share
            (14, "waiver.grant", signers("alice")),  # a review row whose act is not a review
        ],
    )
    conn.executemany("INSERT INTO trial VALUES (?, ?)", [("T1", 1), ("T2", 2), ("T3", 3)])
    conn.executemany(
        "INSERT INTO review_result VALUES (?, ?)",
        [(10, "T1"), (11, "T1"), (12, "T2"), (13, "T3"), (14, "T1")],
    )
    return conn


def review_rows(conn: sqlite3.Connection, cutoff: int | None) -> list[dict[str, Any]]:
    params = {} if cutoff is None else {"cutoff": cutoff}
    return [dict(r) for r in conn.execute(self_review_sql(cutoff), params)]


def test_the_review_query_pairs_each_signed_review_with_its_trials_ingest(
    acts: sqlite3.Connection,
) -> None:
    with closing(acts):
        rows = sorted(review_rows(acts, None), key=lambda r: r["review_seq"])
        assert [
            (r["review_seq"], json.loads(r["review_signers"])[0]["principal"]) for r in rows
        ] == [(10, "alice"), (11, "dave"), (12, "carol")]
        assert [json.loads(r["ingest_signers"])[0]["principal"] for r in rows] == [
            "alice",
            "alice",
            "bob",
        ]
        # Up to the cutoff, inclusive: a decision reads the acts up to its cutoff.
        assert sorted(r["review_seq"] for r in review_rows(acts, 11)) == [10, 11]
        assert review_rows(acts, 9) == []


def test_a_review_by_a_signer_of_the_trials_ingest_is_no_human_evidence(
    acts: sqlite3.Connection,
) -> None:
    with closing(acts):
        rows = review_rows(acts, None)
        assert self_reviews_of(["no_self_review"], rows) == frozenset({10, 12})
        assert self_reviews_of(["no_self_waiver", "no_self_review"], rows) == frozenset({10, 12})
        assert self_reviews_of(["no_self_waiver"], rows) == frozenset()


# ------------------------------------------------------------- refused by the authority


def test_a_waiver_the_authority_refused_is_listed_with_its_rule_and_message() -> None:
    payload = {
        "act": "waiver.grant",
        "request": {"task_id": "t1", "states": ["task_fail"], "build": "b", "suite_id": "s"},
        "refusal": {"rule": "scope", "message": "alice may not waive capability/x"},
    }
    assert refused_by_authority(21, "2026-12-01T00:00:00Z", payload) == {
        "seq": 21,
        "task_id": "t1",
        "states": ["task_fail"],
        "rules": ["scope"],
        "at": "2026-12-01T00:00:00Z",
        "refusal": "refused by the authority: alice may not waive capability/x",
    }


def test_a_refusal_event_without_details_is_still_listed() -> None:
    assert refused_by_authority(4, "2026-12-01T00:00:00Z", {}) == {
        "seq": 4,
        "task_id": None,
        "states": None,
        "rules": ["authority"],
        "at": "2026-12-01T00:00:00Z",
        "refusal": "refused by the authority: ",
    }


GRANT = {"act": "waiver.grant", "request": {"build": "b", "suite_id": "s", "task_id": "t"}}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (GRANT, True),
        ({**GRANT, "act": "waiver.revoke"}, False),
        ({"request": GRANT["request"]}, False),
        ({**GRANT, "request": {"build": "other", "suite_id": "s"}}, False),
        ({**GRANT, "request": {"build": "b", "suite_id": "other"}}, False),
        ({**GRANT, "request": {"suite_id": "s"}}, False),
        ({**GRANT, "request": {"build": "b"}}, False),
        # Recorded before refusals named their request: cannot be placed.
        ({"act": "waiver.grant"}, False),
        ({**GRANT, "request": "b s"}, False),
    ],
)
def test_only_a_refused_grant_of_this_build_and_suite_is_this_decisions(
    payload: dict[str, Any], expected: bool
) -> None:
    assert is_refused_waiver_act(payload, "b", "s") is expected
