"""Human rendering of `evalops trials import` results (the --json shape is the data)."""

from typing import Any

from evalops.cli.context import shown
from evalops.domain.humanize import measure, number


def visible(text: object) -> str:
    """Names from a source log, with control and invisible characters shown, never acted
    on by a terminal (the one terminal rule: `shown`)."""
    return shown(text)


def _reduction(reduction: Any) -> str:
    if not isinstance(reduction, dict):
        return visible(reduction)
    parts = []
    for scorer, reducers in reduction.items():
        if isinstance(reducers, dict):
            # Rounded for people (`0.8333`, not `0.8333333333333334`); --json is exact.
            values = ", ".join(
                f"{visible(r)} {number(v) if isinstance(v, float) else visible(v)}"
                for r, v in reducers.items()
            )
            parts.append(f"{visible(scorer)}: {values}")
    return "; ".join(parts)


def _policy_key(task: dict[str, Any]) -> str | None:
    policy = task.get("gate_policy")
    return f"{policy['id']} ({policy['digest']})" if policy else None


def _policy_lines(tasks: list[dict[str, Any]]) -> list[str]:
    """Which gate policy's rerun rule the numbers follow: the one the gate applies to each
    task's suites, so the preview never counts under a policy that decides nothing."""
    used = dict.fromkeys(_policy_key(t) for t in tasks)
    named = [visible(key) for key in used if key is not None]
    lines = []
    if named:
        lines.append(
            "reruns stand in as the gate policy of each task's suites allows: " + "; ".join(named)
        )
    if None in used:
        lines.append("tasks in no suite, with no one gate policy in force: no rerun stands in")
    return lines


def _policy_tag(task: dict[str, Any], several: bool) -> str:
    if not several:
        return ""
    policy = task.get("gate_policy")
    return f"  [gate policy {visible(policy['id'])}]" if policy else "  [no gate policy]"


def import_summary_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    source = data["source"]
    skipped = data.get("skipped") or {}
    if data.get("tasks") is not None:
        lines.append(f"dry run of {source} import: nothing stored (map {data['map_digest']})")
        lines += _policy_lines(data["tasks"])
        lines.append(
            f"{'task':<36} {'execution':<16} {'trials':>6} {'n':>3} {'pass':>4} {'k':>2} "
            f"{'pass@k':>6} {'pass^k':>6}  classes"
        )
        several = len({_policy_key(t) for t in data["tasks"]}) > 1
        for task in data["tasks"]:
            classes = ", ".join(f"{c} {n}" for c, n in task["classes"].items()) or "-"
            lines.append(
                f"{visible(task['task_id']):<36} {visible(task['execution']):<16} "
                f"{task['trials']:>6} {task['n']:>3} "
                f"{task['passedCount']:>4} {task['k']:>2} {measure(task['passAtK']):>6} "
                f"{measure(task['passHatK']):>6}  {classes}{_policy_tag(task, several)}"
            )
            if task.get("source_reduction"):
                lines.append(
                    f"    {source}'s own reduction: {_reduction(task['source_reduction'])}"
                )
                scorers = ", ".join(visible(x) for x in task.get("differs_from") or [])
                against = f" from {scorers}" if scorers else ""
                for why in task.get("differences") or []:
                    lines.append(f"      evalops counts differently{against}: {why}")
            if task.get("graders_without_scorer"):
                lines.append(
                    "    blocking graders with no scorer (trials missing_required_evidence): "
                    + ", ".join(task["graders_without_scorer"])
                )
        for kind, names in (data.get("unmapped") or {}).items():
            if names:
                lines.append(f"unmapped {kind}: " + ", ".join(visible(n) for n in names))
        verb = "would ingest"
    else:
        verb = "ingested"
    if data.get("output") is not None:
        lines.append(f"wrote {data['written']} trial records to {visible(data['output'])}")
    else:
        lines.append(
            f"{verb} {data['ingested']}, skipped {data['skipped_identical']} identical, "
            f"rejected {len(data['rejected'])}"
        )
    if skipped:
        lines.append("left out: " + ", ".join(f"{r} {n}" for r, n in skipped.items()))
    return lines
