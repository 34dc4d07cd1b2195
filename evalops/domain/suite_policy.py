"""The SuitePolicy engine (docs/promotion.md), as a pure function.

`evaluate_entry(...)` answers, for one task and one target suite, a checklist: every
requirement of the target kind's entry rule, met or unmet, with the evidence looked at and,
when unmet, how to meet it. Each entry rule is complete in itself: promoting into
`regression` checks exactly what `regression_entry` lists. A rule the policy leaves out
refuses what it governs. Nothing here reads a database or a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalops.domain.free_text import has_visible_text
from evalops.domain.humanize import plural
from evalops.domain.specs import EvalTaskSpec, GraderSet, SuiteDeclaration, SuitePolicy
from evalops.domain.timestamps import parse_timestamp

# Incident states from which an incident counts as confirmed.
CONFIRMED_STATES = ("confirmed", "reproduced", "promoted")


@dataclass(frozen=True)
class LinkedIncident:
    incident_id: str
    state: str
    was_confirmed: bool
    """The incident reached `confirmed` at some point (a closed one may have)."""


@dataclass(frozen=True)
class EntryFacts:
    """Everything the engine looks at, loaded by the store."""

    task: EvalTaskSpec
    task_file: str
    task_digest: str | None
    """None when the task revision is not synced."""
    grader_set: GraderSet | None
    grader_set_digest: str | None
    """None when the task's grader set is not synced."""
    calibration_states: Mapping[str, str] = field(default_factory=dict)
    """Grader id -> `valid`, `stale`, `failing` or `missing`, for the set's model graders."""
    calibration_reasons: Mapping[str, Sequence[str]] = field(default_factory=dict)
    valid_trials_by_execution: Mapping[str, int] = field(default_factory=dict)
    """execution_digest -> valid trials of this task's eval case under that execution."""
    uncounted_trials: Mapping[str, int] = field(default_factory=dict)
    """Trials of this task revision that are not valid, by class and cause (e.g.
    `grader_invalid (blocking model grader judge calibration missing)`) -> count."""
    incidents: Sequence[LinkedIncident] = ()


@dataclass(frozen=True)
class Requirement:
    name: str
    met: bool
    evidence: str
    fix: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "met": self.met, "evidence": self.evidence, "fix": self.fix}


@dataclass(frozen=True)
class Checklist:
    suite_id: str
    suite_kind: str
    task_id: str
    requirements: tuple[Requirement, ...]

    @property
    def accepted(self) -> bool:
        return all(r.met for r in self.requirements)

    @property
    def unmet(self) -> list[Requirement]:
        return [r for r in self.requirements if not r.met]

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "requirements": [r.as_dict() for r in self.requirements],
        }


MIN_VALID_TRIALS = 2


def _resync(facts: EntryFacts, what: str) -> str:
    return f"{what} in {facts.task_file}, bump `revision`, commit, and run `evalops sync`"


