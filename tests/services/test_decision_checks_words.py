"""verify's checks of a stored gate decision (evalops/services/verify/decision_checks.py),
run on the demo registry of tests/fixtures (`registry-evaluator3-demo.db`, read through
plain `sqlite3`) with the rows edited by hand, one edit per case.

DESIGN 10: `verify` checks every stored decision: it replays byte for byte from its stored
inputs (DESIGN 9, `gate replay`), it says what the audit event that recorded it says (the
event's digests and decision), and its inputs still match the rows they were loaded from;
the first bad item is named and verify fails (exit 6). The demo's three decisions are
GATE-1 block (build-124), GATE-2 hold and GATE-3 pass (build-125, after the waiver WVR-1;
DESIGN 13). No CLI, no workspace: `make mutate` runs these for each mutant of the module.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalops.errors import VerificationError
from evalops.services.verify.decision_checks import (
    StoredDecision,
    decision_event_mismatch,
    differences,
    rebuilt_inputs_problem,
    replay_row,
    stored_decisions,
    verify_decisions,
)
from evalops.store.reader import SqliteReader
from tests.helpers import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "registry-evaluator3-demo.db"
DEMO = {"GATE-1": "block", "GATE-2": "hold", "GATE-3": "pass"}
SEQS = {"GATE-1": 32, "GATE-2": 35, "GATE-3": 37}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return Path(shutil.copy(FIXTURE, tmp_path / "registry.db"))


@pytest.fixture
def reader(db: Path) -> Iterator[SqliteReader]:
    conn = sqlite3.connect(db)
    try:
        yield SqliteReader(conn)
    finally:
        conn.close()


def edit(db: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """An edit made behind evalops's back (plain SQL, no audit event)."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            assert conn.execute(sql, params).rowcount >= 1, sql
    finally:
        conn.close()


def stored(reader: SqliteReader, gate_id: str) -> StoredDecision:
    return next(d for d in stored_decisions(reader) if d.gate_id == gate_id)


