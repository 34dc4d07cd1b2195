"""The commands of the gate's `next:` lines paste into a shell as they are (docs/cli.md,
`gate check`): values the decision knows are filled in, alternatives are words outside the
backticks, and what only the user knows is a placeholder that the command refuses as a
literal value (exit 2, nothing written), so `OWNER` never becomes a waiver's risk owner.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from evalops.domain.next_steps import PLACEHOLDERS, next_steps
from tests.conftest import Cli
from tests.helpers import sqlite_fingerprint

SUITE = "regression/core"
PUBLISH = "article-publish-approved-revision"
EXPLAIN = "support-refund-policy-explanation"
AMBIGUOUS = f"trial-b124-{PUBLISH}-3"
EFFECT = "publish:article-42"

# What a user would type instead of each placeholder; some hold the placeholder's letters,
# which are the user's own words and accepted.
FILLED = {
    "OWNER": "support-lead@example.com",
    "REASON": "known REASON: the copy change ships next sprint",
    "KEY": EFFECT,
    "URI": "receipt://URI/article-42",
    "G": "reply-quality",
    "S": "task_pass",
    "TEXT": "TEXT of the reply checked by hand",
    "TASK": PUBLISH,
    "B0": "build-123",
}
assert set(FILLED) == PLACEHOLDERS


def _commands(output: str) -> list[str]:
    """The commands of the `next:` lines, as written between backticks."""
    return [
        command
        for line in output.splitlines()
        if line.startswith("next: ")
        for command in re.findall(r"`(evalops [^`]*)`", line)
    ]


def _words(command: str) -> list[str]:
    """The arguments bash would pass to `evalops`: no pipe, list or redirection in it."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    assert not [w for w in words if set(w) <= set("|&;<>()")], f"not pasteable: {command}"
    assert words[0] == "evalops" and words == shlex.split(command), command
    return words[1:]


def _placeholders(words: list[str]) -> list[str]:
    found = [w for w in words if re.fullmatch(r"[A-Z][A-Z0-9]*", w)]
    assert set(found) <= PLACEHOLDERS, f"an undeclared placeholder in {words}"
    return found


def _not_a_usage_error(result: object, words: list[str]) -> None:
    text = getattr(result, "stdout", "") + getattr(result, "stderr", "")
    assert "Usage:" not in text and "Missing option" not in text, (words, text)


def _paste(cli: Cli, repo: Path, command: str) -> None:
    """Run the command as printed: each placeholder is refused, naming its option, with
    the database unchanged; then filled in, it is not refused for its syntax."""
    words = _words(command)
    db = repo / ".evalops" / "registry.db"
    for placeholder in _placeholders(words):
        before = sqlite_fingerprint(db)
        # Every other placeholder filled: this one alone is refused.
        one = [w if w == placeholder or w not in PLACEHOLDERS else FILLED[w] for w in words]
        refused = cli(*one, cwd=repo)
        assert refused.code == 2, (one, refused.stdout, refused.stderr)
        assert re.search(
            rf"\S+ {placeholder} is the placeholder of a suggested command: give \w", refused.stderr
        ), refused.stderr
        assert sqlite_fingerprint(db) == before, f"{one} wrote to the database"
    filled = [FILLED.get(w, w) for w in words]
    _not_a_usage_error(cli(*filled, cwd=repo), filled)


