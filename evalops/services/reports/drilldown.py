"""The drill-down of a trial that did not pass: what each grader said, what became of each
expected tool call, what the harness reported (fixture misses, effects, runtime, usage), what
happened since (reconciliations, reviews, reruns) and where its trace is (docs/verify.md).

`trial_details` reads one stored trial (its record and trajectory block; content-free: tool
names, never arguments); `failing_trials` arranges those details, with the decision's own
classes and the calibration state of each model grader, in the report document. Both are
pure functions of what they are given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalops.domain.trajectory import TrajectoryResult
from evalops.importers.provenance import source_of
from evalops.services.registry.definitions import Definitions
from evalops.store.tables import Trial


def _graders(defs: Definitions, trial: Trial, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each grader of the trial's set in the set's order with its result (state None: no
    result), then results naming a grader the set does not have."""
    found = defs.grader_set(trial.grader_set_digest)
    results = {r.get("grader_id"): r for r in record.get("grader_results", [])}
    out: list[dict[str, Any]] = []
    for grader in found[0].graders if found else ():
        result = results.pop(grader.id, {})
        out.append(
            {
                "grader_id": grader.id,
                "version": result.get("grader_version", grader.version),
                "state": result.get("state"),
                "score": result.get("score"),
                "layer": grader.layer,
                "blocking": grader.blocking,
                "type": grader.type,
            }
        )
    for grader_id, result in results.items():
        out.append(
            {
                "grader_id": grader_id,
                "version": result.get("grader_version"),
                "state": result.get("state"),
                "score": result.get("score"),
                "layer": None,
                "blocking": None,
                "type": None,
            }
        )
    return out


def _trajectory(text: str | None) -> dict[str, Any] | None:
    """The stored block, call by call; a block stored before the per-call detail was kept
    has counts only (`per_call` false)."""
    if not text:
        return None
    block = json.loads(text)
    result = TrajectoryResult.from_block(block)
    return {
        **result.block(),
        "per_call": "expected" in block,
        "expected": [
            {"tool": tool, "matched": state == "matched", "state": state}
            for tool, state in result.calls
        ],
        "forbidden_called": list(result.forbidden_called),
    }


def _duration(trial: Trial) -> float:
    return (trial.completed_at - trial.started_at).total_seconds()


def _trace(record: Mapping[str, Any], files: Sequence[str]) -> dict[str, Any]:
    """Where to look: the trace URI (a link only for http and https), or the source log of
    an imported trial and the command that opens it."""
    uri = record.get("trace_uri")
    out: dict[str, Any] = {
        "uri": uri,
        "link": isinstance(uri, str) and uri.lower().startswith(("http://", "https://")),
        "open_with": None,
        "source": None,
    }
    out["source"] = source_of(record, files)
    if out["source"]:
        out["open_with"] = out["source"]["open_with"]
    return out


