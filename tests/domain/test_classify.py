"""Primary classification (docs/classification.md): pure, no database.

A small task and grader set are built here so that one record can carry a trigger for any
class (several triggers per class, each touching its own part of the record). Every pair
of classes is then combined: the higher class must be primary and the lower one must
survive as a secondary label. Hypothesis checks that adding a trigger never lowers the
primary class's rank.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalops.domain.calibration_validity import Validity
from evalops.domain.classify import Classification, classify, failing_verdict_class, shown_score
from evalops.domain.specs import EvalTaskSpec, GraderSet
from evalops.domain.trajectory import ObservedCall, grade
from evalops.domain.trial_record import GraderResult, Runtime, TrialRecord
from evalops.domain.vocabulary import CANONICAL_PRECEDENCE

DIGEST = "sha256:" + "0" * 64
# The precedence as docs/classification.md writes it, highest first: the tests read the
# documented order, never the code's own constant (a reordered constant must fail them).
DOCUMENTED_PRECEDENCE = (
    "hard_constraint_fail",
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
    "agent_error",
    "runtime_error",
    "task_fail",
    "task_pass",
)
RANK = {c: i for i, c in enumerate(DOCUMENTED_PRECEDENCE)}
FAILING = [c for c in DOCUMENTED_PRECEDENCE if c != "task_pass"]
CLASSES = set(DOCUMENTED_PRECEDENCE)

MODEL = {
    "provider": "p",
    "name": "judge-1",
    "prompt_hash": "sha256:" + "1" * 64,
    "rubric_version": 1,
}
CAL_REQ = {
    "min_holdout_items": 50,
    "min_precision_lower_bound": 0.8,
    "min_recall_lower_bound": 0.8,
    "min_human_agreement": 0.6,
}
ALL_STATES = [*DOCUMENTED_PRECEDENCE, "pass", "abstain"]


def test_the_code_s_precedence_is_the_documented_one() -> None:
    assert CANONICAL_PRECEDENCE == DOCUMENTED_PRECEDENCE
    doc = (Path(__file__).resolve().parents[2] / "docs" / "classification.md").read_text("utf-8")
    written = doc.split("## The precedence", 1)[1].split("```")[1]
    assert tuple(c.strip() for c in written.split(">")) == DOCUMENTED_PRECEDENCE


# Graders that "say so": one blocking deterministic grader per class a grader may report.
# agent_error, runtime_error and infrastructure_invalid come from runtime.status alone
# (docs/formats.md: no grader may produce them).
SAYS = (
    "hard_constraint_fail",
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
)
RUNTIME_ONLY = ("infrastructure_invalid", "agent_error", "runtime_error")


def grader(gid: str, layer: str, produces: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": gid,
        "version": 1,
        "layer": layer,
        "type": "deterministic",
        "produces": produces,
        "blocking": True,
        **extra,
    }


GRADERS: dict[str, Any] = {
    "spec_schema_version": "grader-set/v1",
    "id": "test-graders",
    "version": 1,
    "graders": [
        grader("outcome", "outcome", ["task_pass", "task_fail", "missing_required_evidence"]),
        *(
            grader(f"says-{cls.replace('_', '-')}", "hard_constraint", ["pass", cls])
            for cls in SAYS
        ),
        grader("narrow", "hard_constraint", ["pass"]),  # anything else is outside produces
        grader("evidence", "hard_constraint", ["pass"]),  # its result goes missing
        grader("versioned", "hard_constraint", ["pass"]),  # its result names a wrong version
        {
            **grader("judge", "outcome", ["task_pass", "task_fail", "abstain"]),
            "type": "model",
            "model": MODEL,
            "calibration_requirements": CAL_REQ,
        },
        {
            **grader("diag", "trajectory_diagnosis", ["task_pass", "task_fail", "abstain"]),
            "type": "model",
            "model": MODEL,
            "blocking": False,
            "rule_state": "diagnostic_only",
        },
    ],
}

TRAJECTORY = {
    "match": "in-order",
    "calls": [
        {"tool": "crm:lookup-order", "argsMatch": "ignore"},
        {"tool": "billing:refund", "args": {"amountMinor": 4200}, "argsMatch": "subset"},
    ],
    "forbidden": ["billing:refund-all"],
}


def task_dict(
    *,
    on_miss: str | None = "fail",
    expected: dict[str, Any] | None = None,
    score_from: str | None = "outcome",
) -> dict[str, Any]:
    contract: dict[str, Any] = {
        "goal": "refund_the_requested_order_once",
        "environment": {"network_policy": "deny"},
        "required_artifacts": {"logical": ["refund_receipt", "reply"]},
        "expected": expected
        if expected is not None
        else {"kind": "golden", "match": {"strategy": "contains"}, "trajectory": TRAJECTORY},
    }
    if score_from is not None:
        contract["score_from"] = score_from
    fixtures: dict[str, Any] = {"toolResponses": [{"tool": "crm:lookup-order", "response": {}}]}
    if on_miss is not None:
        fixtures["onMiss"] = on_miss
    return {
        "spec_schema_version": "eval-task/v1",
        "id": "refund-task",
        "revision": 1,
        "meta": {"title": "Refund once", "risk": "critical"},
        "contract": contract,
        "fixtures": fixtures,
        "grader_set": "test-graders",
    }


TASK = EvalTaskSpec.model_validate(task_dict())
GRADER_SET = GraderSet.model_validate(GRADERS)
VALID = Validity("valid", blockable_classes=frozenset({"task_pass", "task_fail"}))


def result(gid: str, state: str, score: float | None = None, version: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"grader_id": gid, "grader_version": version, "state": state}
    if score is not None:
        out["score"] = score
    return out


def base_record() -> dict[str, Any]:
    """A record that passes: every blocking grader passes, evidence complete, path matched."""
    return {
        "schema": "evalops.trial/v1",
        "trial_id": "trial-1",
        "task_id": "refund-task",
        "task_digest": DIGEST,
        "execution_digest": DIGEST,
        "grader_set_digest": DIGEST,
        "trial_index": 0,
        "started_at": "2026-11-29T10:00:00Z",
        "completed_at": "2026-11-29T10:03:12Z",
        "artifact_manifest": {"artifacts": [{"kind": "refund_receipt"}, {"kind": "reply"}]},
        "grader_results": [
            result("outcome", "task_pass", 0.9),
            *(result(f"says-{cls.replace('_', '-')}", "pass") for cls in SAYS),
            result("narrow", "pass"),
            result("evidence", "pass"),
            result("versioned", "pass"),
            result("judge", "task_pass", 1.0),
            result("diag", "task_pass", 1.0),
        ],
        "external_effects": [{"effect_key": "refund:A-1", "status": "committed"}],
        "runtime": {"status": "ok"},
        "tool_calls": [
            {"tool": "crm:lookup-order", "args": {"orderId": "A-1"}, "agent_id": "support"},
            {"tool": "billing:refund", "args": {"amountMinor": 4200}, "agent_id": "support"},
        ],
        "target_agent_id": "support",
        "fixture_misses": 0,
    }


@dataclass
class Case:
    record: dict[str, Any]
    validity: dict[str, Validity]


def run(
    case: Case,
    task: EvalTaskSpec = TASK,
    graders: GraderSet = GRADER_SET,
    *,
    reconciliations: Mapping[int, str] | None = None,
    reviews: Mapping[str, GraderResult] | None = None,
) -> Classification:
    record = TrialRecord.model_validate(case.record)
    trajectory = None
    expected = task.contract.expected
    if expected is not None and expected.trajectory is not None:
        calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
        trajectory = grade(expected.trajectory, calls, record.target_agent_id)
    return classify(
        record,
        task,
        graders,
        validity=case.validity,
        trajectory=trajectory,
        reconciliations=reconciliations,
        reviews=reviews,
    )


def new_case() -> Case:
    return Case(base_record(), {"judge": VALID})


def set_result(case: Case, gid: str, state: str, score: float | None = None) -> None:
    results = case.record["grader_results"]
    index = next(i for i, r in enumerate(results) if r["grader_id"] == gid)
    results[index] = result(gid, state, score)


def drop_result(case: Case, gid: str) -> None:
    case.record["grader_results"] = [
        r for r in case.record["grader_results"] if r["grader_id"] != gid
    ]


def class_labels(c: Classification) -> set[str]:
    return set(c.secondary_labels) & CLASSES


# ------------------------------------------------------------------------------- triggers


@dataclass(frozen=True)
class Trigger:
    name: str
    cls: str
    apply: Callable[[Case], None]
    runtime: str | None = None
    """None: any runtime status; "ok": needs runtime ok; else the status it sets."""
    resource: str | None = None
    """The part of the record it edits; two triggers on one resource never combine."""


def _says(cls: str) -> Callable[[Case], None]:
    return lambda case: set_result(case, f"says-{cls.replace('_', '-')}", cls)


def _runtime(status: str) -> Callable[[Case], None]:
    def apply(case: Case) -> None:
        case.record["runtime"] = {"status": status}

    return apply


def _effects(*effects: tuple[str, str]) -> Callable[[Case], None]:
    def apply(case: Case) -> None:
        case.record["external_effects"] += [{"effect_key": k, "status": s} for k, s in effects]

    return apply


def _drop_artifact(case: Case) -> None:
    case.record["artifact_manifest"]["artifacts"] = [{"kind": "reply"}]


def _unknown_grader(case: Case) -> None:
    case.record["grader_results"].append(result("ghost", "pass"))


def _wrong_version(case: Case) -> None:
    drop_result(case, "versioned")
    case.record["grader_results"].append(result("versioned", "pass", version=7))


def _uncalibrated(case: Case) -> None:
    case.validity.pop("judge")


def _forbidden_call(case: Case) -> None:
    case.record["tool_calls"].append(
        {"tool": "billing:refund-all", "args": {}, "agent_id": "support"}
    )


def _fixture_miss(case: Case) -> None:
    case.record["fixture_misses"] = 1


TRIGGERS: list[Trigger] = [
    # hard_constraint_fail
    Trigger("hcf-grader", "hard_constraint_fail", _says("hard_constraint_fail"), resource="s-hcf"),
    Trigger(
        "hcf-double-commit",
        "hard_constraint_fail",
        _effects(("refund:A-1", "committed")),  # the base record committed it once already
    ),
    # ambiguous_external_effect
    Trigger("aee-requested", "ambiguous_external_effect", _effects(("mail:1", "requested"))),
    Trigger("aee-unknown", "ambiguous_external_effect", _effects(("mail:2", "unknown"))),
    Trigger(
        "aee-grader",
        "ambiguous_external_effect",
        _says("ambiguous_external_effect"),
        resource="s-aee",
    ),
    # missing_required_evidence (artifact / result / abstain only with runtime ok)
    Trigger("mre-artifact", "missing_required_evidence", _drop_artifact, "ok", "manifest"),
    Trigger(
        "mre-no-result",
        "missing_required_evidence",
        lambda case: drop_result(case, "evidence"),
        "ok",
        "evidence",
    ),
    Trigger(
        "mre-abstain",
        "missing_required_evidence",
        lambda case: set_result(case, "judge", "abstain"),
        "ok",
        "judge",
    ),
    Trigger(
        "mre-grader",
        "missing_required_evidence",
        _says("missing_required_evidence"),
        resource="s-mre",
    ),
    # grader_invalid
    Trigger(
        "gi-outside-produces",
        "grader_invalid",
        lambda case: set_result(case, "narrow", "task_fail"),
        resource="narrow",
    ),
    Trigger("gi-unknown-grader", "grader_invalid", _unknown_grader, resource="ghost"),
    Trigger("gi-wrong-version", "grader_invalid", _wrong_version, resource="versioned"),
    Trigger("gi-uncalibrated", "grader_invalid", _uncalibrated, resource="judge"),
    Trigger("gi-grader", "grader_invalid", _says("grader_invalid"), resource="s-gi"),
    # infrastructure_invalid
    Trigger(
        "infra-error", "infrastructure_invalid", _runtime("infrastructure_error"), "infra_error"
    ),
    Trigger("infra-timeout", "infrastructure_invalid", _runtime("timeout"), "timeout"),
    # agent_error / runtime_error
    Trigger("ae-runtime", "agent_error", _runtime("agent_error"), "agent_error"),
    Trigger("re-runtime", "runtime_error", _runtime("runtime_error"), "runtime_error"),
    # task_fail
    Trigger(
        "tf-outcome",
        "task_fail",
        lambda case: set_result(case, "outcome", "task_fail", 0.2),
        resource="outcome",
    ),
    Trigger("tf-trajectory", "task_fail", _forbidden_call, resource="calls"),
    Trigger("tf-fixture-miss", "task_fail", _fixture_miss, resource="fixtures"),
]
BY_NAME = {t.name: t for t in TRIGGERS}


def compatible(triggers: Sequence[Trigger]) -> bool:
    resources = [t.resource for t in triggers if t.resource is not None]
    if len(resources) != len(set(resources)):
        return False
    statuses = {t.runtime for t in triggers if t.runtime is not None}
    return len(statuses) <= 1


def build(triggers: Sequence[Trigger]) -> Case:
    case = new_case()
    for t in triggers:
        t.apply(case)
    return case


# ------------------------------------------------------------------------- the base record


def test_base_record_passes() -> None:
    c = run(new_case())
    assert c.primary == "task_pass"
    assert c.passed
    assert c.score == 0.9
    assert c.gating_score == 0.9
    assert class_labels(c) == set()
    assert c.secondary_labels == ("diagnostic:diag:task_pass",)


def test_every_failing_class_has_a_trigger() -> None:
    assert {t.cls for t in TRIGGERS} == set(FAILING)


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: t.name)
def test_each_trigger_alone_gives_exactly_its_class(trigger: Trigger) -> None:
    c = run(build([trigger]))
    assert c.primary == trigger.cls, c.reasons
    assert class_labels(c) == set(), c.reasons
    assert not c.passed


# --------------------------------------------------------------------------- every pair

# Two classes that only runtime.status yields never meet in one record (it has one status).
PAIRS = [
    (hi, lo)
    for hi, lo in itertools.combinations(FAILING, 2)
    if not (hi in RUNTIME_ONLY and lo in RUNTIME_ONLY)
]


def combos(hi: str, lo: str) -> list[tuple[Trigger, Trigger]]:
    return [
        (a, b)
        for a in TRIGGERS
        if a.cls == hi
        for b in TRIGGERS
        if b.cls == lo and compatible([a, b])
    ]


@pytest.mark.parametrize(("hi", "lo"), PAIRS, ids=[f"{h}>{lo}" for h, lo in PAIRS])
def test_pair_higher_is_primary_lower_is_secondary(hi: str, lo: str) -> None:
    assert RANK[hi] < RANK[lo]
    found = combos(hi, lo)
    assert found, f"no record can trigger both {hi} and {lo}"
    for a, b in found:
        for order in ((a, b), (b, a)):
            c = run(build(order))
            where = f"{a.name} + {b.name}: {c.reasons}"
            assert c.primary == hi, where
            assert lo in c.secondary_labels, where
            assert class_labels(c) == {lo}, where
            assert not c.passed


def test_runtime_classes_never_meet_in_one_record() -> None:
    # One record has one runtime.status and no grader may produce a runtime class, so two
    # of them never meet: every record carries at most one.
    with pytest.raises(ValidationError):
        Runtime.model_validate({"status": ["timeout", "agent_error"]})
    for cls in RUNTIME_ONLY:
        with pytest.raises(ValidationError, match="may not produce"):
            GraderSet.model_validate(
                {**GRADERS, "graders": [grader("g", "hard_constraint", ["pass", cls])]}
            )
    for status in ("agent_error", "runtime_error", "infrastructure_error", "timeout"):
        case = new_case()
        case.record["runtime"] = {"status": status}
        c = run(case)
        assert len({c.primary, *c.secondary_labels} & set(RUNTIME_ONLY)) == 1


def test_every_pair_includes_task_pass_only_trivially() -> None:
    # task_pass is "none of the above": any trigger outranks it and it is never a label.
    for trigger in TRIGGERS:
        c = run(build([trigger]))
        assert RANK[c.primary] < RANK["task_pass"]
        assert "task_pass" not in c.secondary_labels


# ----------------------------------------------- missing evidence needs runtime.status ok


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        ("agent_error", "agent_error"),
        ("runtime_error", "runtime_error"),
        ("infrastructure_error", "infrastructure_invalid"),
        ("timeout", "infrastructure_invalid"),
    ],
)
def test_missing_evidence_of_an_incomplete_run_is_not_a_candidate(status: str, cls: str) -> None:
    case = build([BY_NAME["mre-artifact"], BY_NAME["mre-no-result"], BY_NAME["mre-abstain"]])
    assert run(case).primary == "missing_required_evidence"
    _runtime(status)(case)
    c = run(case)
    assert c.primary == cls, c.reasons
    assert "missing_required_evidence" not in c.secondary_labels


def test_a_grader_saying_missing_evidence_counts_whatever_the_runtime() -> None:
    case = build([BY_NAME["mre-grader"], BY_NAME["re-runtime"]])
    c = run(case)
    assert c.primary == "missing_required_evidence"
    assert "runtime_error" in c.secondary_labels


# ------------------------------------------------------------------- non-blocking graders


def test_non_blocking_graders_only_add_diagnostic_labels() -> None:
    for state in ("task_fail", "abstain", "task_pass"):
        case = new_case()
        set_result(case, "diag", state, 0.0)
        c = run(case)
        assert c.primary == "task_pass", state
        assert c.secondary_labels == (f"diagnostic:diag:{state}",)
        assert c.score == 0.9
    case = new_case()
    drop_result(case, "diag")
    c = run(case)
    assert c.primary == "task_pass"
    assert c.secondary_labels == ()


def test_non_blocking_hard_constraint_grader_does_not_block() -> None:
    graders = copy.deepcopy(GRADERS)
    graders["graders"].append(
        {**grader("soft", "hard_constraint", ["pass", "hard_constraint_fail"]), "blocking": False}
    )
    case = new_case()
    case.record["grader_results"].append(result("soft", "hard_constraint_fail"))
    c = run(case, graders=GraderSet.model_validate(graders))
    assert c.primary == "task_pass"
    assert "diagnostic:soft:hard_constraint_fail" in c.secondary_labels
    assert class_labels(c) == set()


def test_diagnostic_labels_sit_beside_class_labels() -> None:
    case = build([BY_NAME["hcf-grader"], BY_NAME["tf-outcome"]])
    set_result(case, "diag", "task_fail")
    c = run(case)
    assert c.primary == "hard_constraint_fail"
    assert "task_fail" in c.secondary_labels
    assert "diagnostic:diag:task_fail" in c.secondary_labels


# -------------------------------------------------------------------- trajectory and score


def test_unmatched_trajectory_fails_with_gating_zero_and_output_score() -> None:
    c = run(build([BY_NAME["tf-trajectory"]]))
    assert c.primary == "task_fail"
    assert not c.passed
    assert c.score == 0.9  # the output score stays (RFC 0244 section A)
    assert c.gating_score == 0.0  # RFC 0246: the pass decisions read 0


def test_wrong_order_is_unmatched_too() -> None:
    case = new_case()
    case.record["tool_calls"].reverse()
    c = run(case)
    assert (c.primary, c.score, c.gating_score) == ("task_fail", 0.9, 0.0)


def test_delegate_calls_do_not_unmatch_the_target_agents_path() -> None:
    case = new_case()
    case.record["tool_calls"].append(
        {"tool": "billing:refund-all", "args": {}, "agent_id": "helper"}
    )
    c = run(case)
    assert c.primary == "task_pass"
    assert c.gating_score == 0.9


def test_kind_trajectory_scores_one_or_zero() -> None:
    task = EvalTaskSpec.model_validate(
        task_dict(expected={"kind": "trajectory", "trajectory": TRAJECTORY}, score_from=None)
    )
    matched = run(new_case(), task)
    assert (matched.primary, matched.score, matched.gating_score) == ("task_pass", 1.0, 1.0)
    unmatched = run(build([BY_NAME["tf-trajectory"]]), task)
    assert (unmatched.primary, unmatched.score, unmatched.gating_score) == (
        "task_fail",
        0.0,
        0.0,
    )


def test_score_falls_back_to_the_first_blocking_outcome_grader() -> None:
    task = EvalTaskSpec.model_validate(task_dict(score_from=None))
    assert run(new_case(), task).score == 0.9
    task_judge = EvalTaskSpec.model_validate(task_dict(score_from="judge"))
    assert run(new_case(), task_judge).score == 1.0


def test_score_without_a_graded_score_is_one_for_pass_zero_otherwise() -> None:
    case = new_case()
    set_result(case, "outcome", "task_pass")  # no score
    assert run(case).score == 1.0
    failing = build([BY_NAME["tf-outcome"]])
    set_result(failing, "outcome", "task_fail")
    assert run(failing).score == 0.0


def test_a_trial_with_no_score_source_shows_no_score() -> None:
    """The 1-or-0 stand-in only restates the class: people see `-`, never a score that
    looks measured; a graded score is shown as its gating score."""
    case = new_case()
    set_result(case, "outcome", "task_pass")  # no score anywhere it could come from
    unscored = run(case)
    assert unscored.scored is False
    assert shown_score(unscored.primary, unscored.gating_score, scored=unscored.scored) is None
    scored = run(new_case())
    assert scored.scored is True
    assert shown_score(scored.primary, scored.gating_score, scored=scored.scored) == 0.9


@pytest.mark.parametrize("trigger", ["ae-runtime", "hcf-grader", "gi-grader"])
def test_a_crashed_or_hard_failed_trial_shows_score_zero(trigger: str) -> None:
    """The judge still scored it 0.9; what people see, and what the gate counts, is 0."""
    c = run(build([BY_NAME[trigger]]))
    assert c.score == 0.9
    assert shown_score(c.primary, c.gating_score, scored=c.scored) == 0.0


def test_outcome_task_fail_keeps_its_score() -> None:
    c = run(build([BY_NAME["tf-outcome"]]))
    assert (c.primary, c.score, c.gating_score) == ("task_fail", 0.2, 0.2)


# ------------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("on_miss", ["fail", None])
def test_fail_closed_fixture_miss_is_task_fail_with_score_zero(on_miss: str | None) -> None:
    task = EvalTaskSpec.model_validate(task_dict(on_miss=on_miss))
    c = run(build([BY_NAME["tf-fixture-miss"]]), task)
    assert c.primary == "task_fail"
    assert not c.passed
    assert c.score == 0.0  # RFC 0244 section D as amended: not the output score
    assert c.gating_score == 0.0


def test_fail_closed_miss_score_is_zero_even_under_a_higher_class() -> None:
    c = run(build([BY_NAME["tf-fixture-miss"], BY_NAME["ae-runtime"]]))
    assert c.primary == "agent_error"
    assert "task_fail" in c.secondary_labels
    assert c.score == 0.0


def test_live_fixture_miss_is_labelled_not_failed() -> None:
    task = EvalTaskSpec.model_validate(task_dict(on_miss="live"))
    c = run(build([BY_NAME["tf-fixture-miss"]]), task)
    assert c.primary == "task_pass"
    assert "fixture_miss_live" in c.secondary_labels
    assert c.score == 0.9
    assert "fixture_miss_live" not in run(new_case(), task).secondary_labels


# ------------------------------------------------------------------------- model graders


@pytest.mark.parametrize(
    "validity",
    [{}, {"judge": Validity("stale")}, {"judge": Validity("failing")}],
    ids=["missing", "stale", "failing"],
)
def test_blocking_model_grader_without_valid_calibration(validity: dict[str, Validity]) -> None:
    case = new_case()
    case.validity = dict(validity)
    c = run(case)
    assert c.primary == "grader_invalid"
    assert "uncalibrated_model_grader" in c.secondary_labels


def test_uncalibrated_model_grader_cannot_fail_a_trial_itself() -> None:
    case = build([BY_NAME["gi-uncalibrated"]])
    set_result(case, "judge", "task_fail", 0.0)
    c = run(case)
    assert c.primary == "grader_invalid"
    assert "task_fail" not in c.secondary_labels


def test_calibrated_model_grader_blocks() -> None:
    case = new_case()
    set_result(case, "judge", "task_fail", 0.0)
    assert run(case).primary == "task_fail"


def test_model_grader_may_not_block_a_class_humans_disagree_on() -> None:
    # docs/promotion.md: an unblockable verdict is never read as a pass: it waits for a person.
    case = new_case()
    case.validity = {"judge": Validity("valid", blockable_classes=frozenset({"task_pass"}))}
    set_result(case, "judge", "task_fail", 0.0)
    c = run(case)
    assert c.primary == "missing_required_evidence"
    assert "awaiting_review" in c.secondary_labels
    assert "unblockable_model_verdict:judge:task_fail" in c.secondary_labels
    assert [g for g, _ in c.review] == ["judge"]
    assert not c.passed
    resolved = run(case, reviews={"judge": review("judge", "task_fail")})
    assert resolved.primary == "task_fail"
    assert run(case, reviews={"judge": review("judge", "task_pass")}).primary == "task_pass"


def test_non_blocking_model_grader_needs_no_calibration() -> None:
    case = new_case()
    case.validity = {"judge": VALID}  # nothing for diag
    assert run(case).primary == "task_pass"


# ------------------------------------------------------------------------- reconciliation


# The base record commits refund:A-1 at position 0; `_effects` appends from position 1.


@pytest.mark.parametrize("status", ["requested", "unknown"])
def test_reconciliation_clears_ambiguous_external_effect(status: str) -> None:
    case = new_case()
    _effects(("mail:1", status))(case)
    assert run(case).primary == "ambiguous_external_effect"
    c = run(case, reconciliations={1: "not_committed"})
    assert c.primary == "task_pass"
    assert "ambiguous_external_effect" not in c.secondary_labels
    assert run(case, reconciliations={1: "committed"}).primary == "task_pass"


def test_reconciliation_to_committed_can_reveal_a_double_commit() -> None:
    case = new_case()
    _effects(("refund:A-1", "unknown"))(case)  # refund:A-1 is committed once already
    assert run(case).primary == "ambiguous_external_effect"
    c = run(case, reconciliations={1: "committed"})
    assert c.primary == "hard_constraint_fail"


def test_reconciling_another_effect_changes_nothing() -> None:
    case = new_case()
    _effects(("mail:1", "requested"), ("mail:2", "requested"))(case)
    c = run(case, reconciliations={2: "not_committed"})
    assert c.primary == "ambiguous_external_effect"
    assert "effect mail:1 is requested and not reconciled" in " ".join(c.reasons)


def test_a_recorded_committed_effect_is_a_fact_no_reconciliation_changes() -> None:
    # docs/classification.md: the built-in "committed twice" hard failure cannot be reconciled away.
    case = build([BY_NAME["hcf-double-commit"]])
    for settled in ({0: "not_committed"}, {1: "not_committed"}, {0: "x", 1: "y"}):
        assert run(case, reconciliations=settled).primary == "hard_constraint_fail"


def test_one_reconciliation_settles_one_of_two_effects_with_one_key() -> None:
    case = new_case()
    _effects(("mail:1", "requested"), ("mail:1", "unknown"))(case)
    assert run(case, reconciliations={1: "not_committed"}).primary == ("ambiguous_external_effect")
    assert run(case, reconciliations={1: "committed", 2: "not_committed"}).primary == ("task_pass")


# -------------------------------------------------------------------------- human reviews


def review(gid: str, state: str, score: float | None = None) -> GraderResult:
    return GraderResult.model_validate(result(gid, state, score))


def test_human_review_resolves_an_abstention() -> None:
    case = build([BY_NAME["mre-abstain"]])
    assert run(case).primary == "missing_required_evidence"
    assert run(case, reviews={"judge": review("judge", "task_pass")}).primary == "task_pass"
    failed = run(case, reviews={"judge": review("judge", "task_fail")})
    assert failed.primary == "task_fail"


def test_a_human_review_never_replaces_a_deterministic_result() -> None:
    # docs/promotion.md: the review queue is the only door; nothing a person says lifts a failure.
    c = run(new_case(), reviews={"outcome": review("outcome", "task_fail", 0.3)})
    assert (c.primary, c.score) == ("task_pass", 0.9)
    failing = build([BY_NAME["tf-outcome"]])
    fixed = run(failing, reviews={"outcome": review("outcome", "task_pass", 0.7)})
    assert (fixed.primary, fixed.score) == ("task_fail", 0.2)
    hard = build([BY_NAME["hcf-grader"]])
    lifted = run(hard, reviews={"says-hard-constraint-fail": review("x", "pass")})
    assert lifted.primary == "hard_constraint_fail"


def test_a_human_review_does_not_supply_a_deterministic_graders_missing_result() -> None:
    case = build([BY_NAME["mre-no-result"]])
    c = run(case, reviews={"evidence": review("evidence", "pass")})
    assert c.primary == "missing_required_evidence"


def _with_human_grader() -> GraderSet:
    graders = copy.deepcopy(GRADERS)
    graders["graders"].append(
        {**grader("person", "outcome", ["task_pass", "task_fail", "abstain"]), "type": "human"}
    )
    return GraderSet.model_validate(graders)


def test_a_blocking_human_grader_without_a_result_waits_for_review() -> None:
    gs = _with_human_grader()
    c = run(new_case(), graders=gs)
    assert c.primary == "missing_required_evidence"
    assert "awaiting_review" in c.secondary_labels
    assert [g for g, _ in c.review] == ["person"]
    done = run(new_case(), graders=gs, reviews={"person": review("person", "task_pass")})
    assert (done.primary, done.review) == ("task_pass", ())
    failed = run(new_case(), graders=gs, reviews={"person": review("person", "task_fail")})
    assert failed.primary == "task_fail"


def test_an_abstention_is_queued_and_a_calibrated_verdict_is_not() -> None:
    assert [g for g, _ in run(build([BY_NAME["mre-abstain"]])).review] == ["judge"]
    case = new_case()
    set_result(case, "judge", "task_fail", 0.0)
    assert run(case).review == ()
    # A review of a pair that is not queued is ignored: the calibrated verdict stands.
    assert run(case, reviews={"judge": review("judge", "task_pass")}).primary == "task_fail"


# ------------------------------------------------------ trajectory_diagnosis never passes


def _diag_blocking_set(produces: list[str]) -> GraderSet:
    graders = copy.deepcopy(GRADERS)
    for g in graders["graders"]:
        if g["id"] == "diag":
            g.update(
                {
                    "type": "deterministic",
                    "blocking": True,
                    "rule_state": "blocking_constraint",
                    "produces": produces,
                }
            )
            del g["model"]
    return GraderSet.model_validate(graders)


def test_diagnosis_task_pass_does_not_outvote_an_outcome_fail() -> None:
    case = build([BY_NAME["tf-outcome"]])
    set_result(case, "diag", "task_pass", 1.0)
    c = run(case)
    assert c.primary == "task_fail"
    blocking = run(case, graders=_diag_blocking_set(["task_pass", "task_fail"]))
    assert blocking.primary == "task_fail"
    assert blocking.score == 0.2


def test_diagnosis_task_pass_does_not_replace_a_missing_outcome_result() -> None:
    case = new_case()
    drop_result(case, "outcome")
    set_result(case, "diag", "task_pass", 1.0)
    c = run(case, graders=_diag_blocking_set(["task_pass", "task_fail"]))
    assert c.primary == "missing_required_evidence"
    assert not c.passed


def test_diagnosis_task_pass_does_not_clear_an_unmatched_trajectory() -> None:
    case = build([BY_NAME["tf-trajectory"]])
    set_result(case, "diag", "task_pass", 1.0)
    c = run(case, graders=_diag_blocking_set(["task_pass", "task_fail"]))
    assert (c.primary, c.gating_score) == ("task_fail", 0.0)


def test_blocking_constraint_diagnosis_acts_as_a_hard_constraint() -> None:
    # docs/formats.md: a blocking_constraint trajectory guard's task_fail is a hard failure.
    gs = _diag_blocking_set(["pass", "task_fail"])
    case = new_case()
    set_result(case, "diag", "task_fail")
    c = run(case, graders=gs)
    assert c.primary == "hard_constraint_fail"
    assert "task_fail" not in c.secondary_labels
    drop_result(case, "diag")
    assert run(case, graders=gs).primary == "missing_required_evidence"


def test_a_trajectory_guard_may_not_produce_hard_constraint_fail_itself() -> None:
    with pytest.raises(ValidationError, match="may not produce hard_constraint_fail"):
        _diag_blocking_set(["pass", "hard_constraint_fail"])


# ---------------------------------------------------------------------- harness labels


def test_harness_labels_are_kept_and_the_claim_is_not_trusted() -> None:
    case = build([BY_NAME["tf-outcome"]])
    case.record["secondary_labels"] = ["flaky-network"]
    case.record["primary_classification"] = "task_pass"
    c = run(case)
    assert c.primary == "task_fail"
    assert "flaky-network" in c.secondary_labels


# --------------------------------------------------------- Hypothesis: monotone precedence


@st.composite
def trigger_sets(draw: st.DrawFn) -> tuple[list[Trigger], Trigger]:
    order = draw(st.permutations(TRIGGERS))
    size = draw(st.integers(0, 4))
    chosen: list[Trigger] = []
    rest: list[Trigger] = []
    for t in order:
        if len(chosen) < size and compatible([*chosen, t]):
            chosen.append(t)
        else:
            rest.append(t)
    extras = [t for t in rest if compatible([*chosen, t])]
    assume(extras)
    return chosen, draw(st.sampled_from(extras))


@settings(max_examples=150, deadline=None)
@given(trigger_sets())
def test_adding_a_trigger_never_lowers_the_primary_rank(
    drawn: tuple[list[Trigger], Trigger],
) -> None:
    chosen, extra = drawn
    before = run(build(chosen))
    after = run(build([*chosen, extra]))
    assert RANK[after.primary] <= RANK[before.primary]
    for triggers, c in ((chosen, before), ([*chosen, extra], after)):
        classes = {t.cls for t in triggers}
        best = min(classes, key=RANK.__getitem__) if classes else "task_pass"
        assert c.primary == best, c.reasons
        assert class_labels(c) == classes - {best}, c.reasons
        assert c.passed is (best == "task_pass")


def test_a_fixture_miss_with_no_fixtures_block_fails_closed() -> None:
    """docs/classification.md: `fixtures.onMiss` `fail` or absent, with fixture misses, is
    task_fail; a task with no `fixtures` block at all has no onMiss either."""
    spec = task_dict()
    del spec["fixtures"]
    task = EvalTaskSpec.model_validate(spec)
    case = new_case()
    case.record["fixture_misses"] = 2
    c = run(case, task)
    assert c.primary == "task_fail"
    assert c.score == 0.0


@pytest.mark.parametrize(
    ("change", "cls", "facts"),
    [
        ({"runtime": {"status": "timeout"}}, "infrastructure_invalid", ["timeout"]),
        ({"runtime": {"status": "agent_error"}}, "agent_error", ["agent_error"]),
        ({"fixture_misses": 3}, "task_fail", ["3"]),
        (
            {"external_effects": [{"effect_key": "refund:A-1", "status": "committed"}] * 2},
            "hard_constraint_fail",
            ["refund:A-1", "2"],
        ),
    ],
)
def test_each_reason_says_why_its_class_applied(
    change: dict[str, Any], cls: str, facts: list[str]
) -> None:
    """A reason is `class: why` (Classification.reasons): the why names the fact that made
    the class apply (the runtime status, the number of misses, the effect and its count)."""
    case = new_case()
    case.record.update(copy.deepcopy(change))
    c = run(case)
    whys = [r.split(": ", 1)[1] for r in c.reasons if r.startswith(f"{cls}: ")]
    assert whys
    assert any(all(fact in why for fact in facts) for why in whys), c.reasons


def test_failing_verdict_class_of_each_kind_of_grader() -> None:
    """The class a blocking grader's own failing verdict becomes: its hard_constraint_fail
    first, else its task_fail; a blocking trajectory guard's task_fail acts as a hard
    constraint; a diagnostic grader, or one that cannot fail, has none."""
    by_id = {g.id: g for g in GRADER_SET.graders}
    assert failing_verdict_class(by_id["outcome"]) == "task_fail"
    assert failing_verdict_class(by_id["says-hard-constraint-fail"]) == "hard_constraint_fail"
    assert failing_verdict_class(by_id["narrow"]) is None
    assert failing_verdict_class(by_id["diag"]) is None
    guard = {g.id: g for g in _diag_blocking_set(["pass", "task_fail"]).graders}["diag"]
    assert failing_verdict_class(guard) == "hard_constraint_fail"


def _no_manifest(case: Case) -> None:
    case.record["artifact_manifest"] = None


@pytest.mark.parametrize(
    ("apply", "cls", "facts"),
    [
        (_unknown_grader, "grader_invalid", ["ghost"]),
        (_wrong_version, "grader_invalid", ["versioned"]),
        (lambda case: set_result(case, "narrow", "task_fail"), "grader_invalid", ["narrow"]),
        (_drop_artifact, "missing_required_evidence", ["refund_receipt"]),
        (_no_manifest, "missing_required_evidence", ["refund_receipt"]),
    ],
)
def test_each_evidence_reason_names_its_grader_or_artifact(
    apply: Callable[[Case], None], cls: str, facts: list[str]
) -> None:
    """An untrusted result names its grader; a missing required artifact (no manifest at
    all included) names the artifact kind."""
    case = new_case()
    apply(case)
    c = run(case)
    whys = [r.split(": ", 1)[1] for r in c.reasons if r.startswith(f"{cls}: ")]
    assert any(all(fact in why for fact in facts) for why in whys), c.reasons


def test_a_grader_with_two_results_makes_the_trial_grader_invalid() -> None:
    """A record carries at most one result per grader (docs/tutorial.md). Ingest refuses a
    record with two; a pure caller that builds one anyway (no validation) still gets no pass
    out of it: the trial is grader_invalid, and the reason names the grader."""
    record = TrialRecord.model_validate(base_record())
    first = record.grader_results[0]
    assert first.grader_id == "outcome"
    twice = record.model_copy(update={"grader_results": [*record.grader_results, first]})
    calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
    expected = TASK.contract.expected
    assert expected is not None and expected.trajectory is not None
    trajectory = grade(expected.trajectory, calls, record.target_agent_id)
    c = classify(twice, TASK, GRADER_SET, validity={"judge": VALID}, trajectory=trajectory)
    assert c.primary == "grader_invalid"
    assert c.reasons == ("grader_invalid: outcome gave more than one result",)
    once = classify(record, TASK, GRADER_SET, validity={"judge": VALID}, trajectory=trajectory)
    assert (once.primary, once.reasons) == ("task_pass", ())


# ------------------------------------------------- what a classification says, in words
#
# A trial's reasons, labels and review-queue entries are stored with it and shown by
# `trials show` (docs/classification.md names each cause; docs/promotion.md the queue).


def _run_record(record: TrialRecord, graders: GraderSet = GRADER_SET, **kw: Any) -> Classification:
    """`run` for a record built without validation (two results of one grader)."""
    calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in record.tool_calls]
    expected = TASK.contract.expected
    assert expected is not None and expected.trajectory is not None
    trajectory = grade(expected.trajectory, calls, record.target_agent_id)
    validity = kw.pop("validity", {"judge": VALID})
    return classify(record, TASK, graders, validity=validity, trajectory=trajectory, **kw)


def _twice(case: Case, first: dict[str, Any], second: dict[str, Any]) -> TrialRecord:
    record = TrialRecord.model_validate(case.record)
    extra = [GraderResult.model_validate(first), GraderResult.model_validate(second)]
    kept = [r for r in record.grader_results if r.grader_id != first["grader_id"]]
    return record.model_copy(update={"grader_results": [*kept, *extra]})


STATES: dict[str, Literal["stale", "failing"]] = {"stale": "stale", "failing": "failing"}


@pytest.mark.parametrize("state", ["missing", "stale", "failing"])
def test_an_uncalibrated_model_grader_names_its_calibration_state(state: str) -> None:
    """docs/classification.md: a blocking model grader without a valid calibration makes
    the trial grader_invalid (label `uncalibrated_model_grader`); the graders after it are
    still read (the diagnostic grader's label)."""
    case = new_case()
    case.validity = {} if state == "missing" else {"judge": Validity(STATES[state])}
    c = run(case)
    assert c.reasons == (f"grader_invalid: blocking model grader judge calibration {state}",)
    assert "uncalibrated_model_grader" in c.secondary_labels
    assert "diagnostic:diag:task_pass" in c.secondary_labels


def test_an_abstention_waits_for_a_person_in_words() -> None:
    case = new_case()
    set_result(case, "judge", "abstain")
    c = run(case)
    assert c.reasons == (
        "missing_required_evidence: blocking grader judge: abstained; awaiting human review",
    )
    assert c.review == (("judge", "abstained"),)
    assert [x for x in c.secondary_labels if x.startswith("unblockable")] == []
    assert "awaiting_review" in c.secondary_labels
    assert "diagnostic:diag:task_pass" in c.secondary_labels


def test_an_unblockable_verdict_waits_for_a_person_in_words() -> None:
    case = new_case()
    case.validity = {"judge": Validity("valid", blockable_classes=frozenset({"task_pass"}))}
    set_result(case, "judge", "task_fail", 0.0)
    c = run(case)
    why = "task_fail is not blockable by the model"
    assert c.reasons == (
        f"missing_required_evidence: blocking grader judge: {why}; awaiting human review",
    )
    assert c.review == (("judge", why),)


def test_a_human_review_speaks_as_the_review_of_its_grader() -> None:
    case = new_case()
    set_result(case, "judge", "abstain")
    c = run(case, reviews={"judge": review("judge", "task_fail")})
    assert c.reasons == ("task_fail: human review (judge) said task_fail",)
    own = build([BY_NAME["tf-outcome"]])
    assert run(own).reasons == ("task_fail: outcome said task_fail",)


def test_a_blocking_human_grader_in_words() -> None:
    gs = _with_human_grader()
    c = run(new_case(), graders=gs)
    why = "blocking human grader has no result"
    assert c.reasons == (
        f"missing_required_evidence: blocking grader person: {why}; awaiting human review",
    )
    assert c.review == (("person", why),)
    answered = new_case()
    answered.record["grader_results"].append(result("person", "task_pass"))
    done = run(answered, graders=gs)
    assert (done.primary, done.review, done.reasons) == ("task_pass", (), ())
    abstained = new_case()
    abstained.record["grader_results"].append(result("person", "abstain"))
    said = run(abstained, graders=gs)
    assert said.reasons == ("missing_required_evidence: blocking grader person abstained",)
    assert said.review == ()


def test_a_missing_result_names_its_grader() -> None:
    case = new_case()
    drop_result(case, "evidence")
    assert run(case).reasons == (
        "missing_required_evidence: blocking grader evidence has no result",
    )


def test_an_unmatched_trajectory_says_so() -> None:
    case = build([BY_NAME["tf-trajectory"]])
    c = run(case)
    assert "task_fail: trajectory expectation unmatched" in c.reasons


def test_a_calibration_never_makes_a_deterministic_result_wait_for_review() -> None:
    """Only a model grader's verdict may wait for a person (docs/promotion.md): a
    deterministic grader's failure stands whatever calibrations a caller passes."""
    case = build([BY_NAME["tf-outcome"]])
    case.validity = {"judge": VALID, "outcome": Validity("valid", blockable_classes=frozenset())}
    c = run(case)
    assert (c.primary, c.review) == ("task_fail", ())


def test_every_result_of_a_grader_with_two_is_read() -> None:
    """A pure caller's record with two results of one grader (ingest refuses it): the trial
    is grader_invalid, and each result still counts, after one outside `produces` or an
    abstention too."""
    outside_first = _twice(
        new_case(), result("outcome", "pass"), result("outcome", "task_fail", 0.1)
    )
    c = _run_record(outside_first)
    assert "task_fail: outcome said task_fail" in c.reasons
    gs = _with_human_grader()
    abstain_first = _twice(new_case(), result("person", "abstain"), result("person", "task_fail"))
    h = _run_record(abstain_first, gs)
    assert "missing_required_evidence: blocking grader person abstained" in h.reasons
    assert "task_fail: person said task_fail" in h.reasons
    judge = _twice(new_case(), result("judge", "hard_constraint_fail"), result("judge", "abstain"))
    assert _run_record(judge).review == (("judge", "abstained"),)


def _score_task(score_from: str | None, kind: str = "golden") -> EvalTaskSpec:
    expected: dict[str, Any] = (
        {"kind": "trajectory", "trajectory": TRAJECTORY}
        if kind == "trajectory"
        else {"kind": "golden", "match": {"strategy": "contains"}, "trajectory": TRAJECTORY}
    )
    return EvalTaskSpec.model_validate(task_dict(score_from=score_from, expected=expected))


def test_the_score_comes_from_the_documented_source() -> None:
    """docs/classification.md: the `score_from` grader's score (a non-blocking one too);
    else the first blocking outcome grader's; a reviewed result speaks for its grader."""
    assert run(new_case(), _score_task("diag")).score == 1.0  # non-blocking, read anyway
    case = new_case()
    set_result(case, "diag", "task_pass", 0.4)
    assert run(case, _score_task("diag")).score == 0.4
    assert run(case, _score_task(None)).score == 0.9
    queued = new_case()
    set_result(queued, "judge", "abstain")
    reviewed = run(
        queued, _score_task("judge"), reviews={"judge": review("judge", "task_pass", 0.8)}
    )
    assert (reviewed.primary, reviewed.score, reviewed.scored) == ("task_pass", 0.8, True)


def test_the_first_blocking_outcome_grader_scores_whatever_the_order() -> None:
    graders = copy.deepcopy(GRADERS)
    narrow = next(g for g in graders["graders"] if g["id"] == "narrow")
    graders["graders"].remove(narrow)
    graders["graders"].insert(0, narrow)
    case = new_case()
    set_result(case, "narrow", "pass", 0.3)
    c = run(case, _score_task(None), GraderSet.model_validate(graders))
    assert (c.score, c.scored) == (0.9, True)


def test_without_a_blocking_outcome_grader_the_class_stands_in_for_the_score() -> None:
    graders = copy.deepcopy(GRADERS)
    for g in graders["graders"]:
        if g["layer"] == "outcome":
            g["blocking"] = False
    case = new_case()
    case.validity = {}
    c = run(case, _score_task(None), GraderSet.model_validate(graders))
    assert (c.primary, c.score, c.scored) == ("task_pass", 1.0, False)


def test_a_fail_closed_miss_and_a_trajectory_task_are_scored() -> None:
    """A score of 0 after a fail-closed fixture miss, and the trajectory's 1 or 0, are real
    scores (shown), not the 1-or-0 stand-in that shows `-`."""
    case = new_case()
    case.record["fixture_misses"] = 1
    missed = run(case)
    assert (missed.score, missed.scored) == (0.0, True)
    on_path = run(new_case(), _score_task(None, "trajectory"))
    assert (on_path.score, on_path.scored) == (1.0, True)


def test_a_classification_as_stored() -> None:
    c = run(build([BY_NAME["tf-outcome"]]))
    assert c.as_dict() == {
        "primary_classification": "task_fail",
        "secondary_labels": list(c.secondary_labels),
        "score": 0.2,
        "gating_score": 0.2,
        "reasons": ["task_fail: outcome said task_fail"],
    }
