"""Refusing a suggested command pasted with its placeholders left in.

The gate's `next:` lines print whole commands; where only the user knows a value (who owns
the risk, the receipt's URI) they print a placeholder (evalops/domain/next_steps.py
`PLACEHOLDERS`). Pasted unfilled, such a command would record `OWNER` as a risk owner for
good: the commands refuse a placeholder as a literal value, as bad input, before anything
is written.
"""

from __future__ import annotations

from evalops.domain.next_steps import PLACEHOLDERS
from evalops.errors import InputError


def refuse_placeholder(option: str, value: str | None, wanted: str) -> None:
    """InputError (exit 2) when `value` is exactly a placeholder: `option` names where it was
    given (`--owner`), `wanted` what to give instead (`the risk owner (an email address)`).
    A value that merely contains one (`OWNER-team`, `Sam`) is the user's own."""
    if value is not None and value.strip() in PLACEHOLDERS:
        # The message names the option itself (`--owner OWNER is ...`), so no field prefix.
        raise InputError(
            f"{option} {value.strip()} is the placeholder of a suggested command: give {wanted}"
        )
