"""What the two gate-input loaders share (evalops/services/gate/input_parts.py), held to the
contract's words rather than to each other.

`gate check` loads a decision's inputs over the ORM (services/gate/inputs.py); `verify`
rebuilds them over plain SQL (services/verify/gate_inputs.py) to disagree when either is
wrong. What they share is the same on both sides, so a fault there would be invisible to
that comparison; these tables are written from DESIGN 6.2, 8 and 9:

- which trials are evidence for a member's pin, and under which `ignoredTrials` reason the
  others are counted (9: same `task_digest` and `grader_set_digest` as the pin);
- which execution profile a build names (9: the one whose `system_build` is the build;
  `--execution` picks among several, and only among that build's);
- when a trial's stored class may stand and when it must be re-derived (6.2, 8: a class
  depends on the record, the definitions, reconciliations, reviews and the pinned
  config's calibration validity; only the last three change after ingest).

The last one is also run end to end: a stored `task_pass` whose calibration state is not
known must be re-derived, or a release the contract holds would pass.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalops.errors import InputError
from evalops.services.gate.input_parts import choose_execution, ignored_as, must_rederive
from tests.conftest import Cli

# The calibrated, promoted registry whose gate passes (built once per module there).
from tests.services.test_calibration_cli import gated_dir, seed_dir  # noqa: F401

# ------------------------------------------------------------------ must_rederive, 6.2 / 8

VALID, INVALIDATED = "sha256:valid-state", "sha256:invalidated-state"
PINNED, OTHER_SET = "sha256:pinned-grader-set", "sha256:another-grader-set"

# (what happened since ingest, appended?, state recorded at ingest, state now, must re-derive)
MUST_REDERIVE = [
    ("nothing changed: the stored class stands", False, {PINNED: VALID}, VALID, False),
    ("the calibration was invalidated since", False, {PINNED: VALID}, INVALIDATED, True),
    ("a calibration became valid since", False, {PINNED: INVALIDATED}, VALID, True),
    ("a reconciliation or review was appended", True, {PINNED: VALID}, VALID, True),
    ("appended, and the state changed too", True, {PINNED: VALID}, INVALIDATED, True),
    ("the batch recorded no state at all (older ingest)", False, None, VALID, True),
    ("the batch recorded no state for this grader set", False, {OTHER_SET: VALID}, VALID, True),
    ("another grader set's state differs, this one's not", False,
     {PINNED: VALID, OTHER_SET: VALID}, VALID, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("appended", "recorded", "now", "expected"),
    [case[1:] for case in MUST_REDERIVE],
    ids=[case[0] for case in MUST_REDERIVE],
)
def test_must_rederive_follows_what_a_class_depends_on(
    appended: bool, recorded: dict[str, str] | None, now: str, expected: bool
) -> None:
    """A stored class stands only when nothing it depends on can have changed: no
    reconciliation or review appended, and the pinned grader set's calibration state known
    at ingest and the same now. Anything unknown is re-derived (never a stale pass)."""
    assert must_rederive(appended, recorded, PINNED, lambda: now) is expected


def test_must_rederive_never_lets_an_unknown_state_stand() -> None:
    """Brute force over every recorded/current combination: the answer is False exactly
    when nothing was appended and the recorded state of this grader set equals the current."""
    states = [VALID, INVALIDATED, "sha256:third"]
    recordings: list[dict[str, str] | None] = [None, {}, {OTHER_SET: VALID}]
    recordings += [{PINNED: s} for s in states] + [{PINNED: s, OTHER_SET: VALID} for s in states]
    for appended in (False, True):
        for recorded in recordings:
            for now in states:
                stands = not appended and recorded is not None and recorded.get(PINNED) == now
                got = must_rederive(appended, recorded, PINNED, lambda now=now: now)
                assert got is (not stands), (appended, recorded, now)


# ------------------------------------------------------------------------ ignored_as, 9

TASK, OLD_TASK = "sha256:task-pinned", "sha256:task-other-revision"


@pytest.mark.parametrize(
    ("trial_task", "trial_set", "expected"),
    [
        (TASK, PINNED, None),
        (OLD_TASK, PINNED, "other_task_revision"),
        (TASK, OTHER_SET, "other_grader_set_version"),
        # Both differ: one trial is counted once, under the task revision (a trial of
        # another revision is no evidence whatever its graders).
        (OLD_TASK, OTHER_SET, "other_task_revision"),
    ],
)
def test_only_trials_of_the_pinned_task_and_grader_set_are_evidence(
    trial_task: str, trial_set: str, expected: str | None
) -> None:
    assert ignored_as(trial_task, trial_set, TASK, PINNED) == expected


# ------------------------------------------------------------------ choose_execution, 9


@dataclass(frozen=True)
class Profile:
    system_build: str


FORCED = {
    "agent-a": Profile("build-1"),
    "agent-b": Profile("build-2"),
    "agent-b-gpu": Profile("build-2"),
    "build-3": Profile("build-9"),  # a profile whose id looks like a build
}


@pytest.mark.parametrize(
    ("build", "execution", "field", "expected"),
    [
        ("build-1", None, "--build", "agent-a"),
        ("build-1", "agent-a", "--build", "agent-a"),
        ("build-2", "agent-b-gpu", "--build", "agent-b-gpu"),
        ("build-2", "agent-b", "--build", "agent-b"),
        ("build-9", None, "--build", "build-3"),
        # several share the build: --execution must pick one
        ("build-2", None, "--build", InputError("--execution", "pick one with --execution")),
        # --execution only among the build's own profiles
        ("build-1", "agent-b", "--build", InputError("--execution", "is for build build-2")),
        ("build-1", "nope", "--build", InputError("--execution", "nope")),
        # no profile in force for the build
        ("build-7", None, "--build", InputError("--build", "no execution profile in force")),
        ("build-3", None, "--build", InputError("--build", "is an execution profile id")),
        # a second build (compare's --baseline) must have exactly one
        ("build-2", None, "--baseline", InputError("--baseline", "needs a build with one")),
    ],
)
def test_the_execution_profile_is_the_one_whose_system_build_is_the_build(
    build: str, execution: str | None, field: str, expected: str | InputError
) -> None:
    if isinstance(expected, str):
        assert choose_execution(FORCED, build, execution, field) is FORCED[expected]
        return
    with pytest.raises(InputError) as caught:
        choose_execution(FORCED, build, execution, field)
    want_field, want_words = expected.args
    assert caught.value.field == want_field
    assert want_words in caught.value.message


# --------------------------------------------------- end to end: an unknown state is re-derived


def _strip_recorded_validity(db: Path) -> int:
    """Make every ingest batch one that recorded no calibration state (as an ingest before
    evalops recorded it did): edits audit payloads, so this registry's chain no longer
    verifies; only the gate is asked here."""
    with closing(sqlite3.connect(db)) as conn, conn:
        rows = conn.execute(
            "SELECT e.seq, e.payload FROM audit_event AS e JOIN ingest_batch AS b "
            "ON b.audit_seq = e.seq"
        ).fetchall()
        for seq, payload in rows:
            document = json.loads(payload)
            assert "validity" in document
            del document["validity"]
            conn.execute(
                "UPDATE audit_event SET payload = ? WHERE seq = ?", (json.dumps(document), seq)
            )
    return len(rows)


@pytest.mark.tampers
def test_a_stored_pass_whose_calibration_state_is_unknown_is_re_derived_and_held(
    gated_dir: Path,  # noqa: F811
    tmp_path: Path,
    cli: Cli,
) -> None:
    """The trials were classified `task_pass` under a valid calibration; the calibration is
    then invalidated. DESIGN 8: the gate judges the pinned config's validity now, so the
    task is `grader_invalid` and the release holds, on both loaders, even when the ingest
    batch did not record the state its trials were classified under."""
    from tests.services.test_calibration_cli import BUILD, JUDGE, SUITE, TASK_ID

    ws = Path(shutil.copytree(gated_dir, tmp_path / "ws", symlinks=True))
    assert _strip_recorded_validity(ws / ".evalops" / "registry.db") >= 1
    done = cli("calibration", "invalidate", JUDGE, "--reason", "label shift", cwd=ws)
    assert done.code == 0, done.stderr
    check = cli("gate", "check", "--build", BUILD, "--suite", SUITE, "--json", cwd=ws)
    assert check.code == 3, (check.stdout, check.stderr)
    decision = check.json()
    assert decision["decision"] == "hold"
    (task,) = decision["tasks"]
    assert (task["task_id"], task["state"], task["effect"]) == (TASK_ID, "grader_invalid", "hold")
    # verify's loader rebuilds the same inputs from the same rows (its own reading of the
    # batches): the decision's check passes even though the chain does not.
    verified = cli("verify", "--json", cwd=ws).json()
    decision_problems = [p for p in verified.get("problems", []) if "GATE" in json.dumps(p)]
    assert decision_problems == [], decision_problems