def canonical(value: Any) -> str:
    """RFC 8785 for these documents (no floats other than plain ones): sorted keys, no
    spaces, UTF-8 as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- differences


@pytest.mark.parametrize(
    ("a", "b", "paths"),
    [
        ({"x": 1, "y": [1, 2]}, {"y": [1, 2], "x": 1}, []),
        ({"x": 1}, {"x": 1.0}, []),  # one number, however written
        ({"x": 1}, {"x": 2}, ["x"]),
        ({"x": 1}, {}, ["x"]),
        ({}, {"z": None, "a": 0}, ["a"]),  # a key absent reads as null: `z` is no difference
        (
            {"t": {"b": 1, "a": [1, {"c": 2}]}},
            {"t": {"b": 2, "a": [1, {"c": 3}]}},
            ["t.a[1].c", "t.b"],
        ),
        ({"l": [1, 2]}, {"l": [1, 2, 3]}, ["l"]),  # lists of other lengths: the list
        ([1, 2], [1, 3], ["[1]"]),
        ("pass", "hold", ["(decision)"]),
        ([1], [1, 2], ["(decision)"]),
        ({"x": [1]}, {"x": {"0": 1}}, ["x"]),
    ],
)
def test_differences_name_every_place_two_documents_differ(
    a: Any, b: Any, paths: list[str]
) -> None:
    assert differences(a, b) == paths


# ------------------------------------------------------------------------- the fixture as is


def test_every_decision_of_the_demo_verifies(reader: SqliteReader) -> None:
    assert verify_decisions(reader) == 3
    rows = list(stored_decisions(reader))
    assert [(r.gate_id, r.decision, r.audit_seq) for r in rows] == [
        (g, DEMO[g], SEQS[g]) for g in ("GATE-1", "GATE-2", "GATE-3")
    ]
    for row in rows:
        assert replay_row(row) == {
            "gate_id": row.gate_id,
            "identical": True,
            "decision": DEMO[row.gate_id],
            "stored_decision": DEMO[row.gate_id],
            "problems": [],
        }
        assert decision_event_mismatch(reader, row) is None
        assert rebuilt_inputs_problem(reader, row) is None


# ------------------------------------------------------------------------------ replay_row


def test_a_stored_decision_not_in_canonical_form_does_not_match_its_digest(
    reader: SqliteReader,
) -> None:
    """The same decision written with spaces: its digest is of other bytes."""
    row = stored(reader, "GATE-3")
    spaced = row._replace(result=json.dumps(json.loads(row.result), sort_keys=True))
    assert replay_row(spaced)["problems"] == ["stored decision does not match result_digest"]
    assert replay_row(spaced)["identical"] is False
    wrong = row._replace(result_digest=digest("{}"))
    assert replay_row(wrong)["problems"] == ["stored decision does not match result_digest"]


def test_stored_inputs_must_be_their_digests_canonical_bytes(reader: SqliteReader) -> None:
    row = stored(reader, "GATE-2")
    spaced = row._replace(inputs=json.dumps(json.loads(row.inputs), sort_keys=True))
    outcome = replay_row(spaced)
    assert outcome["problems"] == ["stored inputs do not match inputs_digest"]
    assert outcome["identical"] is False
    assert outcome["decision"] == "hold"  # replayed all the same
    wrong = row._replace(inputs_digest=digest("{}"))
    assert replay_row(wrong)["problems"] == ["stored inputs do not match inputs_digest"]


def test_a_stored_decision_that_says_otherwise_is_named_where_it_differs(
    reader: SqliteReader,
) -> None:
    """GATE-3 stored as `hold` (digest and all made to match): the replay says `pass`, and
    the place that differs is named."""
    row = stored(reader, "GATE-3")
    result = {**json.loads(row.result), "decision": "hold"}
    text = canonical(result)
    changed = row._replace(result=text, result_digest=digest(text), decision="hold")
    assert replay_row(changed) == {
        "gate_id": "GATE-3",
        "identical": False,
        "decision": "pass",
        "stored_decision": "hold",
        "problems": ["differs at decision"],
    }


def test_at_most_twenty_places_are_named(reader: SqliteReader) -> None:
    row = stored(reader, "GATE-1")
    result = json.loads(row.result)
    for task in result["tasks"]:
        for key in task:
            if key != "task_id":
                task[key] = "edited"
    text = canonical(result)
    problems = replay_row(row._replace(result=text, result_digest=digest(text)))["problems"]
    assert len(problems) == 20
    assert (
        problems[0]
        == f"differs at tasks[0].{sorted(k for k in result['tasks'][0] if k != 'task_id')[0]}"
    )
    assert all(p.startswith("differs at tasks[") for p in problems)


# ------------------------------------------------------------------ the decision's audit event


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("inputs_digest", "sha256:" + "0" * 64),
        ("result_digest", "sha256:" + "0" * 64),
        ("decision", "block"),
    ],
)
def test_a_decision_event_saying_otherwise_is_a_mismatch(
    db: Path, reader: SqliteReader, field: str, value: str
) -> None:
    payload = json.loads(reader.scalar("SELECT payload FROM audit_event WHERE seq = 37"))
    edit(
        db,
        "UPDATE audit_event SET payload = ? WHERE seq = 37",
        (json.dumps({**payload, field: value}),),
    )
    assert decision_event_mismatch(reader, stored(reader, "GATE-3")) == (
        "not the decision audit seq 37 recorded"
    )


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", '"GATE-3"', "null"])
def test_an_event_that_is_no_decision_document_is_a_mismatch(
    db: Path, reader: SqliteReader, payload: str
) -> None:
    edit(db, "UPDATE audit_event SET payload = ? WHERE seq = 37", (payload,))
    assert decision_event_mismatch(reader, stored(reader, "GATE-3")) == (
        "not the decision audit seq 37 recorded"
    )


def test_a_decision_pointing_at_another_event_is_a_mismatch(reader: SqliteReader) -> None:
    row = stored(reader, "GATE-3")
    assert decision_event_mismatch(reader, row._replace(audit_seq=35)) == (
        "not the decision audit seq 35 recorded"
    )
    assert decision_event_mismatch(reader, row._replace(audit_seq=999)) == (
        "not the decision audit seq 999 recorded"
    )


# --------------------------------------------------------- inputs rebuilt from the registry


def test_an_edited_trial_class_is_named_in_the_inputs(db: Path, reader: SqliteReader) -> None:
    """GATE-3's members, by task id: article-publish-approved-revision, then
    support-refund-in-order (build-125's trials 68 to 72), then the policy explanation."""
    edit(db, "UPDATE trial SET classification = 'task_fail' WHERE id = 68")
    assert rebuilt_inputs_problem(reader, stored(reader, "GATE-3")) == (
        "stored inputs no longer match the registry rows they were loaded from "
        "(tasks[1].trials[0].classification)"
    )


def test_at_most_five_places_are_named_in_the_inputs(db: Path, reader: SqliteReader) -> None:
    edit(db, "UPDATE trial SET classification = 'task_fail' WHERE id BETWEEN 58 AND 72")
    assert rebuilt_inputs_problem(reader, stored(reader, "GATE-3")) == (
        "stored inputs no longer match the registry rows they were loaded from ("
        + ", ".join(f"tasks[0].trials[{i}].classification" for i in range(5))
        + ")"
    )


def test_inputs_that_can_no_longer_be_loaded_say_why(reader: SqliteReader) -> None:
    row = stored(reader, "GATE-3")
    inputs = json.loads(row.inputs)
    inputs["request"]["suite"] = "nope/suite"
    assert rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs))) == (
        "its inputs can no longer be loaded: suite 'nope/suite' was not in force at the "
        "decision's cutoff"
    )


