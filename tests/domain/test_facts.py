"""The views of stored documents (evalops/domain/facts.py) read what the spec models read.

`trials list` and `calibration status` classify and judge calibrations from the views, every
other command from the pydantic models; the two must never differ. Here, for every example
definition and trial record and for every record the classification tests build, each
attribute the protocols name is compared between the view and the validated model (value
and type: canonical JSON stores `1.0` as `1`, the models make it a float again), and
`classify` / `calibration_validity` give equal results from either.
"""

from __future__ import annotations

import itertools
import json
import types
import typing
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalops.domain import facts
from evalops.domain.calibration_validity import StoredCalibration, calibration_validity
from evalops.domain.canonical import canonical_text
from evalops.domain.facts import (
    GraderSetFacts,
    RecordFacts,
    StoredGraderSet,
    StoredRecord,
    StoredResult,
    StoredTask,
    StoredTaskHead,
    TaskFacts,
    TaskHeadFacts,
    rerun_limits,
)
from evalops.domain.specs import EvalTaskSpec, GatePolicy, GraderSet
from evalops.domain.trial_record import GraderResult, TrialRecord
from evalops.registry.load import load_document
from tests.domain.test_classify import (
    GRADERS,
    TRIGGERS,
    VALID,
    base_record,
    build,
    compatible,
    new_case,
    task_dict,
)
from tests.domain.test_classify import run as classify_models
from tests.helpers import EXAMPLE_REGISTRY, MINI_GRADERS, MINI_JUDGE, MINI_TASK


def stored(value: Any) -> Any:
    """A document as the registry stores it: canonical JSON, parsed back."""
    return json.loads(canonical_text(value))


def _facts_of(protocol: type) -> dict[str, Any]:
    """The attributes a protocol of evalops/domain/facts.py names, with their types."""
    return {
        name: typing.get_type_hints(member.fget, vars(facts))["return"]
        for name, member in vars(protocol).items()
        if isinstance(member, property)
    }


def _is_protocol(kind: Any) -> bool:
    return isinstance(kind, type) and getattr(kind, "_is_protocol", False)


def differences(view: Any, model: Any, kind: Any, where: str = "") -> list[str]:
    """Where `view` and `model` differ in an attribute `kind` (a protocol) names."""
    if _is_protocol(kind):
        out = []
        for name, member_kind in _facts_of(kind).items():
            out += differences(
                getattr(view, name), getattr(model, name), member_kind, f"{where}.{name}"
            )
        return out
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        if view is None or model is None:
            return [] if view is None and model is None else [f"{where}: {view!r} != {model!r}"]
        (inner,) = [k for k in typing.get_args(kind) if k is not type(None)]
        return differences(view, model, inner, where)
    if origin is not None and issubclass(origin, Sequence) and origin is not str:
        (inner,) = typing.get_args(kind)
        if len(view) != len(model):
            return [f"{where}: {len(view)} items != {len(model)}"]
        return [
            d
            for i, (v, m) in enumerate(zip(view, model, strict=True))
            for d in differences(v, m, inner, f"{where}[{i}]")
        ]
    if view != model or type(view) is not type(model):
        return [f"{where}: {view!r} ({type(view).__name__}) != {model!r} ({type(model).__name__})"]
    return []


def test_the_walk_sees_every_attribute_classification_reads() -> None:
    """The comparison is only as good as its walk: it must reach nested protocols."""
    assert set(_facts_of(RecordFacts)) == {
        "runtime",
        "grader_results",
        "external_effects",
        "artifact_manifest",
        "fixture_misses",
        "secondary_labels",
    }
    assert set(_facts_of(_facts_of(GraderSetFacts)["graders"].__args__[0])) >= {
        "id",
        "produces",
        "calibration_requirements",
    }
    model = TrialRecord.model_validate(base_record())
    changed = {**base_record(), "runtime": {"status": "timeout"}}
    assert differences(StoredRecord.of(stored(changed)), model, RecordFacts) == [
        ".runtime.status: 'timeout' (str) != 'ok' (str)"
    ]
    scored = base_record()
    scored["grader_results"][0]["score"] = 1
    as_int = StoredRecord.of(scored)._replace(
        grader_results=(StoredResult("outcome", 1, "task_pass", 1),)  # type: ignore[arg-type]
    )
    assert differences(as_int, TrialRecord.model_validate(scored), RecordFacts)


