"""Timestamps as evalops reads and writes them: RFC 3339 with an offset, printed in UTC.

Kept apart from the vocabulary's spec types (which need pydantic) so that a command that only
prints stored timestamps does not import pydantic.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

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
    offset = re.search(r"([+-])(\d{2}):(\d{2})$", normalized)
    if offset is not None and (int(offset.group(2)) > 23 or int(offset.group(3)) > 59):
        raise ValueError(
            f"timestamp {text!r} has offset {offset.group(0)}, outside -23:59 .. +23:59"
        )
    try:
        parsed = datetime.fromisoformat(normalized).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a valid timestamp: {exc}") from None
    if not EARLIEST <= parsed < LATEST:
        raise ValueError(
            f"timestamp {text!r} is outside 1970-01-01T00:00:00Z .. 9999-01-01T00:00:00Z"
        )
    return parsed


@lru_cache(maxsize=8192)
def format_timestamp(moment: datetime) -> str:
    """UTC, microseconds, `Z`: the one spelling evalops stores and prints."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("naive datetime: evalops only handles timestamps with an offset")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