def test_the_inputs_are_compared_as_documents_not_as_text(reader: SqliteReader) -> None:
    """Stored with spaces (replay flags the bytes): the rebuild compares the document."""
    row = stored(reader, "GATE-1")
    spaced = row._replace(inputs=json.dumps(json.loads(row.inputs), indent=1))
    assert rebuilt_inputs_problem(reader, spaced) is None


def test_the_gate_id_is_the_stored_ones(reader: SqliteReader) -> None:
    """The id is given at storing, not loaded from rows: the rebuild takes the stored one."""
    row = stored(reader, "GATE-2")
    inputs = {**json.loads(row.inputs), "gate_id": "GATE-9"}
    assert rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs))) is None


def test_a_decision_made_before_requests_were_recorded_is_not_rebuilt(
    reader: SqliteReader,
) -> None:
    row = stored(reader, "GATE-1")
    inputs = json.loads(row.inputs)
    del inputs["request"]
    assert rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs))) is None


def test_a_decision_rebuilt_under_the_evaluator_it_was_made_with(reader: SqliteReader) -> None:
    """GATE-1 was made by evaluator 3, every trial listed; rebuilt as evaluator 4 (per-task
    summaries) its tasks differ, and the stored `evaluator` is what chooses."""
    row = stored(reader, "GATE-1")
    inputs = {**json.loads(row.inputs), "evaluator": 4}
    problem = rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs)))
    assert problem is not None
    assert problem.startswith("stored inputs no longer match the registry rows")
    assert "tasks[0]." in problem


# --------------------------------------------------------------------------- verify_decisions


def test_verify_names_the_first_bad_decision_and_what_is_wrong(
    db: Path, reader: SqliteReader
) -> None:
    edit(db, "UPDATE gate_decision SET result_digest = ? WHERE gate_id = 'GATE-2'", (digest("x"),))
    with pytest.raises(VerificationError) as caught:
        verify_decisions(reader)
    assert (
        caught.value.message == "gate decision GATE-2: stored decision does not match result_digest"
    )


