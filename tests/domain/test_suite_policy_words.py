"""What a promotion or retirement checklist says, requirement by requirement.

docs/promotion.md: `evalops promote` prints "each requirement met or unmet, the evidence it
looked at, and how to meet it", and `--json` gives `{"name", "met", "evidence", "fix"}` per
requirement (docs/tutorial.md shows the lines). The tests beside this file check which
requirements are met; these check the whole requirement: its name, a `met` that is exactly
true or false (the JSON field is a boolean), the evidence naming the facts it read (digests,
files, counts, grader and incident ids) and a fix naming the command that meets it, absent
(null) when the requirement is met. Every expectation is written out from the facts given,
in the wording the tutorial prints.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from evalops.domain import suite_policy
from evalops.domain.suite_policy import (
    CHECKS,
    Checklist,
    EntryFacts,
    LinkedIncident,
    Replacement,
    Requirement,
    coverage_gaps,
    covered_items,
    evaluate_entry,
    evaluate_retirement,
    incident_subject_refusal,
)
from tests.domain.test_suite_policy import (
    EXEC_A,
    EXEC_B,
    GRADER_SET_DIGEST,
    JUDGE,
    TASK_DIGEST,
    facts,
    grader_set,
    policy,
    suite,
    task_spec,
)

TASK_FILE = "registry/tasks/mini-task.yaml"
SYNC = "bump `revision`, commit, and run `evalops sync`"
BLANK = " \u200b\u3000"  # spaces and a zero-width space: no visible character
NOBODY = "has no visible character (spaces and invisible characters name nobody)"


def requirement(checklist: Checklist, name: str) -> Requirement:
    (found,) = [r for r in checklist.requirements if r.name == name]
    return found


def regression(f: EntryFacts) -> Checklist:
    return evaluate_entry(f, suite("regression"), policy())


def check(name: str, f: EntryFacts) -> Requirement:
    return requirement(regression(f), name)


def met(name: str, evidence: str) -> Requirement:
    return Requirement(name, True, evidence, None)


# ------------------------------------------------------------------ every requirement met


def test_every_met_regression_requirement_says_what_it_looked_at() -> None:
    checklist = regression(facts())

    assert checklist == Checklist(
        "regression/x",
        "regression",
        "mini-task",
        (
            met(
                "reproducible_fixture",
                "fixtures fail closed (1 tool response); "
                f"2 valid trials of one eval case (execution {EXEC_A})",
            ),
            met("task_digest", f"task_digest {TASK_DIGEST}"),
            met(
                "minimum_grader_coverage",
                "1/1 forbidden effects covered by a blocking hard-constraint grader, "
                "1/1 success-state keys covered by a blocking outcome grader",
            ),
            met("review_owner", "meta.owner is owner@example.com"),
            met("confirmed_failure_or_invariant", "meta.invariant: the thing is done exactly once"),
            met(
                "stable_success_state",
                "1 success-state key, each covered by a deterministic grader",
            ),
            met("calibrated_graders", "no blocking model grader in the grader set"),
            met(
                "versioned_fixture",
                f"fixtures are inside task_digest {TASK_DIGEST}; "
                f"grader set pinned at {GRADER_SET_DIGEST}",
            ),
            met("grader_set_digest", f"grader set mini-graders at {GRADER_SET_DIGEST}"),
            met("failure_owner", "meta.failure_owner is team-a"),
        ),
    )
    for r in checklist.as_dict()["requirements"]:
        assert r["met"] is True and r["fix"] is None


def test_every_met_estimation_requirement_shows_the_declaration() -> None:
    checklist = evaluate_entry(facts(), suite("estimation"), policy())

    frame = {
        "source": "production-sessions",
        "period": "2026-10",
        "frozen_at": "2026-11-01T00:00:00Z",
    }
    assert checklist == Checklist(
        "estimation/x",
        "estimation",
        "mini-task",
        (
            met(
                "frozen_sampling_frame",
                f"sampling_frame: {frame}; sampled at 2026-10-15T09:30:00Z, frozen at "
                "2026-11-01T00:00:00Z",
            ),
            met(
                "production_population_definition",
                "population: sessions of paying tenants in the EU region",
            ),
            met("weights", "stratum tenant_tier=pro (weight 0.5)"),
            met("update_policy", "update_policy: refreshed quarterly; old cohorts kept read-only"),
        ),
    )


# --------------------------------------------------------------------- reproducible_fixture


def _fixtures(on_miss: str | None, responses: int) -> Any:
    def mutate(t: dict[str, Any]) -> None:
        t["fixtures"] = {
            "toolResponses": [
                {"tool": "svc:do", "args": {"n": i}, "argsMatch": "subset", "response": {}}
                for i in range(responses)
            ]
        }
        if on_miss is not None:
            t["fixtures"]["onMiss"] = on_miss

    return mutate


def _no_fixtures_network_live(t: dict[str, Any]) -> None:
    del t["fixtures"]
    t["contract"]["environment"]["network_policy"] = "live"


def _scripts_nothing_network_live(t: dict[str, Any]) -> None:
    t["fixtures"] = {"onMiss": "fail", "toolResponses": []}
    t["contract"]["environment"]["network_policy"] = "live"


ADD_FIXTURES = f"add `fixtures: {{onMiss: fail, toolResponses: [...]}}` in {TASK_FILE}, {SYNC}"
INGEST = (
    "ingest at least 2 valid trials of one eval case of this task revision: "
    "`evalops trials ingest FILE`"
)
TWO_OF_A = f"2 valid trials of one eval case (execution {EXEC_A})"


@pytest.mark.parametrize(
    ("change", "met_", "fixture_text", "fix"),
    [
        (_fixtures("fail", 2), True, "fixtures fail closed (2 tool responses)", None),
        # onMiss absent means fail (docs/formats.md).
        (_fixtures(None, 1), True, "fixtures fail closed (1 tool response)", None),
        (
            _fixtures("fail", 0),
            True,
            "no fixtures needed (network_policy deny, no tool calls expected)",
            None,
        ),
        (
            _scripts_nothing_network_live,
            True,
            "fixtures fail closed but script no tool responses",
            None,
        ),
        (
            _fixtures("live", 1),
            False,
            "fixtures.onMiss is live (a miss may reach a live tool)",
            ADD_FIXTURES,
        ),
        (
            _fixtures("live", 0),
            False,
            "fixtures.onMiss is live (a miss may reach a live tool)",
            ADD_FIXTURES,
        ),
        (
            _no_fixtures_network_live,
            False,
            "no fixtures, and the task is not sealed (network or tool calls)",
            ADD_FIXTURES,
        ),
    ],
    ids=["two-responses", "onMiss-absent", "sealed", "scripts-nothing", "live", "live-empty",
         "not-sealed"],
)  # fmt: skip
def test_reproducible_fixture_names_the_fixtures(
    change: Any, met_: bool, fixture_text: str, fix: str | None
) -> None:
    result = check("reproducible_fixture", facts(task=task_spec(change)))
    assert result == Requirement("reproducible_fixture", met_, f"{fixture_text}; {TWO_OF_A}", fix)


def test_reproducible_fixture_counts_the_best_eval_case() -> None:
    """At least 2 valid trials *of one eval case*: the case with the most decides, whichever
    execution digest sorts first."""
    for trials, best, execution in (
        ({EXEC_A: 3, EXEC_B: 1}, 3, EXEC_A),
        ({EXEC_A: 1, EXEC_B: 3}, 3, EXEC_B),
    ):
        result = check("reproducible_fixture", facts(valid_trials_by_execution=trials))
        assert result == met(
            "reproducible_fixture",
            "fixtures fail closed (1 tool response); "
            f"{best} valid trials of one eval case (execution {execution})",
        )


@pytest.mark.parametrize(
    ("trials", "trials_text"),
    [
        ({}, "no valid trials of this task's eval case"),
        ({EXEC_A: 1}, f"1 valid trial of one eval case (execution {EXEC_A})"),
        ({EXEC_A: 1, EXEC_B: 1}, f"1 valid trial of one eval case (execution {EXEC_A})"),
    ],
)
def test_too_few_valid_trials_says_how_to_ingest_them(
    trials: dict[str, int], trials_text: str
) -> None:
    result = check("reproducible_fixture", facts(valid_trials_by_execution=trials))
    assert result == Requirement(
        "reproducible_fixture",
        False,
        f"fixtures fail closed (1 tool response); {trials_text}",
        INGEST,
    )


def test_uncounted_trials_read_as_in_the_tutorial() -> None:
    """docs/tutorial.md section 11, the task with 3 tool responses and 3 grader_invalid
    trials: the two lines it prints."""
    cause = "grader_invalid (blocking model grader reply-quality calibration missing)"
    f = facts(
        task=task_spec(_fixtures("fail", 3)),
        valid_trials_by_execution={},
        uncounted_trials={cause: 3},
    )
    assert check("reproducible_fixture", f) == Requirement(
        "reproducible_fixture",
        False,
        "fixtures fail closed (3 tool responses); no valid trials of this task's eval case; "
        f"not counted: 3 of 3 trials are {cause}",
        "fix what made the trials invalid (above: an infrastructure_invalid or grader_invalid "
        "trial never counts; a model grader needs a valid calibration), then ingest at least "
        "2 valid trials of one eval case of this task revision: `evalops trials ingest FILE`",
    )


def test_uncounted_causes_most_first_then_by_name_out_of_every_trial() -> None:
    """The total counts valid and uncounted trials; causes are listed by count, most first,
    ties by name; one trial "is", several "are"."""
    f = facts(
        valid_trials_by_execution={EXEC_A: 1},
        uncounted_trials={"b_cause": 1, "a_cause": 1, "c_cause": 2},
    )
    result = check("reproducible_fixture", f)
    assert result.evidence == (
        "fixtures fail closed (1 tool response); "
        f"1 valid trial of one eval case (execution {EXEC_A}); "
        "not counted: 2 of 5 trials are c_cause, 1 is a_cause, 1 is b_cause"
    )
    assert result.met is False
    one = check(
        "reproducible_fixture",
        facts(valid_trials_by_execution={}, uncounted_trials={"x_cause": 1}),
    )
    assert one.evidence.endswith("; not counted: 1 of 1 trial is x_cause")


def test_uncounted_trials_beside_enough_valid_ones_change_nothing_but_the_words() -> None:
    f = facts(valid_trials_by_execution={EXEC_A: 2}, uncounted_trials={"x_cause": 2})
    assert check("reproducible_fixture", f) == met(
        "reproducible_fixture",
        f"fixtures fail closed (1 tool response); {TWO_OF_A}; "
        "not counted: 2 of 4 trials are x_cause",
    )


# ------------------------------------------------------------ digests, pins and coverage


def test_an_unsynced_task_names_its_revision_and_the_sync() -> None:
    checklist = regression(facts(task_digest=None))
    assert requirement(checklist, "task_digest") == Requirement(
        "task_digest",
        False,
        "task mini-task revision 1 is not synced",
        "commit the task file and run `evalops sync`",
    )
    assert requirement(checklist, "versioned_fixture") == Requirement(
        "versioned_fixture",
        False,
        "task is not synced, so nothing is pinned",
        "commit the registry and run `evalops sync`",
    )


def test_an_unsynced_grader_set_is_named() -> None:
    checklist = regression(facts(grader_set=None, grader_set_digest=None))
    assert requirement(checklist, "grader_set_digest") == Requirement(
        "grader_set_digest",
        False,
        "grader set mini-graders is not synced",
        "commit the grader set file and run `evalops sync`",
    )
    assert requirement(checklist, "versioned_fixture") == Requirement(
        "versioned_fixture",
        False,
        "grader set mini-graders is not synced, so nothing is pinned",
        "commit the registry and run `evalops sync`",
    )
    assert requirement(checklist, "minimum_grader_coverage") == Requirement(
        "minimum_grader_coverage",
        False,
        "grader set mini-graders is not synced",
        "sync grader set mini-graders",
    )


def _nothing_blocks(g: dict[str, Any]) -> None:
    for grader in g["graders"]:
        grader["blocking"] = False


def test_coverage_counts_and_names_every_gap() -> None:
    result = check("minimum_grader_coverage", facts(grader_set=grader_set(_nothing_blocks)))
    assert result == Requirement(
        "minimum_grader_coverage",
        False,
        "0/1 forbidden effects covered by a blocking hard-constraint grader, "
        "0/1 success-state keys covered by a blocking outcome grader; "
        "uncovered: forbidden effect do_it_twice, success-state key done",
        "add the uncovered items to the `covers` of a blocking grader of the right layer in "
        "grader set mini-graders, bump its `version`, and run `evalops sync`",
    )


def test_public_coverage_helpers_read_a_missing_grader_set_as_covering_nothing() -> None:
    """`suite coverage` shows GAP for every item of a task whose grader set is not synced."""
    task = task_spec()
    assert coverage_gaps(task, None) == (["do_it_twice"], ["done"])
    assert coverage_gaps(task, grader_set()) == ([], [])
    assert coverage_gaps(task, grader_set(_nothing_blocks)) == (["do_it_twice"], ["done"])
    assert covered_items(task, None) == set()
    assert covered_items(task, grader_set()) == {"do_it_twice", "done"}


# ----------------------------------------------------------------------------- owners


@pytest.mark.parametrize(("name", "attribute"), [("review_owner", "owner"),
                                                 ("failure_owner", "failure_owner")])  # fmt: skip
def test_owner_requirements_name_the_field(name: str, attribute: str) -> None:
    """`review_owner` / `failure_owner`: `meta.owner` / `meta.failure_owner` is set, with a
    visible character (docs/promotion.md). The checks are built by `_owner` when the module
    loads; building one again here checks the builder itself, so a test sees a change to it."""
    fix = f"set `meta.{attribute}` in {TASK_FILE}, commit, and run `evalops sync`"
    value = "owner@example.com" if attribute == "owner" else "team-a"

    def drop(t: dict[str, Any]) -> None:
        del t["meta"][attribute]

    def blank(t: dict[str, Any]) -> None:
        t["meta"][attribute] = BLANK

    cases = [
        (facts(), met(name, f"meta.{attribute} is {value}")),
        (
            facts(task=task_spec(drop)),
            Requirement(name, False, f"meta.{attribute} is not set", fix),
        ),
        (
            facts(task=task_spec(blank)),
            Requirement(name, False, f"meta.{attribute} {NOBODY}", fix),
        ),
    ]
    built = suite_policy._owner(name, attribute)
    for f, expected in cases:
        assert CHECKS[name](f, suite("regression")) == expected
        assert built(f, suite("regression")) == expected
        assert check(name, f) == expected


# ------------------------------------------------------------------ incidents, invariant


def _no_invariant(t: dict[str, Any]) -> None:
    del t["meta"]["invariant"]


def test_confirmed_incidents_are_listed_with_their_states() -> None:
    f = facts(
        task=task_spec(_no_invariant),
        incidents=(
            LinkedIncident("INC-1", "open", was_confirmed=False),
            LinkedIncident("INC-3", "reproduced", was_confirmed=True),
            LinkedIncident("INC-4", "closed", was_confirmed=True),
        ),
    )
    assert check("confirmed_failure_or_invariant", f) == met(
        "confirmed_failure_or_invariant", "confirmed incident INC-3 (reproduced), INC-4 (closed)"
    )


@pytest.mark.parametrize(
    ("incidents", "linked"),
    [
        ((), "none"),
        (
            (
                LinkedIncident("INC-1", "open", was_confirmed=False),
                LinkedIncident("INC-2", "closed", was_confirmed=False),
            ),
            "INC-1 (open), INC-2 (closed)",
        ),
    ],
)
def test_no_confirmed_incident_lists_the_linked_ones(
    incidents: tuple[LinkedIncident, ...], linked: str
) -> None:
    f = facts(task=task_spec(_no_invariant), incidents=incidents)
    assert check("confirmed_failure_or_invariant", f) == Requirement(
        "confirmed_failure_or_invariant",
        False,
        f"no confirmed incident linked (linked: {linked}) and no meta.invariant",
        "confirm the incident this task reproduces and link it (`evalops incident confirm "
        "INC`, `evalops incident link INC --task mini-task`), or set `meta.invariant`",
    )


PROMOTE_FIX = (
    "confirm it (`evalops incident confirm {id}`) and promote it again, or promote the task "
    "by its id (`evalops promote mini-task --to regression/x`) when its meta.invariant is "
    "enough; the incident then keeps its state"
)


@pytest.mark.parametrize(
    ("state", "was_confirmed", "evidence"),
    [
        ("confirmed", True, None),
        ("reproduced", True, None),
        # Promoted after a confirmation: promoted again to pin a new revision.
        ("promoted", True, None),
        ("promoted", False, "is promoted, never confirmed"),
        ("open", False, "is open, never confirmed"),
        ("closed", False, "is closed, never confirmed"),
        # Confirmed once, then closed: no longer a failure to promote.
        ("closed", True, "is closed"),
    ],
)
def test_promoting_an_incident_needs_it_confirmed_or_reproduced(
    state: str, was_confirmed: bool, evidence: str | None
) -> None:
    """docs/promotion.md: `promote INC-n` requires the incident `confirmed` or `reproduced`
    (or already `promoted` after being confirmed); otherwise `confirmed_incident` is unmet,
    with the fix (confirm it, or promote its task by id)."""
    incident = LinkedIncident("INC-7", state, was_confirmed=was_confirmed)
    refusal = incident_subject_refusal(incident, "mini-task", "regression/x")
    if evidence is None:
        assert refusal is None
        return
    assert refusal == Requirement(
        "confirmed_incident",
        False,
        f"incident INC-7 {evidence}: promoting an incident needs it confirmed or reproduced",
        PROMOTE_FIX.format(id="INC-7"),
    )


# ---------------------------------------------------------------- stable success state


def _no_success_state(t: dict[str, Any]) -> None:
    t["contract"]["success_state"] = {}


def _two_keys(t: dict[str, Any]) -> None:
    t["contract"]["success_state"] = {"done": True, "receipt": "ok"}


def _outcome_covers_two(g: dict[str, Any]) -> None:
    g["graders"][0]["covers"] = ["done", "receipt"]


def _human_outcome_covers_two(g: dict[str, Any]) -> None:
    _outcome_covers_two(g)
    g["graders"][0]["type"] = "human"


def test_stable_success_state_in_words() -> None:
    assert check("stable_success_state", facts(task=task_spec(_no_success_state))) == (
        Requirement(
            "stable_success_state",
            False,
            "success_state is empty",
            "state the facts that define success in `contract.success_state` in "
            f"{TASK_FILE}, {SYNC}",
        )
    )
    two = task_spec(_two_keys)
    assert check(
        "stable_success_state", facts(task=two, grader_set=grader_set(_outcome_covers_two))
    ) == met("stable_success_state", "2 success-state keys, each covered by a deterministic grader")
    assert check(
        "stable_success_state", facts(task=two, grader_set=grader_set(_human_outcome_covers_two))
    ) == Requirement(
        "stable_success_state",
        False,
        "success-state keys not covered by a deterministic grader: done, receipt",
        "cover them with a deterministic grader in grader set mini-graders",
    )


# ------------------------------------------------------------------ calibrated graders


def _two_judges(g: dict[str, Any]) -> None:
    g["graders"].append(copy.deepcopy(JUDGE))
    second = copy.deepcopy(JUDGE)
    second["id"] = "judge-2"
    g["graders"].append(second)


def _record(*ids: str) -> str:
    return "record a valid calibration for " + ", ".join(
        f"`evalops calibration record {gid} --labels FILE`" for gid in ids
    )


def test_calibrated_graders_in_words() -> None:
    judges = grader_set(_two_judges)
    both_valid = {"judge": "valid", "judge-2": "valid"}
    assert check(
        "calibrated_graders", facts(grader_set=judges, calibration_states=both_valid)
    ) == met("calibrated_graders", "judge: valid, judge-2: valid")

    # No state recorded reads `missing`; a state without reasons is shown as the state.
    assert check("calibrated_graders", facts(grader_set=judges)) == Requirement(
        "calibrated_graders", False, "judge: missing; judge-2: missing", _record("judge", "judge-2")
    )
    stale = facts(
        grader_set=judges,
        calibration_states={"judge": "valid", "judge-2": "stale"},
        calibration_reasons={"judge-2": ["grader_config_digest changed", "prompt changed"]},
    )
    assert check("calibrated_graders", stale) == Requirement(
        "calibrated_graders",
        False,
        "judge-2: grader_config_digest changed; prompt changed",
        _record("judge-2"),
    )


# ------------------------------------------------------------- estimation declarations


@pytest.mark.parametrize(
    ("name", "attribute", "what"),
    [
        ("frozen_sampling_frame", "sampling_frame", "source, period, frozen_at"),
        ("production_population_definition", "population", "the production population"),
        ("weights", "weights", "stratum weights"),
        ("update_policy", "update_policy", "how samples are refreshed"),
    ],
)
def test_an_undeclared_estimation_field_names_the_suite_file(
    name: str, attribute: str, what: str
) -> None:
    """Declared in the estimation suite's file (docs/promotion.md). The checks are built by
    `_declared` when the module loads; building one again here checks the builder too."""
    declared = suite("estimation")
    undeclared = suite("estimation", lambda s: s.pop(attribute))
    refusal = Requirement(
        name,
        False,
        f"suite estimation/x declares no {attribute}",
        f"declare `{attribute}` ({what}) in the suite file of estimation/x and run `evalops sync`",
    )
    shown = getattr(declared, attribute)
    shown = shown if isinstance(shown, str) else shown.model_dump(mode="json", exclude_none=True)
    built = suite_policy._declared(name, attribute, what)
    for check_ in (CHECKS[name], built):
        assert check_(facts(), undeclared) == refusal
    assert built(facts(), declared) == met(name, f"{attribute}: {shown}")
    # The frame and the weights also check the task's own declaration (tested below).
    if name not in ("frozen_sampling_frame", "weights"):
        assert CHECKS[name](facts(), declared) == met(name, f"{attribute}: {shown}")
    checklist = evaluate_entry(facts(), undeclared, policy())
    assert requirement(checklist, name) == refusal


# ---------------------------------------------------------------------- absent rules


def _absent(rule: str, what: str) -> Requirement:
    return Requirement(
        "suite_policy_rule",
        False,
        f"the suite policy has no {rule} rule",
        f"add `{rule}` to the suite policy file (its `requires` list) and run `evalops sync`; "
        f"without it nothing {what} (a policy never fails open)",
    )


@pytest.mark.parametrize("kind", ["capability", "regression", "estimation"])
def test_an_absent_entry_rule_refuses_entry(kind: str) -> None:
    """docs/formats.md: a rule that is absent refuses what it governs; a policy never fails
    open."""
    rule = f"{kind}_entry"
    checklist = evaluate_entry(facts(), suite(kind), policy(lambda p: p.pop(rule)))
    assert checklist == Checklist(
        f"{kind}/x", kind, "mini-task", (_absent(rule, f"enters a {kind} suite"),)
    )
    assert checklist.accepted is False


def test_an_absent_retirement_rule_refuses_retirement() -> None:
    no_removal = policy(lambda p: p.pop("removal"))
    assert retire(pol=no_removal) == Checklist(
        "", "retirement", "mini-task", (_absent("removal", "may be retired"),)
    )
    no_replacement = policy(lambda p: p.pop("replacement"))
    assert retire(reason="replaced", pol=no_replacement) == Checklist(
        "", "retirement", "mini-task", (_absent("replacement", "may be retired as replaced"),)
    )


# -------------------------------------------------------------------------- retirement


def retire(
    *,
    reason: str = "obsolete",
    approved_by: str | None = "risk@example.com",
    replacement: Replacement | None = None,
    pol: Any = None,
    task: Any = None,
) -> Checklist:
    return evaluate_retirement(
        task=task or task_spec(),
        grader_set=grader_set(),
        reason=reason,
        approved_by=approved_by,
        replacement=replacement,
        policy=pol or policy(),
    )


def _wide(t: dict[str, Any]) -> None:
    t["id"] = "wide-task"
    t["contract"]["forbidden_effects"] = ["do_it_twice", "leak_a_secret"]
    t["contract"]["success_state"] = {"done": True, "receipt": "ok"}


def _wide_graders(g: dict[str, Any]) -> None:
    g["graders"][0]["covers"] = ["done", "receipt"]
    g["graders"][1]["covers"] = ["do_it_twice", "leak_a_secret"]


def _renamed(t: dict[str, Any]) -> None:
    t["id"] = "other-task"


def _renamed_without_effects(t: dict[str, Any]) -> None:
    _renamed(t)
    t["contract"]["forbidden_effects"] = []


def test_removal_in_words() -> None:
    assert retire() == Checklist(
        "",
        "retirement",
        "mini-task",
        (
            met("obsolete_reason", "reason: obsolete"),
            met("risk_owner_approval", "approved by risk@example.com"),
        ),
    )
    refused = retire(reason="", approved_by=None)
    assert refused.requirements == (
        Requirement("obsolete_reason", False, "no reason given", "pass `--reason`"),
        Requirement(
            "risk_owner_approval",
            False,
            "no risk-owner approval",
            "pass `--approved-by OWNER` (task owner: owner@example.com)",
        ),
    )
    # A blank approver names nobody; a task without an owner says so in the fix.
    ownerless = task_spec(lambda t: t["meta"].pop("owner"))
    blank = retire(approved_by=BLANK, task=ownerless)
    assert requirement(blank, "risk_owner_approval") == Requirement(
        "risk_owner_approval",
        False,
        f"--approved-by {NOBODY}",
        "pass `--approved-by OWNER` (task owner: unset)",
    )


def test_replacement_checks_removal_replacement_and_coverage_in_order() -> None:
    """docs/promotion.md: replacement (`coverage_mapping`, `review`) adds to removal
    (`obsolete_reason`, `risk_owner_approval`); `review` is the risk owner's approval."""
    wide = Replacement(task_spec(_wide), grader_set(_wide_graders))
    checklist = retire(reason="replaced", replacement=wide)
    assert checklist == Checklist(
        "",
        "retirement",
        "mini-task",
        (
            met("obsolete_reason", "reason: replaced"),
            met("risk_owner_approval", "approved by risk@example.com"),
            met("coverage_mapping", "wide-task covers 2/2 items of mini-task"),
            met("review", "approved by risk@example.com"),
        ),
    )
    unapproved = retire(reason="replaced", replacement=wide, approved_by=None)
    assert [r.name for r in unapproved.requirements if r.met is False] == [
        "risk_owner_approval",
        "review",
    ]


