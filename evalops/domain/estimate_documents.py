"""An estimate's stored inputs and the document computed from them (docs/estimation.md).

`evaluate_estimate(inputs)` is pure: the stored inputs (each member's trials by class as the
gate counts them, its stratum, the suite's weights and frame, the confidence) give the same
result bytes on every replay, as a gate decision does. The result has exactly the keys of
the JSON of docs/estimation.md; evalops/services/output_schemas/estimate.schema.json describes it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from evalops.domain.estimation import (
    INVALID_CLASSES,
    TaskObservation,
    estimate_rates,
    members_by_stratum,
    paired_difference,
)
from evalops.domain.next_steps import not_counted_reason
from evalops.domain.timestamps import parse_timestamp

ESTIMATOR = 3
"""The version of the rules `evaluate_estimate` applies (stored with every estimate). 2: a
member sampled after the frame's `frozen_at` is not counted, voided trials and members
without baseline trials are named, and a paired difference that does not vary has no
interval. 3: a frame's size is checked against the stratum's members, not only those with
trials; a stratum is a census only when its size, members and paired tasks agree, and a
difference is exact only when every stratum is one; trials of the build that do not count
for a member's pins (another task revision, grader-set version or profile version) are
named, and so are members whose labels in force differ from those they were promoted with.
Estimates stored under 1 and 2 replay under their own rules."""


def observations(
    tasks: Sequence[Mapping[str, Any]], strata: Collection[str]
) -> list[TaskObservation]:
    """The stored task entries in a stratum of the weights, as the statistics read them."""
    return [
        TaskObservation(
            t["task_id"],
            t["stratum"],
            {str(k): int(v) for k, v in t["effective"].items()},
            {str(k): int(v) for k, v in t["first"].items()},
            int(t["reruns"]),
        )
        for t in tasks
        if t["stratum"] in strata
    ]


def claims_sentence(suite: Mapping[str, Any]) -> str:
    """'rates of <population>, sampled from <frame>, frozen <date>; not of other traffic'."""
    frame = suite["frame"]
    sentence = (
        f"rates of {suite['population']}, sampled from {frame['source']} {frame['period']}, "
        f"frozen {frame['frozen_at']}; not of other traffic"
    )
    limited = suite.get("claims_limited_to")
    if limited:
        sentence += f" (claims limited to the {str(limited).replace('_', ' ')})"
    return sentence


def _names(ids: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _members(ids: Sequence[str], one: str, several: str) -> str:
    return f"1 member {one}" if len(ids) == 1 else f"{len(ids):,} members {several}"


def sampled_after_the_frame(tasks: Sequence[Mapping[str, Any]], frozen_at: str) -> list[str]:
    """Members sampled after the frame was frozen (its `frozen_at` moved earlier since they
    were promoted): not samples of the frame the estimate names."""
    frozen = parse_timestamp(frozen_at)
    return [
        t["task_id"]
        for t in tasks
        if isinstance(t.get("sampled_at"), str) and parse_timestamp(t["sampled_at"]) > frozen
    ]


def _voided(tasks: Sequence[Mapping[str, Any]], build: str, label: str = "") -> list[str]:
    """What voids left out of the build's trials (docs/trials.md: voided trials are left
    out, and said so): how many, and the members left with none."""
    voided = sum(int(t.get("voided", 0)) for t in tasks)
    if not voided:
        return []
    trials = "1 trial" if voided == 1 else f"{voided:,} trials"
    reasons = [f"{trials} under {label}build {build} voided: left out (`evalops void list`)"]
    return reasons + _left_empty(tasks, "voided", "only voided trials", build, label)


def _left_empty(
    tasks: Sequence[Mapping[str, Any]], key: str, what: str, build: str, label: str
) -> list[str]:
    """The members whose entry `key` left them no counted trial, named."""
    emptied = [t["task_id"] for t in tasks if t.get(key) and not sum(t["effective"].values())]
    if not emptied:
        return []
    return [
        f"{_members(emptied, 'has', 'have')} {what} under {label}build {build}: not "
        f"counted: {_names(emptied)}"
    ]


def _not_counted(tasks: Sequence[Mapping[str, Any]], build: str, label: str = "") -> list[str]:
    """Trials of the build that are not evidence for a member's pins, by why (as the gate
    names them), and the members left with none that count. Voids are `_voided`'s."""
    by_reason: dict[str, list[tuple[str, int]]] = {}
    for t in tasks:
        for reason, n in sorted((t.get("ignored") or {}).items()):
            by_reason.setdefault(reason, []).append((t["task_id"], int(n)))
    out = []
    for reason, found in by_reason.items():
        total = sum(n for _, n in found)
        trials = "1 trial" if total == 1 else f"{total:,} trials"
        named = [f"{task_id} ({n})" for task_id, n in found]
        out.append(
            f"{trials} under {label}build {build} of {not_counted_reason(reason)}: not "
            f"counted: {_names(named)}"
        )
    return out + _left_empty(tasks, "ignored", "no counted trials", build, label)