def test_verify_lists_every_replay_problem_of_a_decision(db: Path, reader: SqliteReader) -> None:
    edit(
        db,
        "UPDATE gate_decision SET result_digest = ?, inputs_digest = ? WHERE gate_id = 'GATE-1'",
        (digest("x"), digest("y")),
    )
    with pytest.raises(VerificationError) as caught:
        verify_decisions(reader)
    assert caught.value.message == (
        "gate decision GATE-1: stored inputs do not match inputs_digest; "
        "stored decision does not match result_digest"
    )


def test_verify_fails_on_an_event_that_says_otherwise(db: Path, reader: SqliteReader) -> None:
    edit(db, "UPDATE audit_event SET payload = '{}' WHERE seq = 35")
    with pytest.raises(VerificationError) as caught:
        verify_decisions(reader)
    assert caught.value.message == "gate decision GATE-2: not the decision audit seq 35 recorded"


def test_verify_fails_on_inputs_the_rows_no_longer_give(db: Path, reader: SqliteReader) -> None:
    """Trial 68 (build-125) is an input of GATE-2 and GATE-3: the first is named."""
    edit(db, "UPDATE trial SET classification = 'task_fail' WHERE id = 68")
    with pytest.raises(VerificationError) as caught:
        verify_decisions(reader)
    assert caught.value.message == (
        "gate decision GATE-2: stored inputs no longer match the registry rows they were "
        "loaded from (tasks[1].trials[0].classification)"
    )


def test_a_decision_stored_as_other_than_text_is_refused(db: Path, reader: SqliteReader) -> None:
    edit(db, "UPDATE gate_decision SET result = CAST(result AS BLOB) WHERE gate_id = 'GATE-2'")
    with pytest.raises(VerificationError) as caught:
        list(stored_decisions(reader))
    assert caught.value.message == "gate decision GATE-2: stored as other than text"


def test_inputs_stripped_of_their_evaluator_are_a_named_difference(reader: SqliteReader) -> None:
    """An edited document is reported, never a crash: without `evaluator` the inputs are
    rebuilt under the first evaluator's rules, and the place that differs is named."""
    row = stored(reader, "GATE-3")
    inputs = json.loads(row.inputs)
    del inputs["evaluator"]
    assert rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs))) == (
        "stored inputs no longer match the registry rows they were loaded from (evaluator)"
    )


def test_a_decision_with_an_added_null_is_still_not_the_replayed_one(
    db: Path, reader: SqliteReader
) -> None:
    """A key added with a null value, digest made to match: no place differs (an absent key
    reads as null), but the bytes are not the replay's, and verify says so."""
    ((text,),) = [(r.result,) for r in stored_decisions(reader) if r.gate_id == "GATE-1"]
    result = canonical({**json.loads(text), "added": None})
    edit(
        db,
        "UPDATE gate_decision SET result = ?, result_digest = ? WHERE gate_id = 'GATE-1'",
        (result, digest(result)),
    )
    outcome = replay_row(stored(reader, "GATE-1"))
    assert (outcome["identical"], outcome["problems"]) == (False, [])
    with pytest.raises(VerificationError) as caught:
        verify_decisions(reader)
    assert caught.value.message == "gate decision GATE-1: differs"


def test_inputs_with_an_added_null_are_not_the_rebuilt_ones(reader: SqliteReader) -> None:
    """No place differs (an absent key reads as null), but the documents do: said so."""
    row = stored(reader, "GATE-3")
    inputs = {**json.loads(row.inputs), "added": None}
    assert rebuilt_inputs_problem(reader, row._replace(inputs=canonical(inputs))) == (
        "stored inputs no longer match the registry rows they were loaded from (differs)"
    )
