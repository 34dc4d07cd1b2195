"""What to do about a held decision: one `next:` line per held task, with the command.

A hold is the gate saying "not yet": evidence is missing, an effect is unsettled, a grader
is broken, or a non-critical failure awaits a fix or a risk owner's waiver. Each of those
has one way forward, and people should not have to look it up.

Evidence that is missing while trials of the build exist for another revision of the task,
another version of its grader set or an older execution profile is not fixed by ingesting
more: those trials are named, with what makes trials count (`not_counted` names them on
every decision, pass included).

Every command is written in backticks and can be pasted into a shell as it is: values the
decision knows are filled in, alternatives are words outside the backticks, and what only
the user knows is one of `PLACEHOLDERS`, which the command refuses as a literal value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalops.domain.humanize import plural
from evalops.domain.visible import shell_word

_TRIAL = re.compile(r"^\w+ in (?P<trial>\S+)$")
FAILING = ("agent_error", "runtime_error", "task_fail")

#: The words a suggested command holds where only the user knows the value. Each command
#: they are written for refuses them as literal values (evalops/services/placeholders.py),
#: so a command pasted unfilled changes nothing.
PLACEHOLDERS = frozenset({"OWNER", "REASON", "KEY", "URI", "G", "S", "TEXT", "TASK", "B0"})


@dataclass(frozen=True)
class Hints:
    """What the registry knows beyond the decision, to fill in the suggested commands.

    `signed`: an authority is in force, so waivers and reviews are signed acts (the command
    carries `--sign-with KEY`, and the line names who holds the role); `risk_owners` and
    `reviewers` by task id; `review_graders` by trial id: the graders whose verdict awaits
    a person (one: its id fills `--grader`)."""

    signed: bool = False
    risk_owners: Mapping[str, Sequence[str]] = field(default_factory=dict)
    reviewers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    review_graders: Mapping[str, Sequence[str]] = field(default_factory=dict)


NO_HINTS = Hints()


def _holders(hints: Hints, role: str, who: Sequence[str] | None, where: str) -> str:
    if not hints.signed:
        return ""
    if not who:
        return f" (no principal of the authority holds {role} for {where})"
    return f" ({role} for {where}: {', '.join(who)})"


def _trial_of(reason: str) -> str | None:
    """The trial a task's reason names (`ambiguous_external_effect in trial-7`)."""
    found = _TRIAL.match(reason)
    return found.group("trial") if found else None


def _q(value: str) -> str:
    return shell_word(value)


def effect_trials(decision: Mapping[str, Any]) -> list[str]:
    """The trials whose unsettled effects hold a task: the caller reads their effects, which
    the decision does not record, so that the command names the key when there is one."""
    return [
        trial
        for task in decision["tasks"]
        if task["effect"] == "hold" and task["state"] == "ambiguous_external_effect"
        for trial in [_trial_of(str(task.get("reason", "")))]
        if trial
    ]


def _settle(task_id: str, trial: str, keys: Sequence[str] | None, build: str, suite: str) -> str:
    """`keys`: the trial's effects unsettled now, one per position (None: not read)."""
    if keys is not None and not keys:
        # A stored decision shown after the effect was reconciled.
        return (
            f"{task_id}: the effects of {trial} have been settled since: decide again with "
            f"`evalops gate check --build {_q(build)} --suite {_q(suite)}`"
        )
    known = keys is not None and len(keys) == 1
    key = _q(keys[0]) if keys is not None and known else "KEY"
    shows = "" if known else f"; `evalops trials show {_q(trial)}` lists its effects"
    return (
        f"{task_id}: settle the effect of {trial} from its receipt: `evalops trials "
        f"reconcile {_q(trial)} --effect {key} --status committed --evidence URI` (or "
        f"--status not_committed when the receipt shows it did not happen{shows})"
    )


