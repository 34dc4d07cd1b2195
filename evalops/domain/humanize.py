"""Numbers and counts written for people (the terminal and reasons); `--json` stays exact.

`0.2875000000000001` is an artefact of binary floating point, not information: people read
`0.2875`. Missing values read `-`, never `None`; counts agree with their noun.
"""

from __future__ import annotations

import math

#: Significant digits of a number shown to people.
HUMAN_DIGITS = 4


def number(value: object, *, missing: str = "-") -> str:
    """`value` for people: below 1 in magnitude, HUMAN_DIGITS significant digits
    (`0.2875000000000001` -> `0.2875`, `0.8999999999999999` -> `0.9`, `3.2e-07`); from 1 up,
    at most two decimals (`1.0` -> `1`); integers as they are; None as `missing`."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 1:
            # 1234.5678 -> 1234.57; 1.0 -> 1 (never an exponent for a count-like value)
            return f"{value:.2f}".rstrip("0").rstrip(".")
        return f"{value:.{HUMAN_DIGITS}g}"
    return str(value)


def interval(bounds: object) -> str:
    """`[low, high]` with both ends rounded like `number`; `-` when absent."""
    if not isinstance(bounds, list | tuple) or len(bounds) != 2:
        return "-"
    return f"[{number(bounds[0])}, {number(bounds[1])}]"


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`1 paired task`, `3 paired tasks`, `0 paired tasks`."""
    noun = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {noun}"


def text(value: object, *, missing: str = "-") -> str:
    """A value for a line of prose: None reads `missing` (never `None`), floats round."""
    if value is None or value == "":
        return missing
    return number(value) if isinstance(value, float) else str(value)
