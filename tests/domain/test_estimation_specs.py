"""Strata in the specs (docs/estimation.md): weights positive and summing to 1, sizes naming
the strata, and promotion into an estimation suite refusing a task that names no stratum of
the weights or was sampled after the frame was frozen, each with its fix."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from evalops.domain.suite_policy import Requirement, evaluate_entry
from tests.domain.test_suite_policy import facts, policy, suite, task_spec

SYNC = "in registry/tasks/mini-task.yaml, bump `revision`, commit, and run `evalops sync`"


def weights(values: dict[str, Any]) -> Any:
    return lambda s: s["weights"].__setitem__("values", values)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"free": 0.2, "pro": 0.5, "enterprise": 0.4}, "weights must sum to 1, not 1.1"),
        ({"free": 0.5, "pro": 0.4}, "weights must sum to 1, not 0.9"),
        ({"free": 0.0, "pro": 1.0}, "weight of stratum 'free' must be a positive number"),
        ({"free": -0.5, "pro": 1.5}, "weight of stratum 'free' must be a positive number"),
        ({"free": float("nan"), "pro": 1.0}, "weight of stratum 'free' must be a positive number"),
    ],
)
def test_weights_must_be_positive_and_sum_to_1(values: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        suite("estimation", weights(values))


def test_decimal_weights_that_sum_to_1_are_accepted() -> None:
    # 0.1 + 0.2 + 0.7 is 0.9999999999999999 in binary floating point.
    declared = suite("estimation", weights({"a": 0.1, "b": 0.2, "c": 0.7}))
    assert declared.weights is not None
    assert set(declared.weights.values) == {"a", "b", "c"}
    assert suite("estimation", weights({"all": 1})).weights is not None


def test_sizes_are_optional_and_must_name_the_strata() -> None:
    sized = suite(
        "estimation",
        lambda s: s["sampling_frame"].__setitem__(
            "sizes", {"free": 4000, "pro": 9000, "enterprise": 1200}
        ),
    )
    assert sized.sampling_frame is not None and sized.sampling_frame.sizes == {
        "free": 4000,
        "pro": 9000,
        "enterprise": 1200,
    }
    with pytest.raises(ValidationError, match="sizes must name exactly the strata"):
        suite("estimation", lambda s: s["sampling_frame"].__setitem__("sizes", {"free": 10}))
    with pytest.raises(ValidationError):
        suite(
            "estimation",
            lambda s: s["sampling_frame"].__setitem__(
                "sizes", {"free": 0, "pro": 1, "enterprise": 1}
            ),
        )


def _entry(mutate: Any) -> dict[str, Requirement]:
    checklist = evaluate_entry(facts(task=task_spec(mutate)), suite("estimation"), policy())
    return {r.name: r for r in checklist.requirements}


def test_a_member_with_its_stratum_and_sampling_time_enters() -> None:
    found = _entry(None)
    assert all(r.met for r in found.values())
    assert found["weights"].evidence == "stratum tenant_tier=pro (weight 0.5)"


def test_a_task_without_a_stratum_is_refused_with_the_fix() -> None:
    found = _entry(lambda t: t["meta"].pop("stratum"))
    assert found["weights"] == Requirement(
        "weights",
        False,
        "the task declares no meta.stratum.tenant_tier",
        "set `meta.stratum: {tenant_tier: STRATUM}` (one of free, pro, enterprise) " + SYNC,
    )
    assert [n for n, r in found.items() if not r.met] == ["weights"]


def test_a_stratum_not_in_the_weights_or_under_another_key_is_refused() -> None:
    unknown = _entry(lambda t: t["meta"].__setitem__("stratum", {"tenant_tier": "gold"}))
    assert not unknown["weights"].met
    assert unknown["weights"].evidence == (
        "stratum tenant_tier=gold is not one of the weights' strata (free, pro, enterprise)"
    )
    other_key = _entry(lambda t: t["meta"].__setitem__("stratum", {"region": "pro"}))
    assert not other_key["weights"].met
    assert "no meta.stratum.tenant_tier" in other_key["weights"].evidence


def test_a_task_without_sampled_at_is_refused_with_the_fix() -> None:
    found = _entry(lambda t: t["meta"].pop("sampled_at"))
    r = found["frozen_sampling_frame"]
    assert not r.met
    assert r.evidence.endswith("the task declares no meta.sampled_at")
    assert r.fix == (
        "set `meta.sampled_at` (when the session was sampled, at most 2026-11-01T00:00:00Z) " + SYNC
    )


@pytest.mark.parametrize(
    ("sampled_at", "accepted"),
    [
        ("2026-11-01T00:00:00Z", True),  # at the freeze: of the frame
        ("2026-11-01T00:00:01Z", False),
        ("2026-11-01T01:00:00+02:00", True),  # 23:00Z the day before: compared as moments
        ("2026-10-31T23:30:00-01:00", False),  # 00:30Z: after, though its text sorts before
    ],
)
def test_a_task_sampled_after_the_freeze_is_refused(sampled_at: str, accepted: bool) -> None:
    found = _entry(lambda t: t["meta"].__setitem__("sampled_at", sampled_at))
    r = found["frozen_sampling_frame"]
    assert r.met is accepted
    if not accepted:
        assert r.evidence == (
            f"the task was sampled at {sampled_at}, after the frame was frozen at "
            "2026-11-01T00:00:00Z: it is not a sample of this frame"
        )
        assert r.fix is not None and "later frozen_at" in r.fix


def test_stratum_and_sampled_at_are_not_required_elsewhere() -> None:
    def undeclared(t: dict[str, Any]) -> None:
        t["meta"].pop("stratum")
        t["meta"].pop("sampled_at")

    checklist = evaluate_entry(facts(task=task_spec(undeclared)), suite("capability"), policy())
    assert checklist.accepted


def test_sampled_at_must_be_a_timestamp_with_an_offset() -> None:
    with pytest.raises(ValidationError):
        task_spec(lambda t: t["meta"].__setitem__("sampled_at", "2026-10-01 10:00"))