def _for_task(
    task: Mapping[str, Any],
    build: str,
    suite: str,
    effects: Mapping[str, Sequence[str]] | None,
    hints: Hints = NO_HINTS,
) -> str | None:
    state, task_id = str(task["state"]), str(task["task_id"])
    sign = " --sign-with KEY" if hints.signed else ""
    trial = _trial_of(str(task.get("reason", "")))
    if state == "ambiguous_external_effect" and trial:
        keys = None if effects is None else effects.get(trial)
        return _settle(task_id, trial, keys, build, suite)
    if state == "missing_required_evidence" and trial:
        graders = hints.review_graders.get(trial) or ()
        grader = _q(graders[0]) if len(graders) == 1 else "G"
        return (
            f"{task_id}: {trial} lacks evidence (`evalops trials show {_q(trial)}` says "
            f"which); a verdict awaiting review: `evalops review list`, then `evalops review "
            f"resolve {_q(trial)} --grader {grader} --state S --reason TEXT{sign}`"
            + _holders(hints, "reviewer", hints.reviewers.get(task_id), task_id)
        )
    if state == "missing_required_evidence" and ignored_trials(task):
        return f"{task_id}: " + "; ".join(
            _uncounted_step(reason, n, task_id, build, suite)
            for reason, n in ignored_trials(task).items()
        )
    if state == "missing_required_evidence":
        return f"{task_id}: ingest more trials of build {build} ({task.get('reason', '')})"
    if state == "grader_invalid" and trial:
        return (
            f"{task_id}: a grader result of {trial} is invalid (`evalops trials show "
            f"{_q(trial)}`): fix or calibrate the grader (`evalops calibration status`), "
            f"then run the build again"
        )
    if state == "infrastructure_invalid" and trial:
        return (
            f"{task_id}: {trial} failed in the infrastructure: run it again and ingest the "
            f"rerun (rerun.parent_trial_id {trial})"
        )
    if state in FAILING:
        return (
            f"{task_id}: fix it and ingest new trials, or a risk owner accepts it for this "
            f"build: `evalops waiver grant --task {_q(task_id)} --suite {_q(suite)} "
            f"--states {state} --build {_q(build)} --owner OWNER --reason REASON --expires "
            f"7d{sign}`" + _holders(hints, "risk_owner", hints.risk_owners.get(task_id), suite)
        )
    return None


# Why a trial of the build is not evidence for the member's pins, by `ignoredTrials` key
# (evaluator 1 counted them without a reason).
_NOT_COUNTED = {
    "other_task_revision": "another task revision than the suite pins",
    "other_grader_set_version": "another grader-set version than the suite pins",
    "older_execution_digest": "an older version of the execution profile",
    "voided": "voided: `evalops void list` says by whom and why",
    "other_revision_or_grader_set": "another task revision or grader-set version than the "
    "suite pins",
}


def not_counted_reason(key: str) -> str:
    """Why trials stored under `ignoredTrials` key `key` are not evidence for the pins."""
    return _NOT_COUNTED.get(key, key)


def ignored_trials(task: Mapping[str, Any]) -> dict[str, int]:
    """A task's trials not counted, `{reason: n}`, whether stored by reason or as a count."""
    value = task.get("ignoredTrials")
    if isinstance(value, Mapping):
        return {str(k): int(v) for k, v in sorted(value.items()) if v}
    if isinstance(value, int) and value:
        return {"other_revision_or_grader_set": value}
    return {}


# What "no trials for this build" means when the build has trials that do not count, by
# `ignoredTrials` key: shown to people; the stored reason is the evaluator's, for replay.
_UNCOUNTED_SHORT = {
    "older_execution_digest": "under another profile version: sync it or pass --execution",
    "other_task_revision": "of another task revision: promote it or ingest the pinned one",
    "other_grader_set_version": "under another grader-set version: promote it",
    "other_revision_or_grader_set": "of another task revision or grader-set version",
    "voided": "voided",
}
NO_TRIALS = "no trials for this build"


def explained_reasons(decision: Mapping[str, Any]) -> list[str]:
    """The decision's reasons as people read them: a task's "no trials for this build"
    says, when the build has trials that do not count, how many and why ("no counted
    trials (5 under another profile version: sync it or pass --execution)")."""
    ignored = {str(t["task_id"]): ignored_trials(t) for t in decision.get("tasks") or []}
    out = []
    for stored in decision.get("reasons") or []:
        reason = str(stored)
        counts = ignored.get(reason.split(" (", 1)[0])
        if counts and reason.endswith(f"; {NO_TRIALS}"):
            parts = ", ".join(f"{n} {_UNCOUNTED_SHORT.get(k, k)}" for k, n in counts.items())
            reason = f"{reason[: -len(NO_TRIALS)]}no counted trials ({parts})"
        out.append(reason)
    return out