def _relabelled(tasks: Sequence[Mapping[str, Any]], by: str, suite_id: str) -> list[str]:
    """Members whose file in force now names another stratum or sampling time than the
    one they were promoted with: counted as promoted (the labels a promotion recorded,
    signed by a risk owner under an authority), and said, with how to count the new ones."""
    out = []
    for t in tasks:
        now = t.get("in_force_labels")
        if not now:
            continue
        changes = []
        if now["stratum"] != t["stratum"]:
            changes.append(f"{by}={now['stratum']} (promoted as {t['stratum']})")
        if now["sampled_at"] != t["sampled_at"]:
            changes.append(f"sampled_at {now['sampled_at']} (promoted as {t['sampled_at']})")
        if changes:
            out.append(
                f"{t['task_id']}: its file in force says {' and '.join(changes)}: counted as "
                f"promoted until `evalops promote {t['task_id']} --to {suite_id}` records the "
                "new labels"
            )
    return out


def _unlisted(
    tasks: Sequence[Mapping[str, Any]], build: str, weights: Mapping[str, Any]
) -> list[str]:
    """Members left out of the estimate, each named: without trials, or without a stratum."""
    reasons: list[str] = []
    # A stratum the weights no longer name (the suite's weights changed after promotion)
    # is no stratum of this estimate either.
    no_stratum = [t["task_id"] for t in tasks if t["stratum"] not in weights["values"]]
    if no_stratum:
        reasons.append(
            f"{_members(no_stratum, 'names', 'name')} no stratum of {weights['by']} "
            f"({', '.join(weights['values'])}): not counted: {_names(no_stratum)}"
        )
    no_trials = [
        t["task_id"]
        for t in tasks
        if t["stratum"] in weights["values"]
        and not sum(t["effective"].values())
        and not t.get("voided")
        and not t.get("ignored")
    ]
    if no_trials:
        reasons.append(
            f"{_members(no_trials, 'has', 'have')} no trials under build {build}: not "
            f"counted: {_names(no_trials)}"
        )
    return reasons


def _unpaired(
    tasks: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]], build: str
) -> list[str]:
    """Members the difference leaves out because the baseline has no trials of them."""
    ran = {t["task_id"] for t in baseline if sum(t["effective"].values())}
    missing = [
        t["task_id"] for t in tasks if sum(t["effective"].values()) and t["task_id"] not in ran
    ]
    if not missing:
        return []
    return [
        f"{_members(missing, 'has', 'have')} no trials under baseline build {build}: not "
        f"in the difference: {_names(missing)}"
    ]


def evaluate_estimate(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The estimate document (docs/estimation.md, "JSON") from its stored inputs, under the
    rules of the estimator version they were stored with (`ESTIMATOR`)."""
    request = inputs["request"]
    suite = inputs["suite"]
    weights = suite["weights"]
    values = {str(k): float(v) for k, v in weights["values"].items()}
    sizes = suite["frame"].get("sizes")
    confidence = float(request["confidence"])
    version = int(inputs.get("estimator", 1))
    tasks = inputs["tasks"]
    baseline_tasks = inputs.get("baseline_tasks")
    unavailable: list[str] = []
    if version >= 2:
        late = sampled_after_the_frame(tasks, suite["frame"]["frozen_at"])
        if late:
            unavailable.append(
                f"{_members(late, 'was', 'were')} sampled after the frame was frozen "
                f"({suite['frame']['frozen_at']}): not counted: {_names(late)}"
            )
            tasks = [t for t in tasks if t["task_id"] not in late]
            if baseline_tasks is not None:
                baseline_tasks = [t for t in baseline_tasks if t["task_id"] not in late]
    observed = observations(tasks, values)
    counted = [t for t in observed if t.n]
    members = members_by_stratum(observed, list(values)) if version >= 3 else None
    rates, strata, reasons = estimate_rates(observed, values, sizes, confidence, members=members)
    first, _, _ = estimate_rates(observed, values, sizes, confidence, first=True, members=members)
    originals = sum(t.n_first for t in counted)
    invalid = sum(t.first.get(c, 0) for t in counted for c in INVALID_CLASSES)
    unavailable += _unlisted(tasks, request["build"], weights)
    if version >= 2:
        unavailable += _voided(tasks, request["build"])
    if version >= 3:
        unavailable += _not_counted(tasks, request["build"])
        unavailable += _relabelled(tasks, str(weights["by"]), str(suite["id"]))
    unavailable += reasons
    difference = None
    if baseline_tasks is not None:
        difference, why = paired_difference(
            observed,
            observations(baseline_tasks, values),
            values,
            sizes,
            confidence,
            interval_of_no_variation=version < 2,
            members=members,
        )
        if version >= 2:
            in_strata = [t for t in tasks if t["stratum"] in values]
            unavailable += _unpaired(in_strata, baseline_tasks, str(request["baseline"]))
            unavailable += _voided(baseline_tasks, str(request["baseline"]), "baseline ")
        if version >= 3:
            unavailable += _not_counted(baseline_tasks, str(request["baseline"]), "baseline ")
        unavailable += why
    return {
        "estimate_id": inputs["estimate_id"],
        "suite": suite["id"],
        "build": request["build"],
        "baseline": request["baseline"],
        "evaluated_at": request["at"],
        "confidence": confidence,
        "claims": claims_sentence(suite),
        "population": suite["population"],
        "frame": suite["frame"],
        "task_count": len(counted),
        "trial_count": sum(t.n for t in counted),
        "rates": rates,
        "first_results": first,
        "invalid_rate": invalid / originals if originals else None,
        "rerun_count": sum(t.reruns for t in counted),
        "strata": strata,
        "difference": difference,
        "unavailable": list(dict.fromkeys(unavailable)),
    }
