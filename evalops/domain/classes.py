"""The trial classes and their canonical precedence (docs/classification.md).

Kept apart from the vocabulary's spec types (which need pydantic), like
evalops/domain/timestamps.py, so that re-deriving a stored trial's class on the read path
(`trials list`) does not import pydantic; evalops/domain/vocabulary.py names them as well.
"""

from __future__ import annotations

from typing import Literal, get_args

# Primary classification of a trial, highest precedence first (docs/classification.md).
TrialClass = Literal[
    "hard_constraint_fail",
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
    "agent_error",
    "runtime_error",
    "task_fail",
    "task_pass",
]
CANONICAL_PRECEDENCE: tuple[TrialClass, ...] = get_args(TrialClass)

EVIDENCE_BLOCKED: tuple[TrialClass, ...] = (
    "ambiguous_external_effect",
    "missing_required_evidence",
    "grader_invalid",
    "infrastructure_invalid",
)