def _uncounted_step(reason: str, n: int, task_id: str, build: str, suite: str) -> str:
    """What makes trials of the build count: promoting pins the task's latest synced revision
    and the version of its grader set in force (docs/promotion.md); an execution profile is
    not pinned, so trials of an older one are never evidence again."""
    trials, are = plural(n, "trial"), "is" if n == 1 else "are"
    was, they = ("was", "it does") if n == 1 else ("were", "they do")
    promote = f"`evalops promote {_q(task_id)} --to {_q(suite)}`"
    if reason == "other_task_revision":
        return (
            f"{trials} of build {build} {are} of another revision of the task than {suite} "
            f"pins, so {they} not count: ingest trials of the pinned revision, or pin the "
            f"latest synced one: {promote}"
        )
    if reason == "other_grader_set_version":
        return (
            f"{trials} of build {build} {was} graded under another version of the task's "
            f"grader set than {suite} pins, so {they} not count: ingest trials graded under "
            f"the pinned version, or pin the version in force: {promote}"
        )
    if reason == "voided":
        return (
            f"{trials} of build {build} {was} voided, so {they} not count: ingest the "
            f"corrected records (a voided trial's id may be ingested again), or run the "
            f"build again; `evalops void list` says who voided {'it' if n == 1 else 'them'} "
            "and why"
        )
    if reason == "older_execution_digest":
        return (
            f"{trials} of build {build} {was} run under an older version of its execution "
            f"profile, so {they} not count: run the build again under the profile in force "
            f"and ingest those trials"
        )
    return (
        f"{trials} of build {build} {are} of another revision or grader-set version of the "
        f"task than {suite} pins, so {they} not count: ingest trials of the pinned ones, or "
        f"pin the latest synced ones: {promote}"
    )


def not_counted(decision: Mapping[str, Any]) -> list[str]:
    """One line per task with trials of the build that are not evidence for its pins, on
    any decision: a pass resting on an older revision says so too."""
    build = str(decision["build"])
    lines = []
    for task in decision["tasks"]:
        parts = [
            f"{plural(n, 'trial')}{f' of build {build}' if not i else ''} "
            f"({_NOT_COUNTED.get(reason, reason)})"
            for i, (reason, n) in enumerate(ignored_trials(task).items())
        ]
        if parts:
            lines.append(f"{task['task_id']}: {', '.join(parts)}")
    return lines


def review_trials(decision: Mapping[str, Any]) -> list[str]:
    """The trials whose missing evidence holds a task (their awaited graders fill `--grader`)."""
    return [
        trial
        for task in decision["tasks"]
        if task["effect"] == "hold" and task["state"] == "missing_required_evidence"
        for trial in [_trial_of(str(task.get("reason", "")))]
        if trial
    ]


def off_line_step(build: str, suite: str, syncs: Sequence[Mapping[str, Any]]) -> str:
    """The fix for a hold on trials made under definitions registered off the tracked line
    (a branch's sync): not a re-run."""
    newest = syncs[0]
    commit = str(newest.get("git_commit") or "REV")[:12]
    branch = newest.get("git_branch") or "a detached HEAD"
    return (
        f"trials of build {build} were made under definitions that sync run "
        f"{newest['sync_run']} registered from {branch} (commit {commit}), which are not in "
        f"force (re-running the eval will not change that): decide under them with `evalops "
        f"gate check --build {_q(build)} --suite {_q(suite)} --dry-run --definitions "
        f"{commit}`, or merge {branch} into the tracked branch and `evalops sync` there"
    )


def next_steps(
    decision: Mapping[str, Any],
    effects: Mapping[str, Sequence[str]] | None = None,
    off_line: Sequence[Mapping[str, Any]] | None = None,
    hints: Hints = NO_HINTS,
) -> list[str]:
    """One line per held task (in the decision's order) saying what would move it on.

    `effects`: the effect keys still unsettled, one per position, of the trials
    `effect_trials` names (None: not read, the key stays a placeholder). `off_line`: the
    syncs off the tracked line that registered the build's definitions (newest first):
    a hold then names that sync first. `hints`: what the
    registry knows besides (under an authority: who signs, with `--sign-with KEY`)."""
    build, suite = str(decision["build"]), str(decision["suite"])
    held = any(task["effect"] == "hold" for task in decision["tasks"])
    lines = [off_line_step(build, suite, off_line)] if off_line and held else []
    lines += [
        line
        for task in decision["tasks"]
        if task["effect"] == "hold"
        for line in [_for_task(task, build, suite, effects, hints)]
        if line is not None
    ]
    regression = decision.get("regression") or {}
    if regression.get("baseline") is None and any(
        "baseline is required" in r or "required baseline" in r for r in decision["reasons"]
    ):
        lines.append(
            "the policy requires a baseline: ingest its trials, or name one: `evalops gate "
            f"check --build {_q(build)} --suite {_q(suite)} --baseline B0`"
        )
    if not decision["tasks"] and any("has no members" in r for r in decision["reasons"]):
        # Only promotion makes a task a member: a suite file lists none.
        lines.append(
            f"{suite} has no members: promote a task into it: "
            f"`evalops promote TASK --to {_q(suite)}`"
        )
    return lines