def _reproducible_fixture(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    contract = f.task.contract
    fixtures = f.task.fixtures
    expects_calls = bool(
        contract.expected and contract.expected.trajectory and contract.expected.trajectory.calls
    )
    fail_closed = fixtures is not None and fixtures.onMiss in (None, "fail")
    none_needed = (
        (fixtures is None or not fixtures.toolResponses)
        and contract.environment.network_policy == "deny"
        and not expects_calls
    )
    best_execution, best = max(
        f.valid_trials_by_execution.items(), key=lambda kv: kv[1], default=("", 0)
    )
    if fixtures is not None and fixtures.onMiss == "live":
        fixture_text = "fixtures.onMiss is live (a miss may reach a live tool)"
    elif fail_closed and fixtures is not None and fixtures.toolResponses:
        fixture_text = (
            f"fixtures fail closed ({plural(len(fixtures.toolResponses), 'tool response')})"
        )
    elif none_needed:
        fixture_text = "no fixtures needed (network_policy deny, no tool calls expected)"
    elif fail_closed:
        fixture_text = "fixtures fail closed but script no tool responses"
    else:
        fixture_text = "no fixtures, and the task is not sealed (network or tool calls)"
    # `onMiss: live` explicitly lets a miss reach a live tool: never reproducible.
    live = fixtures is not None and fixtures.onMiss == "live"
    fixtures_ok = (fail_closed or none_needed) and not live
    trials_text = (
        f"{plural(best, 'valid trial')} of one eval case (execution {best_execution})"
        if best
        else "no valid trials of this task's eval case"
    )
    not_counted = sum(f.uncounted_trials.values())
    if not_counted:
        total = not_counted + sum(f.valid_trials_by_execution.values())
        causes = [
            f"{n} {'is' if n == 1 else 'are'} {cause}"
            for cause, n in sorted(f.uncounted_trials.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        # "5 of 6 trials are grader_invalid (...), 1 is infrastructure_invalid (...)"
        first_n, _space, first_rest = causes[0].partition(" ")
        causes[0] = f"{first_n} of {plural(total, 'trial')} {first_rest}"
        trials_text += f"; not counted: {', '.join(causes)}"
    met = fixtures_ok and best >= MIN_VALID_TRIALS
    fix = None
    if not fixtures_ok:
        fix = _resync(f, "add `fixtures: {onMiss: fail, toolResponses: [...]}`")
    elif best < MIN_VALID_TRIALS:
        fix = (
            f"ingest at least {MIN_VALID_TRIALS} valid trials of one eval case of this task "
            "revision: `evalops trials ingest FILE`"
        )
        if not_counted:
            fix = (
                "fix what made the trials invalid (above: an infrastructure_invalid or "
                "grader_invalid trial never counts; a model grader needs a valid calibration), "
                f"then {fix}"
            )
    return Requirement("reproducible_fixture", met, f"{fixture_text}; {trials_text}", fix)


def _task_digest(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    if f.task_digest:
        return Requirement("task_digest", True, f"task_digest {f.task_digest}", None)
    return Requirement(
        "task_digest",
        False,
        f"task {f.task.id} revision {f.task.revision} is not synced",
        "commit the task file and run `evalops sync`",
    )


def _coverage_gaps(f: EntryFacts) -> tuple[list[str], list[str]]:
    graders = f.grader_set.graders if f.grader_set else []
    hard = {c for g in graders if g.blocking and g.acts_as_hard_constraint for c in g.covers}
    outcome = {c for g in graders if g.blocking and g.layer == "outcome" for c in g.covers}
    contract = f.task.contract
    effects = [e for e in contract.forbidden_effects if e not in hard]
    keys = [k for k in contract.success_state if k not in outcome]
    return effects, keys


def _minimum_grader_coverage(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    if f.grader_set is None:
        return Requirement(
            "minimum_grader_coverage",
            False,
            f"grader set {f.task.grader_set} is not synced",
            f"sync grader set {f.task.grader_set}",
        )
    effects, keys = _coverage_gaps(f)
    contract = f.task.contract
    evidence = (
        f"{len(contract.forbidden_effects) - len(effects)}/{len(contract.forbidden_effects)} "
        "forbidden effects covered by a blocking hard-constraint grader, "
        f"{len(contract.success_state) - len(keys)}/{len(contract.success_state)} success-state "
        "keys covered by a blocking outcome grader"
    )
    if not effects and not keys:
        return Requirement("minimum_grader_coverage", True, evidence, None)
    gaps = [f"forbidden effect {e}" for e in effects] + [f"success-state key {k}" for k in keys]
    return Requirement(
        "minimum_grader_coverage",
        False,
        f"{evidence}; uncovered: {', '.join(gaps)}",
        f"add the uncovered items to the `covers` of a blocking grader of the right layer in "
        f"grader set {f.task.grader_set}, bump its `version`, and run `evalops sync`",
    )


def _owner(name: str, attribute: str) -> Callable[[EntryFacts, SuiteDeclaration], Requirement]:
    def check(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
        value = getattr(f.task.meta, attribute)
        if has_visible_text(value):
            return Requirement(name, True, f"meta.{attribute} is {value}", None)
        return Requirement(
            name,
            False,
            f"meta.{attribute} is not set" if value is None else _blank(f"meta.{attribute}"),
            f"set `meta.{attribute}` in {f.task_file}, commit, and run `evalops sync`",
        )

    return check


def _blank(what: str) -> str:
    return f"{what} has no visible character (spaces and invisible characters name nobody)"


PROMOTABLE_INCIDENT_STATES = ("confirmed", "reproduced")


def incident_subject_refusal(
    incident: LinkedIncident, task_id: str, suite_id: str
) -> Requirement | None:
    """Promoting an incident (`promote INC-n`) needs it confirmed or reproduced; a promoted
    one that was confirmed may be promoted again (a new pin). None: it may be promoted.

    A task whose `meta.invariant` is enough is promoted by its own id, which leaves its
    incidents' states alone: promotion never stands in for a confirmation."""
    if incident.state in PROMOTABLE_INCIDENT_STATES:
        return None
    if incident.state == "promoted" and incident.was_confirmed:
        return None
    never = "" if incident.was_confirmed else ", never confirmed"
    return Requirement(
        "confirmed_incident",
        False,
        f"incident {incident.incident_id} is {incident.state}{never}: promoting an incident "
        "needs it confirmed or reproduced",
        f"confirm it (`evalops incident confirm {incident.incident_id}`) and promote it again, "
        f"or promote the task by its id (`evalops promote {task_id} --to {suite_id}`) when "
        "its meta.invariant is enough; the incident then keeps its state",
    )


def _confirmed_failure_or_invariant(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    confirmed = [i for i in f.incidents if i.was_confirmed]
    if confirmed:
        names = ", ".join(f"{i.incident_id} ({i.state})" for i in confirmed)
        return Requirement(
            "confirmed_failure_or_invariant", True, f"confirmed incident {names}", None
        )
    if has_visible_text(f.task.meta.invariant):
        return Requirement(
            "confirmed_failure_or_invariant",
            True,
            f"meta.invariant: {f.task.meta.invariant}",
            None,
        )
    linked = ", ".join(f"{i.incident_id} ({i.state})" for i in f.incidents) or "none"
    return Requirement(
        "confirmed_failure_or_invariant",
        False,
        f"no confirmed incident linked (linked: {linked}) and no meta.invariant",
        "confirm the incident this task reproduces and link it (`evalops incident confirm INC`, "
        f"`evalops incident link INC --task {f.task.id}`), or set `meta.invariant`",
    )


def _stable_success_state(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    keys = list(f.task.contract.success_state)
    if not keys:
        return Requirement(
            "stable_success_state",
            False,
            "success_state is empty",
            _resync(f, "state the facts that define success in `contract.success_state`"),
        )
    graders = f.grader_set.graders if f.grader_set else []
    deterministic = {c for g in graders if g.type == "deterministic" for c in g.covers}
    loose = [k for k in keys if k not in deterministic]
    if not loose:
        return Requirement(
            "stable_success_state",
            True,
            f"{plural(len(keys), 'success-state key')}, each covered by a deterministic grader",
            None,
        )
    return Requirement(
        "stable_success_state",
        False,
        f"success-state keys not covered by a deterministic grader: {', '.join(loose)}",
        f"cover them with a deterministic grader in grader set {f.task.grader_set}",
    )


def _calibrated_graders(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    graders = f.grader_set.graders if f.grader_set else []
    blocking_models = [g for g in graders if g.type == "model" and g.blocking]
    if not blocking_models:
        return Requirement(
            "calibrated_graders", True, "no blocking model grader in the grader set", None
        )
    states = {g.id: f.calibration_states.get(g.id, "missing") for g in blocking_models}
    bad = {gid: s for gid, s in states.items() if s != "valid"}
    evidence = ", ".join(f"{gid}: {s}" for gid, s in states.items())
    if not bad:
        return Requirement("calibrated_graders", True, evidence, None)
    reasons = [
        f"{gid}: {'; '.join(f.calibration_reasons.get(gid, ())) or state}"
        for gid, state in bad.items()
    ]
    return Requirement(
        "calibrated_graders",
        False,
        "; ".join(reasons),
        "record a valid calibration for "
        + ", ".join(f"`evalops calibration record {gid} --labels FILE`" for gid in bad),
    )


def _versioned_fixture(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    if f.task_digest and f.grader_set_digest:
        return Requirement(
            "versioned_fixture",
            True,
            f"fixtures are inside task_digest {f.task_digest}; grader set pinned at "
            f"{f.grader_set_digest}",
            None,
        )
    missing = "task" if not f.task_digest else f"grader set {f.task.grader_set}"
    return Requirement(
        "versioned_fixture",
        False,
        f"{missing} is not synced, so nothing is pinned",
        "commit the registry and run `evalops sync`",
    )


def _grader_set_digest(f: EntryFacts, _: SuiteDeclaration) -> Requirement:
    if f.grader_set_digest:
        return Requirement(
            "grader_set_digest",
            True,
            f"grader set {f.task.grader_set} at {f.grader_set_digest}",
            None,
        )
    return Requirement(
        "grader_set_digest",
        False,
        f"grader set {f.task.grader_set} is not synced",
        "commit the grader set file and run `evalops sync`",
    )


def _declared(name: str, attribute: str, what: str) -> Callable[..., Requirement]:
    def check(_: EntryFacts, suite: SuiteDeclaration) -> Requirement:
        value = getattr(suite, attribute)
        if value is not None:
            # exclude_none: an optional field left out (sizes) is not shown as None.
            shown = (
                value
                if isinstance(value, str)
                else value.model_dump(mode="json", exclude_none=True)
            )
            return Requirement(name, True, f"{attribute}: {shown}", None)
        return Requirement(
            name,
            False,
            f"suite {suite.id} declares no {attribute}",
            f"declare `{attribute}` ({what}) in the suite file of {suite.id} and run "
            "`evalops sync`",
        )

    return check


def _frozen_sampling_frame(f: EntryFacts, suite: SuiteDeclaration) -> Requirement:
    """The frame is declared, and the task was sampled from it: `meta.sampled_at` no later
    than `frozen_at` (a session sampled after the freeze is not of the frame)."""
    declared = _declared("frozen_sampling_frame", "sampling_frame", "source, period, frozen_at")(
        f, suite
    )
    frame = suite.sampling_frame
    if not declared.met or frame is None:
        return declared
    sampled = f.task.meta.sampled_at
    if sampled is None:
        return Requirement(
            "frozen_sampling_frame",
            False,
            f"{declared.evidence}; the task declares no meta.sampled_at",
            _resync(
                f,
                f"set `meta.sampled_at` (when the session was sampled, at most {frame.frozen_at})",
            ),
        )
    if parse_timestamp(sampled) > parse_timestamp(frame.frozen_at):
        return Requirement(
            "frozen_sampling_frame",
            False,
            f"the task was sampled at {sampled}, after the frame was frozen at "
            f"{frame.frozen_at}: it is not a sample of this frame",
            f"promote a task sampled before the freeze, or refresh the frame (a new "
            f"estimation suite with a later frozen_at, as its update_policy says); a wrong "
            f"meta.sampled_at is corrected {_resync(f, 'there')}",
        )
    return Requirement(
        "frozen_sampling_frame",
        True,
        f"{declared.evidence}; sampled at {sampled}, frozen at {frame.frozen_at}",
        None,
    )


def _weights(f: EntryFacts, suite: SuiteDeclaration) -> Requirement:
    """Weights are declared, and the task names one of their strata under their key."""
    declared = _declared("weights", "weights", "stratum weights")(f, suite)
    weights = suite.weights
    if not declared.met or weights is None:
        return declared
    strata = ", ".join(weights.values)
    named = (f.task.meta.stratum or {}).get(weights.by)
    if named in weights.values:
        return Requirement(
            "weights",
            True,
            f"stratum {weights.by}={named} (weight {weights.values[named]:g})",
            None,
        )
    if named is None:
        evidence = f"the task declares no meta.stratum.{weights.by}"
    else:
        evidence = f"stratum {weights.by}={named} is not one of the weights' strata ({strata})"
    return Requirement(
        "weights",
        False,
        evidence,
        _resync(f, f"set `meta.stratum: {{{weights.by}: STRATUM}}` (one of {strata})"),
    )


CHECKS: dict[str, Callable[[EntryFacts, SuiteDeclaration], Requirement]] = {
    "reproducible_fixture": _reproducible_fixture,
    "task_digest": _task_digest,
    "minimum_grader_coverage": _minimum_grader_coverage,
    "review_owner": _owner("review_owner", "owner"),
    "failure_owner": _owner("failure_owner", "failure_owner"),
    "confirmed_failure_or_invariant": _confirmed_failure_or_invariant,
    "stable_success_state": _stable_success_state,
    "calibrated_graders": _calibrated_graders,
    "versioned_fixture": _versioned_fixture,
    "grader_set_digest": _grader_set_digest,
    "frozen_sampling_frame": _frozen_sampling_frame,
    "production_population_definition": _declared(
        "production_population_definition", "population", "the production population"
    ),
    "weights": _weights,
    "update_policy": _declared("update_policy", "update_policy", "how samples are refreshed"),
}


ENTRY_RULES: dict[str, str] = {
    "incident_corpus": "incident_corpus",
    "capability": "capability_entry",
    "estimation": "estimation_entry",
    "regression": "regression_entry",
}


def _absent_rule(rule: str, what: str) -> Requirement:
    return Requirement(
        "suite_policy_rule",
        False,
        f"the suite policy has no {rule} rule",
        f"add `{rule}` to the suite policy file (its `requires` list) and run `evalops sync`; "
        f"without it nothing {what} (a policy never fails open)",
    )


def required_names(policy: SuitePolicy, kind: str) -> list[str] | None:
    """The requirement names of a suite kind's entry rule, in policy order, no repeats.

    Each rule is complete in itself (docs/formats.md): `regression_entry` checks
    exactly what it lists. None when the policy has no rule for the kind.
    """
    if kind == "incident_corpus":
        corpus = policy.incident_corpus
        if corpus is None:
            return None
        return ["reproducible_fixture"] if corpus.executable_required else []
    rule = getattr(policy, ENTRY_RULES[kind])
    if rule is None:
        return None
    return list(dict.fromkeys(rule.requires))


def evaluate_entry(facts: EntryFacts, suite: SuiteDeclaration, policy: SuitePolicy) -> Checklist:
    """Every requirement of `suite.kind`'s entry rule, checked against `facts`."""
    names = required_names(policy, suite.kind)
    if names is None:
        missing = _absent_rule(ENTRY_RULES[suite.kind], f"enters a {suite.kind} suite")
        return Checklist(suite.id, suite.kind, facts.task.id, (missing,))
    requirements = [CHECKS[name](facts, suite) for name in names]
    return Checklist(suite.id, suite.kind, facts.task.id, tuple(requirements))


def coverage_gaps(task: EvalTaskSpec, grader_set: GraderSet | None) -> tuple[list[str], list[str]]:
    """Forbidden effects without a blocking hard-constraint grader, and success-state keys
    without a blocking outcome grader."""
    facts = EntryFacts(task, "", None, grader_set, None)
    return _coverage_gaps(facts)


def covered_items(task: EvalTaskSpec, grader_set: GraderSet | None) -> set[str]:
    """The task's forbidden effects and success-state keys that a blocking grader covers."""
    graders = grader_set.graders if grader_set else []
    covers = {c for g in graders if g.blocking for c in g.covers}
    own = set(task.contract.forbidden_effects) | set(task.contract.success_state)
    return own & covers


@dataclass(frozen=True)
class Replacement:
    task: EvalTaskSpec
    grader_set: GraderSet | None


def evaluate_retirement(
    *,
    task: EvalTaskSpec,
    grader_set: GraderSet | None,
    reason: str,
    approved_by: str | None,
    replacement: Replacement | None,
    policy: SuitePolicy,
) -> Checklist:
    """Removal needs what `removal` lists; replacement also what `replacement` lists, and
    always a coverage mapping. An absent rule refuses (the policy never fails open)."""
    if policy.removal is None:
        return Checklist("", "retirement", task.id, (_absent_rule("removal", "may be retired"),))
    names: list[str] = list(policy.removal.requires)
    if reason == "replaced":
        if policy.replacement is None:
            return Checklist(
                "",
                "retirement",
                task.id,
                (_absent_rule("replacement", "may be retired as replaced"),),
            )
        names += [n for n in policy.replacement.requires if n not in names]
        if "coverage_mapping" not in names:
            names.append("coverage_mapping")
    requirements: list[Requirement] = []
    for name in names:
        if name == "obsolete_reason":
            requirements.append(
                Requirement(name, True, f"reason: {reason}", None)
                if has_visible_text(reason)
                else Requirement(name, False, "no reason given", "pass `--reason`")
            )
        elif name in ("risk_owner_approval", "review"):
            requirements.append(
                Requirement(name, True, f"approved by {approved_by}", None)
                if has_visible_text(approved_by)
                else Requirement(
                    name,
                    False,
                    "no risk-owner approval" if approved_by is None else _blank("--approved-by"),
                    f"pass `--approved-by OWNER` (task owner: {task.meta.owner or 'unset'})",
                )
            )
        elif name == "coverage_mapping":
            requirements.append(_coverage_mapping(task, grader_set, replacement))
    return Checklist("", "retirement", task.id, tuple(requirements))


def _coverage_mapping(
    task: EvalTaskSpec, grader_set: GraderSet | None, replacement: Replacement | None
) -> Requirement:
    if replacement is None:
        return Requirement(
            "coverage_mapping",
            False,
            "reason is replaced but no replacement task was named",
            "pass `--replaced-by TASK`",
        )
    old = covered_items(task, grader_set)
    new = covered_items(replacement.task, replacement.grader_set)
    lost = sorted(old - new)
    evidence = f"{replacement.task.id} covers {len(old) - len(lost)}/{len(old)} items of {task.id}"
    if not lost:
        return Requirement("coverage_mapping", True, evidence, None)
    return Requirement(
        "coverage_mapping",
        False,
        f"{evidence}; not covered: {', '.join(lost)}",
        f"make {replacement.task.id} state and cover {', '.join(lost)} (forbidden effects and "
        "success-state keys with a blocking grader), or retire without replacing",
    )