def test_a_replacement_always_needs_a_coverage_mapping() -> None:
    """Even a replacement rule that does not list it: a replacement must cover every
    `covers` item of the retired task (docs/promotion.md)."""
    review_only = policy(lambda p: p["replacement"].__setitem__("requires", ["review"]))
    checklist = retire(reason="replaced", pol=review_only)
    assert [r.name for r in checklist.requirements] == [
        "obsolete_reason",
        "risk_owner_approval",
        "review",
        "coverage_mapping",
    ]
    assert requirement(checklist, "coverage_mapping") == Requirement(
        "coverage_mapping",
        False,
        "reason is replaced but no replacement task was named",
        "pass `--replaced-by TASK`",
    )


def test_a_replacement_that_loses_coverage_names_what_it_loses() -> None:
    one_lost = Replacement(task_spec(_renamed_without_effects), grader_set())
    assert requirement(retire(reason="replaced", replacement=one_lost), "coverage_mapping") == (
        Requirement(
            "coverage_mapping",
            False,
            "other-task covers 1/2 items of mini-task; not covered: do_it_twice",
            "make other-task state and cover do_it_twice (forbidden effects and success-state "
            "keys with a blocking grader), or retire without replacing",
        )
    )
    all_lost = Replacement(task_spec(_renamed), grader_set(_nothing_blocks))
    assert requirement(retire(reason="replaced", replacement=all_lost), "coverage_mapping") == (
        Requirement(
            "coverage_mapping",
            False,
            "other-task covers 0/2 items of mini-task; not covered: do_it_twice, done",
            "make other-task state and cover do_it_twice, done (forbidden effects and "
            "success-state keys with a blocking grader), or retire without replacing",
        )
    )