# ----------------------------------------------------------------- the example registry


def _example(kind: str) -> list[tuple[str, Any]]:
    return [
        (p.name, stored(load_document(p).value))
        for p in sorted((EXAMPLE_REGISTRY / kind).iterdir())
        if p.suffix in (".yaml", ".yml", ".json")
    ]


def _example_records() -> list[tuple[str, Any]]:
    out = []
    for path in sorted((EXAMPLE_REGISTRY / "trials").glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                out.append((f"{path.name}:{number}", stored(json.loads(line))))
    return out


TASKS = [*_example("tasks"), ("mini", stored(MINI_TASK))]
TASKS += [
    (f"classify-{i}", stored(task_dict(on_miss=on_miss, expected=expected, score_from=score)))
    for i, (on_miss, expected, score) in enumerate(
        itertools.product(
            ("fail", "live", None),
            (None, {"kind": "trajectory", "trajectory": {"match": "exact", "calls": []}}),
            ("outcome", None),
        )
    )
]
GRADER_SETS = [
    *_example("graders"),
    ("mini", stored(MINI_GRADERS)),
    ("judge", stored({**MINI_GRADERS, "graders": [*MINI_GRADERS["graders"], MINI_JUDGE]})),
    ("classify", stored(GRADERS)),
    (
        # Integral floats, stored as integers: the view makes them floats as the model does.
        "integral-requirements",
        stored(
            {
                **MINI_GRADERS,
                "graders": [
                    *MINI_GRADERS["graders"],
                    {
                        **MINI_JUDGE,
                        "calibration_requirements": {
                            "min_holdout_items": 1,
                            "min_precision_lower_bound": 1.0,
                            "min_recall_lower_bound": 0.0,
                            "min_human_agreement": 1.0,
                        },
                    },
                ],
            }
        ),
    ),
]
# What a record may leave out, left out: the view's defaults must be the model's.
OPTIONAL_RECORD_FIELDS = ("external_effects", "artifact_manifest", "fixture_misses")
MINIMAL_RECORD = {k: v for k, v in base_record().items() if k not in OPTIONAL_RECORD_FIELDS}
RECORDS = [
    *_example_records(),
    ("minimal", stored(MINIMAL_RECORD)),
    ("empty-manifest", stored({**MINIMAL_RECORD, "artifact_manifest": {}})),
    ("labelled", stored({**base_record(), "secondary_labels": ["harness-label"]})),
    (
        "integral-score",
        stored(
            {
                **base_record(),
                "grader_results": [
                    {
                        "grader_id": "outcome",
                        "grader_version": 1,
                        "state": "task_pass",
                        "score": 1.0,
                    }
                ],
            }
        ),
    ),
]


@pytest.mark.parametrize(("name", "document"), TASKS, ids=[n for n, _ in TASKS])
def test_a_task_view_reads_what_the_model_reads(name: str, document: Any) -> None:
    assert (
        differences(StoredTask.of(document), EvalTaskSpec.model_validate(document), TaskFacts) == []
    )


@pytest.mark.parametrize(("name", "document"), TASKS, ids=[n for n, _ in TASKS])
def test_a_task_head_view_reads_what_the_model_reads(name: str, document: Any) -> None:
    model = EvalTaskSpec.model_validate(document)
    assert differences(StoredTaskHead.of(document), model, TaskHeadFacts) == []


def _with_head(meta: dict[str, Any], plan: dict[str, Any] | None) -> Any:
    task = json.loads(json.dumps(MINI_TASK))
    task["meta"] = {"title": "t", **meta}
    task["contract"].pop("trials", None)
    if plan is not None:
        task["contract"]["trials"] = plan
    return stored(task)


RISKS = ("critical", "noncritical_regression", "quality_signal")
PROTECTS = ("permissions", "secrets", "human_approval", "external_effect", "required_evidence")


@settings(max_examples=300, deadline=None)
@given(
    risk=st.sampled_from(RISKS),
    protects=st.none() | st.lists(st.sampled_from(PROTECTS), unique=True),
    plan=st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "count": st.integers(1, 12),
            "k": st.integers(1, 12),
            "passRule": st.sampled_from(("all", "any", "mean")),
            # integral scores included: canonical JSON stores 1.0 as 1, the model reads a float
            "passScore": st.sampled_from((0, 1, 0.0, 1.0)) | st.floats(0, 1),
        },
    ),
)
def test_any_task_head_is_read_alike_from_the_view_and_the_model(
    risk: str, protects: list[str] | None, plan: dict[str, Any] | None
) -> None:
    if protects:
        risk = "critical"
    if plan is not None and plan.get("k", 0) > plan.get("count", 1):
        plan["k"] = plan.get("count", 1)
    meta: dict[str, Any] = {"risk": risk} | ({} if protects is None else {"protects": protects})
    document = _with_head(meta, plan)
    model = EvalTaskSpec.model_validate(document)
    assert differences(StoredTaskHead.of(document), model, TaskHeadFacts) == []


