"""What to do about a held decision: one `next:` line per held task, with the command.

A hold is the gate saying "not yet": evidence is missing, an effect is unsettled, a grader
is broken, or a non-critical failure awaits a fix or a risk owner's waiver. Each of those
has one way forward, and people should not have to look it up.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

_TRIAL = re.compile(r"^\w+ in (?P<trial>\S+)$")
FAILING = ("agent_error", "runtime_error", "task_fail")


def _trial_of(reason: str) -> str | None:
    """The trial a task's reason names (`ambiguous_external_effect in trial-7`)."""
    found = _TRIAL.match(reason)
    return found.group("trial") if found else None


def _q(value: str) -> str:
    return shlex.quote(value)


def _for_task(task: Mapping[str, Any], build: str, suite: str) -> str | None:
    state, task_id = str(task["state"]), str(task["task_id"])
    trial = _trial_of(str(task.get("reason", "")))
    if state == "ambiguous_external_effect" and trial:
        return (
            f"{task_id}: settle the effect of {trial} from its receipt: `evalops trials "
            f"reconcile {_q(trial)} --effect KEY --status committed|not_committed --evidence URI`"
            f" (`evalops trials show {_q(trial)}` lists its effects)"
        )
    if state == "missing_required_evidence" and trial:
        return (
            f"{task_id}: {trial} lacks evidence (`evalops trials show {_q(trial)}` says "
            f"which); a verdict awaiting review: `evalops review list`, then `evalops review "
            f"resolve {_q(trial)} --grader G --state S --reason TEXT`"
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
            f"--states {state} --build {_q(build)} --owner OWNER --reason REASON --expires 7d`"
        )
    return None


def next_steps(decision: Mapping[str, Any]) -> list[str]:
    """One line per held task (in the decision's order) saying what would move it on."""
    build, suite = str(decision["build"]), str(decision["suite"])
    lines = [
        line
        for task in decision["tasks"]
        if task["effect"] == "hold"
        for line in [_for_task(task, build, suite)]
        if line is not None
    ]
    regression = decision.get("regression") or {}
    if regression.get("baseline") is None and any(
        "baseline is required" in r or "required baseline" in r for r in decision["reasons"]
    ):
        lines.append(
            "the policy requires a baseline: ingest its trials, or name one with --baseline B0"
        )
    return lines
