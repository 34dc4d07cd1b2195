"""The rules of a gate policy that replaying a decision reads, without pydantic.

Replaying a stored decision (`verify`, `gate replay`, `report audit`, an estimate) reads
three rules of the gate policy its inputs carry: which reruns count (`reruns`), which
waivers the policy allows (`waivers`) and how a baseline is compared
(`critical_regressions`). Validating the whole document with the pydantic
model of evalops/domain/specs.py would import pydantic and build every spec model first:
more than a tenth of `verify`'s CPU on the demo registry. `read_policy` accepts the
document by the plain table of evalops/domain/spec_check.py, which tests hold equal to the
models, and takes those rules (and the policy's id) with that table's defaults; a document
the table does not accept goes to pydantic, which accepts it or names its problem, as
before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalops.domain import spec_check


class RerunRules:
    """`reruns` of a gate policy, as the evaluator reads it."""

    __slots__ = ("max_attempts_by_class",)

    def __init__(self, max_attempts_by_class: Mapping[str, int]) -> None:
        self.max_attempts_by_class: dict[str, int] = dict(max_attempts_by_class)


class RegressionRules:
    """`critical_regressions` of a gate policy, as the baseline block reads it."""

    __slots__ = ("alpha", "baseline", "method", "rule")

    def __init__(self, *, rule: str, baseline: str, method: str, alpha: float) -> None:
        self.rule = rule
        self.baseline = baseline
        self.method = method
        self.alpha = alpha


class WaiverRules:
    """`waivers` of a gate policy, as the waiver rules read it."""

    __slots__ = ("allowed_layers", "forbidden_states", "max_duration_days", "require")

    def __init__(
        self,
        *,
        allowed_layers: list[str],
        forbidden_states: list[str],
        require: list[str],
        max_duration_days: int,
    ) -> None:
        self.allowed_layers = list(allowed_layers)
        self.forbidden_states = list(forbidden_states)
        self.require = list(require)
        self.max_duration_days = max_duration_days


class PolicyRules:
    """The rules of one gate policy that the evaluator and the waiver rules read."""

    __slots__ = ("critical_regressions", "id", "reruns", "waivers")

    def __init__(
        self,
        policy_id: str,
        critical_regressions: RegressionRules,
        reruns: RerunRules,
        waivers: WaiverRules,
    ) -> None:
        self.id = policy_id
        self.critical_regressions = critical_regressions
        self.reruns = reruns
        self.waivers = waivers

    def as_dict(self) -> dict[str, Any]:
        """Every value, each rule's fields in the model's order (for comparing readings)."""
        regressions, waivers = self.critical_regressions, self.waivers
        return {
            "id": self.id,
            "critical_regressions": {
                "rule": regressions.rule,
                "baseline": regressions.baseline,
                "method": regressions.method,
                "alpha": regressions.alpha,
            },
            "reruns": {"max_attempts_by_class": self.reruns.max_attempts_by_class},
            "waivers": {
                "allowed_layers": waivers.allowed_layers,
                "forbidden_states": waivers.forbidden_states,
                "require": waivers.require,
                "max_duration_days": waivers.max_duration_days,
            },
        }


def _filled(model: spec_check.Model, value: Mapping[str, Any]) -> dict[str, Any]:
    """`value` with the table's default for every field it omits."""
    return {key: value.get(key, field.default) for key, field in model.fields.items()}


def read_policy(document: Mapping[str, Any]) -> PolicyRules:
    """The rules of a gate policy document; pydantic's error when the policy is not valid
    (a stored decision's inputs can hold anything: `verify` reports what pydantic says)."""
    if not spec_check.GATE_POLICY(document):
        from evalops.domain.specs import GatePolicy

        # What pydantic accepts, as plain JSON values (every default filled in).
        document = GatePolicy.model_validate(document).model_dump(mode="json")
    regressions = _filled(spec_check.REGRESSION_RULE, document["critical_regressions"])
    reruns = _filled(spec_check.RERUN_RULE, document["reruns"])
    waivers = _filled(spec_check.WAIVER_RULE, document["waivers"])
    return PolicyRules(
        document["id"],
        RegressionRules(
            rule=regressions["rule"],
            baseline=regressions["baseline"],
            method=regressions["method"],
            alpha=regressions["alpha"],
        ),
        RerunRules(reruns["max_attempts_by_class"]),
        WaiverRules(
            allowed_layers=waivers["allowed_layers"],
            forbidden_states=waivers["forbidden_states"],
            require=waivers["require"],
            max_duration_days=waivers["max_duration_days"],
        ),
    )