def test_the_head_walk_reaches_the_plan() -> None:
    document = _with_head({"risk": "critical"}, {"count": 3, "passRule": "mean", "passScore": 1})
    view = StoredTaskHead.of(document)
    assert view.contract.trials is not None
    assert view.contract.trials.passScore == 1.0
    assert type(view.contract.trials.passScore) is float
    wrong = view._replace(
        contract=view.contract._replace(trials=replace(view.contract.trials, passScore=1))
    )
    model = EvalTaskSpec.model_validate(document)
    assert differences(wrong, model, TaskHeadFacts) == [
        ".contract.trials.passScore: 1 (int) != 1.0 (float)"
    ]
    no_plan = _with_head({"risk": "quality_signal"}, None)
    assert StoredTaskHead.of(no_plan).contract.trials is None
    assert EvalTaskSpec.model_validate(no_plan).contract.trials is None


@pytest.mark.parametrize(("name", "document"), GRADER_SETS, ids=[n for n, _ in GRADER_SETS])
def test_a_grader_set_view_reads_what_the_model_reads(name: str, document: Any) -> None:
    view = StoredGraderSet.of(document)
    model = GraderSet.model_validate(document)
    assert differences(view, model, GraderSetFacts) == []
    for grader in model.graders:
        found = view.grader(grader.id)
        assert found is not None
        assert found.id == grader.id
    assert view.grader("no-such-grader") is None is model.grader("no-such-grader")


def test_the_example_records_are_all_read() -> None:
    assert len(_example_records()) == 80
    assert "secondary_labels" not in MINIMAL_RECORD
    assert isinstance(dict(RECORDS)["integral-score"]["grader_results"][0]["score"], int)


@pytest.mark.parametrize(("name", "document"), RECORDS, ids=[n for n, _ in RECORDS])
def test_a_record_view_reads_what_the_model_reads(name: str, document: Any) -> None:
    assert (
        differences(StoredRecord.of(document), TrialRecord.model_validate(document), RecordFacts)
        == []
    )


GATE_POLICIES = [
    (name, document)
    for name, document in _example("policies")
    if document.get("spec_schema_version") == "gate-policy/v1"
]


@pytest.mark.parametrize(("name", "document"), GATE_POLICIES, ids=[n for n, _ in GATE_POLICIES])
def test_rerun_limits_are_the_gate_policy_s(name: str, document: Any) -> None:
    rule = GatePolicy.model_validate(document).reruns.max_attempts_by_class
    assert rerun_limits(document) == {str(k): v for k, v in rule.items()}
    assert rerun_limits(document)  # the example policy lets some reruns stand in
    rule_less = {k: v for k, v in document["reruns"].items() if k != "max_attempts_by_class"}
    without = {**document, "reruns": rule_less}
    assert (
        rerun_limits(without)
        == {}
        == dict(GatePolicy.model_validate(without).reruns.max_attempts_by_class)
    )


# ------------------------------------------------------------- classify gives the same


def _classify_views(
    record: dict[str, Any],
    task: dict[str, Any],
    validity: Any,
    reviews: dict[str, GraderResult] | None = None,
    reconciliations: dict[int, str] | None = None,
) -> Any:
    """`classify` of the stored forms of a record, a task and the classification tests'
    grader set, read through the views."""
    from evalops.domain.classify import classify
    from evalops.domain.trajectory import ObservedCall, grade

    model_task = EvalTaskSpec.model_validate(task)
    model_record = TrialRecord.model_validate(record)
    trajectory = None
    expected = model_task.contract.expected
    if expected is not None and expected.trajectory is not None:
        calls = [ObservedCall(c.tool, c.args, c.agent_id) for c in model_record.tool_calls]
        trajectory = grade(expected.trajectory, calls, model_record.target_agent_id)
    return classify(
        StoredRecord.of(stored(record)),
        StoredTask.of(stored(task)),
        StoredGraderSet.of(stored(GRADERS)),
        validity=validity,
        trajectory=trajectory,
        reconciliations=reconciliations,
        reviews={
            g: StoredResult(r.grader_id, r.grader_version, r.state, r.score)
            for g, r in (reviews or {}).items()
        },
    )


