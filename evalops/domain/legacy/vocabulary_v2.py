"""The vocabulary evaluators 1 and 2 read, frozen: the classes, their precedence, the value
types of the gate policy and RFC 3339 timestamps, copied from `domain.vocabulary`,
`domain.limits` and `domain.timestamps` as they stood when these evaluators were frozen
whole (ARCHITECTURE.md, "Add an evaluator version"). Never edited afterwards: a change to
the live vocabulary must not change how an old decision replays.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Literal, get_args

from pydantic import Field, StringConstraints

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
MIN_FORBIDDEN_WAIVER_STATES: tuple[TrialClass, ...] = ("hard_constraint_fail", *EVIDENCE_BLOCKED)

RegressionMethod = Literal["mcnemar", "sign-test", "paired-t", "paired-bootstrap"]


class SpecValueError(ValueError):
    """A validation error that knows which field (below the validated model) is at fault."""

    def __init__(self, message: str, *loc: str | int) -> None:
        super().__init__(message)
        self.loc = loc


ID_PATTERN = r"^[a-z0-9][a-z0-9._/-]{0,127}$"
MAX_FREE_TEXT_CHARS = 4096
"""A title, a reason, a URI, a message."""

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1, max_length=MAX_FREE_TEXT_CHARS)]
"""Free text (a title, a reason, a URI, a message): at most 4,096 characters."""
PositiveInt = Annotated[int, Field(ge=1)]

# Timestamps lie between these (docs/formats.md): every engine and clock can hold them.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$"
)


@lru_cache(maxsize=8192)
def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp with an explicit offset, as an aware datetime in UTC.

    Fractions beyond microseconds are cut to microseconds (the database's precision).
    """
    if not _RFC3339.match(text):
        if re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2})?(\.\d+)?$", text):
            raise ValueError(f"timestamp {text!r} has no offset (add Z or +HH:MM)")
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp with offset")
    normalized = text.upper().replace("Z", "+00:00")
    head, _, rest = normalized.partition(".")
    if rest:
        frac = re.match(r"\d+", rest)
        assert frac is not None
        digits = frac.group(0)
        normalized = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    try:
        parsed = datetime.fromisoformat(normalized).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a valid timestamp: {exc}") from None
    if not EARLIEST <= parsed < LATEST:
        raise ValueError(
            f"timestamp {text!r} is outside 1970-01-01T00:00:00Z .. 9999-01-01T00:00:00Z"
        )
    return parsed
