"""Why a member was retired: a kind the suite policy's rules key on, and free text.

`retire --kind obsolete|unsupported|replaced --reason TEXT`. The older form, `--reason KIND`
alone, still means that kind with the word itself as the text. Both are stored in the one
`reason` column a retirement row has always had (a new column would change the row digest
every existing retirement's event committed to), so the stored value is the old word when
the text is the kind, and `KIND: TEXT` otherwise. Reading it back is unambiguous: the old
words stay themselves, anything else starts with a kind and `: `. Rows that match neither
(written by hand) read as no kind, the whole value as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETIRE_KINDS = ("obsolete", "unsupported", "replaced")

_SEPARATOR = ": "


@dataclass(frozen=True)
class RetirementReason:
    """A retirement's kind (one of RETIRE_KINDS, or None for a row of unknown form) and text."""

    kind: str | None
    text: str | None

    def stored(self) -> str | None:
        """The `reason` column's value: the old word when the text is the kind."""
        if self.kind is None or self.text == self.kind:
            return self.text
        return f"{self.kind}{_SEPARATOR}{self.text}"

    def act_fields(self) -> dict[str, Any]:
        """The act body's fields: exactly the old body's `reason` when the text is the kind
        (so acts printed or signed before `--kind` existed still match), else kind and text."""
        if self.kind is None or self.text == self.kind:
            return {"reason": self.text}
        return {"kind": self.kind, "reason": self.text}

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.text}


def read_stored(value: str | None) -> RetirementReason:
    """A stored `reason` column read back as kind and text."""
    if value is None:
        return RetirementReason(None, None)
    if value in RETIRE_KINDS:
        return RetirementReason(value, value)
    kind, separator, text = value.partition(_SEPARATOR)
    if separator and kind in RETIRE_KINDS:
        return RetirementReason(kind, text)
    return RetirementReason(None, value)