TRIGGER_PAIRS = [(a, b) for a, b in itertools.combinations(TRIGGERS, 2) if compatible([a, b])]


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: t.name)
def test_each_class_trigger_classifies_alike(trigger: Any) -> None:
    case = build([trigger])
    assert _classify_views(case.record, task_dict(), case.validity) == (classify_models(case))


def test_every_compatible_pair_of_triggers_classifies_alike() -> None:
    assert len(TRIGGER_PAIRS) > 100
    for a, b in TRIGGER_PAIRS:
        case = build([a, b])
        assert _classify_views(case.record, task_dict(), case.validity) == (
            classify_models(case)
        ), (a.name, b.name)


@settings(max_examples=60, deadline=None)
@given(
    picked=st.lists(st.sampled_from(TRIGGERS), max_size=4, unique_by=lambda t: t.name),
    on_miss=st.sampled_from(["fail", "live", None]),
    score_from=st.sampled_from(["outcome", "judge", None]),
    judge_review=st.sampled_from([None, "task_pass", "task_fail"]),
    settled=st.dictionaries(st.integers(0, 3), st.sampled_from(["committed", "not_committed"])),
)
def test_any_record_task_review_and_reconciliation_classifies_alike(
    picked: list[Any],
    on_miss: str | None,
    score_from: str | None,
    judge_review: str | None,
    settled: dict[int, str],
) -> None:
    if not compatible(picked):
        return
    case = build(picked)
    task = task_dict(on_miss=on_miss, score_from=score_from)
    reviews = (
        {"judge": GraderResult(grader_id="judge", grader_version=1, state=judge_review)}  # type: ignore[arg-type]
        if judge_review
        else None
    )
    expected = classify_models(
        case,
        EvalTaskSpec.model_validate(task),
        reconciliations=settled,
        reviews=reviews,
    )
    assert _classify_views(case.record, task, case.validity, reviews, settled) == expected


# ----------------------------------------------------------- calibration validity alike

METRICS = {
    "counts": {"holdout": 60, "calibration": 10},
    "human_agreement": {"overall": 1, "per_class": {"task_pass": 1, "task_fail": 0.55}},
    "holdout": {
        "per_class": {
            "task_pass": {"support": 30, "precision_ci": [1, 1], "recall_ci": [0.9, 1]},
            "task_fail": {"support": 30, "precision_ci": [0.85, 1], "recall_ci": [0.75, 1]},
            "abstain": {"support": 0},
        }
    },
}


@pytest.mark.parametrize("min_agreement", [0, 0.5, 0.6, 1])
@pytest.mark.parametrize("bound", [0, 0.8, 1])
def test_calibration_validity_is_the_same_from_either(min_agreement: float, bound: float) -> None:
    judge = {
        **MINI_JUDGE,
        "calibration_requirements": {
            "min_holdout_items": 50,
            "min_precision_lower_bound": bound,
            "min_recall_lower_bound": bound,
            "min_human_agreement": min_agreement,
        },
    }
    document = stored({**MINI_GRADERS, "graders": [*MINI_GRADERS["graders"], judge]})
    view = StoredGraderSet.of(document).grader(judge["id"])
    model = GraderSet.model_validate(document).grader(judge["id"])
    assert view is not None and model is not None
    record = StoredCalibration("CAL-1", "sha256:c", stored(METRICS))
    for exempt in (False, True):
        assert calibration_validity(
            view, "sha256:c", record, pass_class_exempt=exempt
        ) == calibration_validity(model, "sha256:c", record, pass_class_exempt=exempt)


def test_a_base_case_is_what_the_classification_tests_say() -> None:
    """The shared fixtures are the ones test_classify.py checks (a pass at 0.9)."""
    case = new_case()
    assert case.validity == {"judge": VALID}
    assert classify_models(case).primary == "task_pass"
    assert _classify_views(case.record, task_dict(), case.validity).score == 0.9