def _usage(trial: Trial, record: Mapping[str, Any]) -> dict[str, Any]:
    usage = record.get("usage") or {}
    counts = json.loads(trial.efficiency)
    return {
        "tool_calls": counts.get("toolCallCount"),
        "model_calls": usage.get("model_calls"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
    }


def trial_details(
    defs: Definitions, trial: Trial, record: Mapping[str, Any], files: Sequence[str]
) -> dict[str, Any]:
    """What the drill-down shows of one stored trial (`files`: what its ingest read)."""
    return {
        "graders": _graders(defs, trial, record),
        "trajectory": _trajectory(trial.trajectory),
        "effects": [
            {
                "index": i,
                "effect_key": e.get("effect_key"),
                "status": e.get("status"),
                "external_ref": e.get("external_ref"),
            }
            for i, e in enumerate(record.get("external_effects") or [])
        ],
        "usage": _usage(trial, record),
        "duration_s": _duration(trial),
        "trace": _trace(record, files),
        "secondary_labels": json.loads(trial.secondary_labels),
    }


# --- arrangement (pure) ---------------------------------------------------------------


def _effects(
    effects: Sequence[Mapping[str, Any]], reconciliations: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each effect with the reconciliations that settled it (by index, else by key)."""
    out = []
    for effect in effects:
        settled = [
            r
            for r in reconciliations
            if r["effect_key"] == effect["effect_key"]
            and r.get("effect_index") in (None, effect["index"])
        ]
        out.append({**effect, "reconciliations": settled})
    return out


def _reruns(trial_id: str, children: Mapping[str, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The reruns descending from a trial, in chain order, with their classes."""
    out: list[dict[str, Any]] = []
    frontier = list(children.get(trial_id, []))
    while frontier:
        rerun = frontier.pop(0)
        out.append(
            {
                "trial_id": rerun["trial_id"],
                "class": rerun["classification"],
                "rerun_reason": rerun.get("rerun_reason"),
                "permitted": not rerun.get("rerun_not_permitted"),
            }
        )
        frontier.extend(children.get(rerun["trial_id"], []))
    return out


def _awaiting_review(grader: Mapping[str, Any], reviewed: set[str]) -> bool:
    """A model grader that abstained, or a human grader with no result, that no review has
    answered yet (docs/classification.md: the review queue)."""
    if grader["grader_id"] in reviewed:
        return False
    if grader.get("type") == "model":
        return grader.get("state") == "abstain"
    return grader.get("type") == "human" and grader.get("state") is None


def _with_calibration(
    graders: Sequence[Mapping[str, Any]],
    states: Mapping[str, str],
    reviews: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    reviewed = {r["grader_id"] for r in reviews}
    return [
        {
            **g,
            "calibration": states.get(g["grader_id"]) if g.get("type") == "model" else None,
            "awaiting_review": _awaiting_review(g, reviewed),
        }
        for g in graders
    ]


def failing_trials(
    trials: Sequence[Mapping[str, Any]],
    details: Mapping[str, Mapping[str, Any]],
    calibration: Sequence[Mapping[str, Any]],
    grader_sets: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The drill-down of every trial whose class (as decided) is not a pass, in the order of
    the report's trials. `grader_sets`: task id -> its grader set digest."""
    states = calibration_states(calibration)
    children: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        add_rerun(children, t)
    return [
        drill_down(t, details.get(t["trial_id"]) or {}, states, grader_sets, children)
        for t in trials
        if t["classification"] != "task_pass"
    ]


def calibration_states(calibration: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(grader set digest, grader id) -> the calibration state of each model grader."""
    return {(c["grader_set_digest"], c["grader_id"]): c["state"] for c in calibration}


def add_rerun(children: dict[str, list[Mapping[str, Any]]], t: Mapping[str, Any]) -> None:
    """Remember report trial `t` under its parent, if it is a rerun (what `_reruns` shows of
    it, in the order of the report's trials)."""
    if t.get("parent_trial_id"):
        children.setdefault(t["parent_trial_id"], []).append(
            {
                "trial_id": t["trial_id"],
                "classification": t["classification"],
                "rerun_reason": t.get("rerun_reason"),
                "rerun_not_permitted": t.get("rerun_not_permitted"),
            }
        )


def drill_down(
    t: Mapping[str, Any],
    facts: Mapping[str, Any],
    states: Mapping[tuple[str, str], str],
    grader_sets: Mapping[str, str],
    children: Mapping[str, list[Mapping[str, Any]]],
) -> dict[str, Any]:
    """The drill-down of one report trial that did not pass (`facts`: its `trial_details`;
    `children`: every rerun of the report's trials, by parent)."""
    set_digest = grader_sets.get(t["task_id"])
    mine = {g: s for (d, g), s in states.items() if d == set_digest}
    return {
        "trial_id": t["trial_id"],
        "task_id": t["task_id"],
        "class": t["classification"],
        "explanation": t.get("explanation"),
        "rerun_of": t.get("parent_trial_id"),
        "graders": _with_calibration(facts.get("graders") or [], mine, t.get("reviews") or []),
        "trajectory": facts.get("trajectory"),
        "fixture_misses": t.get("fixture_misses"),
        "effects": _effects(facts.get("effects") or [], t.get("reconciliations") or []),
        "runtime_status": t.get("runtime_status"),
        "usage": facts.get("usage"),
        "duration_s": facts.get("duration_s"),
        "secondary_labels": facts.get("secondary_labels") or [],
        "reruns": _reruns(t["trial_id"], children),
        "reviews": list(t.get("reviews") or []),
        "trace": facts.get("trace")
        or {"uri": t.get("trace_uri"), "link": False, "open_with": None, "source": None},
    }
