"""The closed vocabularies of the public contract (docs/formats.md), in one place."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, StringConstraints

from evalops.domain import classes as _classes
from evalops.domain import limits as _limits
from evalops.domain import timestamps as _timestamps
from evalops.domain.limits import MAX_FREE_TEXT_CHARS, MAX_IDENTIFIER_CHARS
from evalops.domain.spec_words import GraderState

# The trial classes live in evalops/domain/classes.py (no pydantic there); named here as well.
TrialClass = _classes.TrialClass
CANONICAL_PRECEDENCE = _classes.CANONICAL_PRECEDENCE
EVIDENCE_BLOCKED = _classes.EVIDENCE_BLOCKED

# The word lists (GraderState, Risk, ...) live in evalops/domain/spec_words.py and the rules
# between fields in spec_rules.py (no pydantic in either, for `validate`'s plain checker).
GRADER_STATES: tuple[GraderState, ...] = get_args(GraderState)

RuntimeStatus = Literal["ok", "agent_error", "runtime_error", "infrastructure_error", "timeout"]
EffectStatus = Literal["committed", "not_committed", "requested", "unknown"]

# The id pattern lives in evalops/domain/limits.py (no pydantic there); named here as well.
ID_PATTERN = _limits.ID_PATTERN
DIGEST_PATTERN = _limits.DIGEST_PATTERN

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
# Limits that hold alike on every engine (a PostgreSQL index cannot hold a 4 KB key, SQLite
# would): build names and other identifiers at most 256 characters, free text at most 4,096.
NonEmptyStr = Annotated[str, StringConstraints(min_length=1, max_length=MAX_FREE_TEXT_CHARS)]
"""Free text (a title, a reason, a URI, a message): at most 4,096 characters."""
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDENTIFIER_CHARS)]
"""A build name, run, attempt, tool or agent name: at most 256 characters."""
#: Expected calls of a trajectory, and observed tool calls of a trial, at most.
MAX_TOOL_CALLS = _limits.MAX_TOOL_CALLS
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]

# Timestamps live in evalops/domain/timestamps.py (no pydantic there); named here as well.
EARLIEST = _timestamps.EARLIEST
LATEST = _timestamps.LATEST
parse_timestamp = _timestamps.parse_timestamp
format_timestamp = _timestamps.format_timestamp


def _check_timestamp(text: str) -> str:
    parse_timestamp(text)
    return text


Timestamp = Annotated[str, AfterValidator(_check_timestamp)]
