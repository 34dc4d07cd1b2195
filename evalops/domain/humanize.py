"""Numbers and counts written for people (the terminal and reasons); `--json` stays exact.

One format everywhere a person reads a number (docs/cli.md, "Numbers"): a measure (a rate,
a score, a p-value, a threshold) has two decimals or more (`pass^k 0.40`, `p=1.00`,
`alpha 0.05`), up to HUMAN_DIGITS significant digits when they carry information
(`0.2875`, never the `0.2875000000000001` of binary floating point); a count or a duration
is an integer without `.0`. Missing values read `-`, never `None`; counts agree with their
noun.
"""

from __future__ import annotations

import math

#: Significant digits of a number shown to people.
HUMAN_DIGITS = 4
#: Decimals a measure always shows, so that a column of them lines up (`1.00`, `0.40`).
MIN_DECIMALS = 2


def number(value: object, *, missing: str = "-") -> str:
    """`value` for people. A float is a measure: at least MIN_DECIMALS decimals, at most
    HUMAN_DIGITS significant digits below 1 (`0.4` -> `0.40`, `1.0` -> `1.00`,
    `0.2875000000000001` -> `0.2875`, `0.8999999999999999` -> `0.90`, `0.0012`,
    `3.2e-07`) and two decimals from 1 up (`1234.57`). An int is a count (`7`); None is
    `missing`."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _measure(value)
    return str(value)


def measure(value: object, *, missing: str = "-") -> str:
    """A rate, a score, a p-value or a threshold: the measure format even when the stored
    document holds it as an integer (canonical JSON writes `1.0` as `1`: `1` -> `1.00`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _measure(float(value))
    return number(value, missing=missing)


def _measure(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value != 0 and abs(value) < 10**-MIN_DECIMALS:
        return f"{value:.{HUMAN_DIGITS}g}"  # a small p-value keeps its digits: 0.0012
    decimals = HUMAN_DIGITS if abs(value) < 1 else MIN_DECIMALS
    shown = f"{value:.{decimals}f}"
    # Trailing zeros carry nothing beyond the two decimals every measure shows.
    whole, _, fraction = shown.partition(".")
    fraction = fraction.rstrip("0").ljust(MIN_DECIMALS, "0")
    return f"{whole}.{fraction}"


def quantity(value: float | int) -> str:
    """A count or a duration for people: an integer without `.0` (`7`, `30`), else at
    most two decimals (`1.5`, `0.25`)."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(int(value))


def interval(bounds: object) -> str:
    """`[low, high]` with both ends rounded like `number`; `-` when absent."""
    if not isinstance(bounds, list | tuple) or len(bounds) != 2:
        return "-"
    return f"[{number(bounds[0])}, {number(bounds[1])}]"


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`1 paired task`, `3 paired tasks`, `0 paired tasks`, `1,200 records`."""
    noun = singular if count == 1 else (plural_form or singular + "s")
    return f"{count:,} {noun}"


def text(value: object, *, missing: str = "-") -> str:
    """A value for a line of prose: None reads `missing` (never `None`), floats round."""
    if value is None or value == "":
        return missing
    return number(value) if isinstance(value, float) else str(value)


#: Hex digits a shortened digest keeps (`sha256:628d872c3c29`), as `git log --oneline` does.
SHORT_DIGEST_HEX = 12


def short_digest(value: str) -> str:
    """`sha256:628d872c3c29f2e8...` -> `sha256:628d872c3c29`; anything else unchanged."""
    algorithm, sep, hexdigits = value.partition(":")
    if not sep or len(hexdigits) <= SHORT_DIGEST_HEX:
        return value
    return f"{algorithm}:{hexdigits[:SHORT_DIGEST_HEX]}"
