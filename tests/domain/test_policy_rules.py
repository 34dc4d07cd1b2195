"""The gate policy rules a replay reads without pydantic are the ones pydantic reads.

`read_policy` (evalops/domain/policy_rules.py) accepts a stored gate policy by the plain
table of spec_check and fills its defaults from that table. The reference here is the
pydantic model of evalops/domain/specs.py, read attribute by attribute: on the repository's
and the scaffold's policies, and on Hypothesis mutations of them (deleted, replaced and added
fields in the three rules read), every value and its JSON type must agree, and a policy
pydantic refuses must be refused with pydantic's own error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalops.domain import spec_check
from evalops.domain.policy_rules import read_policy
from evalops.domain.specs import GatePolicy
from evalops.services.registry import scaffold

REPO = Path(__file__).resolve().parents[2]


def _policies() -> list[dict[str, Any]]:
    found = [yaml.safe_load(scaffold.gate_policy_yaml("scaffolded"))]
    for path in sorted((REPO / "registry").rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("spec_schema_version") == "gate-policy/v1":
            found.append(doc)
    return found


POLICIES = _policies()


def _pydantic_reading(model: GatePolicy) -> str:
    """What the evaluator read from the validated model, as Python writes it: 1 and 1.0,
    True and 1, a list and a tuple, and the order of a mapping's keys all differ."""
    regressions = model.critical_regressions
    waivers = model.waivers
    return repr(
        {
            "id": model.id,
            "critical_regressions": {
                "rule": regressions.rule,
                "baseline": regressions.baseline,
                "method": regressions.method,
                "alpha": regressions.alpha,
            },
            "reruns": {"max_attempts_by_class": dict(model.reruns.max_attempts_by_class)},
            "waivers": {
                "allowed_layers": list(waivers.allowed_layers),
                "forbidden_states": list(waivers.forbidden_states),
                "require": list(waivers.require),
                "max_duration_days": waivers.max_duration_days,
            },
        }
    )


def _ours(document: Any) -> str:
    return repr(read_policy(document).as_dict())


def test_the_corpus_holds_the_repository_s_policy_and_the_scaffold_s() -> None:
    assert len(POLICIES) >= 2
    ids = {p["id"] for p in POLICIES}
    assert {"release-gate", "scaffolded"} <= ids, ids


@pytest.mark.parametrize("policy", POLICIES, ids=[p["id"] for p in POLICIES])
def test_each_policy_reads_as_pydantic_reads_it(policy: dict[str, Any]) -> None:
    assert _ours(policy) == _pydantic_reading(GatePolicy.model_validate(policy))


@pytest.mark.parametrize("policy", POLICIES, ids=[p["id"] for p in POLICIES])
def test_a_policy_only_pydantic_accepts_reads_the_same(
    policy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the plain table to refuse a policy pydantic accepts, the rules would be read
    from pydantic's model, alike."""
    monkeypatch.setattr(spec_check, "GATE_POLICY", lambda value: False)
    assert _ours(policy) == _pydantic_reading(GatePolicy.model_validate(policy))


@pytest.mark.parametrize("stored", [None, [], "release-gate", 3, {"id": "release-gate"}])
def test_a_stored_policy_that_is_no_policy_gets_pydantic_s_error(stored: Any) -> None:
    """A decision's inputs are read from the database: whatever is there, the error is
    the one pydantic gives for it (what `verify` and `gate replay` report)."""
    with pytest.raises(ValidationError) as theirs:
        GatePolicy.model_validate(stored)
    with pytest.raises(ValidationError) as ours:
        read_policy(stored)
    assert str(ours.value) == str(theirs.value)


def test_omitted_rules_take_the_model_s_defaults() -> None:
    policy = copy.deepcopy(POLICIES[-1])
    for rule, field in (
        ("critical_regressions", "baseline"),
        ("critical_regressions", "method"),
        ("critical_regressions", "alpha"),
        ("reruns", "max_attempts_by_class"),
        ("waivers", "allowed_layers"),
        ("waivers", "forbidden_states"),
        ("waivers", "require"),
    ):
        policy[rule].pop(field, None)
    read = read_policy(policy)
    # The defaults as docs/formats.md states them.
    assert (read.critical_regressions.baseline, read.critical_regressions.method) == (
        "optional",
        "mcnemar",
    )
    assert read.critical_regressions.alpha == 0.05
    assert read.reruns.max_attempts_by_class == {}
    assert read.waivers.allowed_layers == [] and read.waivers.require == []
    assert read.waivers.forbidden_states == [
        "hard_constraint_fail",
        "ambiguous_external_effect",
        "missing_required_evidence",
        "grader_invalid",
        "infrastructure_invalid",
    ]
    assert _ours(policy) == _pydantic_reading(GatePolicy.model_validate(policy))


def test_a_reading_never_shares_the_table_s_defaults() -> None:
    """Two policies that omit `forbidden_states` get equal lists, never the same list."""
    first, second = (copy.deepcopy(POLICIES[-1]) for _ in range(2))
    for policy in (first, second):
        del policy["waivers"]["forbidden_states"]
    a, b = read_policy(first), read_policy(second)
    a.waivers.forbidden_states.append("task_fail")
    assert "task_fail" not in b.waivers.forbidden_states
    assert "task_fail" not in read_policy(second).waivers.forbidden_states


RULES = ("critical_regressions", "reruns", "waivers")
WORDS = [
    "optional", "required", "mcnemar", "sign-test", "paired-t", "paired-bootstrap", "bogus",
    "quality_signal", "noncritical_regression", "hard_constraint_fail", "task_fail",
    "grader_invalid", "infrastructure_invalid", "missing_required_evidence", "owner",
    "reason", "build_scope", "expires_at", "first_result",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 2, 30, -1, 0.0, 0.05, 0.5, 1.0, 1, 2.5, "", "x"]),
    st.sampled_from(WORDS),
    st.lists(st.sampled_from(WORDS), max_size=6),
    st.dictionaries(st.sampled_from(WORDS), st.sampled_from([0, 1, 2, 3, 1.0, "2"]), max_size=3),
)
FIELDS = [
    "rule", "baseline", "method", "alpha", "preserve_all_trials", "report",
    "max_attempts_by_class", "task_is_primary_statistical_unit", "allowed_layers",
    "forbidden_states", "require", "max_duration_days", "extra",
]  # fmt: skip


@st.composite
def mutated_policy(draw: st.DrawFn) -> dict[str, Any]:
    """A valid policy with one to three fields of its three rules deleted, replaced or
    added (or a whole rule replaced)."""
    policy = copy.deepcopy(draw(st.sampled_from(POLICIES)))
    for _ in range(draw(st.integers(1, 3))):
        rule = draw(st.sampled_from(RULES))
        if not isinstance(policy.get(rule), dict) or draw(st.integers(0, 9)) == 0:
            policy[rule] = draw(VALUES)
            continue
        field = draw(st.sampled_from(FIELDS))
        if draw(st.booleans()):
            policy[rule].pop(field, None)
        else:
            policy[rule][field] = draw(VALUES)
    return policy


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_policy())
def test_mutated_policies_read_as_pydantic_reads_them(policy: dict[str, Any]) -> None:
    try:
        model = GatePolicy.model_validate(policy)
    except ValidationError as refused:
        with pytest.raises(ValidationError) as ours:
            read_policy(policy)
        assert str(ours.value) == str(refused)
        return
    assert _ours(policy) == _pydantic_reading(model)
