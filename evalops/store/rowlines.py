"""A row's canonical line and an event's per-table entry (docs/verify.md), without SQLAlchemy.

What an event commits to about its rows is hashed here from plain values, whatever a driver
returned them as (`sqlite3`'s text and integers, psycopg's datetimes and booleans), so that
`verify` on a SQLite file re-hashes every row without loading SQLAlchemy. Which columns a
table's row digest covers, and of which kind each is, is evalops/store/rowdigest.py
`digest_plan` (from the table models), kept without them in evalops/store/audited_columns.py.

A row's canonical content is the RFC 8785 JSON list of its column values in sorted
column-name order, timestamps in the one UTC spelling and booleans as booleans, so the same
row written from Python or read back raw from SQLite or PostgreSQL hashes the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from evalops.domain.canonical import MAX_SAFE_INTEGER, canonical_json, encode_trusted
from evalops.domain.timestamps import format_timestamp

#: How a column's stored value is read for its row's digest.
TIMESTAMP, BOOLEAN, PLAIN = "timestamp", "boolean", "plain"


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return format_timestamp(value)
    text = str(value)
    # SQLite's one stored spelling (naive UTC with microseconds) -> the canonical one. Any
    # other spelling, even of the same moment ('T' for the space, no fraction), hashes as
    # itself: readers that compare the stored text would see a different time.
    if len(text) == 26 and text[10] == " " and text[19] == ".":
        return f"{text[:10]}T{text[11:]}Z"
    return f"not a stored timestamp: {text}"


def _boolean(value: Any) -> Any:
    # SQLite keeps booleans as the integers 0 and 1; 2, 'false' or 0.5 read back as True
    # through the driver, so anything else hashes as itself and no longer matches.
    if value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return value == 1
    return f"not a stored boolean: {value!r}"


def cell(kind: str, value: Any) -> Any:
    """A stored value as the row digest reads it, whatever the driver returned."""
    if value is None:
        return None
    if kind == TIMESTAMP:
        return _timestamp(value)
    if kind == BOOLEAN:
        return _boolean(value)
    return value


class _Slow(Exception):
    pass


def _fast(value: Any) -> Any:
    """A scalar on the C encoder's RFC 8785 fast path, or _Slow."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        if math.isfinite(value) and 1e-4 <= abs(value) < 1e16:
            return value
        raise _Slow
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        raise _Slow
    return value


#: The C encoder's own writer of a `str` when it does not escape to ASCII (what
#: `encode_trusted` calls for each string): the same bytes, without building an encoder.
_encode_string = encode_basestring


def line_of(cells: Sequence[Any]) -> bytes:
    """One row's canonical content (RFC 8785 of the list of its cells), newline-ended.

    Cells that are all strings, None, safe integers or floats of plain magnitude (most rows:
    a trial's scores too) are written here as the C encoder writes them (each string by its
    own writer, an int by `int.__repr__`, a float by `float.__repr__`, an integral one as
    the int it is); any other cell takes `encode_trusted` or the reference.
    tests/services/test_fast_paths.py holds every path to `rfc8785`."""
    parts = []
    for value in cells:
        kind = type(value)
        if kind is str:
            parts.append(_encode_string(value))
        elif value is None:
            parts.append("null")
        elif kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            parts.append(int.__repr__(value))
        elif kind is float:
            # `_fast`'s rule, written as the encoder path writes it: 1.0 and -0.0 as 1 and 0,
            # else `float.__repr__` (RFC 8785's form, but for an integral float past 2^53,
            # `9007199254740992.0`, as every stored digest was computed).
            try:
                plain = _fast(value)
            except _Slow:
                return _line_of_any(cells)
            parts.append(int.__repr__(plain) if type(plain) is int else float.__repr__(plain))
        else:
            return _line_of_any(cells)
    try:
        return ("[" + ",".join(parts) + "]\n").encode("utf-8")
    except UnicodeEncodeError:
        return _line_of_any(cells)


def stored_line_of(cells: Sequence[Any]) -> bytes:
    """`line_of` for a row as read back from the database by `verify`: a cell no writer
    could have stored (a blob, an infinite float, an integer past JSON's safe range) gives
    a line that matches no recorded row, so the row is reported as changed instead of
    stopping the check."""
    try:
        return line_of(cells)
    except (TypeError, ValueError):  # rfc8785's errors are ValueErrors
        return ("not a stored row: " + repr(list(cells)) + "\n").encode("utf-8", "backslashreplace")


def _line_of_any(cells: Sequence[Any]) -> bytes:
    try:
        return encode_trusted([_fast(v) for v in cells]) + b"\n"
    except (_Slow, UnicodeEncodeError):
        return canonical_json(list(cells)) + b"\n"


def table_entry(count: int, hasher: Any) -> dict[str, Any]:
    """One table's entry in an event's `rows` block: its count of rows and the sha256 of
    their lines (fed to `hasher` in id order)."""
    return {"count": count, "digest": "sha256:" + hasher.hexdigest()}