def _unsettled_trial(demo: Path, cli: Cli) -> str:
    """Build-124's publish trial again, its effect unknown and not reconciled (the demo
    reconciled the first one)."""
    lines = (demo / "registry" / "trials" / "candidate-b124.jsonl").read_text().splitlines()
    record = next(json.loads(line) for line in lines if AMBIGUOUS in line)
    trial = f"{AMBIGUOUS}-again"
    record.update(trial_id=trial, attempt_id=f"{record['attempt_id']}-again", trial_index=5)
    (demo / "again.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert cli("trials", "ingest", "again.jsonl", cwd=demo).code == 0
    return trial


def test_the_demo_decisions_commands_paste_and_their_placeholders_are_refused(
    demo: Path, cli: Cli
) -> None:
    trial = _unsettled_trial(demo, cli)
    held = cli("gate", "check", "--build", "build-124", "--suite", SUITE, cwd=demo)
    assert held.code == 4, held.stdout + held.stderr
    commands = _commands(held.stdout)
    # The one unsettled effect is named; the status is a value, its alternative a word.
    assert (
        f"evalops trials reconcile {trial} --effect {EFFECT} --status committed --evidence URI"
        in commands
    ), held.stdout
    assert "--status not_committed when the receipt shows" in held.stdout
    for gate_id in ("GATE-1", "GATE-2"):
        shown = cli("gate", "show", gate_id, cwd=demo)
        assert shown.code == 0, shown.stderr
        commands += _commands(shown.stdout)
    assert any(c.startswith("evalops waiver grant ") for c in commands), commands
    for command in commands:
        _paste(cli, demo, command)
    # Filled in, the reconciliation settled it and the waivers are the owner's.
    settled = cli("trials", "show", trial, cwd=demo).stdout
    assert f"reconciled {EFFECT} -> committed by " in settled, settled
    waivers = cli("waiver", "list", "--all", cwd=demo).stdout
    assert "(owner support-lead@example.com" in waivers and "OWNER" not in waivers


def _decision(state: str, reason: str, task: str = EXPLAIN) -> dict[str, object]:
    return {
        "build": "build-125",
        "suite": SUITE,
        "reasons": [],
        "regression": None,
        "tasks": [{"task_id": task, "state": state, "effect": "hold", "reason": reason}],
    }


def _no_baseline() -> dict[str, object]:
    return {
        **_decision("task_pass", "3/3"),
        "reasons": ["a baseline is required (critical_regressions.baseline) and none was found"],
    }


def _no_members() -> dict[str, object]:
    return {
        **_decision("task_pass", "3/3"),
        "tasks": [],
        "reasons": [f"suite {SUITE} has no members"],
    }


# The held states of test_first_hour's test_every_held_state_has_its_next_step, on the demo's
# trials, and the decision-wide steps: (decision, the placeholders its commands hold).
HELD = {
    "ambiguous_external_effect": (
        _decision(
            "ambiguous_external_effect", f"ambiguous_external_effect in {AMBIGUOUS}", PUBLISH
        ),
        {"KEY", "URI"},
    ),
    "missing_required_evidence in a trial": (
        _decision(
            "missing_required_evidence",
            "missing_required_evidence in trial-b125-support-reply-tone-1",
        ),
        {"G", "S", "TEXT"},
    ),
    "missing_required_evidence": (_decision("missing_required_evidence", "no trials"), set()),
    "grader_invalid": (_decision("grader_invalid", f"grader_invalid in {AMBIGUOUS}"), set()),
    "infrastructure_invalid": (_decision("infrastructure_invalid", f"x in {AMBIGUOUS}"), set()),
    "agent_error": (_decision("agent_error", "2/3 trials failed"), {"OWNER", "REASON"}),
    "task_fail": (_decision("task_fail", "2/3 trials failed"), {"OWNER", "REASON"}),
    "no baseline": (_no_baseline(), {"B0"}),
    "no members": (_no_members(), {"TASK"}),
}


def test_every_held_states_command_pastes_and_refuses_its_placeholders(
    demo: Path, cli: Cli
) -> None:
    for held, (decision, placeholders) in HELD.items():
        steps = next_steps(decision)
        assert len(steps) == 1, (held, steps)
        commands = re.findall(r"`(evalops [^`]*)`", steps[0])
        found = {p for command in commands for p in _placeholders(_words(command))}
        assert found == placeholders, (held, steps[0])
        for command in commands:
            _paste(cli, demo, command)


def test_a_trial_with_several_unsettled_effects_keeps_the_key_to_fill_in() -> None:
    decision = _decision("ambiguous_external_effect", "ambiguous_external_effect in t-7")
    (named,) = next_steps(decision, {"t-7": ["cancel:O-1"]})
    assert "--effect cancel:O-1 --status committed --evidence URI`" in named
    (several,) = next_steps(decision, {"t-7": ["cancel:O-1", "cancel:O-2"]})
    assert "--effect KEY " in several
    assert "`evalops trials show t-7` lists its effects" in several
    (unread,) = next_steps(decision, {})  # a trial the registry does not hold
    assert "--effect KEY " in unread
    (settled,) = next_steps(decision, {"t-7": []})
    assert "settled since" in settled and "`evalops gate check --build build-125 " in settled


def test_trials_show_lists_the_effects_the_next_line_points_at(demo: Path, cli: Cli) -> None:
    shown = cli("trials", "show", AMBIGUOUS, cwd=demo)
    assert shown.code == 0, shown.stderr
    assert f"  effect {EFFECT}: unknown" in shown.stdout.splitlines(), shown.stdout
